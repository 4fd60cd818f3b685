#include "compiler/arith/IndexInterval.h"

#include "compiler/arith/Analyzer.h"
#include "compiler/ir/IREquality.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/Substitute.h"

#include <algorithm>

namespace tessel {

namespace {

int64_t floordiv_i(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

Expr add_base(const Expr &a, const Expr &b) {
  if (!a.defined())
    return b;
  if (!b.defined())
    return a;
  return a + b;
}

Expr sub_base(const Expr &a, const Expr &b) {
  if (!b.defined())
    return a;
  if (!a.defined())
    return 0 - b;
  return a - b;
}

Expr mul_base(const Expr &a, int64_t c) {
  if (!a.defined() || c == 0)
    return Expr();
  return c == 1 ? a : a * make_const(a.type(), c);
}

} // namespace

std::optional<Expr> divide_exact(const Expr &e, int64_t c) {
  if (!e.defined())
    return Expr();
  if (auto v = as_const_int(e)) {
    if (*v % c == 0)
      return make_const(e.type(), *v / c);
    return std::nullopt;
  }
  if (const auto *m = e.as<Mul>()) {
    if (auto v = as_const_int(m->b); v && *v % c == 0)
      return *v == c ? m->a : m->a * make_const(e.type(), *v / c);
    if (auto v = as_const_int(m->a); v && *v % c == 0)
      return *v == c ? m->b : m->b * make_const(e.type(), *v / c);
    return std::nullopt;
  }
  if (const auto *a = e.as<Add>()) {
    auto x = divide_exact(a->a, c), y = divide_exact(a->b, c);
    if (x && y)
      return add_base(*x, *y);
  }
  if (const auto *s = e.as<Sub>()) {
    auto x = divide_exact(s->a, c), y = divide_exact(s->b, c);
    if (x && y)
      return sub_base(*x, *y);
  }
  // min / max of multiples of c (c > 0): the start of a block shifted inwards.
  if (const auto *m = e.as<Min>(); m && c > 0) {
    auto x = divide_exact(m->a, c), y = divide_exact(m->b, c);
    if (x && y && x->defined() && y->defined())
      return min(*x, *y);
  }
  if (const auto *m = e.as<Max>(); m && c > 0) {
    auto x = divide_exact(m->a, c), y = divide_exact(m->b, c);
    if (x && y && x->defined() && y->defined())
      return max(*x, *y);
  }
  return std::nullopt;
}

namespace {

class Evaluator {
public:
  explicit Evaluator(const VarIntervals &vars) : vars_(vars) {}

  std::optional<IndexInterval> eval(const Expr &e) {
    if (auto v = as_const_int(e))
      return IndexInterval::constant(*v, *v);
    if (const auto *v = e.as<Variable>()) {
      auto it = vars_.find(v);
      return it == vars_.end() ? IndexInterval::point(e) : it->second;
    }
    // An expression of fixed variables only is a single point, whatever its form.
    if (!uses_var(e, [&](const Variable *v) { return vars_.count(v) != 0; }))
      return IndexInterval::point(e);
    if (const auto *op = e.as<Add>()) {
      auto a = eval(op->a), b = eval(op->b);
      if (!a || !b)
        return std::nullopt;
      return IndexInterval{add_base(a->base, b->base), a->lo + b->lo, a->hi + b->hi};
    }
    if (const auto *op = e.as<Sub>()) {
      auto a = eval(op->a), b = eval(op->b);
      if (!a || !b)
        return std::nullopt;
      return IndexInterval{sub_base(a->base, b->base), a->lo - b->hi, a->hi - b->lo};
    }
    if (const auto *op = e.as<Mul>()) {
      auto a = eval(op->a), b = eval(op->b);
      if (!a || !b)
        return std::nullopt;
      if (b->has_base() && !a->has_base())
        std::swap(a, b);
      if (b->has_base() || !b->is_point())
        return point_if_fixed(e, *a, *b);
      int64_t c = b->lo;
      int64_t x = a->lo * c, y = a->hi * c;
      return IndexInterval{mul_base(a->base, c), std::min(x, y), std::max(x, y)};
    }
    if (const auto *op = e.as<FloorDiv>()) {
      auto a = eval(op->a);
      auto c = as_const_int(op->b);
      if (!a || !c || *c <= 0)
        return std::nullopt;
      if (auto q = divide_exact(a->base, *c))
        return IndexInterval{*q, floordiv_i(a->lo, *c), floordiv_i(a->hi, *c)};
      if (a->is_point())
        return IndexInterval::point(floordiv(a->min_expr(), make_const(e.type(), *c)));
      return std::nullopt;
    }
    if (const auto *op = e.as<FloorMod>()) {
      auto a = eval(op->a);
      auto c = as_const_int(op->b);
      if (!a || !c || *c <= 0)
        return std::nullopt;
      if (auto q = divide_exact(a->base, *c)) {
        (void)q;
        if (floordiv_i(a->lo, *c) == floordiv_i(a->hi, *c))
          return IndexInterval::constant(a->lo - floordiv_i(a->lo, *c) * *c,
                                         a->hi - floordiv_i(a->lo, *c) * *c);
      }
      if (a->is_point())
        return IndexInterval::point(floormod(a->min_expr(), make_const(e.type(), *c)));
      return IndexInterval::constant(0, *c - 1);
    }
    if (const auto *op = e.as<Min>())
      return min_max(e, op->a, op->b, true);
    if (const auto *op = e.as<Max>())
      return min_max(e, op->a, op->b, false);
    if (const auto *op = e.as<Cast>()) {
      if (op->type.is_integer_like() && op->value.type().is_integer_like())
        return eval(op->value);
    }
    return std::nullopt;
  }

private:
  std::optional<IndexInterval> point_if_fixed(const Expr &e, const IndexInterval &a,
                                              const IndexInterval &b) {
    if (a.is_point() && b.is_point())
      return IndexInterval::point(e.as<Mul>() ? a.min_expr() * b.min_expr() : e);
    return std::nullopt;
  }

  std::optional<IndexInterval> min_max(const Expr &e, const Expr &x, const Expr &y, bool is_min) {
    auto a = eval(x), b = eval(y);
    if (!a || !b)
      return std::nullopt;
    bool same_base = (!a->has_base() && !b->has_base()) ||
                     (a->has_base() && b->has_base() && structural_equal(a->base, b->base));
    if (same_base) {
      if (is_min)
        return IndexInterval{a->base, std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
      return IndexInterval{a->base, std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
    }
    if (a->is_point() && b->is_point())
      return IndexInterval::point(is_min ? min(a->min_expr(), b->min_expr())
                                         : max(a->min_expr(), b->min_expr()));
    (void)e;
    return std::nullopt;
  }

  const VarIntervals &vars_;
};

} // namespace

Expr IndexInterval::min_expr() const {
  if (!base.defined())
    return Expr(static_cast<int>(lo));
  return lo == 0 ? base : base + make_const(base.type(), lo);
}

std::optional<IndexInterval> eval_interval(const Expr &e, const VarIntervals &vars) {
  return Evaluator(vars).eval(e);
}

std::optional<IndexInterval> union_interval(const IndexInterval &a, const IndexInterval &b) {
  // Bases that are the same sum in another order (i + threadIdx.x, threadIdx.x + i) are one.
  bool same = (!a.has_base() && !b.has_base()) ||
              (a.has_base() && b.has_base() &&
               (structural_equal(a.base, b.base) || is_zero(arith::simplify(a.base - b.base))));
  if (!same)
    return std::nullopt;
  return IndexInterval{a.base, std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
}

} // namespace tessel
