// Reductions across threads: a reduction loop bound to threadIdx.x is folded per thread, then
// combined by @thread_allreduce (warp shuffles and a shared-memory step across warps), on the
// executor against float64 and in CUDA compiled by NVRTC.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Check.h"
#include "runtime/Device.h"
#include "runtime/Nvrtc.h"

#include <gtest/gtest.h>

#include <tuple>

using namespace tessel;

namespace {

struct RowReduce {
  Tensor A, B;
  Schedule s;
};

// B[i] = combiner_k A[i, k] over rows of `cols`, one block per row (or per `rows_per_block`
// rows on threadIdx.y), k split by `threads` with the inner part on threadIdx.x.
RowReduce row_reduce(int64_t rows, int64_t cols, int threads, const char *combiner,
                     DataType dtype = Float(32), int rows_per_block = 1) {
  RowReduce r;
  r.A = placeholder({rows, cols}, dtype, "A");
  IterVar k = reduce_axis({0, cols}, "k");
  r.B = compute({rows}, [&](Var i) {
    Expr v = r.A(i, k);
    return std::string(combiner) == "sum" ? sum(v, {k}) : max(v, {k});
  }, "B");
  r.s = create_schedule({r.B});
  auto [i] = r.s[r.B].axes<1>();
  auto [ko, ki] = r.s[r.B].split(r.s[r.B].reduce_axis()[0], threads);
  if (rows_per_block > 1) {
    auto [bi, ti] = r.s[r.B].split(i, rows_per_block);
    r.s[r.B].bind(bi, thread_axis("blockIdx.x"));
    r.s[r.B].bind(ti, thread_axis("threadIdx.y"));
  } else {
    r.s[r.B].bind(i, thread_axis("blockIdx.x"));
  }
  r.s[r.B].bind(ki, thread_axis("threadIdx.x"));
  (void)ko;
  return r;
}

// C = A - rowsum(A), one block per row of 1000 on 128 threads; B, the row's sum, computed in the
// block (local), its reduction split by `threads` and bound to threadIdx.x.
std::tuple<Tensor, Tensor, Schedule> row_minus_sum(int threads) {
  Tensor A = placeholder({8, 1000}, Float(32), "A");
  IterVar k = reduce_axis({0, 1000}, "k");
  Tensor B = compute({8}, [&](Var i) { return sum(A(i, k), {k}); }, "B");
  Tensor C = compute({8, 1000}, [&](Var i, Var j) { return A(i, j) - B(i); }, "C");
  Schedule s = create_schedule({C});
  auto [ci, cj] = s[C].axes<2>();
  auto [cjo, cji] = s[C].split(cj, 128);
  s[C].bind(ci, thread_axis("blockIdx.x"));
  s[C].bind(cji, thread_axis("threadIdx.x"));
  s[B].compute_at(s[C], ci);
  s[B].set_scope("local");
  auto [ko, ki] = s[B].split(s[B].reduce_axis()[0], threads);
  s[B].bind(ki, thread_axis("threadIdx.x"));
  (void)cjo;
  (void)ko;
  return {A, C, s};
}

} // namespace

TEST(CrossThreadReduction, RowSumAndMaxMatchTheReference) {
  struct Case {
    int64_t rows, cols;
    int threads;
    const char *combiner;
    int rows_per_block;
  };
  for (const Case &c : std::vector<Case>{{8, 1000, 128, "sum", 1},
                                        {8, 1000, 256, "max", 1},
                                        {12, 100, 16, "sum", 4},   // narrower than a warp
                                        {6, 77, 32, "max", 2},     // one warp, ragged k
                                        {4, 3000, 1024, "sum", 1},
                                        {5, 21, 32, "sum", 1}}) {  // fewer columns than threads
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " + c.combiner +
                 " over " + std::to_string(c.threads) + " threads");
    RowReduce r = row_reduce(c.rows, c.cols, c.threads, c.combiner, Float(32), c.rows_per_block);
    CheckResult res = check_on_cpu(r.s, {r.A, r.B}, 1, 3);
    EXPECT_TRUE(res.compare.ok) << res.str();
  }
}

TEST(CrossThreadReduction, IrAndCudaUseShufflesAndOneSharedStep) {
  RowReduce r = row_reduce(8, 1000, 128, "sum");
  LoweredModule m = lower(r.s, {r.A, r.B});
  std::string ir = to_string(m);
  EXPECT_NE(ir.find("@thread_allreduce(\"sum\", @address_of(B.red[0]), 128)"), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("if (threadIdx.x == 0)"), std::string::npos) << ir;
  std::string src = codegen_cuda(m);
  EXPECT_EQ(test::count_of(src, "__shfl_xor_sync"), 5) << src;
  EXPECT_NE(src.find("__shared__ float tessel_red[4];"), std::string::npos) << src;
  for (const char *arch : {"sm_80", "sm_90"}) {
    CompileOptions o;
    o.arch = arch;
    EXPECT_FALSE(nvrtc_compile(src, nvrtc_options(o), "row_sum.cu").cubin.empty()) << arch;
  }
}

// Several rows a block, a serial loop around the reduction across 16 threads: the rows' sums are
// folded per thread first and combined in one batched exchange (thread_allreduce with a count:
// each halving step sends half of what a thread holds in one shuffle), then stored row by row.
// A loop of 3 (not a power of two) is not batched. Ragged rows (the split overshoots) included.
namespace {

struct BatchedRows {
  int64_t rows;
  int per_block;
  const char *combiner;
  int count; // of the batched allreduce; 0: not batched
  DataType dtype = Float(32); // of A and B (the accumulator's: float16 exchanges halves)
};
const std::vector<BatchedRows> kBatchedRows = {{16, 4, "sum", 4},
                                               {10, 4, "max", 4},
                                               {12, 2, "sum", 2},
                                               {9, 3, "sum", 0},
                                               {8, 4, "max", 4, Float(16)},
                                               {8, 2, "sum", 2, Float(16)}};

RowReduce batched_rows(const BatchedRows &c) {
  RowReduce r;
  r.A = placeholder({c.rows, 100}, c.dtype, "A");
  IterVar k = reduce_axis({0, 100}, "k");
  r.B = compute({c.rows}, [&](Var i) {
    return std::string(c.combiner) == "sum" ? sum(r.A(i, k), {k}) : max(r.A(i, k), {k});
  }, "B");
  r.s = create_schedule({r.B});
  auto [bi, ii] = r.s[r.B].split(r.s[r.B].axes<1>()[0], c.per_block);
  auto [ko, ki] = r.s[r.B].split(r.s[r.B].reduce_axis()[0], 16);
  (void)ii;
  (void)ko;
  r.s[r.B].bind(bi, thread_axis("blockIdx.x"));
  r.s[r.B].bind(ki, thread_axis("threadIdx.x"));
  return r;
}

std::string trace(const BatchedRows &c) {
  return std::to_string(c.rows) + " rows, " + std::to_string(c.per_block) + " a block, " +
         c.combiner + ", " + c.dtype.str();
}

} // namespace

TEST(CrossThreadReduction, RowsOfABlockCombinedInOneExchange) {
  for (const BatchedRows &c : kBatchedRows) {
    SCOPED_TRACE(trace(c));
    RowReduce r = batched_rows(c);
    LoweredModule m = lower(r.s, {r.A, r.B});
    std::string ir = to_string(m);
    const std::string call = std::string("@thread_allreduce(\"") + c.combiner +
                             "\", @address_of(B.red[0]), 16" +
                             (c.count ? ", " + std::to_string(c.count) : "") + ")";
    EXPECT_NE(ir.find(call), std::string::npos) << ir;
    std::string src = codegen_cuda(m);
    if (c.count == 4) { // offsets 8 and 4 halve what a thread holds, 2 and 1 combine one value
      EXPECT_EQ(test::count_of(src, "__shfl_xor_sync"), 2 + 1 + 2) << src;
      EXPECT_EQ(test::count_of(src, "__shfl_sync(0xffffffffu, tessel_v0, "), 4) << src;
    }
    CompileOptions o;
    o.arch = "sm_80";
    EXPECT_FALSE(nvrtc_compile(src, nvrtc_options(o), "rows.cu").cubin.empty());
    CheckResult res = check_on_cpu(r.s, {r.A, r.B}, 1, 5);
    EXPECT_TRUE(res.compare.ok) << res.str();
  }
}

TEST(CrossThreadReductionGpu, RowsOfABlockMatchTheReference) {
  if (!Device::available())
    GTEST_SKIP() << Device::unavailable_reason();
  for (const BatchedRows &c : kBatchedRows) {
    SCOPED_TRACE(trace(c));
    RowReduce r = batched_rows(c);
    CheckResult res = check_on_gpu(r.s, {r.A, r.B}, 1, std::nullopt, 5);
    EXPECT_TRUE(res.compare.ok) << res.str();
  }
}

// A row's sum computed inside the kernel that uses it (C = A - rowsum(A), one block per row):
// B is local, so every thread keeps the combined sum and no barrier or shared copy follows.
TEST(CrossThreadReduction, LocalResultFeedsTheSameKernel) {
  auto [A, C, s] = row_minus_sum(128);
  LoweredModule m = lower(s, {A, C});
  ASSERT_EQ(m.funcs.size(), 1u);
  std::string ir = to_string(m);
  EXPECT_NE(ir.find("  B[0] = B.red[0]"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("threadIdx.x == 0"), std::string::npos) << ir;
  CheckResult r = check_on_cpu(s, {A, C}, 1, 4);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

// TVM's pattern: rfactor the row sum along the threads' part of k, so each thread sums its
// share into B.rf (computed at the thread loop, in registers), then B reduces B.rf across the
// threads. Ragged rows and several reduce axes included.
TEST(CrossThreadReduction, RfactorThenReduceAcrossThreads) {
  for (int64_t cols : {1000, 64, 7}) {
    SCOPED_TRACE(cols);
    Tensor A = placeholder({6, 3, cols}, Float(16), "A");
    IterVar r = reduce_axis({0, 3}, "r"), k = reduce_axis({0, cols}, "k");
    Tensor B = compute({6}, [&](Var i) { return sum(A(i, r, k).astype(Float(32)), {r, k}); }, "B");
    Schedule s = create_schedule({B});
    auto [ko, ki] = s[B].split(k, 32);
    Tensor BF = s.rfactor(B, ki);
    (void)ko;
    IterVar tx = s[B].reduce_axis()[0];
    s[B].bind(s[B].op_axis()[0], thread_axis("blockIdx.x"));
    s[B].bind(tx, thread_axis("threadIdx.x"));
    s[BF].compute_at(s[B], tx);
    s[BF].set_scope("local");
    EXPECT_EQ(BF.shape().size(), 2u);
    EXPECT_EQ(*as_const_int(BF.shape()[0]), 32);
    LoweredModule m = lower(s, {A, B});
    ASSERT_EQ(m.funcs.size(), 1u);
    std::string ir = to_string(m);
    EXPECT_NE(ir.find("@thread_allreduce(\"sum\", @address_of(B.red[0]), 32)"), std::string::npos)
        << ir;
    CheckResult res = check_on_cpu(s, {A, B}, 1, 8);
    EXPECT_TRUE(res.compare.ok) << res.str();
  }
  // rfactor of a loop that is not a reduction loop of the stage.
  Tensor A = placeholder({6, 100}, Float(32), "A");
  IterVar k = reduce_axis({0, 100}, "k");
  Tensor B = compute({6}, [&](Var i) { return sum(A(i, k), {k}); }, "B");
  Schedule s = create_schedule({B});
  test::expect_error([&] { s.rfactor(B, s[B].op_axis()[0]); },
                     {"'i0' is not a reduction loop of stage 'B'"});
}

TEST(CrossThreadReduction, Errors) {
  RowReduce r = row_reduce(8, 1000, 128, "sum");
  test::expect_error([&] { r.s[r.B].bind(r.s[r.B].leaf_iter_vars()[1], thread_axis("threadIdx.y")); },
                     {"stage 'B'", "threadIdx.y", "bind it to threadIdx.x"});
  // Threads that are not a power of two.
  RowReduce odd = row_reduce(8, 1000, 24, "sum");
  test::expect_error([&] { lower(odd.s, {odd.A, odd.B}); },
                     {"stage 'B'", "across 24 threads", "power of two"});
  // The row loop after the reduction loops.
  r.s[r.B].reorder({r.s[r.B].leaf_iter_vars()[1], r.s[r.B].leaf_iter_vars()[2],
                    r.s[r.B].leaf_iter_vars()[0]});
  test::expect_error([&] { lower(r.s, {r.A, r.B}); },
                     {"stage 'B'", "data-parallel loops must all come before", "reorder it outwards"});
  // 64 threads reduce while the block has 128 (another stage binds threadIdx.x with 128).
  auto [A, C, s] = row_minus_sum(64);
  test::expect_error([&] { lower(s, {A, C}); },
                     {"stage 'B'", "across 64 threads of threadIdx.x", "launches 128"});
}
