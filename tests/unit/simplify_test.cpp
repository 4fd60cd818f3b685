// Unit tests of the simplifier, one group per rule family, and of statement simplification.
#include "compiler/arith/Analyzer.h"
#include "compiler/arith/CanonicalForm.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"

#include <gtest/gtest.h>

using namespace tessel;
using arith::Analyzer;
using arith::IntInterval;

namespace {

std::string simp(Analyzer &an, const Expr &e) { return to_string(an.simplify(e)); }
std::string simp(const Expr &e) { return to_string(arith::simplify(e)); }

} // namespace

TEST(Simplify, FoldsIntegerConstantsWithWrapAround) {
  Expr a = IntImm::make(Int(8), 100), b = IntImm::make(Int(8), 100);
  EXPECT_EQ(simp(Add::make(a, b)), "-56i8");
  EXPECT_EQ(simp(Mul::make(IntImm::make(UInt(8), 16), IntImm::make(UInt(8), 17))), "16u8");
  EXPECT_EQ(simp(Sub::make(IntImm::make(UInt(32), 0), IntImm::make(UInt(32), 1))), "4294967295u32");
  EXPECT_EQ(simp(Add::make(IntImm::make(Int(64), INT64_MAX), IntImm::make(Int(64), 1))),
            std::to_string(INT64_MIN) + "i64");
  EXPECT_EQ(simp(FloorDiv::make(Expr(-7), Expr(2))), "-4");
  EXPECT_EQ(simp(FloorMod::make(Expr(-7), Expr(2))), "1");
  EXPECT_EQ(simp(FloorMod::make(Expr(7), Expr(-2))), "-1");
  EXPECT_EQ(simp(Div::make(Expr(-7), Expr(2))), "-3");
  EXPECT_EQ(simp(Mod::make(Expr(-7), Expr(2))), "-1");
  EXPECT_EQ(simp(Min::make(Expr(3), Expr(-2))), "-2");
}

TEST(Simplify, LeavesDivisionByZeroAlone) {
  Var x("x");
  EXPECT_EQ(simp(FloorDiv::make(Expr(7), Expr(0))), "floordiv(7, 0)");
  EXPECT_EQ(simp(FloorMod::make(x, Expr(0))), "floormod(x, 0)");
  EXPECT_EQ(simp(Div::make(Expr(1.0f), Expr(0.0f))), "1f32 / 0f32");
}

TEST(Simplify, FoldsFloats) {
  EXPECT_EQ(simp(Expr(1.5f) * Expr(2.0f)), "3f32");
  Expr h1 = FloatImm::make(Float(16), 1.5), h2 = FloatImm::make(Float(16), 0.25);
  EXPECT_EQ(simp(Add::make(h1, h2)), "1.75f16");
  // 1/3 is not a float16: left for the hardware to round.
  Expr third = Div::make(FloatImm::make(Float(16), 1.0), FloatImm::make(Float(16), 3.0));
  EXPECT_TRUE(arith::simplify(third).as<Div>());
  Var f("f", Float(32));
  EXPECT_EQ(simp(f * Expr(1.0f)), "f");
  // x + 0.0 is not x for x = -0.0.
  EXPECT_EQ(simp(f + Expr(0.0f)), "f + 0f32");
  EXPECT_EQ(simp(LT::make(Expr(1.0f), Expr(2.0f))), "true");
}

TEST(Simplify, CastsOfConstants) {
  EXPECT_EQ(simp(Cast::make(Int(8), Expr(300))), "44i8");
  EXPECT_EQ(simp(Cast::make(Float(16), Expr(3))), "3f16");
  EXPECT_EQ(simp(Cast::make(Int(32), Expr(-2.75f))), "-2");
  EXPECT_EQ(simp(Cast::make(Bool(), Expr(5))), "true");
  Var x("x");
  EXPECT_EQ(simp(Cast::make(Int(32), Cast::make(Int(64), x))), "x");
  // Narrowing first loses bits: not the identity.
  EXPECT_EQ(simp(Cast::make(Int(32), Cast::make(Int(8), x))), "cast(int32, cast(int8, x))");
}

TEST(Simplify, CollectsLinearTerms) {
  Var x("x"), y("y"), z("z");
  EXPECT_EQ(simp(x * 4 + y + x * 2), "x * 6 + y");
  EXPECT_EQ(simp(x - x), "0");
  EXPECT_EQ(simp(3 + x + 4), "x + 7");
  EXPECT_EQ(simp((x + 2) * 4 - 8), "x * 4");
  EXPECT_EQ(simp(y - (x + y)), "x * (-1)");
  EXPECT_EQ(simp(16 - x), "16 - x");
  EXPECT_EQ(simp(x - y * 2 + z - 3), "x + z - y * 2 - 3");
  EXPECT_EQ(simp((x * 2) * (y * 3)), "x * y * 6");
  EXPECT_EQ(simp(x * y - y * x + x * y), "x * y");
  EXPECT_EQ(simp(x * 0 + y * 1), "y");
}

TEST(Simplify, RecombinesSplitIndices) {
  Var x("x"), y("y");
  EXPECT_EQ(simp(floordiv(x, 16) * 16 + floormod(x, 16)), "x");
  EXPECT_EQ(simp(floormod(x + y, 8) + floordiv(x + y, 8) * 8 - y), "x");
  EXPECT_EQ(simp(x - floordiv(x, 4) * 4), "floormod(x, 4)");
  EXPECT_EQ(simp((floordiv(x, 16) * 16 + floormod(x, 16)) * 2), "x * 2");
}

TEST(Simplify, FloorDivAndModWithBounds) {
  Var x("x"), y("y");
  Analyzer an;
  an.bind(y, Range(0, 16));
  EXPECT_EQ(simp(an, floordiv(x * 16 + y, 16)), "x");
  EXPECT_EQ(simp(an, floormod(x * 16 + y, 16)), "y");
  EXPECT_EQ(simp(an, floormod(y, 16)), "y");
  EXPECT_EQ(simp(an, floordiv(y, 16)), "0");
  EXPECT_EQ(simp(an, floordiv(x * 32 + y + 16, 16)), "x * 2 + 1");
  EXPECT_EQ(simp(an, floormod(x * 32 + y + 16, 16)), "y");
  EXPECT_EQ(simp(an, floordiv(x * 16 + y - 16, 16)), "x - 1");
  // y + 8 in [8, 24): undecided, but the multiples of 16 leave the division.
  EXPECT_EQ(simp(an, floordiv(x * 16 + y - 8, 16)), "x + floordiv(y + 8, 16) - 1");
}

// x + s with x a multiple of g dividing c and s in [0, g): s leaves floordiv / floormod by c.
// The channel of an im2col row loaded as 8-lane vectors: i*32 + j*8 + v, v in [0, 8).
TEST(Simplify, FloorDivAndModOfAlignedPlusSmall) {
  Var i("i"), j("j"), v("v"), z("z");
  Analyzer an;
  an.bind(j, Range(0, 4));
  an.bind(v, Range(0, 8));
  an.bind(z, Range(-8, 8));
  EXPECT_EQ(simp(an, floordiv(i * 32 + j * 8 + v, 256)), "floordiv(i, 8)");
  EXPECT_EQ(simp(an, floormod(i * 32 + j * 8 + v, 256)), "floormod(i, 8) * 32 + j * 8 + v");
  EXPECT_EQ(simp(an, floordiv(i * 32 + j * 8 + v + 32, 256)), "floordiv(i + 1, 8)");
  EXPECT_EQ(simp(an, floordiv(floordiv(i * 32 + v, 256), 3)), "floordiv(i, 24)");
  // The largest g that works: 8 (v alone), not 32 (j*8 + v + 8 reaches 40).
  EXPECT_EQ(simp(an, floordiv(i * 32 + j * 8 + v + 8, 256)), "floordiv(i * 4 + j + 1, 32)");
  // A small part that may be negative or reach g stays inside.
  EXPECT_EQ(simp(an, floordiv(i * 8 + z, 256)), "floordiv(i * 8 + z, 256)");
  EXPECT_EQ(simp(an, floordiv(i * 4 + v, 256)), "floordiv(i * 4 + v, 256)");
  // A constant below g is a small part too.
  EXPECT_EQ(simp(floordiv(i * 32 + 5, 256)), "floordiv(i, 8)");
  EXPECT_EQ(simp(floormod(i * 32 + 5, 256)), "floormod(i, 8) * 32 + 5");
}

TEST(Simplify, FloorDivAndModWithoutBounds) {
  Var x("x"), y("y");
  EXPECT_EQ(simp(floordiv(x, 1)), "x");
  EXPECT_EQ(simp(floormod(x, 1)), "0");
  EXPECT_EQ(simp(floordiv(floordiv(x, 4), 8)), "floordiv(x, 32)");
  EXPECT_EQ(simp(floormod(floormod(x, 32), 16)), "floormod(x, 16)");
  EXPECT_EQ(simp(floormod(floormod(x, 16), 32)), "floormod(x, 16)"); // by bounds
  EXPECT_EQ(simp(floordiv(floormod(x, 16), 16)), "0");
  EXPECT_EQ(simp(floordiv(x * 8, 4)), "x * 2");
  EXPECT_EQ(simp(floordiv(x * 4 + 4, 8)), "floordiv(x + 1, 2)");
  // x*4 + 6 = (x*4 + 4) + 2 with 2 in [0, 4): the 2 leaves the floormod.
  EXPECT_EQ(simp(floormod(x * 4 + 6, 8)), "floormod(x + 1, 2) * 4 + 2");
  EXPECT_EQ(simp(floormod(x + 17, 16)), "floormod(x + 1, 16)");
  EXPECT_EQ(simp(floordiv(x + 5, 4)), "floordiv(x + 5, 4)");
  EXPECT_EQ(simp(floordiv(x * 16 + y, 16)), "x + floordiv(y, 16)");
  EXPECT_EQ(simp(floormod(x * 16 + y, 16)), "floormod(y, 16)");
}

TEST(Simplify, TruncDivOfNonNegativeIsFloorDiv) {
  Var x("x"), y("y");
  Analyzer an;
  an.bind(x, Range(0, 100));
  an.bind(y, Range(0, 16));
  EXPECT_EQ(simp(an, Div::make(x * 16 + y, Expr(16))), "x");
  EXPECT_EQ(simp(an, Mod::make(x * 16 + y, Expr(16))), "y");
  Var z("z"); // unknown sign: stays truncating
  EXPECT_EQ(simp(an, Div::make(z * 16 + y, Expr(16))), "(z * 16 + y) / 16");
}

TEST(Simplify, MinMax) {
  Var x("x"), y("y");
  EXPECT_EQ(simp(min(x, x + 3)), "x");
  EXPECT_EQ(simp(max(x, x + 3)), "x + 3");
  EXPECT_EQ(simp(min(x * 2 + 1, x * 2)), "x * 2");
  EXPECT_EQ(simp(min(x, x)), "x");
  EXPECT_EQ(simp(min(min(x, 5), 3)), "min(x, 3)");
  EXPECT_EQ(simp(max(4, x)), "max(x, 4)");
  EXPECT_EQ(simp(min(x, y)), "min(x, y)");
  Analyzer an;
  an.bind(x, Range(0, 101));
  EXPECT_EQ(simp(an, min(x, 100)), "x");
  EXPECT_EQ(simp(an, max(x, 100)), "100");
  EXPECT_EQ(simp(an, min(x, 99)), "min(x, 99)");
  EXPECT_EQ(simp(an, max(x, 0)), "x");
  EXPECT_EQ(simp(an, min(x, -1)), "-1");
}

TEST(Simplify, Comparisons) {
  Var x("x"), y("y");
  EXPECT_EQ(simp(x * 4 + 3 < x * 4 + 5), "true");
  EXPECT_EQ(simp(x + 3 < 10), "x < 7");
  EXPECT_EQ(simp(x + 3 <= 10), "x <= 7");
  EXPECT_EQ(simp(x > 5), "5 < x");
  EXPECT_EQ(simp(x - y < 0), "x < y");
  EXPECT_EQ(simp(x + 1 == y + 3), "x == y + 2");
  EXPECT_EQ(simp(x == x), "true");
  EXPECT_EQ(simp(x < x), "false");
  EXPECT_EQ(simp(x * 4 < 8), "x < 2");
  EXPECT_EQ(simp(x * 4 < 7), "x < 2");
  EXPECT_EQ(simp(x * 4 <= 7), "x <= 1");
  EXPECT_EQ(simp(x * 4 == 7), "false");
  EXPECT_EQ(simp(x * 4 != 6), "true");
  EXPECT_EQ(simp(5 == x), "x == 5");
  Analyzer an;
  an.bind(x, Range(0, 64));
  an.bind(y, Range(0, 16));
  EXPECT_EQ(simp(an, x * 16 + y < 1024), "true");
  EXPECT_EQ(simp(an, x * 16 + y < 1023), "x * 16 + y < 1023");
  EXPECT_EQ(simp(an, x >= 0), "true");
  EXPECT_EQ(simp(an, x < 0), "false");
  EXPECT_EQ(simp(an, x == 64), "false");
}

TEST(Simplify, UnsignedComparisonsOnlyByBounds) {
  Var u("u", UInt(32));
  // u - 1 wraps for u = 0, so u - 1 < 5 is not u < 6.
  Expr e = Sub::make(u, IntImm::make(UInt(32), 1)) < IntImm::make(UInt(32), 5);
  EXPECT_TRUE(arith::simplify(e).as<LT>());
  EXPECT_EQ(to_string(arith::simplify(e).as<LT>()->a), "u - 1u32");
  Analyzer an;
  an.bind(u, Range(IntImm::make(UInt(32), 0), IntImm::make(UInt(32), 8)));
  EXPECT_EQ(simp(an, u < IntImm::make(UInt(32), 8)), "true");
}

TEST(Simplify, Logic) {
  Var x("x"), y("y");
  Var c("c", Bool());
  EXPECT_EQ(simp(const_true() && c), "c");
  EXPECT_EQ(simp(const_false() && c), "false");
  EXPECT_EQ(simp(c || const_true()), "true");
  EXPECT_EQ(simp(c || const_false()), "c");
  EXPECT_EQ(simp(!(x < y)), "y <= x");
  EXPECT_EQ(simp(!(x <= y)), "y < x");
  EXPECT_EQ(simp(!(x == y)), "x != y");
  EXPECT_EQ(simp(!!c), "c");
  EXPECT_EQ(simp(c && !c), "false");
  EXPECT_EQ(simp(c || !c), "true");
  EXPECT_EQ(simp(c && c), "c");
  Var f("f", Float(32));
  // With NaN, !(f < 1) is not 1 <= f.
  EXPECT_EQ(simp(!(f < Expr(1.0f))), "!(f < 1f32)");
}

TEST(Simplify, SelectAndIfThenElse) {
  Var x("x"), y("y");
  Var c("c", Bool());
  EXPECT_EQ(simp(select(const_true(), x, y)), "x");
  EXPECT_EQ(simp(select(Expr(2) < Expr(1), x, y)), "y");
  EXPECT_EQ(simp(select(c, x + 1, 1 + x)), "x + 1");
  EXPECT_EQ(simp(if_then_else(x - x == 0, x, y)), "x");
  Analyzer an;
  an.bind(x, Range(0, 8));
  EXPECT_EQ(simp(an, if_then_else(x < 8, x, y)), "x");
  // Each branch is simplified knowing its condition.
  Var i("i");
  Analyzer an2;
  an2.bind(i, Range(0, 32));
  EXPECT_EQ(simp(an2, select(i < 16, floormod(i, 16), floormod(i, 16) + 1)),
            "select(i < 16, i, i - 15)");
  EXPECT_EQ(simp(an2, if_then_else(1 <= i, min(i, 0) + i, 0)), "if_then_else(1 <= i, i, 0)");
}

TEST(Simplify, Let) {
  Var x("x"), v("v"), w("w");
  EXPECT_EQ(simp(Let::make(v, Expr(3), v + x)), "x + 3");
  EXPECT_EQ(simp(Let::make(v, x, v * 2)), "x * 2");
  EXPECT_EQ(simp(Let::make(v, x * 2, x)), "x");
  Analyzer an;
  an.bind(x, Range(0, 16));
  // v = x + 1 is in [1, 16]: floordiv(v, 32) is 0.
  EXPECT_EQ(simp(an, Let::make(v, x + 1, floordiv(v, 32) + v)), "(let v = x + 1 in v)");
}

TEST(Simplify, Vectors) {
  Var x("x");
  Expr r = Ramp::make(x * 4, Expr(1), 4) + Broadcast::make(Expr(8), 4);
  EXPECT_EQ(simp(r), to_string(Ramp::make(x * 4 + 8, Expr(1), 4)));
  Expr m = Ramp::make(x, Expr(1), 4) * Broadcast::make(Expr(2), 4);
  EXPECT_EQ(simp(m), to_string(Ramp::make(x * 2, Expr(2), 4)));
}

TEST(Simplify, PreservesTypes) {
  Var a("a", Int(64)), b("b", Int(16));
  Expr e = arith::simplify(a * 4 + a * 2 - 3);
  EXPECT_EQ(e.type(), Int(64));
  EXPECT_EQ(to_string(e), "a * 6i64 - 3i64");
  EXPECT_EQ(arith::simplify(floordiv(b * 8, 4)).type(), Int(16));
  EXPECT_EQ(arith::simplify(b < b + 1).type(), Bool());
}

TEST(Simplify, ReturnsTheSameNodeWhenNothingChanges) {
  Var x("x"), y("y");
  Expr e = min(x * 16 + y, y) < floordiv(x, 3);
  EXPECT_TRUE(arith::simplify(e).same_as(e));
  Stmt s = For::make(x, 0, 8, ForKind::Serial,
                     BufferStore::make(Buffer::make("A", Int(32), {Expr(64)}), y, {x * 8 + y}));
  EXPECT_TRUE(arith::simplify(s).same_as(s));
}

TEST(Simplify, CanProve) {
  Var i("i"), j("j");
  Analyzer an;
  an.bind(i, Range(0, 64));
  an.bind(j, Range(0, 16));
  EXPECT_TRUE(an.can_prove(i * 16 + j < 1024));
  EXPECT_FALSE(an.can_prove(i * 16 + j < 1000));
  EXPECT_TRUE(an.can_prove(floormod(i * 16 + j, 16) == j));
  EXPECT_TRUE(an.can_prove(floordiv(i * 16 + j, 16) == i));
  EXPECT_TRUE(an.can_prove(i * 16 + j >= 0 && j < 16));
  EXPECT_FALSE(arith::can_prove(i < 64));
  EXPECT_TRUE(arith::can_prove(i * 2 + 1 != i * 2));
}

TEST(Simplify, RecombinesSplitIndicesWithOffsets) {
  Var x("x"), y("y");
  EXPECT_EQ(simp(floordiv(x + 17, 16) * 16 + floormod(x + 17, 16)), "x + 17");
  EXPECT_EQ(simp(x + 17 - floordiv(x + 17, 16) * 16), "floormod(x + 1, 16)");
  EXPECT_EQ(simp(floordiv(x * 4 + 6, 8) * 8 + floormod(x * 4 + 6, 8)), "x * 4 + 6");
  EXPECT_EQ(simp(floordiv(x * 16 + y, 16) * 16 + floormod(y, 16)), "x * 16 + y");
}
