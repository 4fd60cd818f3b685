// TMA bulk copies of operands of rank 3 and more: a batched GEMM, C[b] = A[b] B[b] with
// A[b, M, K] and B[b, K, N], on gemm_wgmma's schedule (schedule_wgmma_gemm with TMA fills): the
// batch is the grid's z and one batch of a tile is a box whose batch dimension has size 1. Its
// tensor maps, the executor against float64, its CUDA compiled for sm_90a; A[1, M, K]; and the
// refusals of copies that are no box, which say why.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "runtime/Device.h"
#include "schedules/Gemm.h"
#include "schedules/GemmWgmma.h"

#include "BatchedWgmmaGemm.h"
#include "SassUtil.h"

#include <gtest/gtest.h>

using namespace tessel;
using tessel::test::count_of;
using tessel::test::expect_error;

using tessel::test::BatchedWgmmaGemm;
using tessel::test::batched_tma_tiles;

// A tile of one batch is a 3-D box {64, 128, 1} of A (K, M, batch innermost first) and
// {64, 64, 1} of B, at coordinates (k, m, b): 3-D TMA copies.
TEST(BulkCopyBatched, TensorMapsOfBatchedOperands) {
  BatchedWgmmaGemm g(3, 256, 128, 192, batched_tma_tiles(3));
  LoweredModule m = g.lowered();
  const LoweredFunc &f = m.funcs.at(0);
  ASSERT_EQ(f.tensor_maps.size(), 2u);
  EXPECT_EQ(f.tensor_maps[0].dims, (std::vector<int64_t>{192, 256, 3}));
  EXPECT_EQ(f.tensor_maps[0].strides, (std::vector<int64_t>{1, 192, 256 * 192}));
  EXPECT_EQ(f.tensor_maps[0].box, (std::vector<int64_t>{64, 128, 1}));
  EXPECT_EQ(f.tensor_maps[1].dims, (std::vector<int64_t>{128, 192, 3}));
  EXPECT_EQ(f.tensor_maps[1].box, (std::vector<int64_t>{64, 64, 1}));
  EXPECT_EQ(f.tensor_maps[1].swizzle, 128);
  std::string ir = to_string(m);
  EXPECT_NE(ir.find("blockIdx.z"), std::string::npos) << ir;
  EXPECT_GT(count_of(ir, "@tma_load(A_tmap, "), 0) << ir;
  EXPECT_NE(ir.find(", blockIdx.z)"), std::string::npos) << ir; // the batch coordinate

  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"),
            std::string::npos)
      << src.substr(0, 4000);
  CompiledKernel k = tessel::test::compile_for_sm90(m, src, "batched_wgmma_tma.cu");
  ASSERT_FALSE(k.cubin.empty());
  if (std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "batched_wgmma_tma")) {
    EXPECT_NE(sass->find("UTMALDG.3D"), std::string::npos) << sass->substr(0, 4000);
  }
}

// The executor runs it against float64: every batch reads its own A and B.
TEST(BulkCopyBatched, BatchedGemmMatchesTheReference) {
  for (int stages : {2, 4}) {
    SCOPED_TRACE("stages " + std::to_string(stages));
    BatchedWgmmaGemm g(3, 256, 128, 192, batched_tma_tiles(stages));
    CheckResult r = check_on_cpu(g.s, {g.A, g.B, g.C}, 2);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

// A batch of one, A[1, M, K]: still a 3-D box of batch size 1.
TEST(BulkCopyBatched, BatchOfOne) {
  BatchedWgmmaGemm g(1, 128, 64, 128, batched_tma_tiles(2));
  LoweredModule m = g.lowered();
  EXPECT_EQ(m.funcs.at(0).tensor_maps.at(0).box, (std::vector<int64_t>{64, 128, 1}));
  CheckResult r = check_on_cpu(g.s, {g.A, g.B, g.C}, 2);
  EXPECT_TRUE(r.compare.ok) << r.str();
  std::string src = codegen_cuda(m);
  EXPECT_FALSE(tessel::test::compile_for_sm90(m, src, "batch_of_one.cu").cubin.empty());
}

// What is no box is refused with its reason. A's shared tile reordered: its dimensions are
// written out of order.
TEST(BulkCopyBatched, ReorderedTileIsRefused) {
  BatchedWgmmaGemm g(2, 128, 64, 128, batched_tma_tiles(2));
  Stage as = g.s.stage("A.shared");
  auto [b, m, k] = as.axes<3>();
  as.reorder({b, k, m});
  expect_error([&] { g.lowered(); },
               {"stage 'A.shared' is filled by TMA (bulk_copy)", "shared dimension 1",
                "the stage's axes were reordered"});
}

// A's shared tile copied by the threads of a warpgroup: one thread issues the copy.
TEST(BulkCopyBatched, BoundTileIsRefused) {
  BatchedWgmmaGemm g(2, 128, 64, 128, batched_tma_tiles(2));
  Stage as = g.s.stage("A.shared");
  auto [b, m, k] = as.axes<3>();
  as.bind(m, thread_axis(Range(0, 128), "threadIdx.x"));
  expect_error([&] { g.lowered(); },
               {"stage 'A.shared' is filled by TMA (bulk_copy)", "runs on threads",
                "leave the stage's axes unbound"});
}

// A tensor of 6 dimensions is more than a TMA box has.
TEST(BulkCopyBatched, SixDimensionsAreRefused) {
  Tensor A = placeholder({2, 2, 2, 2, 8, 64}, Float(16), "A");
  Tensor B = compute_from_vars(
      A.shape(), [&](const std::vector<Var> &v) { return A(v[0], v[1], v[2], v[3], v[4], v[5]); },
      "B");
  Schedule s = create_schedule({B});
  Tensor AS = s.cache_read(A, "shared", {B});
  s[AS].compute_at(s[B], s[B].op_axis(0));
  s[AS].bulk_copy().pipeline(2);
  expect_error([&] { lower(s, {A, B}); },
               {"stage 'A.shared' is filled by TMA (bulk_copy)",
                "a TMA box has at most 5 dimensions, but 'A' has 6"});
}

// On a Hopper GPU: the 3-D TMA copies of every batch, checked against float64.
TEST(BulkCopyBatched, GpuBatchedGemmMatchesTheReference) {
  if (!Device::available())
    GTEST_SKIP() << Device::unavailable_reason();
  if (Device::get().arch() != "sm_90")
    GTEST_SKIP() << "TMA and wgmma need a Hopper GPU";
  for (int batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    BatchedWgmmaGemm g(batch, 256, 128, 192, batched_tma_tiles(3));
    CheckResult r = check_on_gpu(g.s, {g.A, g.B, g.C}, 2);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}
