#include "compiler/passes/InjectPipeline.h"

#include "compiler/arith/Analyzer.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/Substitute.h"
#include "compiler/passes/AsyncCopy.h"
#include "compiler/passes/FlatBuffer.h"
#include "compiler/passes/IntrinsicStmt.h"
#include "compiler/passes/RemoveNoOp.h"
#include "compiler/support/Error.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/SmallVector.h>

#include <algorithm>

namespace tessel {

namespace {

const Variable *pipelined_var(const AttrStmt *op) {
  if (const auto *e = std::get_if<Expr>(&op->node))
    return e->as<Variable>();
  if (const auto *b = std::get_if<Buffer>(&op->node))
    return (*b)->data.as<Variable>();
  return nullptr;
}

// How a buffer var is used in a statement.
struct Uses {
  int accesses = 0;     ///< loads and stores
  int loads = 0;
  int other_stores = 0; ///< stores to any other buffer
  int raw_refs = 0;     ///< the var itself (intrinsic arguments), which cannot be offset
  bool calls = false;   ///< an Evaluate of a non-constant (an intrinsic with effects)
  llvm::DenseSet<const ExprNode *> loaded, stored;
};

class UseCounter : public IRVisitor {
public:
  UseCounter(const Variable *var, const AttrStmt *skip = nullptr) : var_(var), skip_(skip) {}
  Uses uses;
  /// An access to the var seen before `stop_at` (in program order) was reached.
  bool accessed_before_stop = false;
  const AttrStmt *stop_at = nullptr;

protected:
  void visit(const Variable *op) override { uses.raw_refs += op == var_; }
  void visit(const BufferLoad *op) override {
    note(op->buffer, false);
    IRVisitor::visit(op);
  }
  void visit(const BufferStore *op) override {
    note(op->buffer, true);
    IRVisitor::visit(op);
  }
  void visit(const Evaluate *op) override {
    uses.calls |= !is_const(op->value);
    IRVisitor::visit(op);
  }
  void visit(const AttrStmt *op) override {
    if (op == stop_at)
      reached_stop_ = true;
    if (op != skip_)
      IRVisitor::visit(op);
  }

private:
  void note(const Buffer &b, bool store) {
    const ExprNode *data = b->data.get();
    (store ? uses.stored : uses.loaded).insert(data);
    if (data == var_) {
      ++uses.accesses;
      uses.loads += !store;
      accessed_before_stop |= !reached_stop_ && stop_at;
    } else if (store) {
      ++uses.other_stores;
    }
  }

  const Variable *var_;
  const AttrStmt *skip_;
  bool reached_stop_ = false;
};

Uses uses_in(const Stmt &s, const Variable *var, const AttrStmt *skip = nullptr) {
  UseCounter c(var, skip);
  c.visit_stmt(s);
  return c.uses;
}

const char *const kNoLoop = "its fill is in no loop (a loop of one iteration is removed), so "
                           "there is no next tile to fetch ahead";

/// One buffer to pipeline: where it is filled, the loop that pipelines it, its allocation.
struct Plan {
  const AttrStmt *attr = nullptr;
  const For *loop = nullptr;
  const Allocate *alloc = nullptr;
  bool alloc_inside_loop = false;
  int attrs = 0;
  int stages = 0; ///< asked for by the attr; the loop's largest count is what is used
  int slack = 0;  ///< Stage::pipeline's slack (a TMA ring's; pipeline_scope's tuple)
  bool valid = true;
  std::string why_not; ///< the first reason it cannot be pipelined, for the remark
  /// Filled by TMA (an attr bulk_copy of tma_load calls): completes on the ring's barriers.
  bool bulk = false;
  int64_t bulk_bytes = 0;
  /// A bulk copy in no loop at all (a K loop of one step): filled once, on one barrier.
  bool bulk_once = false;
  /// The block's thread variables bound around the attr, with their extents: the fill of a
  /// bulk copy is issued by the thread where all are 0, and every thread releases the stages.
  std::vector<std::pair<Var, Expr>> threads;
  /// Under a warp_roles attr (Stage::warp_specialize): a bulk copy's fills are the producer
  /// role's (warp_producer), issued as far ahead as the ring allows.
  bool warp_roles = false;
  /// A multicast bulk copy (tma_load_multicast, Stage::multicast): the blocks of its cluster
  /// whose shared memory it writes (1: none but this one's).
  int cluster = 1;
  /// A bulk copy whose boxes stop short of the tile (attr bulk_copy_clipped): its buffer's
  /// allocation, zeroed once before the first fill, which leaves the elements past the tensor
  /// zero (null: none).
  const Allocate *zero_first = nullptr;

  void require(bool ok, const std::string &why) {
    if (!ok && valid)
      why_not = why;
    valid &= ok;
  }
};

bool is_same_var(const AttrNode &node, const Var &v) {
  const auto *e = std::get_if<Expr>(&node);
  return e && e->as<Variable>() == v.get();
}

const AttrStmt *bulk_copy_of(const AttrStmt *pipeline) {
  const auto *a = pipeline->body.as<AttrStmt>();
  return a && a->key == attr::bulk_copy ? a : nullptr;
}

// Finds the pipeline_scope attrs and decides which of them can be applied.
class Planner : public IRVisitor {
public:
  explicit Planner(const Stmt &root) : root_(root) {}
  llvm::DenseMap<const Variable *, Plan> plans;
  /// The planned buffers in program order, so the output does not depend on hashing.
  std::vector<const Variable *> order;

protected:
  void visit(const Allocate *op) override {
    allocs_[op->buffer_var.get()] = {op, loops_.size()};
    IRVisitor::visit(op);
  }
  void visit(const For *op) override {
    if (tile_loops_.count(op)) {
      // A persistent kernel's tile loop: the block's work, which a ring inside runs across
      // (and a fill in no other loop is filled once per tile).
      bound_.push_back(op->loop_var.get());
      IRVisitor::visit(op);
      bound_.pop_back();
      return;
    }
    bool thread = op->for_kind == ForKind::ThreadBinding && is_thread_tag(op->thread_tag);
    if (thread)
      thread_vars_.insert(op->loop_var.get());
    if (thread && op->thread_tag.rfind("threadIdx", 0) == 0)
      block_threads_.push_back({op->loop_var, op->extent});
    bool divergent = divergent_ > 0 || uses_thread_var(op->min) || uses_thread_var(op->extent);
    loops_.push_back({op, bound_.size(), divergent});
    bound_.push_back(op->loop_var.get());
    IRVisitor::visit(op);
    bound_.pop_back();
    loops_.pop_back();
    if (thread && op->thread_tag.rfind("threadIdx", 0) == 0)
      block_threads_.pop_back();
    for (const Variable *var : order)
      if (plans[var].loop == op)
        check_loop(var, plans[var]);
  }
  void visit(const IfThenElse *op) override {
    visit_expr(op->condition);
    int d = uses_thread_var(op->condition);
    divergent_ += d;
    visit_stmt(op->then_case);
    if (op->else_case.defined())
      visit_stmt(op->else_case);
    divergent_ -= d;
  }
  void visit(const LetStmt *op) override {
    bound_.push_back(op->var.get());
    IRVisitor::visit(op);
    bound_.pop_back();
  }
  void visit(const AttrStmt *op) override {
    const IterVar *iv = std::get_if<IterVar>(&op->node);
    bool block_thread = iv && iv->thread_tag().rfind("threadIdx", 0) == 0;
    if (iv) {
      bound_.push_back(iv->var().get());
      if (is_thread_tag(iv->thread_tag()))
        thread_vars_.insert(iv->var().get());
      if (block_thread)
        block_threads_.push_back({iv->var(), op->value});
    }
    if (op->key == attr::pipeline_scope)
      plan_attr(op);
    if (op->key == attr::tile_loop)
      if (const auto *f = op->body.as<For>(); f && is_same_var(op->node, f->loop_var))
        tile_loops_.insert(f);
    roles_ += op->key == attr::warp_roles;
    IRVisitor::visit(op);
    roles_ -= op->key == attr::warp_roles;
    if (block_thread)
      block_threads_.pop_back();
    if (iv)
      bound_.pop_back();
  }

private:
  llvm::DenseSet<const For *> tile_loops_;

  struct LoopEntry {
    const For *loop;
    size_t bound_depth; ///< bound_.size() before the loop var was pushed
    bool divergent;     ///< under control flow that depends on threadIdx
  };
  struct AllocEntry {
    const Allocate *alloc;
    size_t loop_depth; ///< number of loops around the Allocate
  };

  static bool is_thread_tag(const std::string &tag) {
    return tag.rfind("threadIdx", 0) == 0 || tag.rfind("vthread", 0) == 0;
  }
  template <typename Node> bool uses_thread_var(const Node &n) const {
    return uses_var(n, [&](const Variable *v) { return thread_vars_.count(v) > 0; });
  }

  void plan_attr(const AttrStmt *op) {
    const Variable *var = pipelined_var(op);
    internal_check(var) << "pipeline_scope attr without a buffer var";
    auto [it, fresh] = plans.try_emplace(var);
    if (fresh)
      order.push_back(var);
    Plan &p = it->second;
    p.attr = op;
    // stages, or tuple(stages, slack)
    const auto *tuple = op->value.as<Call>();
    auto stages = as_const_int(tuple ? tuple->args.at(0) : op->value);
    internal_check(stages && *stages >= 2) << "pipeline_scope needs 2 or more stages, got "
                                           << op->value;
    p.stages = int(*stages);
    p.slack = tuple ? int(as_const_int(tuple->args.at(1)).value_or(0)) : 0;
    p.warp_roles = roles_ > 0;
    ++p.attrs;
    if (const AttrStmt *bulk = bulk_copy_of(op)) {
      p.bulk = true;
      p.bulk_bytes = as_const_int(bulk->value).value_or(0);
      const auto *clipped = bulk->body.as<AttrStmt>();
      if (clipped && clipped->key == attr::bulk_copy_clipped) {
        auto alloc = allocs_.find(var);
        internal_check(alloc != allocs_.end() && alloc->second.alloc->extents.size() == 1)
            << "the clipped bulk copy of '" << var->name << "' outside its flat allocation";
        p.zero_first = alloc->second.alloc;
      }
      post_order_visit(bulk->body, [&](const IRNode *n) {
        const auto *c = llvm::dyn_cast<Call>(n);
        if (c && c->is_intrinsic(intrinsic::tma_load_multicast))
          p.cluster = std::max(p.cluster, __builtin_popcountll(uint64_t(
                                              as_const_int(c->args[3]).value_or(1))));
      });
      p.threads.assign(block_threads_.begin(), block_threads_.end());
      // Outside any loop and any divergence: filled once.
      p.bulk_once = loops_.empty() && divergent_ == 0 && p.attrs == 1 && p.bulk_bytes > 0 &&
                    !uses_thread_var(op->body);
    }
    user_check(p.bulk || p.slack == 0, "pipeline")
        << "buffer '" << var->name << "': a pipeline's slack (" << p.slack << ") is a TMA "
        << "ring's (its slots released on mbarriers); this one is filled by the block's "
        << "threads, which meet at a barrier each iteration: fill it by bulk_copy, or give no "
        << "slack";
    p.require(p.attrs == 1, "it is filled in more than one place");
    p.require(!loops_.empty(), kNoLoop);
    p.require(loops_.empty() || !loops_.back().divergent,
              "its loop runs under a condition on threadIdx, where the pipeline's barrier "
              "could hang");
    auto alloc = allocs_.find(var);
    p.require(alloc != allocs_.end() && alloc->second.alloc->extents.size() == 1,
              "it is not allocated as one flat buffer in the kernel");
    if (!p.valid)
      return;
    p.loop = loops_.back().loop;
    p.alloc = alloc->second.alloc;
    p.alloc_inside_loop = alloc->second.loop_depth >= loops_.size();
    // Hoisting the allocation out of the loop needs a size known outside it.
    p.require(!p.alloc_inside_loop || as_const_int(p.alloc->extents[0]).has_value(),
              "its size changes with the loop");
    // The fill moves to an earlier iteration and before the loop: it may only use variables
    // bound outside the loop (and the loop variable, which is substituted).
    llvm::DenseSet<const Variable *> inner(bound_.begin() + loops_.back().bound_depth + 1,
                                           bound_.end());
    std::string inner_name;
    uses_var(op->body, [&](const Variable *v) {
      if (inner.count(v) && inner_name.empty())
        inner_name = v->name;
      return inner.count(v) > 0;
    });
    p.require(inner_name.empty(), "its fill uses '" + inner_name +
                                      "', bound inside the loop, so it cannot move to an "
                                      "earlier iteration");
    Uses fill = uses_in(op->body, var);
    if (const AttrStmt *bulk = bulk_copy_of(op)) {
      // tma_load calls, which take the stage's address: the only way they touch it.
      Uses copies = uses_in(bulk->body, var); // the attr itself names the var
      p.require(copies.other_stores == 0 && copies.raw_refs == 0 && p.bulk_bytes > 0,
                "its bulk copy does more than copy into it");
      p.require(!uses_thread_var(op->body), "its bulk copy depends on the thread");
    } else {
      p.require(fill.other_stores == 0, "its fill writes other storage too");
      p.require(fill.loads == 0, "its fill reads the buffer itself");
      p.require(fill.raw_refs == 0 && !fill.calls, "its fill calls an intrinsic");
    }
  }

  void check_loop(const Variable *var, Plan &p) {
    if (!p.valid)
      return;
    // One thread issues a bulk copy for the whole block: every thread index must be bound
    // outside the loop, where the leader condition can name it.
    bool threads_inside = false;
    post_order_visit(p.loop->body, [&](const IRNode *n) {
      const auto *a = llvm::dyn_cast<AttrStmt>(n);
      const IterVar *iv = a && a->key == attr::thread_extent ? std::get_if<IterVar>(&a->node)
                                                              : nullptr;
      threads_inside |= iv && iv->thread_tag().rfind("threadIdx", 0) == 0;
    });
    user_check(!p.bulk || !threads_inside, "pipeline")
        << "buffer '" << var->name << "' is filled by TMA (bulk_copy) in the loop over "
        << p.loop->loop_var << ", which binds threads inside it; one thread issues the copies "
        << "for the block, so bind the block's threads outside that loop (env_threads on the "
        << "output stage launches them without a loop)";
    // Nothing the fill reads may be written elsewhere in the loop, or reading it iterations
    // early would see other values.
    Uses fill = uses_in(p.attr->body, var);
    Uses rest = uses_in(p.loop->body, var, p.attr);
    for (const ExprNode *b : fill.loaded)
      p.require(!rest.stored.count(b), "its fill reads '" + llvm::cast<Variable>(b)->name +
                                           "', which the loop also writes");
    // The buffer is only stored by the fill, only used inside the loop, and never by address.
    p.require(!rest.stored.count(var) && rest.raw_refs == 0,
              "the loop writes it outside its fill, or takes its address");
    p.require(uses_in(root_, var).accesses == uses_in(p.loop->body, var).accesses,
              "it is used outside the loop over '" + p.loop->loop_var->name + "'");
    // Within an iteration, the fill comes before every read.
    UseCounter before(var);
    before.stop_at = p.attr;
    before.visit_stmt(p.loop->body);
    p.require(!before.accessed_before_stop, "an iteration reads it before its fill");
  }

  Stmt root_;
  llvm::SmallVector<LoopEntry, 8> loops_;
  llvm::SmallVector<const Variable *, 16> bound_;
  llvm::DenseMap<const Variable *, AllocEntry> allocs_;
  llvm::DenseSet<const Variable *> thread_vars_;
  llvm::SmallVector<std::pair<Var, Expr>, 4> block_threads_; ///< threadIdx bound here, extents
  int divergent_ = 0;
  int roles_ = 0; ///< warp_roles attrs around
};

using passes_detail::intrinsic_stmt;

// Whether `s` issues wgmma, whose reads of shared memory complete asynchronously, and leaves
// them in flight: not where it also reads an accumulator register (wgmma_reg: an fp8 GEMM's
// promotion of each K block), which waits for every wgmma of the iteration.
bool reads_asynchronously(const Stmt &s) {
  bool mma = false, reads_registers = false;
  post_order_visit(s, [&](const IRNode *n) {
    if (const auto *c = llvm::dyn_cast<Call>(n)) {
      mma |= c->is_intrinsic(intrinsic::wgmma_mma) || c->is_intrinsic(intrinsic::wgmma_mma_rs);
      reads_registers |= c->is_intrinsic(intrinsic::wgmma_reg);
    }
  });
  return mma && !reads_registers;
}

// address_of(b[i]).
Expr element_address(const Buffer &b, const Expr &i) {
  return Call::make(Handle(), intrinsic::address_of, {BufferLoad::make(b, {i})},
                    Call::Intrinsic);
}

// `fill` with the barrier argument of its tma_load / tma_load_im2col calls set to `bar`.
Stmt with_barrier(const Stmt &fill, const Expr &bar) {
  class SetBarrier : public IRMutator {
  public:
    explicit SetBarrier(Expr bar) : bar_(std::move(bar)) {}

  protected:
    Expr visit(const Call *op) override {
      Expr e = IRMutator::visit(op);
      const auto *c = e.as<Call>();
      if (!c->is_intrinsic(intrinsic::tma_load) && !c->is_intrinsic(intrinsic::tma_load_im2col) &&
          !c->is_intrinsic(intrinsic::tma_load_multicast))
        return e;
      std::vector<Expr> args = c->args;
      args[2] = bar_;
      return Call::make(c->type, c->name, std::move(args), c->call_kind);
    }
    Stmt visit(const AttrStmt *op) override {
      if (op->key == attr::bulk_copy || op->key == attr::bulk_copy_clipped) // consumed here
        return mutate(op->body);
      return IRMutator::visit(op);
    }

  private:
    Expr bar_;
  };
  return SetBarrier(bar).mutate(fill);
}

// Zeroes the `elements` of p's buffer (its ring, or its one stage) before the first fill of a
// clipped bulk copy: the threads of the first thread axis, the others' at 0 (one warpgroup of
// a gemm), store 16 bytes each, then fence their writes for the async proxy (the TMA fills and
// wgmma reads after the barrier that follows).
Stmt zero_buffer(const Plan &p, int64_t elements) {
  const Allocate &alloc = *p.zero_first;
  const DataType t = alloc.dtype;
  const int lanes = elements % (16 / t.bytes()) == 0 ? 16 / t.bytes() : 1;
  Buffer buf = passes_detail::make_flat_buffer(alloc.buffer_var->name, alloc.buffer_var, t,
                                               Expr(elements), "shared");
  Expr lane = Expr(0), one_group = const_true();
  int64_t threads = 1;
  for (size_t k = 0; k < p.threads.size(); ++k) {
    const auto &[v, extent] = p.threads[k];
    auto e = as_const_int(extent);
    if (k == 0 && e) {
      lane = v;
      threads = *e;
    } else {
      one_group = one_group && v == make_zero(v.type());
    }
  }
  const int64_t vectors = elements / lanes;
  Var z("zero", Int(32));
  Expr at = z * make_const(Int(32), threads) + lane;
  Expr index = lanes > 1 ? Expr(Ramp::make(at * lanes, Expr(1), lanes)) : at;
  Expr zero = lanes > 1 ? Expr(Broadcast::make(make_zero(t), lanes)) : make_zero(t);
  Stmt store = BufferStore::make(buf, zero, {index});
  if (vectors % threads != 0)
    store = IfThenElse::make(at < make_const(Int(32), vectors), store);
  Stmt loop = For::make(z, Expr(0), make_const(Int(32), (vectors + threads - 1) / threads),
                        ForKind::Serial, store);
  return IfThenElse::make(arith::simplify(one_group),
                          Seq::make({loop, intrinsic_stmt(intrinsic::fence_proxy_async, {})}));
}

// The bulk copies of a plan are issued by the block's thread where every threadIdx is 0, and
// every thread of the block releases the stages: that condition, and the number of threads.
std::pair<Expr, Expr> leader_and_threads(const Plan &p) {
  Expr leader = const_true(), threads = Expr(1);
  for (const auto &[v, extent] : p.threads) {
    leader = leader && v == make_zero(v.type());
    threads = threads * extent;
  }
  return {arith::simplify(leader), arith::simplify(threads)};
}

class Rewriter : public IRMutator {
public:
  Rewriter(llvm::DenseMap<const Variable *, Plan> &plans, std::vector<const Variable *> order,
           Remarks *remarks)
      : plans_(plans), order_(std::move(order)), remarks_(remarks) {}

protected:
  Stmt visit(const Allocate *op) override {
    Plan *p = plan_of(op->buffer_var.get());
    if (!p)
      return IRMutator::visit(op);
    Stmt body = mutate(op->body);
    if (p->alloc_inside_loop)
      return body; // re-created around the loop
    return Allocate::make(op->buffer_var, op->dtype, {grown_size(*p)}, op->scope, body);
  }

  Stmt visit(const For *op) override {
    std::vector<Plan *> here;
    int stages = 0;
    for (const Variable *var : order_)
      if (Plan *p = plan_of(var); p && p->loop == op) {
        here.push_back(p);
        stages = std::max(stages, p->stages);
      }
    if (here.empty())
      return IRMutator::visit(op);
    for (Plan *p : here) {
      loop_stages_[p] = stages;
      user_check(p->bulk == here[0]->bulk, "pipeline")
          << "the stages filled in the loop over " << op->loop_var
          << " are pipelined together, but '" << here[0]->alloc->buffer_var->name << "' is "
          << (here[0]->bulk ? "" : "not ") << "filled by TMA (bulk_copy) and '"
          << p->alloc->buffer_var->name << "' is " << (p->bulk ? "" : "not")
          << "; make both bulk copies or neither";
      report_applied(*p, *op, stages);
    }
    for (Plan *p : here)
      user_check(p->bulk || !p->warp_roles, "warp_specialize")
          << "buffer '" << p->alloc->buffer_var->name << "' is pipelined over " << op->loop_var
          << " in a warp-specialized stage, but its fill is not a TMA bulk copy: the producer "
          << "role only issues bulk copies; call bulk_copy() on its stage, or drop "
          << "warp_specialize";
    if (here[0]->bulk) {
      // In a persistent kernel's tile loop the ring runs across the tiles: its steps (slots,
      // parities) are counted from the block's first tile.
      if (!tiles_.empty()) {
        // (A part of a tile split over the last wave is a block's last: the earlier tiles
        // took the whole steps.)
        auto whole = whole_steps_.find(op);
        auto steps = whole != whole_steps_.end() ? std::optional<int64_t>(whole->second)
                                                 : as_const_int(op->extent);
        user_check(steps.has_value(), "persistent")
            << "the TMA ring of '" << here[0]->alloc->buffer_var->name << "' over "
            << op->loop_var << " runs across the tiles of a persistent stage, but its loop's "
            << "extent (" << op->extent << ") varies from tile to tile (a triangular loop, e.g. "
            << "causal attention's key blocks); a persistent ring counts its slots from the "
            << "block's first tile and needs the same number of steps in every tile: drop "
            << "persistent for this stage";
        ring_base_[op] = tiles_.back().iteration * make_const(op->loop_var.type(), *steps);
      }
      return bulk_pipeline(op, here, stages, here[0]->warp_roles);
    }
    // The compute: fills removed (they move to the top), reads retargeted to their stage.
    Stmt compute = remove_no_op(IRMutator::mutate(op->body));

    Var i = op->loop_var;
    DataType t = i.type();
    Expr end = op->min + op->extent;
    // The fills of all buffers, writing stage (i - min) % N, for iteration `iter`.
    auto fills = [&](const Expr &iter) {
      std::vector<Stmt> out;
      for (Plan *p : here)
        out.push_back(substitute(fill_of(*p, *op), i, iter));
      return Seq::make(std::move(out));
    };
    int copies = 0;
    auto async = [&](const Stmt &s) { return to_async_copies(s, &copies); };
    // A compute that reads its stages asynchronously (wgmma) may leave one iteration's reads in
    // flight when there are 3 or more stages: the fills then run `lag` more iterations behind,
    // so that the stage they overwrite was read lag + 1 iterations ago.
    int lag = stages >= 3 && reads_asynchronously(compute) ? 1 : 0;
    int ahead = stages - 1 - lag; // iterations filled ahead of the one computed

    std::vector<Stmt> out; // the prologue, then the loop
    auto extent = as_const_int(op->extent);
    for (int s = 0; s < ahead; ++s) {
      Stmt f = async(fills(op->min + make_const(t, s)));
      if (!extent)
        f = IfThenElse::make(make_const(t, s) < op->extent, f);
      else if (s >= *extent)
        f = Stmt();
      if (f.defined())
        out.push_back(f);
      if (copies) // one group per stage, empty or not, so that the waits count right
        out.push_back(intrinsic_stmt(intrinsic::cp_async_commit));
    }

    std::vector<Stmt> next;
    for (Plan *p : here)
      next.push_back(AttrStmt::make(Expr(p->alloc->buffer_var), attr::pipeline_fill, Expr(0),
                                    substitute(fill_of(*p, *op), i, i + ahead)));
    Stmt steady_fill = async(Seq::make(std::move(next)));
    std::vector<Stmt> body;
    if (copies)
      body.push_back(intrinsic_stmt(intrinsic::cp_async_wait, {Expr(ahead - 1)}));
    // Other threads read the stage the fill overwrites, unless every buffer is a thread's own
    // (local: a register copy prefetched a step ahead).
    if (std::any_of(here.begin(), here.end(),
                    [](const Plan *p) { return p->alloc->scope != "local"; }))
      body.push_back(intrinsic_stmt(intrinsic::syncthreads));
    body.push_back(IfThenElse::make(i + ahead < end, steady_fill));
    if (copies)
      body.push_back(intrinsic_stmt(intrinsic::cp_async_commit));
    body.push_back(compute);
    return finish_loop(*op, std::move(body), lag, std::move(out), here);
  }

  Stmt visit(const AttrStmt *op) override {
    if (op->key == attr::tile_loop)
      return tile_loop(op);
    if (op->key == attr::last_wave_steps) {
      Stmt loop = op->body; // (under the loop's pragmas: overlap_steps, ping_pong)
      for (const AttrStmt *a = loop.as<AttrStmt>();
           a && a->key.rfind(attr::pragma_prefix, 0) == 0; a = loop.as<AttrStmt>())
        loop = a->body;
      if (const auto *f = loop.as<For>())
        whole_steps_[f] = *as_const_int(op->value);
      return mutate(op->body);
    }
    if (op->key != attr::pipeline_scope)
      return IRMutator::visit(op);
    if (!plan_of(pipelined_var(op))) {
      auto it = plans_.find(pipelined_var(op));
      if (it != plans_.end() && it->second.bulk_once && bulk_copy_of(op))
        return tiles_.empty() ? bulk_once(it->second, op) : bulk_once_per_tile(it->second, op);
      user_check(!bulk_copy_of(op), "pipeline")
          << "buffer '" << pipelined_var(op)->name << "' is filled by TMA (bulk_copy), but its "
          << "fill cannot be pipelined: it must sit directly in a loop that every thread of the "
          << "block runs together, use nothing bound inside that loop, and be the only write "
          << "of the buffer (compute_at the loop that steps through the tiles)";
      if (remarks_ && it != plans_.end()) {
        std::string what = "pipeline(" + std::to_string(it->second.stages) + ") of '" +
                           pipelined_var(op)->name + "' not applied: " + it->second.why_not;
        // A loop of one iteration is removed before this pass: then there is nothing to do.
        if (it->second.why_not == kNoLoop)
          remarks_->note("pipeline", what);
        else
          remarks_->missed("pipeline",
                           what + "; it stays one buffer, filled and then read in each iteration");
      }
      return mutate(op->body); // not applicable: the buffer stays single
    }
    return Evaluate::make(Expr(0)); // the fill moves to the top of the loop
  }

  Expr visit(const BufferLoad *op) override {
    Expr e = IRMutator::visit(op);
    Plan *p = plan_of(op->buffer->data.as<Variable>());
    if (!p)
      return e;
    const auto *load = e.as<BufferLoad>();
    return BufferLoad::make(grown(*p, op->buffer),
                            {offset(*p, load->indices, stage_of(*p, *p->loop))});
  }

  Stmt visit(const BufferStore *op) override {
    internal_check(!plan_of(op->buffer->data.as<Variable>()))
        << "store to pipelined buffer '" << op->buffer.name() << "' outside its fill";
    return IRMutator::visit(op);
  }

private:
  // "pipeline(3) of 'A.shared' over 'k.outer' (3 stages): applied, ..." and whether its copies
  // are cp.async (a missed remark when they are not).
  void report_applied(const Plan &p, const For &loop, int stages) {
    if (!remarks_)
      return;
    std::string what = "pipeline(" + std::to_string(p.stages) + ") of '" +
                       p.alloc->buffer_var->name + "' over '" + loop.loop_var->name + "' (" +
                       std::to_string(stages) + " stages)";
    if (p.bulk)
      return remarks_->applied("pipeline", what + ": applied, filled by TMA on a ring of " +
                                               std::to_string(stages) + " mbarrier slots" +
                                               (p.warp_roles ? " by a producer warpgroup" : ""));
    if (p.alloc->scope == "local") // a thread's own registers: no copy engine, no barrier
      return remarks_->applied("pipeline", what + ": applied, a register copy: the next "
                                                  "iteration's loads issued before this one's "
                                                  "compute");
    int copies = 0;
    std::string why;
    to_async_copies(p.attr->body, &copies, &why);
    if (why.empty())
      return remarks_->applied("pipeline", what + ": applied, filled by cp.async");
    remarks_->missed("pipeline", what + ": applied, but its fill waits for its loads before "
                                        "the compute runs: " +
                                        (copies ? "some of its copies are" : "it is") +
                                        " not cp.async, because " + why);
  }

  Plan *plan_of(const Variable *var) {
    auto it = var ? plans_.find(var) : plans_.end();
    return it != plans_.end() && it->second.valid ? &it->second : nullptr;
  }

  int stages_of(Plan &p) const {
    auto it = loop_stages_.find(&p);
    internal_check(it != loop_stages_.end()) << "pipelined buffer used outside its loop";
    return it->second;
  }

  // (i - min) % N: the stage iteration i of the loop uses (with the steps of earlier tiles
  // before it, in a persistent kernel's tile loop).
  Expr stage_of(Plan &p, const For &loop) const {
    return floormod(ring_step(loop), stages_of(p));
  }

  // The ring's step of the loop's current iteration: i - min, after the steps of the block's
  // earlier tiles when the loop is in a tile loop.
  Expr ring_step(const For &loop) const {
    Expr rel = is_zero(loop.min) ? Expr(loop.loop_var) : loop.loop_var - loop.min;
    auto it = ring_base_.find(&loop);
    return it == ring_base_.end() ? rel : it->second + rel;
  }

  // The fill of `p`, writing the stage of the loop's current iteration.
  Stmt fill_of(Plan &p, const For &loop) {
    class StoreRetargeter : public IRMutator {
    public:
      StoreRetargeter(Rewriter &r, Plan &p, Expr stage) : r_(r), p_(p), stage_(std::move(stage)) {}

    protected:
      Stmt visit(const BufferStore *op) override {
        Stmt s = IRMutator::visit(op);
        if (op->buffer->data.get() != p_.alloc->buffer_var.get())
          return s;
        const auto *store = s.as<BufferStore>();
        return BufferStore::make(r_.grown(p_, op->buffer), store->value,
                                 {r_.offset(p_, store->indices, stage_)});
      }

      // A bulk copy's tma_load: its destination is the stage.
      Expr visit(const BufferLoad *op) override {
        Expr e = IRMutator::visit(op);
        if (op->buffer->data.get() != p_.alloc->buffer_var.get())
          return e;
        const auto *load = e.as<BufferLoad>();
        return BufferLoad::make(r_.grown(p_, op->buffer), {r_.offset(p_, load->indices, stage_)});
      }

    private:
      Rewriter &r_;
      Plan &p_;
      Expr stage_;
    };
    return StoreRetargeter(*this, p, stage_of(p, loop)).mutate(p.attr->body);
  }

  // The loop of bulk copies: a ring of `stages` slots, each with a full and an empty barrier.
  // One thread (the leader) waits until a slot is empty, announces its bytes and issues its
  // tma_load calls; every thread waits until the slot it computes on is full, and once its reads
  // of a slot are over (`delay` iterations later, when the compute reads asynchronously) arrives
  // on that slot's empty barrier. No block barrier is left in the loop: warps drift apart by up
  // to the ring's slack.
  //
  // With warp roles the fill of iteration i is iteration i's own, marked warp_producer, with no
  // prologue: split_warp_roles moves it into a producer loop of its own, which runs ahead of the
  // consumers as far as the empty barriers let it (the whole ring). Before that split the loop
  // is still a correct program: the slot filled in iteration i was released in iteration
  // i - stages + delay, before it.
  Stmt bulk_pipeline(const For *op, const std::vector<Plan *> &here, int stages, bool roles) {
    Stmt compute = remove_no_op(IRMutator::mutate(op->body));
    Var i = op->loop_var;
    DataType t = i.type();
    Expr end = op->min + op->extent;
    const Expr step_in_loop = is_zero(op->min) ? Expr(i) : i - op->min; // counts the delay
    Expr rel = ring_step(*op);
    // In a persistent kernel's tile loop the ring's barriers are initialized once, before it.
    TileLoop *tile = tiles_.empty() ? nullptr : &tiles_.back();
    user_check(!tile || roles, "persistent")
        << "the TMA ring of '" << here[0]->alloc->buffer_var->name << "' over " << op->loop_var
        << " runs in the tile loop of a persistent stage, which needs warp roles (a producer "
        << "filling the next tile's slots during this tile's epilogue): call warp_specialize() "
        << "on the stage computed at the tile";
    int64_t bytes = 0;
    int cluster = 1; // a multicast slot is released by the consumers of every block it fills
    for (Plan *p : here) {
      bytes += p->bulk_bytes;
      cluster = std::max(cluster, p->cluster);
    }
    Var full_var(i->name + "_full", Handle()), empty_var(i->name + "_empty", Handle());
    Buffer full = passes_detail::make_flat_buffer(full_var->name, full_var, UInt(64),
                                                  Expr(stages), "shared");
    Buffer empty = passes_detail::make_flat_buffer(empty_var->name, empty_var, UInt(64),
                                                   Expr(stages), "shared");
    auto full_at = [&](const Expr &slot) { return element_address(full, slot); };
    auto empty_at = [&](const Expr &slot) { return element_address(empty, slot); };
    auto [leader, threads] = leader_and_threads(*here[0]);
    // A slot's release comes `delay` iterations after its reads (1: wgmma's reads left in
    // flight); its refill `slack` iterations after that (Stage::pipeline's).
    int slack = 0;
    for (Plan *p : here)
      slack = std::max(slack, p->slack);
    if (roles)
      slack = 0; // the producer runs as far ahead as the releases allow
    int delay = stages >= 3 + slack && reads_asynchronously(compute) ? 1 : 0;
    int lag = delay + slack;
    int ahead = stages - 1 - lag;
    internal_check(ahead >= 1) << "pipeline of " << stages << " stages with a slack of " << slack;

    // The fill of iteration `iter` (relative: `iter_rel`) into slot iter_rel % stages. In the
    // steady state the slot was last read in iteration iter_rel - stages, whose release is
    // phase iter_rel / stages - 1 of its empty barrier (for the first round, parity 1: the
    // phase before the first, which counts as completed).
    auto fills = [&](const Expr &iter, bool steady) {
      Expr iter_rel = substitute(rel, i, iter);
      Expr slot = floormod(iter_rel, stages);
      std::vector<Stmt> out;
      if (steady)
        out.push_back(intrinsic_stmt(
            intrinsic::mbarrier_wait,
            {empty_at(slot), floormod(floordiv(iter_rel, stages) + 1, 2)}));
      out.push_back(intrinsic_stmt(intrinsic::mbarrier_arrive_expect_tx,
                                   {full_at(slot), Expr(int(bytes))}));
      for (Plan *p : here) {
        Stmt f = with_barrier(fill_of(*p, *op), full_at(floormod(rel, stages)));
        f = substitute(f, i, iter);
        if (steady)
          f = AttrStmt::make(Expr(p->alloc->buffer_var), attr::pipeline_fill, Expr(0), f);
        out.push_back(f);
      }
      return Seq::make(std::move(out));
    };

    std::vector<Stmt> init;
    for (int s = 0; s < stages; ++s) {
      init.push_back(intrinsic_stmt(intrinsic::mbarrier_init, {full_at(Expr(s)), Expr(1)}));
      init.push_back(intrinsic_stmt(intrinsic::mbarrier_init,
                                    {empty_at(Expr(s)), arith::simplify(threads * cluster)}));
    }
    init.push_back(intrinsic_stmt(intrinsic::fence_barrier_init));
    std::vector<Stmt> out{IfThenElse::make(leader, Seq::make(std::move(init)))};
    for (Plan *p : here)
      if (p->zero_first) {
        internal_check(!tile) << "a clipped bulk copy of '" << p->alloc->buffer_var->name
                              << "' in a persistent tile loop";
        out.push_back(zero_buffer(*p, *as_const_int(arith::simplify(grown_size(*p)))));
      }
    out.push_back(intrinsic_stmt(intrinsic::syncthreads));
    if (tile) {
      tile->hoisted.push_back({{full_var, empty_var}, stages, std::move(out)});
      out.clear();
    }
    // A slot's reads are over: its empty barrier learns it, in every block of the cluster
    // when the slot is multicast (each block's producer writes all of them).
    auto release_slot = [&](const Expr &slot) {
      if (cluster == 1)
        return intrinsic_stmt(intrinsic::mbarrier_arrive, {empty_at(slot)});
      std::vector<Stmt> arrivals;
      for (int r = 0; r < cluster; ++r)
        arrivals.push_back(
            intrinsic_stmt(intrinsic::mbarrier_arrive_cluster, {empty_at(slot), Expr(r)}));
      return Seq::make(std::move(arrivals));
    };
    // Reads of iteration rel - delay are over at the end of iteration rel.
    Stmt release = release_slot(floormod(rel - delay, stages));
    if (delay)
      release = IfThenElse::make(step_in_loop >= delay, release);
    Stmt wait_full = intrinsic_stmt(
        intrinsic::mbarrier_wait,
        {full_at(floormod(rel, stages)), floormod(floordiv(rel, stages), 2)});
    std::vector<Stmt> body;
    if (roles) {
      body.push_back(AttrStmt::make(AttrNode(), attr::warp_producer, Expr(0), fills(i, true)));
    } else {
      auto extent = as_const_int(op->extent);
      for (int s = 0; s < ahead; ++s) {
        if (extent && s >= *extent)
          break;
        Expr cond = extent ? leader : leader && make_const(t, s) < op->extent;
        out.push_back(IfThenElse::make(cond, fills(op->min + make_const(t, s), false)));
      }
      body.push_back(IfThenElse::make(leader && i + ahead < end, fills(i + ahead, true)));
    }
    body.insert(body.end(), {wait_full, compute, release});
    // Across tiles the last step's slot is released too, once its reads have landed (after
    // the loop, where insert_wgmma_syncs waits for them) and before the epilogue, so that the
    // producer has the whole ring for the next tile meanwhile.
    Stmt release_last;
    if (tile && delay)
      release_last = release_slot(floormod(substitute(rel, i, end - 1), stages));
    Stmt result = finish_loop(*op, std::move(body), delay, std::move(out), here, release_last);
    if (tile)
      return result; // the barriers are allocated around the tile loop
    result = Allocate::make(empty_var, UInt(64), {Expr(stages)}, "shared", result);
    return Allocate::make(full_var, UInt(64), {Expr(stages)}, "shared", result);
  }

  // A persistent kernel's tile loop: the rings inside it keep their barriers from one tile to
  // the next, so their allocations and initialization go before it.
  Stmt tile_loop(const AttrStmt *op) {
    const auto *iteration = std::get_if<Expr>(&op->node);
    internal_check(iteration && iteration->as<Variable>()) << "tile_loop without its variable";
    const auto *loop = op->body.as<For>();
    if (!loop || !is_same_var(op->node, loop->loop_var))
      return mutate(op->body); // a loop of one iteration, simplified away: one tile per block
    tiles_.push_back({loop->loop_var, {}});
    Stmt body = mutate(op->body);
    std::vector<HoistedRing> hoisted = std::move(tiles_.back().hoisted);
    tiles_.pop_back();
    std::vector<Stmt> out;
    for (HoistedRing &h : hoisted)
      out.insert(out.end(), h.init.begin(), h.init.end());
    out.push_back(AttrStmt::make(op->node, op->key, op->value, body));
    Stmt result = Seq::make(std::move(out));
    for (const HoistedRing &h : hoisted)
      for (const Var &bar : h.barriers)
        result = Allocate::make(bar, UInt(64), {Expr(h.slots)}, "shared", result);
    return result;
  }

  // A bulk copy filled once (outside any loop, or once per tile) on a barrier of its own: the
  // barrier, the leader's setup of it, and the fill (its bytes announced, its copies issued).
  struct OnceFill {
    Var bar;
    Expr at; ///< the barrier's address
    Stmt init, fill;
  };
  OnceFill once_fill(Plan &p, const AttrStmt *op) {
    Var bar_var(pipelined_var(op)->name + "_full", Handle());
    Buffer bar = passes_detail::make_flat_buffer(bar_var->name, bar_var, UInt(64), Expr(1),
                                                 "shared");
    Expr at = element_address(bar, Expr(0));
    Expr leader = leader_and_threads(p).first;
    Stmt init = IfThenElse::make(
        leader, Seq::make({intrinsic_stmt(intrinsic::mbarrier_init, {at, Expr(1)}),
                           intrinsic_stmt(intrinsic::fence_barrier_init)}));
    Stmt fill = IfThenElse::make(
        leader, Seq::make({intrinsic_stmt(intrinsic::mbarrier_arrive_expect_tx,
                                          {at, Expr(int(p.bulk_bytes))}),
                           with_barrier(bulk_copy_of(op)->body, at)}));
    return {bar_var, at, init, fill};
  }

  // A bulk copy outside any loop: the leader fills the buffer once on a barrier of its own,
  // which every thread waits for (phase 0).
  Stmt bulk_once(Plan &p, const AttrStmt *op) {
    OnceFill f = once_fill(p, op);
    std::vector<Stmt> body{f.init};
    if (p.zero_first)
      body.push_back(zero_buffer(p, *as_const_int(arith::simplify(p.zero_first->extents[0]))));
    body.insert(body.end(), {intrinsic_stmt(intrinsic::syncthreads), f.fill,
                             intrinsic_stmt(intrinsic::mbarrier_wait, {f.at, Expr(0)})});
    return Allocate::make(f.bar, UInt(64), {Expr(1)}, "shared", Seq::make(std::move(body)));
  }

  // bulk_once in a persistent kernel's tile loop: the barrier is initialized once, before the
  // loop, and completes once per tile (phase: the tile iteration's parity). The block's
  // threads meet before each fill, so that the copy does not overwrite the previous tile's
  // buffer while a thread still reads it; those of the whole cluster when the copy is
  // multicast (it overwrites the peers' buffers too).
  Stmt bulk_once_per_tile(Plan &p, const AttrStmt *op) {
    OnceFill f = once_fill(p, op);
    internal_check(!p.zero_first) << "a clipped bulk copy of '" << pipelined_var(op)->name
                                  << "' in a persistent tile loop";
    TileLoop &tile = tiles_.back();
    tile.hoisted.push_back({{f.bar}, 1, {f.init, intrinsic_stmt(intrinsic::syncthreads)}});
    return Seq::make(
        {intrinsic_stmt(p.cluster > 1 ? intrinsic::cluster_sync : intrinsic::syncthreads), f.fill,
         intrinsic_stmt(intrinsic::mbarrier_wait,
                        {f.at, floormod(tile.iteration, make_const(tile.iteration.type(), 2))})});
  }

  // The pipelined loop with body `body` (wrapped for insert_wgmma_syncs when its compute keeps
  // `lag` groups of reads in flight) after the statements `out` before it, inside the grown
  // allocations that were inside the loop.
  Stmt finish_loop(const For &op, std::vector<Stmt> body, int lag, std::vector<Stmt> out,
                   const std::vector<Plan *> &here, Stmt after = Stmt()) {
    Stmt loop = For::make(op.loop_var, op.min, op.extent, op.for_kind,
                          Seq::make(std::move(body)), op.thread_tag);
    if (lag)
      loop = AttrStmt::make(AttrNode(), attr::pipeline_async_reads, Expr(lag), loop);
    out.push_back(loop);
    if (after.defined())
      out.push_back(after);
    Stmt result = Seq::make(std::move(out));
    for (Plan *p : here)
      if (p->alloc_inside_loop)
        result = Allocate::make(p->alloc->buffer_var, p->alloc->dtype, {grown_size(*p)},
                                p->alloc->scope, result);
    return result;
  }

  Expr grown_size(Plan &p) { return p.alloc->extents[0] * stages_of(p); }

  Expr offset(Plan &p, const std::vector<Expr> &idx, const Expr &stage) {
    internal_check(idx.size() == 1) << "pipelining expects flat (Form 2) accesses";
    Expr size = p.alloc->extents[0].astype(stage.type());
    return passes_detail::offset_index(idx[0], stage * size);
  }

  // The flat buffer over the grown storage that replaces `b` (one per original buffer).
  Buffer grown(Plan &p, const Buffer &b) {
    auto [it, fresh] = grown_.try_emplace(b.get());
    if (fresh)
      it->second = passes_detail::make_flat_buffer(b.name(), b->data, b.dtype(), grown_size(p),
                                                   b.scope());
    return it->second;
  }

  llvm::DenseMap<const Variable *, Plan> &plans_;
  std::vector<const Variable *> order_;
  Remarks *remarks_;
  llvm::DenseMap<const Plan *, int> loop_stages_;
  llvm::DenseMap<const BufferNode *, Buffer> grown_;

  /// A ring (or a once-filled barrier) inside a tile loop: its barriers, their slots, and the
  /// statements that initialize them, which go before the tile loop.
  struct HoistedRing {
    std::vector<Var> barriers;
    int slots = 0;
    std::vector<Stmt> init;
  };
  struct TileLoop {
    Var iteration;
    std::vector<HoistedRing> hoisted;
  };
  std::vector<TileLoop> tiles_; ///< the tile loops around the statement being rewritten
  llvm::DenseMap<const For *, Expr> ring_base_; ///< a ring's steps before its loop's first
  llvm::DenseMap<const For *, int64_t> whole_steps_; ///< a split loop's steps in a whole tile
};

} // namespace

Stmt inject_pipeline(Stmt s, Remarks *remarks) {
  Planner planner(s);
  planner.visit_stmt(s);
  if (planner.plans.empty())
    return s;
  return Rewriter(planner.plans, planner.order, remarks).mutate(s);
}

} // namespace tessel
