#include "compiler/lower/ReduceBounds.h"

#include "compiler/arith/Analyzer.h"
#include "compiler/arith/CanonicalForm.h"
#include "compiler/arith/ConstIntBound.h"
#include "compiler/arith/Simplify.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/Substitute.h"

#include <vector>

namespace tessel {

namespace {

bool is_thread_index(const Variable *v) {
  return v->name.rfind("threadIdx", 0) == 0 || v->name.rfind("vthread", 0) == 0;
}

} // namespace

std::optional<std::pair<Expr, Expr>> reduce_loop_bounds(const Var &x, int64_t extent,
                                                        const Expr &cond,
                                                        const RangedVars &ranged) {
  const DataType t = x.type();
  const std::vector<Expr> parts = conjuncts(cond);
  arith::VarBounds ranges;
  for (const auto &[v, r] : ranged)
    ranges[v] = {r.first, r.second};
  // The values of an atom whose variables are all ranged (floordiv(threadIdx.x, 8) where the
  // threads of a block are fused from two axes): nothing for one that reads anything else.
  auto ranged_interval = [&](const Expr &atom) -> std::optional<arith::IntInterval> {
    if (uses_var(atom, [&](const Variable *u) { return !ranged.count(u); }))
      return std::nullopt;
    arith::IntInterval r = arith::const_int_bound(atom, ranges);
    if (r.min == arith::IntInterval::kNegInf || r.max == arith::IntInterval::kPosInf)
      return std::nullopt;
    return r;
  };
  std::optional<Expr> lo, hi; // x >= lo, x <= hi
  std::vector<Expr> holds;    // conjuncts without x: the loop runs only where each can hold
  arith::Simplifier simplifier(ranges);
  for (const Expr &c : parts) {
    std::optional<Expr> f = arith::as_nonpositive(c);
    if (!f || f->type() != t)
      continue;
    // A conjunct without x, simplified over the ranged variables' values: floordiv(128 b + r,
    // 128) with r in [0, 127] (the rows of a block) is b.
    if (!uses_var(*f, [&](const Variable *u) { return u == x.get(); }))
      f = simplifier.mutate(*f);

    // f = a * x + (terms of ranged variables) + rest <= 0: the iteration x can hold it when
    // a * x + min(ranged terms) + rest <= 0.
    arith::LinearForm form = arith::linear_form(*f);
    int64_t a = 0;
    arith::LinearForm rest(t);
    rest.constant = form.constant;
    bool linear = true;
    for (const auto &[atom, coeff] : form.terms) {
      const auto *v = atom.as<Variable>();
      if (v && v == x.get()) {
        a = coeff;
      } else if (auto r = v ? ranged.find(v) : ranged.end(); v && r != ranged.end()) {
        rest.constant += coeff * (coeff > 0 ? r->second.first : r->second.second);
      } else if (std::optional<arith::IntInterval> r = ranged_interval(atom)) {
        rest.constant += coeff * (coeff > 0 ? r->min : r->max);
      } else if (uses_var(atom, [&](const Variable *u) {
                   return u == x.get() || ranged.count(u) || is_thread_index(u);
                 })) {
        linear = false; // x or a ranged variable in a non-linear atom, or a thread not ranged
      } else {
        rest.add_term(atom, coeff);
      }
    }
    if (!linear)
      continue;
    Expr r = arith::to_expr(rest);
    if (a == 0) { // rest <= 0 for some value of the ranged variables, or no iteration runs
      holds.push_back(r <= make_zero(t));
      continue;
    }
    if (a > 0) { // x <= floor(-r / a)
      Expr bound = floordiv(make_zero(t) - r, make_const(t, a));
      hi = hi ? min(*hi, bound) : bound;
    } else { // x >= ceil(r / -a)
      Expr bound = floordiv(r + make_const(t, -a - 1), make_const(t, -a));
      lo = lo ? max(*lo, bound) : bound;
    }
  }
  if (!lo && !hi && holds.empty())
    return std::nullopt;
  // [begin, end): clamped to the loop's own [0, extent), empty when they cross.
  Expr begin = lo ? max(*lo, make_zero(t)) : make_zero(t);
  begin = min(begin, make_const(t, extent));
  Expr end = hi ? min(*hi + make_const(t, 1), make_const(t, extent)) : make_const(t, extent);
  Expr count = max(end - begin, make_zero(t));
  if (!holds.empty())
    count = select(all(holds), count, make_zero(t));
  return std::make_pair(arith::simplify(begin), arith::simplify(count));
}

} // namespace tessel
