// Tests of the integer interval analysis (Analyzer::const_int_bound).
#include "compiler/arith/Analyzer.h"
#include "compiler/arith/IndexInterval.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IROperator.h"

#include <gtest/gtest.h>

using namespace tessel;
using arith::Analyzer;
using arith::IntInterval;

namespace {
::testing::AssertionResult has_bound(Analyzer &an, const Expr &e, int64_t lo, int64_t hi) {
  IntInterval b = an.const_int_bound(e);
  if (b.min == lo && b.max == hi)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "[" << b.min << ", " << b.max << "], expected [" << lo << ", " << hi << "]";
}
constexpr int64_t kNegInf = IntInterval::kNegInf, kPosInf = IntInterval::kPosInf;
} // namespace

TEST(ConstIntBound, Arithmetic) {
  Var x("x"), y("y");
  Analyzer an;
  an.bind(x, Range(0, 64));
  an.bind(y, Range(-4, 8)); // [-4, 3]
  EXPECT_TRUE(has_bound(an, x, 0, 63));
  EXPECT_TRUE(has_bound(an, x + y, -4, 66));
  EXPECT_TRUE(has_bound(an, x - y, -3, 67));
  EXPECT_TRUE(has_bound(an, x * y, -252, 189));
  EXPECT_TRUE(has_bound(an, x * 16 + y, -4, 1011));
  EXPECT_TRUE(has_bound(an, min(x, y), -4, 3));
  EXPECT_TRUE(has_bound(an, max(x, y), 0, 63));
  EXPECT_TRUE(has_bound(an, select(x < y, x, y * 2), -8, 63));
}

TEST(ConstIntBound, Division) {
  Var x("x"), y("y");
  Analyzer an;
  an.bind(x, Range(0, 64));
  an.bind(y, Range(-9, 19)); // [-9, 9]
  EXPECT_TRUE(has_bound(an, floordiv(x, 16), 0, 3));
  EXPECT_TRUE(has_bound(an, floordiv(y, 4), -3, 2));
  EXPECT_TRUE(has_bound(an, floordiv(y, -4), -3, 2));
  EXPECT_TRUE(has_bound(an, floormod(y, 4), 0, 3));
  EXPECT_TRUE(has_bound(an, floormod(x, 128), 0, 63));
  EXPECT_TRUE(has_bound(an, floormod(y, -4), -3, 0));
  EXPECT_TRUE(has_bound(an, Div::make(y, Expr(4)), -2, 2));
  EXPECT_TRUE(has_bound(an, Mod::make(y, Expr(4)), -3, 3));
  EXPECT_TRUE(has_bound(an, Mod::make(x, Expr(4)), 0, 3));
  EXPECT_TRUE(has_bound(an, floordiv(x, y + 10), 0, 63)); // divisor in [1, 19]
}

TEST(ConstIntBound, TypesCastsAndLets) {
  Var x("x"), v("v");
  Analyzer an;
  an.bind(x, Range(0, 64));
  EXPECT_TRUE(has_bound(an, Var("free"), INT32_MIN, INT32_MAX));
  EXPECT_TRUE(has_bound(an, Cast::make(Int(8), x), 0, 63));
  EXPECT_TRUE(has_bound(an, Cast::make(Int(8), x * 4), -128, 127)); // may wrap
  EXPECT_TRUE(has_bound(an, Cast::make(Int(64), x), 0, 63));
  EXPECT_TRUE(has_bound(an, Let::make(v, x * 2, v + 1), 1, 127));
  EXPECT_TRUE(has_bound(an, x < 3, 0, 1));
  Var u("u", UInt(32));
  EXPECT_TRUE(has_bound(an, u, 0, 4294967295));
  EXPECT_TRUE(has_bound(an, Var("w", Int(64)), kNegInf, kPosInf));
  // x * x * x * x * x * x overflows int32 for x < 64? 63^6 > 2^31: the whole type.
  EXPECT_TRUE(has_bound(an, x * x * x * x * x * x, INT32_MIN, INT32_MAX));
  EXPECT_TRUE(has_bound(an, Expr(1.0f), kNegInf, kPosInf));
}

TEST(ConstIntBound, BindUsesBoundsOfRange) {
  Var i("i"), j("j");
  Analyzer an;
  an.bind(i, Range(0, 4));
  an.bind(j, Range(i * 4, 4)); // j in [i*4, i*4 + 4) for some i in [0, 4)
  EXPECT_TRUE(has_bound(an, j, 0, 15));
  an.unbind(i);
  EXPECT_TRUE(has_bound(an, i, INT32_MIN, INT32_MAX));
}

// divide_exact (compiler/arith/IndexInterval.h): structural multiples, including the min of a
// block's start and the last start of a split shifted inwards.
TEST(DivideExact, SumsProductsAndMinMax) {
  Var x("x"), y("y");
  auto text = [](const std::optional<Expr> &e) { return e ? to_string(*e) : std::string("none"); };
  EXPECT_EQ(text(divide_exact(x * 8 + y * 4, 4)), "x * 2 + y");
  EXPECT_EQ(text(divide_exact(min(x * 256, 3832), 4)), "min(x * 64, 958)");
  EXPECT_EQ(text(divide_exact(max(x * 6, 12) - y * 2, 2)), "max(x * 3, 6) - y");
  EXPECT_EQ(text(divide_exact(min(x * 256, 3833), 4)), "none");
  EXPECT_EQ(text(divide_exact(x * 8 + y, 4)), "none");
}
