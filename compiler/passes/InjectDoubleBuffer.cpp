#include "compiler/passes/InjectDoubleBuffer.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Substitute.h"
#include "compiler/passes/FlatBuffer.h"
#include "compiler/support/Error.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/SmallVector.h>

namespace tessel {

namespace {

const Variable *db_var(const AttrStmt *op) {
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

/// One buffer to double: where it is filled, the loop that pipelines it, its allocation.
struct Plan {
  const AttrStmt *attr = nullptr;
  const For *loop = nullptr;
  const Allocate *alloc = nullptr;
  bool alloc_inside_loop = false;
  int attrs = 0;
  bool valid = true;
  Stmt prologue; ///< made by the rewriter
};

// Finds the double_buffer_scope attrs and decides which of them can be applied.
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
    loops_.push_back({op, bound_.size()});
    bound_.push_back(op->loop_var.get());
    IRVisitor::visit(op);
    bound_.pop_back();
    loops_.pop_back();
    for (const Variable *var : order)
      if (plans[var].loop == op)
        check_loop(var, plans[var]);
  }
  void visit(const LetStmt *op) override {
    bound_.push_back(op->var.get());
    IRVisitor::visit(op);
    bound_.pop_back();
  }
  void visit(const AttrStmt *op) override {
    const IterVar *iv = std::get_if<IterVar>(&op->node);
    if (iv)
      bound_.push_back(iv->var().get());
    if (op->key == attr::double_buffer_scope)
      plan_attr(op);
    IRVisitor::visit(op);
    if (iv)
      bound_.pop_back();
  }

private:
  struct LoopEntry {
    const For *loop;
    size_t bound_depth; ///< bound_.size() before the loop var was pushed
  };
  struct AllocEntry {
    const Allocate *alloc;
    size_t loop_depth; ///< number of loops around the Allocate
  };

  void plan_attr(const AttrStmt *op) {
    const Variable *var = db_var(op);
    internal_check(var) << "double_buffer_scope attr without a buffer var";
    auto [it, fresh] = plans.try_emplace(var);
    if (fresh)
      order.push_back(var);
    Plan &p = it->second;
    p.attr = op;
    p.valid &= ++p.attrs == 1 && !loops_.empty();
    auto alloc = allocs_.find(var);
    p.valid &= alloc != allocs_.end() && alloc->second.alloc->extents.size() == 1;
    if (!p.valid)
      return;
    p.loop = loops_.back().loop;
    p.alloc = alloc->second.alloc;
    p.alloc_inside_loop = alloc->second.loop_depth >= loops_.size();
    // Hoisting the allocation out of the loop needs a size known outside it.
    p.valid &= !p.alloc_inside_loop || as_const_int(p.alloc->extents[0]).has_value();
    // The fill moves to the previous iteration and before the loop: it may only use variables
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
    // Nothing the fill reads may be written elsewhere in the loop, or reading it one iteration
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
};

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
    return Allocate::make(op->buffer_var, op->dtype, {doubled_size(*p)}, op->scope, body);
  }

  Stmt visit(const For *op) override {
    Stmt s = IRMutator::visit(op);
    for (const Variable *var : order_) {
      Plan &p = plans_[var];
      if (!p.valid || p.loop != op)
        continue;
      s = Seq::make({p.prologue, s});
      if (p.alloc_inside_loop)
        s = Allocate::make(p.alloc->buffer_var, p.alloc->dtype, {doubled_size(p)}, p.alloc->scope,
                           s);
    }
    return s;
  }

  Stmt visit(const AttrStmt *op) override {
    if (op->key != attr::double_buffer_scope)
      return IRMutator::visit(op);
    const Variable *var = db_var(op);
    Plan *p = plan_of(var);
    if (!p)
      return mutate(op->body); // not applicable: the buffer stays single
    const For *loop = p->loop;
    Var i = loop->loop_var;
    DataType t = i.type();
    Expr next = i + make_one(t);
    // The fill is rewritten once per stage expression, then moved one iteration ahead. The
    // steady state's stage is written in terms of i, so moving it gives (i + 1) % 2.
    filling_ = var;
    write_stage_ = make_zero(t);
    p->prologue = substitute(mutate(op->body), i, loop->min);
    write_stage_ = floormod(relative(i, *loop), 2);
    Stmt steady = substitute(mutate(op->body), i, next);
    filling_ = nullptr;
    return IfThenElse::make(next < loop->min + loop->extent, steady);
  }

  Expr visit(const BufferLoad *op) override {
    Expr e = IRMutator::visit(op);
    Plan *p = plan_of(op->buffer->data.as<Variable>());
    if (!p)
      return e;
    const auto *load = e.as<BufferLoad>();
    Expr stage = floormod(relative(p->loop->loop_var, *p->loop), 2);
    return BufferLoad::make(doubled(*p, op->buffer), {offset(*p, load->indices, stage)});
  }

  Stmt visit(const BufferStore *op) override {
    Stmt s = IRMutator::visit(op);
    const Variable *var = op->buffer->data.as<Variable>();
    Plan *p = plan_of(var);
    if (!p)
      return s;
    internal_check(var == filling_) << "double-buffered store outside its fill";
    const auto *store = s.as<BufferStore>();
    return BufferStore::make(doubled(*p, op->buffer), store->value,
                             {offset(*p, store->indices, write_stage_)});
  }

private:
  Plan *plan_of(const Variable *var) {
    auto it = var ? plans_.find(var) : plans_.end();
    return it != plans_.end() && it->second.valid ? &it->second : nullptr;
  }

  static Expr relative(const Expr &i, const For &loop) {
    return is_zero(loop.min) ? i : i - loop.min;
  }

  static Expr doubled_size(const Plan &p) { return p.alloc->extents[0] * 2; }

  Expr offset(const Plan &p, const std::vector<Expr> &idx, const Expr &stage) {
    internal_check(idx.size() == 1) << "double buffering expects flat (Form 2) accesses";
    Expr size = p.alloc->extents[0].astype(stage.type());
    return passes_detail::offset_index(idx[0], stage * size);
  }

  // The flat buffer over the doubled storage that replaces `b` (one per original buffer).
  Buffer doubled(const Plan &p, const Buffer &b) {
    auto [it, fresh] = doubled_.try_emplace(b.get());
    if (fresh)
      it->second = passes_detail::make_flat_buffer(b.name(), b->data, b.dtype(), doubled_size(p),
                                                   b.scope());
    return it->second;
  }

  llvm::DenseMap<const Variable *, Plan> &plans_;
  std::vector<const Variable *> order_;
  llvm::DenseMap<const BufferNode *, Buffer> doubled_;
  const Variable *filling_ = nullptr;
  Expr write_stage_;
};

} // namespace

Stmt inject_double_buffer(Stmt s) {
  Planner planner(s);
  planner.visit_stmt(s);
  if (planner.plans.empty())
    return s;
  return Rewriter(planner.plans, planner.order).mutate(s);
}

} // namespace tessel
