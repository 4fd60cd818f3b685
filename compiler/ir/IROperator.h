// Building expressions: constants, operators and the functions users write in compute bodies.
//
// Operators fold integer constants (so `2 * 8` stays readable as `16` in printed IR) and adapt
// a C++ literal to the type of the other operand (`x + 1` for an int64 x is an int64 add, `h *
// 0.5f` for a float16 h is a float16 multiply). Two expressions of different types are never
// converted silently: that is a tessel::Error that asks for a cast.
#pragma once

#include "compiler/ir/IR.h"

#include <optional>

namespace tessel {

Expr make_const(DataType t, int64_t value);
Expr make_const(DataType t, double value);
/// make_const with an int: lets make_const(t, 0) pick the integer overload.
inline Expr make_const(DataType t, int value) { return make_const(t, int64_t(value)); }
Expr make_zero(DataType t);
Expr make_one(DataType t);
Expr const_true(int lanes = 1);
Expr const_false(int lanes = 1);

/// The value of a scalar integer constant, if `e` is one.
std::optional<int64_t> as_const_int(const Expr &e);
/// The value of a scalar float constant, if `e` is one.
std::optional<double> as_const_float(const Expr &e);
bool is_const_int(const Expr &e, int64_t value);
inline bool is_zero(const Expr &e) { return is_const_int(e, 0); }
inline bool is_one(const Expr &e) { return is_const_int(e, 1); }
/// A scalar integer constant or a broadcast of one.
bool is_const(const Expr &e);

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
/// Integers: floor division (towards negative infinity), as index arithmetic wants.
/// Floats: real division.
Expr operator/(Expr a, Expr b);
/// Integers: floor modulo, with the sign of the divisor.
Expr operator%(Expr a, Expr b);
Expr operator-(Expr a);

Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
/// The operands of a chain of && (e itself when it is no &&), left to right.
std::vector<Expr> conjuncts(const Expr &e);

// Mixed with C++ literals: the literal takes the other operand's type.
#define TESSEL_LITERAL_OPERATORS(OP)                                                               \
  inline Expr operator OP(Expr a, int b) {                                                         \
    DataType t = a.type();                                                                         \
    return std::move(a) OP make_const(t, int64_t(b));                                              \
  }                                                                                                \
  inline Expr operator OP(int a, Expr b) {                                                         \
    DataType t = b.type();                                                                         \
    return make_const(t, int64_t(a)) OP std::move(b);                                              \
  }                                                                                                \
  inline Expr operator OP(Expr a, double b) {                                                      \
    DataType t = a.type();                                                                         \
    return std::move(a) OP make_const(t, b);                                                       \
  }                                                                                                \
  inline Expr operator OP(double a, Expr b) {                                                      \
    DataType t = b.type();                                                                         \
    return make_const(t, a) OP std::move(b);                                                       \
  }
TESSEL_LITERAL_OPERATORS(+)
TESSEL_LITERAL_OPERATORS(-)
TESSEL_LITERAL_OPERATORS(*)
TESSEL_LITERAL_OPERATORS(/)
TESSEL_LITERAL_OPERATORS(%)
TESSEL_LITERAL_OPERATORS(<)
TESSEL_LITERAL_OPERATORS(<=)
TESSEL_LITERAL_OPERATORS(>)
TESSEL_LITERAL_OPERATORS(>=)
TESSEL_LITERAL_OPERATORS(==)
TESSEL_LITERAL_OPERATORS(!=)
#undef TESSEL_LITERAL_OPERATORS

Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr floordiv(Expr a, Expr b);
Expr floormod(Expr a, Expr b);
/// C's integer division and remainder (towards zero).
Expr truncdiv(Expr a, Expr b);
Expr truncmod(Expr a, Expr b);
inline Expr min(Expr a, int b) { DataType t = a.type(); return min(std::move(a), make_const(t, int64_t(b))); }
inline Expr max(Expr a, int b) { DataType t = a.type(); return max(std::move(a), make_const(t, int64_t(b))); }
inline Expr floordiv(Expr a, int b) { DataType t = a.type(); return floordiv(std::move(a), make_const(t, int64_t(b))); }
inline Expr floormod(Expr a, int b) { DataType t = a.type(); return floormod(std::move(a), make_const(t, int64_t(b))); }

/// Math functions of a float expression, of its type (codegen calls CUDA's, in float for
/// float16 / bfloat16): the pieces of activations, e.g. GELU 0.5 x (1 + erf(x / sqrt 2)).
Expr exp(Expr x);
/// 2^x (CUDA's exp2f).
Expr exp2(Expr x);
/// 2^x on the GPU's special-function unit alone (PTX ex2.approx.ftz: a relative error under
/// 2^-22, results under 2^-126 flushed to zero), one instruction where exp2 takes four and exp
/// eight: for a softmax's exponentials, whose scale folds log2(e) into the scores' multiply.
Expr fast_exp2(Expr x);
/// The natural logarithm (a softmax's logsumexp, m + log l).
Expr log(Expr x);
Expr tanh(Expr x);
Expr erf(Expr x);
Expr sqrt(Expr x);
/// 1 / sqrt(x) (CUDA's rsqrtf): layernorm's scale.
Expr rsqrt(Expr x);

Expr cast(DataType t, Expr value);
Expr select(Expr condition, Expr true_value, Expr false_value);
/// cond ? t : f where only the chosen side is evaluated: use it to guard loads that would be
/// out of bounds (padding). Both sides must have the same type.
Expr if_then_else(Expr condition, Expr true_value, Expr false_value);
/// The conjunction / disjunction of boolean conditions.
Expr all(std::vector<Expr> conditions);
Expr any(std::vector<Expr> conditions);
template <typename... Args> Expr all(Expr a, Expr b, Args... rest) {
  return all(std::vector<Expr>{std::move(a), std::move(b), Expr(std::move(rest))...});
}
template <typename... Args> Expr any(Expr a, Expr b, Args... rest) {
  return any(std::vector<Expr>{std::move(a), std::move(b), Expr(std::move(rest))...});
}

} // namespace tessel
