// gemm_tc: its search space, its table of measured configurations and its fallback without one,
// and both of its Tensor Core paths on the CPU executor.
#include "ExactGemm.h"
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "schedules/GemmTc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace tessel;

namespace {

void check_on_executor(const ScheduledProgram &p, int64_t M, int64_t N, int64_t K) {
  EXPECT_EQ(tessel::test::exact_gemm_mismatch(lower(p.schedule, p.args), M, N, K), "");
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
      EXPECT_LE(gemm_wmma_shared_bytes(c.tiles), 163 * 1024) << "what an sm_80 block has";
      EXPECT_GE(c.tiles.stages, 2);
      mma += c.ptx_mma;
    }
    EXPECT_EQ(2 * mma, int(all.size())) << "both paths, the same tiles";
  }
  // 216 tile choices less the 16 that need more than 163 KiB.
  EXPECT_EQ(gemm_tc_candidates(4096, 4096, 4096).size(), 200u);
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

// A shape no measured configuration fits (N = 80: no multiple of their blocks) falls back to
// gemm_wmma_tiles, pipelined in 3 stages.
TEST(GemmTc, UnmeasuredShapesPipelineThreeStages) {
  for (const GemmTcMeasured &m : gemm_tc_measured())
    ASSERT_NE(80 % m.config.tiles.block_n(), 0) << "pick another unmeasured shape";
  GemmTcConfig c = gemm_tc_config(1024, 80, 1024);
  EXPECT_EQ(c.tiles.stages, 3);
  EXPECT_EQ(to_string(c).rfind("wmma brw=", 0), 0u) << to_string(c);
}

// Every entry of the table of measured winners is a point of the tuner's search space at its
// shape (so it passes gemm_tc's own checks: divides the shape, fits in shared memory), is what
// gemm_tc_config returns there, and lowers at that shape to a kernel taking the shared memory
// gemm_wmma_shared_bytes predicts (dynamically, beyond 48 KiB) and to CUDA.
TEST(GemmTc, MeasuredConfigurationsAreLegalAndLowerAtTheirShapes) {
  ASSERT_FALSE(gemm_tc_measured().empty());
  for (const GemmTcMeasured &m : gemm_tc_measured()) {
    std::string config = to_string(m.config);
    SCOPED_TRACE(std::to_string(m.M) + "x" + std::to_string(m.N) + "x" + std::to_string(m.K) +
                 ": " + config);
    std::vector<std::string> candidates;
    for (const GemmTcConfig &c : gemm_tc_candidates(m.M, m.N, m.K))
      candidates.push_back(to_string(c));
    EXPECT_NE(std::find(candidates.begin(), candidates.end(), config), candidates.end());
    EXPECT_TRUE(m.config.tiles.tensorize);
    EXPECT_EQ(to_string(gemm_tc_config(m.M, m.N, m.K)), config);

    ScheduledProgram p = gemm_tc(m.M, m.N, m.K, m.config);
    LoweredModule lowered = lower(p.schedule, p.args);
    ASSERT_EQ(lowered.funcs.size(), 1u);
    const LoweredFunc &f = lowered.funcs[0];
    int64_t shared = gemm_wmma_shared_bytes(m.config.tiles);
    EXPECT_EQ(cuda_shared_memory_bytes(f), shared);
    EXPECT_LE(shared, 227 * 1024);
    EXPECT_EQ(f.launch.dynamic_shared_bytes, shared > 48 * 1024 ? shared : 0);
    std::string src = codegen_cuda(lowered);
    EXPECT_NE(src.find(m.config.ptx_mma ? "mma.sync.aligned" : "nvcuda::wmma::mma_sync("),
              std::string::npos);
  }
}

// An unmeasured shape takes the configuration of the nearest measured shape it fits: 2048^3 that
// of 4096^3.
TEST(GemmTc, NearbyShapesTakeTheNearestMeasuredConfiguration) {
  auto it = std::find_if(gemm_tc_measured().begin(), gemm_tc_measured().end(),
                         [](const GemmTcMeasured &m) {
                           return m.M == 4096 && m.N == 4096 && m.K == 4096;
                         });
  ASSERT_NE(it, gemm_tc_measured().end());
  EXPECT_EQ(to_string(gemm_tc_config(2048, 2048, 2048)), to_string(it->config));
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

// bfloat16 A and B on both paths; a float16 or bfloat16 C takes the mma.sync path with the
// configuration's tiles (WMMA stores float32 only). Against float64 on the executor.
TEST(GemmTc, BFloat16AndNarrowOutput) {
  GemmWmmaTiles t{.block_row_warps = 2, .block_col_warps = 2, .warp_row_tiles = 2,
                  .warp_col_tiles = 2, .chunk = 2, .stages = 3};
  for (bool ptx : {false, true})
    for (DataType out : {Float(32), BFloat(16)}) {
      SCOPED_TRACE(std::string(ptx ? "mma " : "wmma ") + out.str());
      ScheduledProgram p = gemm_tc(192, 128, 160, {t, ptx}, BFloat(16), out);
      EXPECT_EQ(p.args[0].dtype(), BFloat(16));
      EXPECT_EQ(p.args.back().dtype(), out);
      CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs);
      EXPECT_TRUE(r.compare.ok) << r.str();
    }
}
