#include "compiler/arith/ConstIntBound.h"

#include "compiler/arith/IntEval.h"
#include "compiler/ir/Intrinsics.h"

#include <algorithm>
#include <initializer_list>

namespace tessel::arith {

namespace {

constexpr int64_t kNegInf = IntInterval::kNegInf;
constexpr int64_t kPosInf = IntInterval::kPosInf;

bool is_inf(int64_t v) { return v == kNegInf || v == kPosInf; }

// A 128-bit result mapped back to int64, where the extremes stand for the infinities.
int64_t saturate(__int128 v) {
  if (v <= kNegInf)
    return kNegInf;
  if (v >= kPosInf)
    return kPosInf;
  return int64_t(v);
}

int64_t sat_neg(int64_t a) { return a == kNegInf ? kPosInf : a == kPosInf ? kNegInf : -a; }

// Used for min+min and max+max only, so -inf and +inf never meet in a well-formed interval.
int64_t sat_add(int64_t a, int64_t b) {
  if (a == kNegInf || b == kNegInf)
    return kNegInf;
  if (a == kPosInf || b == kPosInf)
    return kPosInf;
  return saturate(__int128(a) + b);
}

int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0)
    return 0;
  if (is_inf(a) || is_inf(b))
    return (a < 0) != (b < 0) ? kNegInf : kPosInf;
  return saturate(__int128(a) * b);
}

// Floor or truncating division of interval end points, one of which may be infinite; b != 0.
int64_t div_point(int64_t a, int64_t b, bool floor) {
  if (is_inf(a))
    return (a < 0) != (b < 0) ? kNegInf : kPosInf;
  if (is_inf(b)) // a finite value over infinity: 0, or -1 when rounding a negative quotient down
    return floor && a != 0 && ((a < 0) != (b < 0)) ? -1 : 0;
  return floor ? floordiv_int(a, b) : a / b;
}

IntInterval from_points(std::initializer_list<int64_t> pts) {
  return {std::min(pts), std::max(pts)};
}

// Division by an interval that excludes zero: the quotient is monotone in each operand on each
// side of zero, so its extremes are at the corners.
IntInterval bound_div(IntInterval a, IntInterval b, bool floor) {
  if (b.min <= 0 && b.max >= 0) {
    // The divisor may be zero (undefined) or change sign: |quotient| <= |a|.
    int64_t m = std::max(sat_neg(a.min), a.max);
    return {sat_neg(std::max<int64_t>(m, 0)), std::max<int64_t>(m, 0)};
  }
  return from_points({div_point(a.min, b.min, floor), div_point(a.min, b.max, floor),
                      div_point(a.max, b.min, floor), div_point(a.max, b.max, floor)});
}

IntInterval bound_floormod(IntInterval a, IntInterval b) {
  if (b.min > 0) {
    // Result in [0, b.max - 1]; a non-negative dividend smaller than every divisor is itself.
    if (a.min >= 0 && a.max < b.min)
      return a;
    int64_t hi = b.max == kPosInf ? kPosInf : b.max - 1;
    return {0, a.min >= 0 ? std::min(hi, a.max) : hi};
  }
  if (b.max < 0) {
    if (a.max <= 0 && a.min > b.max)
      return a;
    int64_t lo = b.min == kNegInf ? kNegInf : b.min + 1;
    return {a.max <= 0 ? std::max(lo, a.min) : lo, 0};
  }
  int64_t lo = b.min == kNegInf ? kNegInf : std::min<int64_t>(b.min + 1, 0);
  int64_t hi = b.max == kPosInf ? kPosInf : std::max<int64_t>(b.max - 1, 0);
  return {lo, hi};
}

// C's remainder: the sign of the dividend, magnitude below the divisor's and the dividend's.
IntInterval bound_truncmod(IntInterval a, IntInterval b) {
  int64_t m = std::max(sat_neg(b.min), b.max);
  m = m == kPosInf ? kPosInf : std::max<int64_t>(m - 1, 0);
  int64_t lo = a.min >= 0 ? 0 : std::max(sat_neg(m), a.min);
  int64_t hi = a.max <= 0 ? 0 : std::min(m, a.max);
  return {lo, hi};
}

class BoundAnalyzer {
public:
  explicit BoundAnalyzer(const VarBounds &vars) : vars_(vars) {}

  IntInterval bound(const Expr &e) {
    DataType t = e.type();
    if (!t.is_integer_like())
      return IntInterval::everything();
    return fit(t, visit(e));
  }

private:
  // A range that does not fit the type means the value may wrap: then it can be anything.
  static IntInterval fit(DataType t, IntInterval r) {
    IntInterval all = type_range(t);
    if (r.min < all.min || r.max > all.max || r.min > r.max)
      return all;
    return r;
  }

  IntInterval visit(const Expr &e) {
    DataType t = e.type();
    if (const auto *imm = e.as<IntImm>()) {
      // uint64 constants above INT64_MAX are stored negative.
      if (t.is_uint() && imm->value < 0)
        return type_range(t);
      return IntInterval::single(imm->value);
    }
    if (const auto *v = e.as<Variable>()) {
      if (auto it = lets_.find(v); it != lets_.end())
        return it->second;
      if (auto it = vars_.find(v); it != vars_.end())
        return it->second;
      return type_range(t);
    }
    Expr a, b;
    if (binary_operands(e, &a, &b)) {
      if (t.is_bool()) // a comparison or a logical operation
        return {0, 1};
      IntInterval x = bound(a), y = bound(b);
      switch (e->kind()) {
      case IRNodeKind::Add:
        return bound_add(x, y);
      case IRNodeKind::Sub:
        return bound_sub(x, y);
      case IRNodeKind::Mul:
        return bound_mul(x, y);
      case IRNodeKind::FloorDiv:
        return bound_div(x, y, true);
      case IRNodeKind::Div:
        return bound_div(x, y, false);
      case IRNodeKind::FloorMod:
        return bound_floormod(x, y);
      case IRNodeKind::Mod:
        return bound_truncmod(x, y);
      case IRNodeKind::Min:
        return {std::min(x.min, y.min), std::min(x.max, y.max)};
      case IRNodeKind::Max:
        return {std::max(x.min, y.min), std::max(x.max, y.max)};
      default:
        return type_range(t);
      }
    }
    if (const auto *op = e.as<Select>())
      return bound_union(bound(op->true_value), bound(op->false_value));
    if (const auto *op = e.as<Call>(); op && op->is_intrinsic(intrinsic::if_then_else))
      return bound_union(bound(op->args[1]), bound(op->args[2]));
    if (const auto *op = e.as<Cast>())
      return op->value.type().is_integer_like() ? bound(op->value) : type_range(t);
    if (const auto *op = e.as<Let>()) {
      IntInterval v = bound(op->value);
      const Variable *var = op->var.get();
      auto old = lets_.find(var) != lets_.end() ? std::optional(lets_[var]) : std::nullopt;
      lets_[var] = v;
      IntInterval r = bound(op->body);
      if (old)
        lets_[var] = *old;
      else
        lets_.erase(var);
      return r;
    }
    if (const auto *op = e.as<Ramp>()) {
      IntInterval steps{0, op->lanes - 1};
      return bound_add(bound(op->base), bound_mul(bound(op->stride), steps));
    }
    if (const auto *op = e.as<Broadcast>())
      return bound(op->value);
    return type_range(t);
  }

  const VarBounds &vars_;
  llvm::DenseMap<const Variable *, IntInterval> lets_;
};

} // namespace

IntInterval type_range(DataType t) {
  if (!t.is_integer_like())
    return IntInterval::everything();
  return {t.min_int(), t.max_int()};
}

IntInterval bound_add(IntInterval a, IntInterval b) {
  return {sat_add(a.min, b.min), sat_add(a.max, b.max)};
}

IntInterval bound_sub(IntInterval a, IntInterval b) {
  return {sat_add(a.min, sat_neg(b.max)), sat_add(a.max, sat_neg(b.min))};
}

IntInterval bound_mul(IntInterval a, IntInterval b) {
  return from_points(
      {sat_mul(a.min, b.min), sat_mul(a.min, b.max), sat_mul(a.max, b.min), sat_mul(a.max, b.max)});
}

IntInterval bound_union(IntInterval a, IntInterval b) {
  return {std::min(a.min, b.min), std::max(a.max, b.max)};
}

std::optional<IntInterval> loop_var_bound(IntInterval min, IntInterval extent) {
  if (extent.max < 1)
    return std::nullopt;
  int64_t last = extent.max == kPosInf ? kPosInf : extent.max - 1;
  return bound_add(min, {0, last});
}

IntInterval const_int_bound(const Expr &e, const VarBounds &vars) {
  return BoundAnalyzer(vars).bound(e);
}

} // namespace tessel::arith
