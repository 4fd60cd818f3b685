#include "compiler/passes/InsertThreadSyncs.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/Substitute.h"
#include "compiler/ir/WrittenBuffers.h"
#include "compiler/passes/IntrinsicStmt.h"

#include <llvm/ADT/DenseSet.h>

namespace tessel {

namespace {

/// The shared buffers (by storage var) a statement reads and writes.
struct AccessSet {
  llvm::DenseSet<const void *> reads, writes;

  /// True if running `next` after this set without a barrier could race: a read of what was
  /// written (RAW) or a write of what was read (WAR). Two writes (WAW) are not ordered, as in
  /// TVM: otherwise every loop filling a tile would need a barrier per iteration.
  bool conflicts(const AccessSet &next) const {
    for (const void *b : writes)
      if (next.reads.count(b))
        return true;
    for (const void *b : reads)
      if (next.writes.count(b))
        return true;
    return false;
  }
  void merge(const AccessSet &o) {
    reads.insert(o.reads.begin(), o.reads.end());
    writes.insert(o.writes.begin(), o.writes.end());
  }
  void clear() {
    reads.clear();
    writes.clear();
  }
};

const void *pipeline_fill_var(const AttrStmt *op) {
  const auto *e = std::get_if<Expr>(&op->node);
  return e ? e->get() : nullptr;
}

bool is_sync(const Stmt &s) { return passes_detail::is_intrinsic_stmt(s, intrinsic::syncthreads); }

Stmt make_sync() { return passes_detail::intrinsic_stmt(intrinsic::syncthreads); }

class AccessCollector : public IRVisitor {
public:
  /// `skip`: buffer vars whose accesses are left out (pipelined fills, see below).
  AccessCollector(const llvm::DenseSet<const void *> &shared,
                  const llvm::DenseSet<const void *> &skip, AccessSet &out)
      : shared_(shared), skip_(skip), out_(out) {}

protected:
  void visit(const AttrStmt *op) override {
    // The steady-state fill of a pipelined buffer writes a stage no other statement of the
    // iteration touches, and inject_pipeline put the barrier it needs before it.
    const void *filled = op->key == attr::pipeline_fill ? pipeline_fill_var(op) : nullptr;
    bool fresh = filled && extra_skip_.insert(filled).second;
    IRVisitor::visit(op);
    if (fresh)
      extra_skip_.erase(filled);
  }
  void visit(const BufferLoad *op) override {
    if (is_shared(op->buffer) && !skipped(op->buffer->data.get())) {
      // Through a pointer (address_of inside an intrinsic) the callee may read and write,
      // unless the intrinsic is known to only read or only write through it.
      if (!pointer_depth_ || !write_only_callee_)
        out_.reads.insert(op->buffer->data.get());
      if (pointer_depth_ && !read_only_callee_)
        out_.writes.insert(op->buffer->data.get());
    }
    IRVisitor::visit(op);
  }
  void visit(const BufferStore *op) override {
    if (is_shared(op->buffer) && !skipped(op->buffer->data.get()))
      out_.writes.insert(op->buffer->data.get());
    IRVisitor::visit(op);
  }
  void visit(const Variable *op) override {
    // The storage var itself (access_ptr and the like): reads and writes unknown.
    if (shared_.count(op) && !skipped(op)) {
      out_.reads.insert(op);
      out_.writes.insert(op);
    }
  }
  void visit(const Call *op) override {
    bool pointer = op->is_intrinsic(intrinsic::address_of) ||
                   op->is_intrinsic(intrinsic::access_ptr);
    // A fragment load and wgmma (whose shared operands are its only pointers) only read the
    // memory they point to.
    bool read_only = op->is_intrinsic(intrinsic::wmma_load_matrix_sync) ||
                     op->is_intrinsic(intrinsic::mma_ldmatrix) ||
                     op->is_intrinsic(intrinsic::wgmma_mma) ||
                     op->is_intrinsic(intrinsic::wgmma_mma_rs);
    // Barriers synchronize; their memory is not data the block shares.
    if (op->is_intrinsic(intrinsic::mbarrier_init) || op->is_intrinsic(intrinsic::mbarrier_wait) ||
        op->is_intrinsic(intrinsic::mbarrier_arrive) ||
        op->is_intrinsic(intrinsic::mbarrier_arrive_expect_tx) ||
        op->is_intrinsic(intrinsic::mbarrier_arrive_cluster))
      return;
    // A TMA store's read of its shared source is ordered by the store's own protocol
    // (lower_bulk_copy: a barrier before the issue, the issuer's wait_group.read and a barrier
    // before the source is written again), so it adds no barrier here.
    if (op->is_intrinsic(intrinsic::tma_store)) {
      for (size_t i = 2; i < op->args.size(); ++i)
        visit_expr(op->args[i]);
      return;
    }
    if ((op->is_intrinsic(intrinsic::tma_load) || op->is_intrinsic(intrinsic::tma_load_im2col) ||
         op->is_intrinsic(intrinsic::tma_load_multicast)) &&
        op->args.size() >= 3) {
      // Writes its destination, as a store does; its barrier is not data.
      const auto *dst = op->args[1].as<Call>();
      const auto *elem = dst && dst->args.size() == 1 ? dst->args[0].as<BufferLoad>() : nullptr;
      if (elem && is_shared(elem->buffer) && !skipped(elem->buffer->data.get()))
        out_.writes.insert(elem->buffer->data.get());
      for (size_t i = 3; i < op->args.size(); ++i)
        visit_expr(op->args[i]);
      return;
    }
    if (op->is_intrinsic(intrinsic::cp_async) && op->args.size() == 4) {
      // Only writes its destination (like a store) and only reads its source.
      const auto *dst = op->args[0].as<Call>();
      const auto *elem = dst && dst->args.size() == 1 ? dst->args[0].as<BufferLoad>() : nullptr;
      if (elem && is_shared(elem->buffer) && !skipped(elem->buffer->data.get()))
        out_.writes.insert(elem->buffer->data.get());
      if (elem)
        for (const Expr &i : elem->indices)
          visit_expr(i);
      else
        visit_expr(op->args[0]);
      ++read_only_callee_;
      ++pointer_depth_;
      visit_expr(op->args[1]);
      --pointer_depth_;
      --read_only_callee_;
      visit_expr(op->args[3]);
      return;
    }
    // A fragment store only writes the memory it points to.
    bool write_only = op->is_intrinsic(intrinsic::wmma_store_matrix_sync) ||
                      op->is_intrinsic(intrinsic::mma_store_fragment) ||
                      op->is_intrinsic(intrinsic::wgmma_store);
    pointer_depth_ += pointer;
    read_only_callee_ += read_only;
    write_only_callee_ += write_only;
    IRVisitor::visit(op);
    pointer_depth_ -= pointer;
    read_only_callee_ -= read_only;
    write_only_callee_ -= write_only;
  }

private:
  bool is_shared(const Buffer &b) const {
    return b.scope() == "shared" || shared_.count(b->data.get());
  }
  bool skipped(const void *var) const { return skip_.count(var) || extra_skip_.count(var); }
  const llvm::DenseSet<const void *> &shared_;
  const llvm::DenseSet<const void *> &skip_;
  llvm::DenseSet<const void *> extra_skip_;
  AccessSet &out_;
  int pointer_depth_ = 0;
  int read_only_callee_ = 0;
  int write_only_callee_ = 0;
};

class SyncInserter {
public:
  explicit SyncInserter(const Stmt &root) {
    post_order_visit(root, [&](const IRNode *n) {
      if (const auto *a = llvm::dyn_cast<Allocate>(n); a && a->scope == "shared")
        shared_.insert(a->buffer_var.get());
    });
    written_ = written_buffers(root);
  }

  /// Rewrites `s`, given the shared accesses since the last barrier; updates them.
  Stmt plan(const Stmt &s, AccessSet &pending) {
    if (!s.defined())
      return s;
    if (const auto *seq = s.as<Seq>()) {
      std::vector<Stmt> out;
      for (const Stmt &st : seq->stmts)
        out.push_back(plan(st, pending));
      return Seq::make(std::move(out));
    }
    if (is_sync(s)) {
      pending.clear();
      return s;
    }
    // A thread_extent subtree at the top is (part of) a kernel. Its accesses stay pending
    // after it: a shared buffer that the next subtree touches too is allocated around both
    // (storage_rewrite), so both are one kernel's statements and may need a barrier between
    // them; buffers of different kernels are different allocations and never conflict.
    if (const auto *a = s.as<AttrStmt>(); a && a->key == attr::thread_extent && !in_kernel_) {
      in_kernel_ = true;
      Stmt out = visit_compound(s, pending);
      in_kernel_ = false;
      return out;
    }
    if (!in_kernel_)
      return rebuild(s, pending);

    AccessSet all = accesses(s);
    Stmt before;
    // A uniform loop whose body starts with a barrier (a pipelined loop) needs none before it
    // for what comes after that barrier.
    AccessSet leading;
    const auto *loop = s.as<For>();
    bool starts_synced = loop && !is_divergent(s) && leading_accesses(loop->body, leading);
    if (pending.conflicts(starts_synced ? leading : all)) {
      before = make_sync();
      pending.clear();
    }
    Stmt out;
    if (is_divergent(s)) {
      pending.merge(all); // one unit: no barrier may go inside
      out = s;
    } else {
      out = visit_compound(s, pending);
    }
    return before.defined() ? Seq::make({before, out}) : out;
  }

private:
  // Recurses into the children of a statement that all threads of a block run together.
  Stmt visit_compound(const Stmt &s, AccessSet &pending) {
    if (const auto *op = s.as<For>())
      return visit_loop(op, pending);
    if (const auto *op = s.as<IfThenElse>()) {
      AccessSet else_pending = pending;
      Stmt then_case = plan(op->then_case, pending);
      Stmt else_case = plan(op->else_case, else_pending);
      pending.merge(else_pending);
      return IfThenElse::make(op->condition, then_case, else_case);
    }
    if (const auto *op = s.as<AttrStmt>(); op && op->key == attr::pipeline_fill) {
      // Consumed here: its stores are not pending accesses (see AccessCollector).
      const void *filled = pipeline_fill_var(op);
      bool fresh = skip_.insert(filled).second;
      Stmt body = plan(op->body, pending);
      if (fresh)
        skip_.erase(filled);
      return body;
    }
    if (const auto *op = s.as<AttrStmt>()) {
      if (const IterVar *iv = std::get_if<IterVar>(&op->node))
        if (iv->thread_tag().rfind("threadIdx", 0) == 0 || iv->thread_tag().rfind("vthread", 0) == 0)
          variant_.insert(iv->var().get());
      return AttrStmt::make(op->node, op->key, op->value, plan(op->body, pending));
    }
    if (const auto *op = s.as<LetStmt>()) {
      if (is_variant(op->value))
        variant_.insert(op->var.get());
      pending.merge(accesses_of(op->value));
      return LetStmt::make(op->var, op->value, plan(op->body, pending));
    }
    if (const auto *op = s.as<Allocate>())
      return Allocate::make(op->buffer_var, op->dtype, op->extents, op->scope,
                            plan(op->body, pending));
    if (const auto *op = s.as<AssertStmt>()) {
      pending.merge(accesses_of(op->condition));
      return AssertStmt::make(op->condition, op->message, plan(op->body, pending));
    }
    // A leaf: a store or an evaluation.
    pending.merge(accesses(s));
    return s;
  }

  Stmt visit_loop(const For *op, AccessSet &pending) {
    if (op->for_kind == ForKind::ThreadBinding &&
        op->thread_tag.rfind("threadIdx", 0) == 0)
      variant_.insert(op->loop_var.get());
    AccessSet entry = pending;
    Stmt body = plan(op->body, pending);
    // Back edge: the next iteration's first accesses (up to its first top-level barrier)
    // against this iteration's last ones.
    AccessSet first;
    std::vector<Stmt> stmts;
    if (const auto *seq = body.as<Seq>())
      stmts = seq->stmts;
    else
      stmts = {body};
    for (const Stmt &st : stmts) {
      if (is_sync(st))
        break;
      first.merge(accesses(st));
    }
    if (pending.conflicts(first)) {
      body = Seq::make({body, make_sync()});
      auto extent = as_const_int(op->extent);
      if (extent && *extent > 0)
        pending.clear();
      else
        pending = entry;
    } else {
      pending.merge(entry);
    }
    return For::make(op->loop_var, op->min, op->extent, op->for_kind, body, op->thread_tag);
  }

  // Outside kernels: walk down to find them.
  Stmt rebuild(const Stmt &s, AccessSet &pending) {
    if (const auto *op = s.as<For>())
      return For::make(op->loop_var, op->min, op->extent, op->for_kind, plan(op->body, pending),
                       op->thread_tag);
    if (const auto *op = s.as<IfThenElse>())
      return IfThenElse::make(op->condition, plan(op->then_case, pending),
                              plan(op->else_case, pending));
    if (const auto *op = s.as<AttrStmt>())
      return AttrStmt::make(op->node, op->key, op->value, plan(op->body, pending));
    if (const auto *op = s.as<LetStmt>())
      return LetStmt::make(op->var, op->value, plan(op->body, pending));
    if (const auto *op = s.as<Allocate>())
      return Allocate::make(op->buffer_var, op->dtype, op->extents, op->scope,
                            plan(op->body, pending));
    if (const auto *op = s.as<AssertStmt>())
      return AssertStmt::make(op->condition, op->message, plan(op->body, pending));
    return s;
  }

  // Whether threads of one block may disagree on `s`'s control flow.
  bool is_divergent(const Stmt &s) const {
    // The producer role's part (split_warp_roles gives it threads of its own).
    if (const auto *op = s.as<AttrStmt>(); op && op->key == attr::warp_producer)
      return true;
    if (const auto *op = s.as<IfThenElse>())
      return is_variant(op->condition);
    if (const auto *op = s.as<For>())
      return is_variant(op->min) || is_variant(op->extent);
    return false;
  }

  /// Whether threads may see different values of `e`. A load is uniform where its indices are
  /// and its buffer is global memory the kernel never writes (a sequence's offset read with
  /// blockIdx); a call where it is a pure math function of uniform arguments.
  bool is_variant(const Expr &e) const {
    bool variant = false;
    post_order_visit(e, [&](const IRNode *n) {
      if (const auto *v = llvm::dyn_cast<Variable>(n))
        variant |= variant_.count(v) > 0;
      else if (const auto *l = llvm::dyn_cast<BufferLoad>(n))
        variant |= l->buffer.scope() != "global" || shared_.count(l->buffer->data.get()) ||
                   written_.count(llvm::dyn_cast<Variable>(l->buffer->data.get()));
      else if (const auto *c = llvm::dyn_cast<Call>(n))
        variant |= c->call_kind != Call::PureExtern;
    });
    return variant;
  }

  /// The accesses of `body` before its first top-level barrier, if it has one.
  bool leading_accesses(const Stmt &body, AccessSet &out) const {
    const auto *seq = body.as<Seq>();
    if (!seq)
      return false;
    for (const Stmt &st : seq->stmts) {
      if (is_sync(st))
        return true;
      out.merge(accesses(st));
    }
    return false;
  }

  AccessSet accesses(const Stmt &s) const {
    AccessSet out;
    AccessCollector(shared_, skip_, out).visit_stmt(s);
    return out;
  }
  AccessSet accesses_of(const Expr &e) const {
    AccessSet out;
    AccessCollector(shared_, skip_, out).visit_expr(e);
    return out;
  }

  llvm::DenseSet<const void *> shared_;
  llvm::DenseSet<const void *> skip_; ///< the buffers of the pipelined fills being planned
  llvm::DenseSet<const Variable *> variant_;
  llvm::DenseSet<const Variable *> written_; ///< the buffers the kernel writes
  bool in_kernel_ = false;
};

} // namespace

Stmt insert_thread_syncs(Stmt s) {
  AccessSet pending;
  return SyncInserter(s).plan(s, pending);
}

} // namespace tessel
