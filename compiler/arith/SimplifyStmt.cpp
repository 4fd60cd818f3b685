// Statement rules of the simplifier: variables are bound to their ranges while inside the loop,
// thread binding or let that defines them, and code proven dead is dropped.
//
// A dropped statement becomes the no-op `Evaluate(0)` (statement fields may not be empty), and
// statements whose body is a no-op disappear in turn.
#include "compiler/arith/Simplify.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/Substitute.h"

namespace tessel::arith {

namespace {

Stmt no_op() { return Evaluate::make(make_zero(Int(32))); }

bool is_no_op(const Stmt &s) {
  if (!s.defined())
    return true;
  const auto *e = s.as<Evaluate>();
  return e && is_const(e->value);
}

} // namespace

BindScope::BindScope(VarBounds &bounds, const Variable *v, IntInterval iv)
    : bounds_(bounds), var_(v) {
  if (auto it = bounds.find(v); it != bounds.end())
    old_ = it->second;
  bounds[v] = iv;
}

BindScope::~BindScope() {
  if (old_)
    bounds_[var_] = *old_;
  else
    bounds_.erase(var_);
}

void Simplifier::assume(const Expr &cond, std::vector<std::unique_ptr<BindScope>> &scopes) {
  if (const auto *op = cond.as<And>()) {
    assume(op->a, scopes);
    assume(op->b, scopes);
    return;
  }
  // After simplification comparisons are EQ, NE, LT or LE; narrow a variable on either side.
  auto narrow = [&](const Expr &v, IntInterval limit) {
    const auto *var = v.as<Variable>();
    if (!var || !is_int_scalar(var->type))
      return;
    IntInterval old = bound(v);
    IntInterval now{std::max(old.min, limit.min), std::min(old.max, limit.max)};
    if (now.min <= now.max)
      scopes.push_back(std::make_unique<BindScope>(bounds_, var, now));
  };
  auto below = [](IntInterval b, int64_t delta) { // values <= b.max - delta
    if (b.max == IntInterval::kNegInf) // x < INT64_MIN: nothing to learn (the branch is dead)
      return IntInterval::everything();
    int64_t hi = b.max == IntInterval::kPosInf ? b.max : b.max - delta;
    return IntInterval{IntInterval::kNegInf, hi};
  };
  auto above = [](IntInterval b, int64_t delta) { // values >= b.min + delta
    if (b.min == IntInterval::kPosInf)
      return IntInterval::everything();
    int64_t lo = b.min == IntInterval::kNegInf ? b.min : b.min + delta;
    return IntInterval{lo, IntInterval::kPosInf};
  };
  if (const auto *op = cond.as<LT>(); op && op->a.type().is_int()) {
    narrow(op->a, below(bound(op->b), 1));
    narrow(op->b, above(bound(op->a), 1));
  } else if (const auto *op = cond.as<LE>(); op && op->a.type().is_int()) {
    narrow(op->a, below(bound(op->b), 0));
    narrow(op->b, above(bound(op->a), 0));
  } else if (const auto *op = cond.as<EQ>(); op && is_int_scalar(op->a.type())) {
    narrow(op->a, bound(op->b));
    narrow(op->b, bound(op->a));
  }
}

Expr Simplifier::mutate_assuming(const Expr &cond, const Expr &e) {
  std::vector<std::unique_ptr<BindScope>> scopes;
  assume(cond, scopes);
  Expr r = mutate(e);
  while (!scopes.empty()) // restore in reverse order of narrowing
    scopes.pop_back();
  return r;
}

Stmt Simplifier::mutate_assuming(const Expr &cond, const Stmt &s) {
  std::vector<std::unique_ptr<BindScope>> scopes;
  assume(cond, scopes);
  Stmt r = mutate(s);
  while (!scopes.empty())
    scopes.pop_back();
  return r;
}

Stmt Simplifier::visit(const For *op) {
  Expr min = mutate(op->min), extent = mutate(op->extent);
  auto range = loop_var_bound(bound(min), bound(extent));
  if (!range)
    return no_op(); // the loop never runs
  auto ext = as_const_int(extent);
  // One iteration: the body with the variable replaced. A thread binding keeps its loop, as the
  // launch configuration is read from it.
  if (ext && *ext == 1 && op->for_kind != ForKind::ThreadBinding)
    return mutate(substitute(op->body, op->loop_var, min));
  Stmt body;
  {
    BindScope scope(bounds_, op->loop_var.get(), *range);
    body = mutate(op->body);
  }
  if (is_no_op(body))
    return no_op();
  if (min.same_as(op->min) && extent.same_as(op->extent) && body.same_as(op->body))
    return op;
  return For::make(op->loop_var, min, extent, op->for_kind, body, op->thread_tag);
}

Stmt Simplifier::visit(const AttrStmt *op) {
  Expr value = mutate(op->value);
  Stmt body;
  const IterVar *iv = std::get_if<IterVar>(&op->node);
  if (iv && iv->defined() && (op->key == attr::thread_extent || op->key == attr::virtual_thread)) {
    // The thread index runs over [0, extent).
    auto range = loop_var_bound(IntInterval::single(0), bound(value));
    if (!range)
      return no_op();
    BindScope scope(bounds_, iv->var().get(), *range);
    body = mutate(op->body);
  } else {
    body = mutate(op->body);
  }
  if (is_no_op(body))
    return no_op();
  if (value.same_as(op->value) && body.same_as(op->body))
    return op;
  return AttrStmt::make(op->node, op->key, value, body);
}

Stmt Simplifier::visit(const LetStmt *op) {
  Expr value = mutate(op->value);
  if (value.as<IntImm>() || value.as<FloatImm>() || value.as<Variable>())
    return mutate(substitute(op->body, op->var, value));
  Stmt body;
  if (is_int_scalar(value.type())) {
    BindScope scope(bounds_, op->var.get(), bound(value));
    body = mutate(op->body);
  } else {
    body = mutate(op->body);
  }
  if (is_no_op(body))
    return no_op();
  if (!uses_var(body, op->var))
    return body;
  if (value.same_as(op->value) && body.same_as(op->body))
    return op;
  return LetStmt::make(op->var, value, body);
}

Stmt Simplifier::visit(const AssertStmt *op) {
  Expr c = mutate(op->condition);
  Stmt body = mutate(op->body);
  if (is_one(c))
    return body;
  if (c.same_as(op->condition) && body.same_as(op->body))
    return op;
  return AssertStmt::make(c, op->message, body);
}

Stmt Simplifier::visit(const Allocate *op) {
  Stmt s = IRMutator::visit(op);
  const auto *a = s.as<Allocate>();
  return a && is_no_op(a->body) ? no_op() : s;
}

Stmt Simplifier::visit(const BufferRealize *op) {
  Stmt s = IRMutator::visit(op);
  const auto *r = s.as<BufferRealize>();
  return r && is_no_op(r->body) ? no_op() : s;
}

Stmt Simplifier::visit(const IfThenElse *op) {
  Expr c = mutate(op->condition);
  if (is_one(c))
    return mutate(op->then_case);
  if (is_zero(c))
    return op->else_case.defined() ? mutate(op->else_case) : no_op();
  // Inside each branch its condition holds: `if (x < 8)` narrows x for the body.
  Stmt then_case = mutate_assuming(c, op->then_case);
  Stmt else_case = op->else_case.defined() ? mutate_assuming(logic_not(c), op->else_case) : Stmt();
  if (else_case.defined() && is_no_op(else_case))
    else_case = Stmt();
  if (is_no_op(then_case)) {
    if (!else_case.defined())
      return no_op();
    return IfThenElse::make(logic_not(c), else_case);
  }
  if (c.same_as(op->condition) && then_case.same_as(op->then_case) &&
      else_case.same_as(op->else_case))
    return op;
  return IfThenElse::make(c, then_case, else_case);
}

Stmt Simplifier::visit(const Seq *op) {
  std::vector<Stmt> stmts;
  bool changed = false;
  for (const Stmt &s : op->stmts) {
    Stmt m = mutate(s);
    changed |= !m.same_as(s);
    if (is_no_op(m))
      changed = true;
    else
      stmts.push_back(m);
  }
  if (!changed)
    return op;
  Stmt r = Seq::make(std::move(stmts));
  return r.defined() ? r : no_op();
}

Stmt Simplifier::visit(const Evaluate *op) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? Stmt(op) : Evaluate::make(v);
}

} // namespace tessel::arith
