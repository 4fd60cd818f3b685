// Expression rules of the simplifier: constant folding, the linear normal form of index
// arithmetic, floordiv/floormod by constants, min/max, comparisons and logic.
//
// Rules that reason about integer values (moving terms across a comparison, splitting a sum
// under a floordiv) assume that signed arithmetic does not overflow, as TVM and Halide do; they
// run on signed types only. Unsigned types, whose wrap-around is routine, get constant folding,
// the ring-exact linear form and rules backed by sound interval bounds.
#include "compiler/arith/CanonicalForm.h"
#include "compiler/arith/IntEval.h"
#include "compiler/arith/Simplify.h"
#include "compiler/ir/IREquality.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/Substitute.h"
#include "compiler/support/Error.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace tessel::arith {

namespace {

bool bounded(IntInterval b) { return b.bounded(); }

// True if a float of type t can hold v exactly, so that folding needs no rounding rule (the
// IR keeps float16/bfloat16 constants as doubles, unrounded).
bool exactly_representable(double v, DataType t) {
  if (std::isnan(v))
    return false;
  if (t.bits() == 64 || t.bits() == 32)
    return true; // FloatImm::make rounds float32 like the hardware does
  if (std::isinf(v)) // float8 casts saturate to the largest finite value
    return !t.is_float8();
  if (v == 0)
    return true;
  const int mantissa = t.significand_bits(), min_exp = t.min_normal_exponent();
  if (std::fabs(v) > t.max_finite())
    return false;
  int e;
  std::frexp(v, &e);
  int exp = std::max(e - 1, min_exp); // subnormals share the smallest exponent
  double scaled = std::ldexp(v, (mantissa - 1) - exp);
  return scaled == std::floor(scaled);
}

// Folds a node whose operands are all constants, through the same evaluator the tests use.
std::optional<Expr> fold_int(const Expr &node) {
  Expr a, b;
  if (!binary_operands(node, &a, &b) || !a.as<IntImm>() || !b.as<IntImm>())
    return std::nullopt;
  auto v = eval_int(node, VarValues());
  if (!v)
    return std::nullopt; // division by zero: left alone
  return IntImm::make(node.type(), *v);
}

std::optional<Expr> fold_float(IRNodeKind k, const Expr &a, const Expr &b) {
  auto x = as_const_float(a), y = as_const_float(b);
  if (!x || !y)
    return std::nullopt;
  DataType t = a.type();
  double r;
  switch (k) {
  case IRNodeKind::Add:
    r = *x + *y;
    break;
  case IRNodeKind::Sub:
    r = *x - *y;
    break;
  case IRNodeKind::Mul:
    r = *x * *y;
    break;
  case IRNodeKind::Div:
    if (*y == 0)
      return std::nullopt;
    r = *x / *y;
    break;
  case IRNodeKind::Min:
    r = std::min(*x, *y);
    break;
  case IRNodeKind::Max:
    r = std::max(*x, *y);
    break;
  case IRNodeKind::EQ:
    return IntImm::make(Bool(), *x == *y);
  case IRNodeKind::NE:
    return IntImm::make(Bool(), *x != *y);
  case IRNodeKind::LT:
    return IntImm::make(Bool(), *x < *y);
  case IRNodeKind::LE:
    return IntImm::make(Bool(), *x <= *y);
  default:
    return std::nullopt;
  }
  if (!exactly_representable(r, t))
    return std::nullopt;
  return FloatImm::make(t, r);
}

Expr make_compare(IRNodeKind k, Expr a, Expr b) {
  switch (k) {
  case IRNodeKind::EQ:
    return EQ::make(std::move(a), std::move(b));
  case IRNodeKind::NE:
    return NE::make(std::move(a), std::move(b));
  case IRNodeKind::LT:
    return LT::make(std::move(a), std::move(b));
  case IRNodeKind::LE:
    return LE::make(std::move(a), std::move(b));
  case IRNodeKind::GT:
    return GT::make(std::move(a), std::move(b));
  case IRNodeKind::GE:
    return GE::make(std::move(a), std::move(b));
  default:
    internal_error << "make_compare of a non-comparison";
  }
}

// Decides `x op y` for all values in the intervals; the infinities decide nothing.
std::optional<bool> decide(IRNodeKind k, IntInterval x, IntInterval y) {
  auto finite = [](int64_t v) { return v != IntInterval::kNegInf && v != IntInterval::kPosInf; };
  bool lt = finite(x.max) && finite(y.min) && x.max < y.min;  // always x < y
  bool le = finite(x.max) && finite(y.min) && x.max <= y.min; // always x <= y
  bool gt = finite(x.min) && finite(y.max) && x.min > y.max;  // always x > y
  bool ge = finite(x.min) && finite(y.max) && x.min >= y.max; // always x >= y
  bool same = x.is_single() && y.is_single() && finite(x.min) && x.min == y.min;
  switch (k) {
  case IRNodeKind::LT:
    return lt ? std::optional(true) : ge ? std::optional(false) : std::nullopt;
  case IRNodeKind::LE:
    return le ? std::optional(true) : gt ? std::optional(false) : std::nullopt;
  case IRNodeKind::EQ:
    return same ? std::optional(true) : (lt || gt) ? std::optional(false) : std::nullopt;
  case IRNodeKind::NE:
    return same ? std::optional(false) : (lt || gt) ? std::optional(true) : std::nullopt;
  default:
    return std::nullopt;
  }
}

// Bounds of a division say nothing when the divisor may be zero (undefined, left alone).
bool nonzero(IntInterval b) { return b.min > 0 || b.max < 0; }

// The quotient floordiv(v, c) taken by every value of b, if it is one number.
std::optional<int64_t> same_quotient(IntInterval b, int64_t c) {
  if (!bounded(b))
    return std::nullopt;
  int64_t lo = floordiv_int(b.min, c), hi = floordiv_int(b.max, c);
  return lo == hi ? std::optional(lo) : std::nullopt;
}

// Divides every coefficient and the constant of f by g (which divides them all).
LinearForm divide_exact(const LinearForm &f, int64_t g) {
  LinearForm r(f.type);
  for (const auto &[atom, c] : f.terms)
    r.add_term(atom, c / g);
  r.constant = f.constant / g;
  return r;
}

} // namespace

// ---- Arithmetic ---------------------------------------------------------------------------

Expr Simplifier::vector_arith(IRNodeKind k, const Expr &a, const Expr &b) {
  // Vector index arithmetic stays in Ramp/Broadcast form, so the scalar rules can run on its
  // base and stride.
  auto scalar = [&](const Expr &x, const Expr &y) {
    return k == IRNodeKind::Add ? add(x, y) : k == IRNodeKind::Sub ? sub(x, y) : mul(x, y);
  };
  const auto *ra = a.as<Ramp>(), *rb = b.as<Ramp>();
  const auto *ba = a.as<Broadcast>(), *bb = b.as<Broadcast>();
  int lanes = a.type().lanes();
  if (ba && bb)
    return Broadcast::make(scalar(ba->value, bb->value), lanes);
  if (k != IRNodeKind::Mul) {
    if (ra && rb)
      return Ramp::make(scalar(ra->base, rb->base), scalar(ra->stride, rb->stride), lanes);
    if (ra && bb)
      return Ramp::make(scalar(ra->base, bb->value), ra->stride, lanes);
    if (ba && rb)
      return Ramp::make(
          scalar(ba->value, rb->base),
          k == IRNodeKind::Add ? rb->stride : sub(make_zero(rb->stride.type()), rb->stride), lanes);
  } else {
    if (ra && bb && is_const(bb->value))
      return Ramp::make(mul(ra->base, bb->value), mul(ra->stride, bb->value), lanes);
    if (ba && rb && is_const(ba->value))
      return Ramp::make(mul(rb->base, ba->value), mul(rb->stride, ba->value), lanes);
  }
  switch (k) {
  case IRNodeKind::Add:
    return Add::make(a, b);
  case IRNodeKind::Sub:
    return Sub::make(a, b);
  default:
    return Mul::make(a, b);
  }
}

Expr Simplifier::add(const Expr &a, const Expr &b) {
  DataType t = a.type();
  if (is_int_scalar(t))
    return canonical_sum(Add::make(a, b)); // folds constants, collects terms
  if (t.is_vector())
    return vector_arith(IRNodeKind::Add, a, b);
  if (auto r = fold_float(IRNodeKind::Add, a, b))
    return *r;
  return Add::make(a, b); // x + 0.0 is not x when x is -0.0
}

Expr Simplifier::sub(const Expr &a, const Expr &b) {
  DataType t = a.type();
  if (is_int_scalar(t))
    return canonical_sum(Sub::make(a, b));
  if (t.is_vector())
    return vector_arith(IRNodeKind::Sub, a, b);
  if (auto r = fold_float(IRNodeKind::Sub, a, b))
    return *r;
  if (t.is_float() && as_const_float(b) == 0.0)
    return a;
  return Sub::make(a, b);
}

Expr Simplifier::mul(const Expr &a, const Expr &b) {
  DataType t = a.type();
  if (is_int_scalar(t))
    return canonical_sum(Mul::make(a, b));
  if (t.is_vector())
    return vector_arith(IRNodeKind::Mul, a, b);
  if (auto r = fold_float(IRNodeKind::Mul, a, b))
    return *r;
  if (as_const_float(b) == 1.0)
    return a;
  if (as_const_float(a) == 1.0)
    return b;
  return Mul::make(a, b);
}

// ---- Division -----------------------------------------------------------------------------

// x + s with x a multiple of g, g dividing c and s in [0, g) never reaches the next multiple of
// c past x, so floordiv(x + s, c) = floordiv(x, c) and floormod(x + s, c) = floormod(x, c) + s.
// That keeps a vector lane out of the division: `floordiv(i*32 + j*8 + v, 256) -> floordiv(i, 8)`
// and `floormod(i*32 + j*8 + v, 256) -> floormod(i, 8)*32 + j*8 + v` for j in [0, 4), v in [0, 8)
// (the channel of an im2col row split into 8-lane vectors).
std::optional<std::pair<LinearForm, LinearForm>> Simplifier::split_aligned(const LinearForm &f,
                                                                            int64_t c) {
  llvm::SmallVector<int64_t, 4> candidates;
  for (const auto &[atom, k] : f.terms)
    if (int64_t g = std::gcd(c, k); g > 1)
      candidates.push_back(g);
  std::sort(candidates.begin(), candidates.end(), std::greater<int64_t>());
  for (int64_t g : candidates) {
    LinearForm aligned(f.type), small(f.type);
    for (const auto &[atom, k] : f.terms)
      (k % g == 0 ? aligned : small).add_term(atom, k);
    aligned.constant = floordiv_int(f.constant, g) * g;
    small.constant = floormod_int(f.constant, g);
    if (small.terms.empty() && small.constant == 0)
      continue; // nothing to split off
    IntInterval b = bound(to_expr(small));
    if (bounded(b) && b.min >= 0 && b.max < g)
      return std::pair(std::move(aligned), std::move(small));
  }
  return std::nullopt;
}

// floordiv(q*c + r, c) = q + floordiv(r, c) for every integer q and r: the multiples of c leave
// the division, and what remains is often decided by bounds (`floordiv(x*16 + y, 16) -> x` for
// y in [0, 16)).
Expr Simplifier::linear_floordiv(const Expr &a, int64_t c) {
  DataType t = a.type();
  LinearForm f = linear_form(a), q(t), r(t);
  for (const auto &[atom, k] : f.terms) {
    if (k % c == 0)
      q.add_term(atom, k / c);
    else
      r.add_term(atom, k);
  }
  q.constant = floordiv_int(f.constant, c);
  r.constant = floormod_int(f.constant, c);
  Expr rest = to_expr(r);
  if (auto k = same_quotient(bound(rest), c)) {
    q.constant = q.wrap(int64_t(uint64_t(q.constant) + uint64_t(*k)));
    return to_expr(q);
  }
  if (auto split = split_aligned(r, c))
    return add(to_expr(q), floordiv(to_expr(split->first), make_const(t, c)));
  // Pull the multiples out only when terms move; `floordiv(x + 5, 4)` stays as it is rather
  // than growing into `floordiv(x + 1, 4) + 1`.
  LinearForm &inner = q.terms.empty() ? f : r;
  // floordiv(g*e, g*c) = floordiv(e, c) for g > 0: `floordiv(x*4 + 4, 8) -> floordiv(x + 1, 2)`.
  int64_t g = std::gcd(std::gcd(coeff_gcd(inner), inner.constant), c);
  Expr div = g > 1 ? FloorDiv::make(to_expr(divide_exact(inner, g)), make_const(t, c / g))
                   : FloorDiv::make(to_expr(inner), make_const(t, c));
  if (q.terms.empty())
    return div;
  return add(to_expr(q), div);
}

Expr Simplifier::floordiv(const Expr &a, const Expr &b) {
  Expr node = FloorDiv::make(a, b);
  if (auto r = fold_int(node))
    return *r;
  DataType t = a.type();
  if (!is_int_scalar(t))
    return node;
  auto c = as_const_int(b);
  if (c && *c == 1)
    return a;
  IntInterval bn = bound(node);
  if (bn.is_single() && bounded(bn) && nonzero(bound(b)))
    return make_const(t, bn.min);
  if (!c || *c <= 0 || !t.is_int())
    return node;
  // floordiv(floordiv(x, c1), c2) = floordiv(x, c1*c2) for positive constants.
  if (const auto *inner = a.as<FloorDiv>()) {
    auto c1 = as_const_int(inner->b);
    if (c1 && *c1 > 0 && fits_type(t, __int128(*c1) * *c))
      return floordiv(inner->a, make_const(t, *c1 * *c));
  }
  return linear_floordiv(a, *c);
}

// floormod(q*c + r, c) = floormod(r, c): multiples of the divisor drop out.
Expr Simplifier::linear_floormod(const Expr &a, int64_t c) {
  DataType t = a.type();
  LinearForm f = linear_form(a), r(t);
  for (const auto &[atom, k] : f.terms)
    if (k % c != 0)
      r.add_term(atom, k);
  r.constant = floormod_int(f.constant, c);
  Expr rest = to_expr(r);
  if (auto k = same_quotient(bound(rest), c))
    return sub(rest, make_const(t, *k * c));
  if (auto split = split_aligned(r, c))
    return add(floormod(to_expr(split->first), make_const(t, c)), to_expr(split->second));
  // floormod(g*e, g*c) = floormod(e, c)*g for g > 0.
  int64_t g = std::gcd(std::gcd(coeff_gcd(r), r.constant), c);
  if (g > 1)
    return mul(FloorMod::make(to_expr(divide_exact(r, g)), make_const(t, c / g)), make_const(t, g));
  return FloorMod::make(rest, make_const(t, c));
}

Expr Simplifier::floormod(const Expr &a, const Expr &b) {
  Expr node = FloorMod::make(a, b);
  if (auto r = fold_int(node))
    return *r;
  DataType t = a.type();
  if (!is_int_scalar(t))
    return node;
  auto c = as_const_int(b);
  if (c && (*c == 1 || (*c == -1 && t.is_int())))
    return make_zero(t);
  IntInterval ba = bound(a);
  // A dividend already in [0, c) is its own remainder (sound for every integer type).
  if (c && *c > 0 && ba.min >= 0 && ba.max < *c)
    return a;
  IntInterval bn = bound(node);
  if (bn.is_single() && bounded(bn) && nonzero(bound(b)))
    return make_const(t, bn.min);
  if (!c || *c <= 0 || !t.is_int())
    return node;
  // floormod(floormod(x, c1), c2) = floormod(x, c2) when c2 divides c1.
  if (const auto *inner = a.as<FloorMod>()) {
    auto c1 = as_const_int(inner->b);
    if (c1 && *c1 > 0 && *c1 % *c == 0)
      return floormod(inner->a, b);
  }
  return linear_floormod(a, *c);
}

// Truncating division agrees with floor division when the dividend is non-negative and the
// divisor positive; then the floordiv rules apply.
Expr Simplifier::truncdiv(const Expr &a, const Expr &b) {
  DataType t = a.type();
  if (t.is_float()) {
    if (auto r = fold_float(IRNodeKind::Div, a, b))
      return *r;
    if (as_const_float(b) == 1.0)
      return a;
    return Div::make(a, b);
  }
  Expr node = Div::make(a, b);
  if (auto r = fold_int(node))
    return *r;
  if (!is_int_scalar(t))
    return node;
  auto c = as_const_int(b);
  if (c && *c == 1)
    return a;
  if (c && *c > 0 && bound(a).min >= 0)
    return floordiv(a, b);
  IntInterval bn = bound(node);
  if (bn.is_single() && bounded(bn) && nonzero(bound(b)))
    return make_const(t, bn.min);
  return node;
}

Expr Simplifier::truncmod(const Expr &a, const Expr &b) {
  Expr node = Mod::make(a, b);
  if (auto r = fold_int(node))
    return *r;
  DataType t = a.type();
  if (!is_int_scalar(t))
    return node;
  auto c = as_const_int(b);
  if (c && *c == 1)
    return make_zero(t);
  if (c && *c > 0 && bound(a).min >= 0)
    return floormod(a, b);
  IntInterval bn = bound(node);
  if (bn.is_single() && bounded(bn) && nonzero(bound(b)))
    return make_const(t, bn.min);
  return node;
}

// ---- Min and max --------------------------------------------------------------------------

Expr Simplifier::min_max(bool is_min, const Expr &a, const Expr &b) {
  auto make = [&](const Expr &x, const Expr &y) {
    return is_min ? Min::make(x, y) : Max::make(x, y);
  };
  Expr node = make(a, b);
  if (auto r = fold_int(node))
    return *r;
  if (auto r = fold_float(is_min ? IRNodeKind::Min : IRNodeKind::Max, a, b))
    return *r;
  if (structural_equal(a, b))
    return a;
  DataType t = a.type();
  if (!is_int_scalar(t))
    return node;
  // Decided by bounds: `min(x, 100) -> x` when x <= 100.
  IntInterval ba = bound(a), bb = bound(b);
  if (decide(IRNodeKind::LE, ba, bb) == true)
    return is_min ? a : b;
  if (decide(IRNodeKind::LE, bb, ba) == true)
    return is_min ? b : a;
  // Decided by the difference: `min(x, x + 3) -> x`.
  if (t.is_int()) {
    IntInterval bd = bound(sub(a, b));
    if (decide(IRNodeKind::LE, bd, IntInterval::single(0)) == true)
      return is_min ? a : b;
    if (decide(IRNodeKind::LE, IntInterval::single(0), bd) == true)
      return is_min ? b : a;
  }
  // Constants last, and merged: min(min(x, c1), c2) -> min(x, min(c1, c2)).
  if (a.as<IntImm>() && !b.as<IntImm>())
    return min_max(is_min, b, a);
  auto cb = as_const_int(b);
  if (cb) {
    Expr inner_a, inner_b;
    if (a->kind() == node->kind() && binary_operands(a, &inner_a, &inner_b) && inner_b.as<IntImm>())
      return min_max(is_min, inner_a, min_max(is_min, inner_b, b));
  }
  return node;
}

// ---- Comparisons --------------------------------------------------------------------------

// For signed integers, `a op b` becomes `a - b op 0` in linear form, so common terms cancel
// (`x*4 + 3 < x*4 + 5 -> true`), bounds of the difference decide it, and what remains is
// printed with positive terms on each side and the constant moved right: `x + 3 < 10 -> x < 7`.
Expr Simplifier::linear_compare(IRNodeKind k, const Expr &a, const Expr &b) {
  DataType t = a.type();
  LinearForm d = linear_form(a);
  d.add(linear_form(b), -1);
  if (auto r = decide(k, bound(to_expr(d)), IntInterval::single(0)))
    return make_const(Bool(), int64_t(*r));
  // Divide by the common factor of the terms: g*e + c < 0  <=>  e + floordiv(c, g) < 0, etc.
  int64_t g = coeff_gcd(d);
  if (g > 1 && d.constant != INT64_MIN) {
    int64_t c = d.constant;
    if ((k == IRNodeKind::EQ || k == IRNodeKind::NE) && c % g != 0)
      return make_const(Bool(), int64_t(k == IRNodeKind::NE));
    LinearForm e(t);
    for (const auto &[atom, coeff] : d.terms)
      e.add_term(atom, coeff / g);
    e.constant = k == IRNodeKind::LT   ? floordiv_int(c, g)
                 : k == IRNodeKind::LE ? -floordiv_int(-c, g)
                                       : c / g;
    d = e;
  }
  LinearForm lhs(t), rhs(t);
  for (const auto &[atom, coeff] : d.terms) {
    if (coeff > 0)
      lhs.add_term(atom, coeff);
    else
      rhs.add_term(atom, -coeff);
  }
  bool symmetric = k == IRNodeKind::EQ || k == IRNodeKind::NE;
  if (!lhs.terms.empty()) {
    rhs.constant = rhs.wrap(int64_t(0 - uint64_t(d.constant))); // L - R + c op 0: L op R - c
  } else if (symmetric) {
    lhs = rhs; // -R + c == 0: R == c, not `c == R`
    rhs = LinearForm(t);
    rhs.constant = d.constant;
  } else {
    lhs.constant = d.constant; // -R + c < 0: c < R
  }
  return make_compare(k, to_expr(lhs), to_expr(rhs));
}

Expr Simplifier::compare(IRNodeKind k, Expr a, Expr b) {
  // a > b is b < a: one form for the rules and the printer.
  if (k == IRNodeKind::GT || k == IRNodeKind::GE) {
    std::swap(a, b);
    k = k == IRNodeKind::GT ? IRNodeKind::LT : IRNodeKind::LE;
  }
  Expr node = make_compare(k, a, b);
  if (auto r = fold_int(node))
    return *r;
  if (auto r = fold_float(k, a, b))
    return *r;
  DataType t = a.type();
  if (!t.is_scalar() || !t.is_integer_like())
    return node; // floats: x == x is false for NaN
  if (structural_equal(a, b))
    return make_const(Bool(), int64_t(k == IRNodeKind::EQ || k == IRNodeKind::LE));
  if (auto r = decide(k, bound(a), bound(b)))
    return make_const(Bool(), int64_t(*r));
  if (t.is_int())
    return linear_compare(k, a, b);
  return node;
}

// ---- Logic --------------------------------------------------------------------------------

namespace {
bool is_negation_of(const Expr &a, const Expr &b) {
  const auto *n = a.as<Not>();
  return n && structural_equal(n->a, b);
}
} // namespace

Expr Simplifier::logic_and(const Expr &a, const Expr &b) {
  if (is_zero(a) || is_one(b))
    return a;
  if (is_zero(b) || is_one(a))
    return b;
  if (structural_equal(a, b))
    return a;
  if (is_negation_of(a, b) || is_negation_of(b, a))
    return make_zero(a.type());
  return And::make(a, b);
}

Expr Simplifier::logic_or(const Expr &a, const Expr &b) {
  if (is_one(a) || is_zero(b))
    return a;
  if (is_one(b) || is_zero(a))
    return b;
  if (structural_equal(a, b))
    return a;
  if (is_negation_of(a, b) || is_negation_of(b, a))
    return make_one(a.type());
  return Or::make(a, b);
}

Expr Simplifier::logic_not(const Expr &a) {
  if (is_zero(a))
    return make_one(a.type());
  if (is_one(a))
    return make_zero(a.type());
  if (const auto *n = a.as<Not>())
    return n->a;
  // Negated comparisons flip; not for floats, where NaN makes !(a < b) differ from b <= a.
  bool ints = false;
  Expr x, y;
  if (binary_operands(a, &x, &y))
    ints = x.type().is_integer_like();
  if (const auto *op = a.as<EQ>())
    return compare(IRNodeKind::NE, op->a, op->b);
  if (const auto *op = a.as<NE>())
    return compare(IRNodeKind::EQ, op->a, op->b);
  if (const auto *op = a.as<LT>(); op && ints)
    return compare(IRNodeKind::LE, op->b, op->a);
  if (const auto *op = a.as<LE>(); op && ints)
    return compare(IRNodeKind::LT, op->b, op->a);
  return Not::make(a);
}

Expr Simplifier::select(const Expr &c, const Expr &t, const Expr &f) {
  if (is_one(c))
    return t;
  if (is_zero(c))
    return f;
  if (structural_equal(t, f))
    return t;
  return Select::make(c, t, f);
}

// ---- Casts --------------------------------------------------------------------------------

namespace {
// Every value of `inner` is a value of `outer`.
bool type_contains(DataType outer, DataType inner) {
  if (!outer.is_integer_like() || !inner.is_integer_like())
    return false;
  if (inner.is_uint() && inner.bits() == 64) // max_int() saturates for uint64
    return outer == inner;
  return outer.min_int() <= inner.min_int() && outer.max_int() >= inner.max_int();
}
} // namespace

Expr Simplifier::cast(DataType t, const Expr &v) {
  if (v.type() == t)
    return v;
  if (t.is_scalar()) {
    if (const auto *imm = v.as<IntImm>()) {
      if (t.is_integer_like())
        return IntImm::make(t, imm->value); // wraps like the hardware
      bool huge_uint64 = v.type().is_uint() && imm->value < 0;
      if (t.is_float() && !huge_uint64 && exactly_representable(double(imm->value), t))
        return FloatImm::make(t, double(imm->value));
    }
    if (auto f = as_const_float(v)) {
      if (t.is_float() && exactly_representable(*f, t))
        return FloatImm::make(t, *f);
      // Float to integer truncates towards zero; out of range is undefined, so left alone.
      if (is_int_scalar(t) && std::isfinite(*f) && std::trunc(*f) >= double(t.min_int()) &&
          std::trunc(*f) <= double(t.max_int()) && std::fabs(*f) < 9e18)
        return IntImm::make(t, int64_t(std::trunc(*f)));
    }
  }
  // Widening and narrowing back is the identity: int32(int64(x)) -> x for an int32 x.
  if (const auto *inner = v.as<Cast>())
    if (inner->value.type() == t && type_contains(v.type(), t))
      return inner->value;
  return Cast::make(t, v);
}

// ---- Visitors -----------------------------------------------------------------------------

Expr Simplifier::visit(const Variable *op) {
  // A variable whose range is one value is that value (a loop of one iteration, a bound
  // given by the caller).
  if (is_int_scalar(op->type)) {
    IntInterval b = bound(Expr(op));
    if (b.is_single() && bounded(b))
      return make_const(op->type, b.min);
  }
  return op;
}

// The mutator's contract: an unchanged expression is returned as the very same node, so callers
// can tell (with same_as) that nothing happened and subtrees stay shared.
static Expr same_if_equal(const ExprNode *op, const Expr &r) {
  return structural_equal(r, Expr(op)) ? Expr(op) : r;
}

#define TESSEL_SIMPLIFY_BINARY(N, RULE)                                                            \
  Expr Simplifier::visit(const N *op) { return same_if_equal(op, RULE); }
TESSEL_SIMPLIFY_BINARY(Add, add(mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(Sub, sub(mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(Mul, mul(mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(FloorDiv, floordiv(mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(FloorMod, floormod(mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(Div, truncdiv(mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(Mod, truncmod(mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(Min, min_max(true, mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(Max, min_max(false, mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(EQ, compare(IRNodeKind::EQ, mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(NE, compare(IRNodeKind::NE, mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(LT, compare(IRNodeKind::LT, mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(LE, compare(IRNodeKind::LE, mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(GT, compare(IRNodeKind::GT, mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(GE, compare(IRNodeKind::GE, mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(And, logic_and(mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(Or, logic_or(mutate(op->a), mutate(op->b)))
TESSEL_SIMPLIFY_BINARY(Not, logic_not(mutate(op->a)))
TESSEL_SIMPLIFY_BINARY(Cast, cast(op->type, mutate(op->value)))
#undef TESSEL_SIMPLIFY_BINARY

// Each value of a select only matters where its condition says so, so it is simplified under
// that assumption: select(x < 16, floormod(x, 16), 0) -> select(x < 16, x, 0) for x >= 0.
Expr Simplifier::visit(const Select *op) {
  Expr c = mutate(op->condition);
  if (is_one(c))
    return mutate(op->true_value);
  if (is_zero(c))
    return mutate(op->false_value);
  Expr t = mutate_assuming(c, op->true_value);
  Expr f = mutate_assuming(logic_not(c), op->false_value);
  return same_if_equal(op, select(c, t, f));
}

Expr Simplifier::visit(const Let *op) {
  Expr value = mutate(op->value);
  // A constant or a variable is cheaper to repeat than to name.
  if (value.as<IntImm>() || value.as<FloatImm>() || value.as<Variable>())
    return mutate(substitute(op->body, op->var, value));
  Expr body;
  if (is_int_scalar(value.type())) {
    BindScope scope(bounds_, op->var.get(), bound(value));
    body = mutate(op->body);
  } else {
    body = mutate(op->body);
  }
  if (!uses_var(body, op->var))
    return body;
  if (value.same_as(op->value) && body.same_as(op->body))
    return op;
  return Let::make(op->var, value, body);
}

Expr Simplifier::visit(const Call *op) {
  if (op->is_intrinsic(intrinsic::if_then_else) && op->args.size() == 3) {
    Expr c = mutate(op->args[0]);
    if (is_one(c))
      return mutate(op->args[1]);
    if (is_zero(c))
      return mutate(op->args[2]);
    Expr t = mutate_assuming(c, op->args[1]), f = mutate_assuming(logic_not(c), op->args[2]);
    if (structural_equal(t, f))
      return t;
    if (c.same_as(op->args[0]) && t.same_as(op->args[1]) && f.same_as(op->args[2]))
      return op;
    return Call::make(op->type, op->name, {c, t, f}, op->call_kind);
  }
  if (op->is_intrinsic(intrinsic::bitwise_xor) && op->args.size() == 2) {
    // Constants fold; x ^ 0 is x (the swizzle of a row that starts an atom).
    Expr a = mutate(op->args[0]), b = mutate(op->args[1]);
    auto ca = as_const_int(a), cb = as_const_int(b);
    if (ca && cb)
      return make_const(op->type, *ca ^ *cb);
    if (cb && *cb == 0)
      return a;
    if (ca && *ca == 0)
      return b;
    if (a.same_as(op->args[0]) && b.same_as(op->args[1]))
      return op;
    return Call::make(op->type, op->name, {a, b}, op->call_kind);
  }
  return IRMutator::visit(op);
}

} // namespace tessel::arith
