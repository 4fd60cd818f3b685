#include "compiler/passes/InjectPipeline.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/Substitute.h"
#include "compiler/passes/AsyncCopy.h"
#include "compiler/passes/FlatBuffer.h"
#include "compiler/passes/RemoveNoOp.h"
#include "compiler/support/Error.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/SmallVector.h>

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

/// One buffer to pipeline: where it is filled, the loop that pipelines it, its allocation.
struct Plan {
  const AttrStmt *attr = nullptr;
  const For *loop = nullptr;
  const Allocate *alloc = nullptr;
  bool alloc_inside_loop = false;
  int attrs = 0;
  int stages = 0; ///< asked for by the attr; the loop's largest count is what is used
  bool valid = true;
};

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
    if (op->for_kind == ForKind::ThreadBinding && is_thread_tag(op->thread_tag))
      thread_vars_.insert(op->loop_var.get());
    bool divergent = divergent_ > 0 || uses_thread_var(op->min) || uses_thread_var(op->extent);
    loops_.push_back({op, bound_.size(), divergent});
    bound_.push_back(op->loop_var.get());
    IRVisitor::visit(op);
    bound_.pop_back();
    loops_.pop_back();
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
    if (iv) {
      bound_.push_back(iv->var().get());
      if (is_thread_tag(iv->thread_tag()))
        thread_vars_.insert(iv->var().get());
    }
    if (op->key == attr::pipeline_scope)
      plan_attr(op);
    IRVisitor::visit(op);
    if (iv)
      bound_.pop_back();
  }

private:
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
  bool uses_thread_var(const Expr &e) const {
    return uses_var(e, [&](const Variable *v) { return thread_vars_.count(v) > 0; });
  }

  void plan_attr(const AttrStmt *op) {
    const Variable *var = pipelined_var(op);
    internal_check(var) << "pipeline_scope attr without a buffer var";
    auto [it, fresh] = plans.try_emplace(var);
    if (fresh)
      order.push_back(var);
    Plan &p = it->second;
    p.attr = op;
    auto stages = as_const_int(op->value);
    internal_check(stages && *stages >= 2) << "pipeline_scope needs 2 or more stages, got "
                                           << op->value;
    p.stages = int(*stages);
    p.valid &= ++p.attrs == 1 && !loops_.empty() && !loops_.back().divergent;
    auto alloc = allocs_.find(var);
    p.valid &= alloc != allocs_.end() && alloc->second.alloc->extents.size() == 1;
    if (!p.valid)
      return;
    p.loop = loops_.back().loop;
    p.alloc = alloc->second.alloc;
    p.alloc_inside_loop = alloc->second.loop_depth >= loops_.size();
    // Hoisting the allocation out of the loop needs a size known outside it.
    p.valid &= !p.alloc_inside_loop || as_const_int(p.alloc->extents[0]).has_value();
    // The fill moves to an earlier iteration and before the loop: it may only use variables
    // bound outside the loop (and the loop variable, which is substituted).
    llvm::DenseSet<const Variable *> inner(bound_.begin() + loops_.back().bound_depth + 1,
                                           bound_.end());
    p.valid &= !uses_var(op->body, [&](const Variable *v) { return inner.count(v) > 0; });
    Uses fill = uses_in(op->body, var);
    p.valid &= fill.other_stores == 0 && fill.loads == 0 && fill.raw_refs == 0 && !fill.calls;
  }

  void check_loop(const Variable *var, Plan &p) {
    if (!p.valid)
      return;
    // Nothing the fill reads may be written elsewhere in the loop, or reading it iterations
    // early would see other values.
    Uses fill = uses_in(p.attr->body, var);
    Uses rest = uses_in(p.loop->body, var, p.attr);
    for (const ExprNode *b : fill.loaded)
      p.valid &= !rest.stored.count(b);
    // The buffer is only stored by the fill, only used inside the loop, and never by address.
    p.valid &= !rest.stored.count(var) && rest.raw_refs == 0;
    p.valid &= uses_in(root_, var).accesses == uses_in(p.loop->body, var).accesses;
    // Within an iteration, the fill comes before every read.
    UseCounter before(var);
    before.stop_at = p.attr;
    before.visit_stmt(p.loop->body);
    p.valid &= !before.accessed_before_stop;
  }

  Stmt root_;
  llvm::SmallVector<LoopEntry, 8> loops_;
  llvm::SmallVector<const Variable *, 16> bound_;
  llvm::DenseMap<const Variable *, AllocEntry> allocs_;
  llvm::DenseSet<const Variable *> thread_vars_;
  int divergent_ = 0;
};

Stmt intrinsic_stmt(const char *name, std::vector<Expr> args = {}) {
  return Evaluate::make(Call::make(Void(), name, std::move(args), Call::Intrinsic));
}

// Whether `s` issues wgmma, whose reads of shared memory complete asynchronously.
bool reads_asynchronously(const Stmt &s) {
  bool found = false;
  post_order_visit(s, [&](const IRNode *n) {
    if (const auto *c = llvm::dyn_cast<Call>(n))
      found |= c->is_intrinsic(intrinsic::wgmma_mma);
  });
  return found;
}

class Rewriter : public IRMutator {
public:
  Rewriter(llvm::DenseMap<const Variable *, Plan> &plans, std::vector<const Variable *> order)
      : plans_(plans), order_(std::move(order)) {}

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
    for (Plan *p : here)
      loop_stages_[p] = stages;
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
    body.push_back(intrinsic_stmt(intrinsic::syncthreads));
    body.push_back(IfThenElse::make(i + ahead < end, steady_fill));
    if (copies)
      body.push_back(intrinsic_stmt(intrinsic::cp_async_commit));
    body.push_back(compute);
    Stmt loop = For::make(i, op->min, op->extent, op->for_kind, Seq::make(std::move(body)),
                          op->thread_tag);
    if (lag)
      loop = AttrStmt::make(AttrNode(), attr::pipeline_async_reads, Expr(lag), loop);
    out.push_back(loop);
    Stmt result = Seq::make(std::move(out));
    for (Plan *p : here)
      if (p->alloc_inside_loop)
        result = Allocate::make(p->alloc->buffer_var, p->alloc->dtype, {grown_size(*p)},
                                p->alloc->scope, result);
    return result;
  }

  Stmt visit(const AttrStmt *op) override {
    if (op->key != attr::pipeline_scope)
      return IRMutator::visit(op);
    if (!plan_of(pipelined_var(op)))
      return mutate(op->body); // not applicable: the buffer stays single
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
  Plan *plan_of(const Variable *var) {
    auto it = var ? plans_.find(var) : plans_.end();
    return it != plans_.end() && it->second.valid ? &it->second : nullptr;
  }

  int stages_of(Plan &p) const {
    auto it = loop_stages_.find(&p);
    internal_check(it != loop_stages_.end()) << "pipelined buffer used outside its loop";
    return it->second;
  }

  // (i - min) % N: the stage iteration i of the loop uses.
  Expr stage_of(Plan &p, const For &loop) const {
    Expr rel = is_zero(loop.min) ? Expr(loop.loop_var) : loop.loop_var - loop.min;
    return floormod(rel, stages_of(p));
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

    private:
      Rewriter &r_;
      Plan &p_;
      Expr stage_;
    };
    return StoreRetargeter(*this, p, stage_of(p, loop)).mutate(p.attr->body);
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
  llvm::DenseMap<const Plan *, int> loop_stages_;
  llvm::DenseMap<const BufferNode *, Buffer> grown_;
};

} // namespace

Stmt inject_pipeline(Stmt s) {
  Planner planner(s);
  planner.visit_stmt(s);
  if (planner.plans.empty())
    return s;
  return Rewriter(planner.plans, planner.order).mutate(s);
}

} // namespace tessel
