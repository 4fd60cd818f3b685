// Value semantics: half / bfloat16 rounding, integer wrapping, vector (Ramp / Broadcast)
// accesses, per-thread local storage and guarded loads.
#include "interp_kernels.h"

#include "compiler/support/Error.h"
#include "runtime/interp/HalfFloat.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

using namespace tessel;
using namespace tessel::interp;
using namespace tessel::interp_test;
using ::testing::HasSubstr;

TEST(InterpNumeric, HalfRoundsToNearestEven) {
  EXPECT_EQ(round_to_half(1.0 + 0x1p-11), 1.0);                  // tie -> even (down)
  EXPECT_EQ(round_to_half(1.0 + 3 * 0x1p-11), 1.0 + 0x1p-9);     // tie -> even (up)
  EXPECT_EQ(round_to_half(1.0 + 0x1p-11 + 0x1p-30), 1.0 + 0x1p-10); // above the tie
  EXPECT_EQ(round_to_half(65504.0), 65504.0);
  EXPECT_EQ(round_to_half(65519.0), 65504.0);
  EXPECT_TRUE(std::isinf(round_to_half(65520.0)));                // max + half ulp ties up
  EXPECT_EQ(round_to_half(0x1p-25), 0.0);                         // half the smallest subnormal
  EXPECT_EQ(round_to_half(3 * 0x1p-25), 0x1p-23);
  EXPECT_EQ(round_to_half(-0x1p-24), -0x1p-24);
  EXPECT_EQ(round_to_bfloat16(1.0 + 0x1p-8), 1.0);
  EXPECT_EQ(round_to_bfloat16(1.0 + 0x1p-8 + 0x1p-20), 1.0 + 0x1p-7);
}

TEST(InterpNumeric, HalfEncodingRoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    double v = half_value(uint16_t(h));
    if (std::isnan(v))
      continue;
    ASSERT_EQ(half_bits(v), h) << std::hex << h;
    ASSERT_EQ(round_to_half(v), v) << std::hex << h;
  }
  EXPECT_EQ(bfloat16_value(bfloat16_bits(-3.25)), -3.25);
}

// Against an independent reference: the nearest of the two neighbouring halves found by
// binary search over the (monotonic) positive encodings, ties to the even encoding.
TEST(InterpNumeric, HalfRoundingMatchesExhaustiveNeighbours) {
  auto reference = [](double x) {
    double a = std::fabs(x);
    uint32_t lo = 0, hi = 0x7c00; // largest encoding with value <= a, in [0, inf]
    while (lo < hi) {
      uint32_t mid = (lo + hi + 1) / 2;
      if (half_value(uint16_t(mid)) <= a)
        lo = mid;
      else
        hi = mid - 1;
    }
    double down = half_value(uint16_t(lo));
    double up = lo == 0x7c00 ? INFINITY : half_value(uint16_t(lo + 1));
    if (lo == 0x7bff) // above the largest finite: round as if the next binade continued
      up = 65536.0;
    double r = (a - down < up - a || (a - down == up - a && lo % 2 == 0)) ? down : up;
    if (r == 65536.0)
      r = INFINITY;
    return std::copysign(r, x);
  };
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> expo(-27, 16);
  for (int i = 0; i < 200000; ++i) {
    double x = std::ldexp(mant(rng), expo(rng)) * (i % 2 ? -1 : 1);
    if (i % 7 == 0) // exact ties and near-ties
      x = half_value(uint16_t(rng() % 0x7bff)) + std::ldexp(1.0, expo(rng) - 11);
    ASSERT_EQ(round_to_half(x), reference(x)) << std::hexfloat << x;
  }
}

namespace {

/// out[i] = body(in loads) for i = threadIdx.x, one block of `n` threads.
LoweredFunc elementwise(const std::vector<Buffer> &args, int n, const std::function<Stmt(Expr)> &body) {
  IterVar tx = thread_axis("threadIdx.x");
  LoweredFunc f;
  f.name = "elementwise";
  f.args = args;
  for (const Buffer &b : args)
    f.arg_shapes.push_back({*as_const_int(b->shape[0])});
  f.launch = launch(1, 1, n, 1);
  f.body = bind(tx, n, body(tx));
  return f;
}

} // namespace

// a * b + c in float16 is two operations, each rounded to half: not a fused multiply-add.
TEST(InterpNumeric, Fp16ArithmeticRoundsEachOperation) {
  const DataType f16 = Float(16);
  Buffer a = flat("a", f16, 1), b = flat("b", f16, 1), c = flat("c", f16, 1), o = flat("o", f16, 1);
  auto f = elementwise({a, b, c, o}, 1, [&](Expr) {
    return st(o, 0, ld(a, 0) * ld(b, 0) + ld(c, 0));
  });
  double x = 1 + 0x1p-10; // x * x = 1 + 2^-9 + 2^-20: rounds to 1 + 2^-9
  HostBuffer A = HostBuffer::from_doubles(f16, {x}), B = A, C = HostBuffer::from_doubles(f16, {-1.0});
  HostBuffer O = HostBuffer::zeros(f16, 1);
  execute(f, {&A, &B, &C, &O});
  EXPECT_EQ(O.get(0), 0x1p-9); // fused would give 2^-9 + 2^-20, representable in half

  // Overflow to infinity, as the GPU's half arithmetic does.
  HostBuffer big = HostBuffer::from_doubles(f16, {300.0});
  execute(f, {&big, &big, &C, &O});
  EXPECT_TRUE(std::isinf(O.get(0)));
}

TEST(InterpNumeric, IntegersWrapAndDivideAsOnTheGpu) {
  const DataType i32 = Int(32);
  Buffer a = flat("a", i32, 4), o = flat("o", i32, 4 * 5);
  auto f = elementwise({a, o}, 4, [&](Expr t) {
    Expr x = ld(a, t);
    return Seq::make({st(o, t * 5, x + 2147483647), st(o, t * 5 + 1, floordiv(x, 3)),
                      st(o, t * 5 + 2, floormod(x, 3)), st(o, t * 5 + 3, truncdiv(x, 3)),
                      st(o, t * 5 + 4, cast(i32, cast(Float(32), x) * 1e10f))});
  });
  HostBuffer A = HostBuffer::from_doubles(i32, {1, -7, 7, 0}), O = HostBuffer::zeros(i32, 20);
  execute(f, {&A, &O});
  EXPECT_EQ(O.get_int(0), -2147483648LL); // 1 + INT_MAX wraps
  EXPECT_EQ(O.get_int(6), -3);            // floordiv(-7, 3)
  EXPECT_EQ(O.get_int(7), 2);             // floormod(-7, 3)
  EXPECT_EQ(O.get_int(8), -2);            // truncdiv(-7, 3)
  EXPECT_EQ(O.get_int(4), 2147483647);    // float -> int saturates
  EXPECT_EQ(O.get_int(9), -2147483648LL);
}

TEST(InterpNumeric, IntegerDivisionByZeroNamesTheThread) {
  Buffer a = flat("a", Int(32), 4), o = flat("o", Int(32), 4);
  auto f = elementwise({a, o}, 4, [&](Expr t) { return st(o, t, truncdiv(Expr(12), ld(a, t))); });
  HostBuffer A = HostBuffer::from_doubles(Int(32), {1, 2, 0, 3}), O = HostBuffer::zeros(Int(32), 4);
  try {
    execute(f, {&A, &O});
    FAIL();
  } catch (const Error &e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("division by zero"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("thread (2,0,0)"));
  }
}

// Each thread loads 4 contiguous floats (Ramp), scales them (Broadcast), gathers with stride 2
// and stores 4 contiguous results: the vectorized forms codegen emits as float4 accesses.
TEST(InterpNumeric, VectorRampLoadsAndStores) {
  const int n = 16;
  const DataType f32 = Float(32);
  Buffer in = flat("in", f32, 4 * n + 8), out = flat("out", f32, 4 * n), strided = flat("s", f32, 4 * n);
  auto f = elementwise({in, out, strided}, n, [&](Expr t) {
    Expr v = ld(in, Ramp::make(t * 4, 1, 4));
    Expr g = ld(in, Ramp::make(t * 4, 2, 4));
    return Seq::make({st(out, Ramp::make(t * 4, 1, 4), v * Broadcast::make(Expr(2.0f), 4) +
                                                           cast(Float(32, 4), Ramp::make(t, 0, 4))),
                      st(strided, Ramp::make(t * 4, 1, 4), g)});
  });
  std::vector<double> vin(4 * n + 8);
  for (size_t i = 0; i < vin.size(); ++i)
    vin[i] = double(i);
  HostBuffer I = HostBuffer::from_doubles(f32, vin), O = HostBuffer::zeros(f32, 4 * n),
             S = HostBuffer::zeros(f32, 4 * n);
  execute(f, {&I, &O, &S});
  for (int t = 0; t < n; ++t)
    for (int l = 0; l < 4; ++l) {
      EXPECT_EQ(O.get(4 * t + l), 2.0 * (4 * t + l) + t);
      EXPECT_EQ(S.get(4 * t + l), double(4 * t + 2 * l));
    }
}

// Vector stores into shared memory by one thread, scalar reads by others after a barrier.
TEST(InterpNumeric, VectorSharedStoreThenScalarReadsAfterBarrier) {
  const int n = 32;
  Buffer out = flat("out", Int(32), n), s = flat("s", Int(32), n, "shared");
  IterVar tx = thread_axis("threadIdx.x");
  Expr t = tx;
  Stmt body = allocate(s, Seq::make({IfThenElse::make(t < n / 4, st(s, Ramp::make(t * 4, 1, 4),
                                                                    Broadcast::make(t * 10, 4))),
                                     sync_threads(), st(out, t, ld(s, n - 1 - t))}));
  LoweredFunc f{"vs", {out}, {{n}}, bind(tx, n, body), launch(1, 1, n, 1), {}};
  HostBuffer O = HostBuffer::zeros(Int(32), n);
  execute(f, {&O});
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(O.get_int(i), (n - 1 - i) / 4 * 10);
}

TEST(InterpNumeric, LocalStorageIsPerThread) {
  Buffer out = flat("out", Int(32), 64), loc = flat("loc", Int(32), 2, "local");
  IterVar tx = thread_axis("threadIdx.x");
  Expr t = tx;
  Stmt body = allocate(loc, Seq::make({st(loc, 0, t), st(loc, 1, t * t),
                                       st(out, t, ld(loc, 0) + ld(loc, 1))}));
  LoweredFunc f{"local", {out}, {{64}}, bind(tx, 64, body), launch(1, 1, 64, 1), {}};
  HostBuffer O = HostBuffer::zeros(Int(32), 64);
  execute(f, {&O});
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(O.get_int(i), i + i * i);
}

// if_then_else evaluates only the side a thread takes, so a guarded padding load is fine;
// Select evaluates both, so the same load is out of bounds.
TEST(InterpNumeric, IfThenElseGuardsLoadsSelectDoesNot) {
  Buffer in = flat("in", Float(32), 10), out = flat("out", Float(32), 32);
  HostBuffer I = HostBuffer::from_doubles(Float(32), random_values(10, 9)), O = HostBuffer::zeros(Float(32), 32);
  auto guarded = elementwise({in, out}, 32, [&](Expr t) {
    return st(out, t, if_then_else(t < 10, ld(in, t), Expr(0.0f)));
  });
  execute(guarded, {&I, &O});
  EXPECT_EQ(O.get(3), I.get(3));
  EXPECT_EQ(O.get(20), 0.0);
  auto selected = elementwise({in, out}, 32, [&](Expr t) {
    return st(out, t, select(t < 10, ld(in, t), Expr(0.0f)));
  });
  try {
    execute(selected, {&I, &O});
    FAIL();
  } catch (const Error &e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("out-of-bounds read of global buffer 'in' at index 10"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("by thread (10,0,0)"));
  }
}

// A variable bound again inside a scope keeps its outer binding after it, taken or not: block
// 0 skips the branch that re-binds threadIdx.y around a copy, and the store after it still
// reads each thread's own threadIdx.y (it read an unset slot, 0, when the inner binding
// captured the later uses; specialized loops duplicate such branches). Likewise a loop and a
// let re-binding a variable inside an untaken branch.
TEST(InterpNumeric, RebindingInAnUntakenBranchKeepsTheOuterBinding) {
  const DataType i32 = Int(32);
  Buffer o = flat("o", i32, 2 * 8 * 3);
  Axes ax;
  Var k("k"), x("x");
  Expr bx = ax.bx, tx = ax.tx, ty = ax.ty;
  Expr at = (bx * 8 + ty * 4 + tx) * 3;
  Stmt rebinds = Seq::make({bind(ax.ty, 2, Evaluate::make(0)), loop(k, 3, Evaluate::make(0)),
                            LetStmt::make(x, Expr(7), Evaluate::make(0))});
  Stmt body = LetStmt::make(
      x, ty + 10,
      Seq::make({IfThenElse::make(bx == 1, rebinds), st(o, at, ty), st(o, at + 2, x)}));
  LoweredFunc f;
  f.name = "rebinding";
  f.args = {o};
  f.arg_shapes = {{2 * 8 * 3}};
  f.launch = launch(2, 1, 4, 2);
  f.body = ax.bind_all(f.launch, body);
  HostBuffer O = HostBuffer::zeros(i32, 2 * 8 * 3);
  execute(f, {&O});
  for (int b = 0; b < 2; ++b)
    for (int y = 0; y < 2; ++y)
      for (int t = 0; t < 4; ++t) {
        const size_t at = size_t((b * 8 + y * 4 + t) * 3);
        EXPECT_EQ(O.get_int(at), y) << "block " << b << ", thread (" << t << ", " << y << ")";
        EXPECT_EQ(O.get_int(at + 2), y + 10) << "block " << b << ", thread (" << t << ", " << y << ")";
      }
}
