// Statement rules of the simplifier: variables are bound to their ranges while inside the loop,
// thread binding or let that defines them, and code proven dead is dropped.
//
// A dropped statement becomes the no-op `Evaluate(0)` (statement fields may not be empty), and
// statements whose body is a no-op disappear in turn.
#include "compiler/arith/Simplify.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Substitute.h"
#include "compiler/ir/WrittenBuffers.h"

namespace tessel::arith {

namespace {

Stmt no_op() { return Evaluate::make(make_zero(Int(32))); }

bool is_no_op(const Stmt &s) {
  if (!s.defined())
    return true;
  const auto *e = s.as<Evaluate>();
  return e && is_const(e->value);
}

// The facts the body of loop `v` over [0, extent) runs under, as f with f <= 0, for an extent
// select(C, n, 0) (ReduceBounds' bound from a `where` with a conjunct free of v: packed
// sequences' key loop): C's comparisons; v < u for the terms u of n's mins (under a max with
// 0, which only empties the loop), and k v <= x for u = floordiv(x, k) + 1 (a loop over the
// blocks of k keys below x + 1: its guard k v < x + 1). Only facts whose loads read buffers
// the body does not write (the extent was evaluated before the loop). (Other loops' bounds
// would serve too; kept to these, the loops that need it, so as not to change other kernels.)
std::vector<Expr> loop_facts(const Var &v, const Expr &extent, const Stmt &body) {
  const auto *sel = extent.as<Select>();
  if (!sel || !is_zero(sel->false_value))
    return {};
  std::vector<Expr> candidates = conjuncts(sel->condition);
  Expr n = sel->true_value;
  if (const auto *mx = n.as<Max>(); mx && is_zero(mx->b))
    n = mx->a;
  std::vector<Expr> mins;
  std::function<void(const Expr &)> split_min = [&](const Expr &e) {
    if (const auto *m = e.as<Min>()) {
      split_min(m->a);
      split_min(m->b);
    } else if (const auto *add = e.as<Add>(); add && add->a.as<Min>() && is_const(add->b)) {
      const auto *m = add->a.as<Min>(); // min(a, b) + c = min(a + c, b + c)
      split_min(m->a + add->b);
      split_min(m->b + add->b);
    } else if (!is_const(e)) {
      mins.push_back(e);
    }
  };
  split_min(n);
  const DataType t = v.type();
  for (const Expr &u : mins) {
    if (u.type() != t)
      continue;
    candidates.push_back(LT::make(v, u));
    // u = floordiv(x, k) + 1: v <= floordiv(x, k) gives k v <= x.
    if (const auto *add = u.as<Add>(); add && is_one(add->b))
      if (const auto *fd = add->a.as<FloorDiv>())
        if (auto k = as_const_int(fd->b); k && *k > 0)
          candidates.push_back(LE::make(make_const(t, *k) * v, fd->a));
  }
  std::vector<Expr> facts;
  std::optional<llvm::DenseSet<const Variable *>> written; // (scanned once, when needed)
  for (const Expr &c : candidates) {
    std::optional<Expr> f = as_nonpositive(c);
    if (!f)
      continue;
    bool stale = false;
    post_order_visit(c, [&](const IRNode *n) {
      if (n->kind() == IRNodeKind::TensorLoad) {
        stale = true;
      } else if (n->kind() == IRNodeKind::BufferLoad) {
        if (!written)
          written = written_buffers(body);
        const auto *data = static_cast<const BufferLoad *>(n)->buffer->data.as<Variable>();
        stale |= !data || written->count(data);
      }
    });
    if (!stale)
      facts.push_back(*f);
  }
  return facts;
}

} // namespace

bool Simplifier::implied_by_facts(const Expr &c) {
  if (facts_.empty())
    return false;
  std::optional<Expr> f = as_nonpositive(c);
  if (!f)
    return false;
  const LinearForm lf = linear_form(*f);
  for (const Expr &fact : facts_) {
    if (fact.type() != f->type())
      continue;
    // f = k fact + d, k > 0 (the ratio of an atom's coefficients: 128 t against t), d <= 0
    // over the variables' ranges (a thread's row past the block's first): fact <= 0 gives
    // f <= 0.
    llvm::SmallVector<int64_t, 2> scales{1};
    for (const auto &[atom, c] : linear_form(fact).terms)
      if (int64_t cf = lf.coeff_of(atom); cf != 0 && cf % c == 0 && cf / c > 1)
        scales.push_back(cf / c);
    for (int64_t k : scales) {
      Expr d = mutate(*f - make_const(fact.type(), k) * fact);
      if (bound(d).max <= 0)
        return true;
    }
  }
  return false;
}

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
    // A loop bounded by data (ReduceBounds) runs its body under its bound's comparisons.
    const size_t known = facts_.size();
    if (is_zero(min))
      for (Expr &f : loop_facts(op->loop_var, extent, op->body))
        facts_.push_back(std::move(f));
    body = mutate(op->body);
    facts_.resize(known);
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
  if (!facts_.empty()) { // conjuncts the enclosing loop's bound already tested hold
    std::vector<Expr> kept;
    bool dropped = false;
    for (const Expr &x : conjuncts(c))
      if (implied_by_facts(x))
        dropped = true;
      else
        kept.push_back(x);
    if (dropped)
      c = kept.empty() ? make_const(c.type(), 1) : all(kept);
  }
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
