#include "compiler/ir/IROperator.h"

#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

#include <cmath>

namespace tessel {

Expr make_const(DataType t, int64_t value) {
  if (t.is_float()) {
    Expr v = FloatImm::make(t.element_of(), double(value));
    return t.lanes() > 1 ? Broadcast::make(v, t.lanes()) : v;
  }
  user_check(t.is_integer_like(), "make_const") << "no constants of type " << t;
  Expr v = IntImm::make(t.element_of(), value);
  return t.lanes() > 1 ? Broadcast::make(v, t.lanes()) : v;
}

Expr make_const(DataType t, double value) {
  if (t.is_integer_like()) {
    user_check(std::floor(value) == value, "make_const")
        << "the literal " << value << " is not an integer, but the other operand is " << t
        << "; cast that operand to a float type first";
    return make_const(t, int64_t(value));
  }
  user_check(t.is_float(), "make_const") << "no constants of type " << t;
  Expr v = FloatImm::make(t.element_of(), value);
  return t.lanes() > 1 ? Broadcast::make(v, t.lanes()) : v;
}

Expr make_zero(DataType t) { return make_const(t, int64_t(0)); }
Expr make_one(DataType t) { return make_const(t, int64_t(1)); }
Expr const_true(int lanes) { return make_const(Bool(lanes), int64_t(1)); }
Expr const_false(int lanes) { return make_const(Bool(lanes), int64_t(0)); }

std::optional<int64_t> as_const_int(const Expr &e) {
  if (const auto *imm = e.as<IntImm>())
    return imm->value;
  return std::nullopt;
}

std::optional<double> as_const_float(const Expr &e) {
  if (const auto *imm = e.as<FloatImm>())
    return imm->value;
  return std::nullopt;
}

bool is_const_int(const Expr &e, int64_t value) {
  if (const auto *b = e.as<Broadcast>())
    return is_const_int(b->value, value);
  auto v = as_const_int(e);
  return v && *v == value;
}

bool is_const(const Expr &e) {
  if (const auto *b = e.as<Broadcast>())
    return is_const(b->value);
  return e.as<IntImm>() || e.as<FloatImm>();
}

Expr Expr::astype(DataType t) const {
  internal_check(defined()) << "astype of an undefined expression";
  if (type() == t)
    return *this;
  return cast(t, *this);
}

namespace {

// Folds an integer binary operation when both sides are constants; returns nothing otherwise.
template <typename F> std::optional<Expr> fold_int(const Expr &a, const Expr &b, F f) {
  auto x = as_const_int(a), y = as_const_int(b);
  if (!x || !y || a.type() != b.type())
    return std::nullopt;
  std::optional<int64_t> r = f(*x, *y);
  if (!r)
    return std::nullopt;
  return IntImm::make(a.type(), *r);
}

int64_t floordiv_int(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t floormod_int(int64_t a, int64_t b) { return a - floordiv_int(a, b) * b; }

} // namespace

Expr operator+(Expr a, Expr b) {
  if (auto r = fold_int(a, b, [](int64_t x, int64_t y) -> std::optional<int64_t> { return x + y; }))
    return *r;
  return Add::make(std::move(a), std::move(b));
}

Expr operator-(Expr a, Expr b) {
  if (auto r = fold_int(a, b, [](int64_t x, int64_t y) -> std::optional<int64_t> { return x - y; }))
    return *r;
  return Sub::make(std::move(a), std::move(b));
}

Expr operator*(Expr a, Expr b) {
  if (auto r = fold_int(a, b, [](int64_t x, int64_t y) -> std::optional<int64_t> { return x * y; }))
    return *r;
  return Mul::make(std::move(a), std::move(b));
}

Expr operator/(Expr a, Expr b) {
  if (a.defined() && a.type().is_float())
    return Div::make(std::move(a), std::move(b));
  return floordiv(std::move(a), std::move(b));
}

Expr operator%(Expr a, Expr b) { return floormod(std::move(a), std::move(b)); }

Expr operator-(Expr a) {
  internal_check(a.defined()) << "negating an undefined expression";
  if (auto v = as_const_int(a))
    return IntImm::make(a.type(), -*v);
  if (auto v = as_const_float(a))
    return FloatImm::make(a.type(), -*v);
  DataType t = a.type();
  return Sub::make(make_zero(t), std::move(a));
}

Expr operator<(Expr a, Expr b) { return LT::make(std::move(a), std::move(b)); }
Expr operator<=(Expr a, Expr b) { return LE::make(std::move(a), std::move(b)); }
Expr operator>(Expr a, Expr b) { return GT::make(std::move(a), std::move(b)); }
Expr operator>=(Expr a, Expr b) { return GE::make(std::move(a), std::move(b)); }
Expr operator==(Expr a, Expr b) { return EQ::make(std::move(a), std::move(b)); }
Expr operator!=(Expr a, Expr b) { return NE::make(std::move(a), std::move(b)); }
Expr operator&&(Expr a, Expr b) { return And::make(std::move(a), std::move(b)); }
Expr operator||(Expr a, Expr b) { return Or::make(std::move(a), std::move(b)); }
Expr operator!(Expr a) { return Not::make(std::move(a)); }

Expr min(Expr a, Expr b) {
  if (auto r = fold_int(a, b, [](int64_t x, int64_t y) -> std::optional<int64_t> { return std::min(x, y); }))
    return *r;
  return Min::make(std::move(a), std::move(b));
}

std::vector<Expr> conjuncts(const Expr &e) {
  if (const auto *a = e.as<And>()) {
    std::vector<Expr> out = conjuncts(a->a), rest = conjuncts(a->b);
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
  }
  return {e};
}

Expr max(Expr a, Expr b) {
  if (auto r = fold_int(a, b, [](int64_t x, int64_t y) -> std::optional<int64_t> { return std::max(x, y); }))
    return *r;
  return Max::make(std::move(a), std::move(b));
}

namespace {
Expr float_math(const char *name, Expr x) {
  user_check(x.defined() && x.type().is_float(), name)
      << name << " takes a float expression, got " << (x.defined() ? x.type().str() : "none");
  DataType t = x.type();
  return Call::make(t, name, {std::move(x)}, Call::PureExtern);
}
} // namespace

Expr exp(Expr x) { return float_math("exp", std::move(x)); }
Expr exp2(Expr x) { return float_math("exp2", std::move(x)); }
Expr fast_exp2(Expr x) { return float_math("fast_exp2", std::move(x)); }
Expr log(Expr x) { return float_math("log", std::move(x)); }
Expr tanh(Expr x) { return float_math("tanh", std::move(x)); }
Expr erf(Expr x) { return float_math("erf", std::move(x)); }
Expr sqrt(Expr x) { return float_math("sqrt", std::move(x)); }
Expr rsqrt(Expr x) { return float_math("rsqrt", std::move(x)); }

Expr floordiv(Expr a, Expr b) {
  if (auto r = fold_int(a, b, [](int64_t x, int64_t y) -> std::optional<int64_t> {
        if (y == 0)
          return std::nullopt;
        return floordiv_int(x, y);
      }))
    return *r;
  return FloorDiv::make(std::move(a), std::move(b));
}

Expr floormod(Expr a, Expr b) {
  if (auto r = fold_int(a, b, [](int64_t x, int64_t y) -> std::optional<int64_t> {
        if (y == 0)
          return std::nullopt;
        return floormod_int(x, y);
      }))
    return *r;
  return FloorMod::make(std::move(a), std::move(b));
}

Expr truncdiv(Expr a, Expr b) {
  if (auto r = fold_int(a, b, [](int64_t x, int64_t y) -> std::optional<int64_t> {
        if (y == 0)
          return std::nullopt;
        return x / y;
      }))
    return *r;
  return Div::make(std::move(a), std::move(b));
}

Expr truncmod(Expr a, Expr b) {
  if (auto r = fold_int(a, b, [](int64_t x, int64_t y) -> std::optional<int64_t> {
        if (y == 0)
          return std::nullopt;
        return x % y;
      }))
    return *r;
  return Mod::make(std::move(a), std::move(b));
}

Expr cast(DataType t, Expr value) {
  internal_check(value.defined()) << "cast of an undefined expression";
  if (value.type() == t)
    return value;
  if (t.is_scalar()) {
    if (auto v = as_const_int(value); v && t.is_integer_like())
      return IntImm::make(t, *v);
    if (auto v = as_const_int(value); v && t.is_float() && !value.type().is_bool())
      return FloatImm::make(t, double(*v));
    if (auto v = as_const_float(value); v && t.is_float())
      return FloatImm::make(t, *v);
  }
  return Cast::make(t, std::move(value));
}

Expr select(Expr condition, Expr true_value, Expr false_value) {
  return Select::make(std::move(condition), std::move(true_value), std::move(false_value));
}

Expr if_then_else(Expr condition, Expr true_value, Expr false_value) {
  user_check(condition.defined() && condition.type() == Bool(), "if_then_else")
      << "the condition must be a scalar bool, got "
      << (condition.defined() ? condition.type().str() : "nothing");
  user_check(true_value.defined() && false_value.defined(), "if_then_else")
      << "both values must be given";
  user_check(true_value.type() == false_value.type(), "if_then_else")
      << "the two values have different types: " << true_value.type() << " (" << true_value
      << ") and " << false_value.type() << " (" << false_value
      << "); make them agree, e.g. make_const(" << true_value.type() << ", 0)";
  DataType t = true_value.type();
  return Call::make(t, intrinsic::if_then_else,
                    {std::move(condition), std::move(true_value), std::move(false_value)},
                    Call::PureIntrinsic);
}

Expr all(std::vector<Expr> conditions) {
  user_check(!conditions.empty(), "all") << "needs at least one condition";
  Expr r = conditions[0];
  for (size_t i = 1; i < conditions.size(); ++i)
    r = r && conditions[i];
  user_check(r.type().is_bool(), "all") << "conditions must be bool, got " << r.type();
  return r;
}

Expr any(std::vector<Expr> conditions) {
  user_check(!conditions.empty(), "any") << "needs at least one condition";
  Expr r = conditions[0];
  for (size_t i = 1; i < conditions.size(); ++i)
    r = r || conditions[i];
  user_check(r.type().is_bool(), "any") << "conditions must be bool, got " << r.type();
  return r;
}

} // namespace tessel
