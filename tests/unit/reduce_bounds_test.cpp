// A reduction's `where` predicate as bounds of its serial loops (compiler/lower/ReduceBounds.h):
// causal, anti-causal and banded sums skip the key blocks where the predicate fails everywhere,
// exact against float64 on the executor; the bounds are the same for every thread of a block
// (a shared tile filled inside the loop, with barriers, still works); predicates that say
// nothing linear leave the loops alone.
#include "SassUtil.h"
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/lower/ReduceBounds.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"

#include <gtest/gtest.h>

using namespace tessel;

namespace {

struct Banded {
  Tensor A, C;
  Schedule s;
};

// C[i] = sum(A[i, j], j, where), i and j split by 16.
Banded banded(int n, const std::function<Expr(Expr, Expr)> &where) {
  Tensor A = placeholder({n, n}, Float(32), "A");
  IterVar j = reduce_axis({0, n}, "j");
  Tensor C = compute({n}, [&](Var i) { return sum(A(i, j), {j}, where(i, j.var())); }, "C");
  Schedule s = create_schedule({C});
  s[C].split(s[C].op_axis(0), 16);
  s[C].split(j, 16);
  return {A, C, s};
}

std::string ir_of(const Banded &b) { return to_string(lower(b.s, {b.A, b.C})); }

} // namespace

TEST(ReduceBounds, CausalSumSkipsTheBlocksPastTheDiagonal) {
  Banded b = banded(64, [](Expr i, Expr j) { return j <= i; });
  std::string ir = ir_of(b);
  EXPECT_NE(ir.find("for (j.outer: int32, 0, i0.outer + 1)"), std::string::npos) << ir;
  // The diagonal block is masked.
  EXPECT_NE(ir.find("if (j.outer * 16 + j.inner <= i0.outer * 16 + i0.inner)"), std::string::npos)
      << ir;
  CheckResult r = check_on_cpu(b.s, {b.A, b.C}, 1);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

TEST(ReduceBounds, LowerAndBandedBoundsMoveTheLoopStart) {
  for (auto where : std::vector<std::function<Expr(Expr, Expr)>>{
           [](Expr i, Expr j) { return j >= i; },                  // anti-causal
           [](Expr i, Expr j) { return j > i - 20 && j <= i; },    // a band of 20
           [](Expr i, Expr j) { return i - j < 20 && i - j >= 0; }, // the same, written otherwise
       }) {
    Banded b = banded(60, where); // 60: the split's own guard (j < 60) beside the predicate
    std::string ir = ir_of(b);
    EXPECT_EQ(ir.find("for (j.outer: int32, 0, 4)"), std::string::npos) << ir;
    CheckResult r = check_on_cpu(b.s, {b.A, b.C}, 1);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

// Rows on threads and a shared tile of A filled inside the key loop (barriers in it), as it is
// or pipelined over 2 and 3 stages (cp.async): the key loop's bound is the block's (the largest
// row's), the same for every thread.
TEST(ReduceBounds, BoundsAreTheBlocksNotEachThreads) {
  for (int stages : {1, 2, 3}) {
    SCOPED_TRACE("stages " + std::to_string(stages));
    const int n = 64;
    Tensor A = placeholder({n, n}, Float(32), "A");
    IterVar j = reduce_axis({0, n}, "j");
    Tensor C = compute({n}, [&](Var i) { return sum(A(i, j), {j}, j <= i); }, "C");
    Schedule s = create_schedule({C});
    Tensor AS = s.cache_read(A, "shared", {C});
    auto [io, ii] = s[C].split(s[C].op_axis(0), 16);
    auto [jo, ji] = s[C].split(j, 16);
    s[C].bind(io, thread_axis("blockIdx.x"));
    s[C].bind(ii, thread_axis("threadIdx.x"));
    s[AS].compute_at(s[C], jo);
    s[AS].bind(s[AS].op_axis(0), thread_axis("threadIdx.x"));
    if (stages > 1)
      s[AS].pipeline(stages);
    LoweredModule m = lower(s, {A, C});
    std::string ir = to_string(m);
    EXPECT_NE(ir.find("for (j.outer: int32, 0, blockIdx.x + 1)"), std::string::npos) << ir;
    EXPECT_NE(ir.find("syncthreads"), std::string::npos) << ir;
    CheckResult r = check_on_cpu(s, {A, C}, 1);
    EXPECT_TRUE(r.compare.ok) << r.str();
    // The CUDA: the bound as written, compiled by NVRTC.
    std::string cuda = codegen_cuda(m);
    EXPECT_NE(cuda.find("j_outer < ((int)blockIdx.x) + 1;"), std::string::npos) << cuda;
    test::compiles_for_sm80_and_sm90(cuda, "reduce_bounds_" + std::to_string(stages), {});
  }
}

TEST(ReduceBounds, PredicatesWithoutALinearBoundLeaveTheLoops) {
  for (auto where : std::vector<std::function<Expr(Expr, Expr)>>{
           [](Expr i, Expr j) { return j * j <= i; },        // not linear in j
           [](Expr i, Expr j) { return j <= i || j > 60; },  // not a conjunction of comparisons
           [](Expr, Expr j) { return floormod(j, 2) == 0; },
       }) {
    Banded b = banded(64, where);
    std::string ir = ir_of(b);
    EXPECT_NE(ir.find("for (j.outer: int32, 0, 4)"), std::string::npos) << ir;
    CheckResult r = check_on_cpu(b.s, {b.A, b.C}, 1);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

// The analysis itself: inner loops range over their extents; a thread index that is not
// ranged gives no bound (it would differ between the threads of a block).
TEST(ReduceBounds, BoundsOfOneLoop) {
  Var x("x"), y("y"), i("i"), t("threadIdx.x");
  RangedVars inner{{y.get(), {0, 15}}};
  auto b = reduce_loop_bounds(x, 4, x * 16 + y <= i, inner);
  ASSERT_TRUE(b);
  EXPECT_EQ(to_string(b->first), "0");
  EXPECT_EQ(to_string(b->second), "max(min(floordiv(i, 16) + 1, 4), 0)");
  EXPECT_FALSE(reduce_loop_bounds(x, 4, x * 16 + y <= t, inner));
  RangedVars with_threads = inner;
  with_threads[t.get()] = {0, 127};
  b = reduce_loop_bounds(x, 4, x * 16 + y <= t, with_threads);
  ASSERT_TRUE(b);
  EXPECT_EQ(to_string(b->second), "4"); // every thread's rows: up to 127, all 4 blocks
  // A conjunct without x runs the loop only where it can hold for some ranged value (a query
  // block wholly past its sequence's end walks no keys): y <= i for some y in [0, 15].
  b = reduce_loop_bounds(x, 4, y <= i, inner);
  ASSERT_TRUE(b);
  EXPECT_EQ(to_string(b->first), "0");
  EXPECT_EQ(to_string(b->second), "select(0 <= i, 4, 0)");
  b = reduce_loop_bounds(x, 4, x * 16 + y <= i && y + 16 <= i, inner);
  ASSERT_TRUE(b);
  EXPECT_EQ(to_string(b->second), "select(16 <= i, min(floordiv(i, 16) + 1, 4), 0)");
  EXPECT_FALSE(reduce_loop_bounds(x, 4, y <= t, inner)); // a thread not ranged: nothing
  // A term of ranged variables alone takes the values interval analysis gives it: the rows of
  // threads fused from (row, column), floordiv(t, 8) in [0, 15] for t in [0, 127].
  b = reduce_loop_bounds(x, 4, x * 16 + y <= floordiv(t, 8) + i, with_threads);
  ASSERT_TRUE(b);
  EXPECT_EQ(to_string(b->second), "max(min(floordiv(i + 15, 16) + 1, 4), 0)");
  EXPECT_FALSE(reduce_loop_bounds(x, 4, x * 16 + y <= floordiv(t + i, 8), with_threads));
}

// Rows and columns of C fused onto threadIdx.x (the attention test's schedule: a thread per
// (query, head dim)): the row is floordiv(threadIdx.x, 8), whose largest value bounds the key
// loop for the block.
TEST(ReduceBounds, RowsOfFusedThreads) {
  const int n = 32, d = 8;
  Tensor A = placeholder({n, n}, Float(32), "A"), B = placeholder({n, d}, Float(32), "B");
  IterVar j = reduce_axis({0, n}, "j");
  Tensor C = compute(
      {n, d}, [&](Var i, Var c) { return sum(A(i, j) * B(j, c), {j}, j <= i); }, "C");
  Schedule s = create_schedule({C});
  auto [i, c] = s[C].axes<2>();
  auto [io, ii] = s[C].split(i, 8);
  s[C].bind(io, thread_axis("blockIdx.x"));
  s[C].bind(s[C].fuse(ii, c), thread_axis("threadIdx.x"));
  s[C].split(j, 8);
  LoweredModule m = lower(s, {A, B, C});
  std::string ir = to_string(m);
  EXPECT_NE(ir.find("for (j.outer: int32, 0, blockIdx.x + 1)"), std::string::npos) << ir;
  CheckResult r = check_on_cpu(s, {A, B, C}, 2);
  EXPECT_TRUE(r.compare.ok) << r.str();
}
