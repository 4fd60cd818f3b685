// gemm_tc: its search space, its fallback without measurements, and both of its Tensor Core paths
// on the CPU executor.
#include "ExactGemm.h"
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "schedules/GemmTc.h"

#include <gtest/gtest.h>

using namespace tessel;

namespace {

void check_on_executor(const ScheduledProgram &p, int64_t M, int64_t N, int64_t K) {
  EXPECT_EQ(tessel::test::exact_gemm_mismatch(lower(p.schedule, p.args).funcs[0], M, N, K), "");
}

} // namespace

TEST(GemmTc, CandidatesDivideTheShapeAndFitInSharedMemory) {
  for (auto [M, N, K] : {std::tuple{4096, 4096, 4096}, {8192, 1024, 4096}, {256, 128, 64}}) {
    std::vector<GemmTcConfig> all = gemm_tc_candidates(M, N, K);
    ASSERT_FALSE(all.empty());
    int mma = 0;
    for (const GemmTcConfig &c : all) {
      SCOPED_TRACE(to_string(c));
      EXPECT_EQ(M % c.tiles.block_m(), 0);
      EXPECT_EQ(N % c.tiles.block_n(), 0);
      EXPECT_EQ(K % c.tiles.block_k(), 0);
      EXPECT_LE(gemm_wmma_shared_bytes(c.tiles), 227 * 1024);
      EXPECT_GE(c.tiles.stages, 2);
      mma += c.ptx_mma;
    }
    EXPECT_EQ(2 * mma, int(all.size())) << "both paths, the same tiles";
  }
  EXPECT_EQ(gemm_tc_candidates(4096, 4096, 4096).size(), 216u);
}

// The shared memory gemm_wmma_shared_bytes predicts is what lowering allocates.
TEST(GemmTc, SharedBytesMatchTheLoweredKernel) {
  for (const GemmTcConfig &c : gemm_tc_candidates(512, 512, 512)) {
    if (c.tiles.raster_group)
      continue;
    SCOPED_TRACE(to_string(c));
    ScheduledProgram p = gemm_tc(512, 512, 512, c);
    EXPECT_EQ(cuda_shared_memory_bytes(lower(p.schedule, p.args).funcs[0]),
              gemm_wmma_shared_bytes(c.tiles));
  }
}

TEST(GemmTc, UnmeasuredShapesPipelineThreeStages) {
  GemmTcConfig c = gemm_tc_config(1024, 1024, 1024);
  EXPECT_EQ(c.tiles.stages, 3);
  EXPECT_EQ(to_string(c).rfind("wmma brw=", 0), 0u) << to_string(c);
}

TEST(GemmTc, BothPathsMatchReferenceOnExecutor) {
  GemmWmmaTiles t{.block_row_warps = 2, .block_col_warps = 2, .warp_row_tiles = 2,
                  .warp_col_tiles = 2, .chunk = 2, .stages = 3};
  t.raster_group = 2;
  for (bool ptx : {false, true}) {
    SCOPED_TRACE(ptx ? "mma" : "wmma");
    check_on_executor(gemm_tc(192, 128, 160, {t, ptx}), 192, 128, 160);
  }
  check_on_executor(gemm_tc(128, 128, 128), 128, 128, 128);
}
