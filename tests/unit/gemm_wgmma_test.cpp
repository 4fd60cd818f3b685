// gemm_wgmma: the Hopper warpgroup GEMM. Its lowered IR (wgmma_mma on interleaved shared tiles
// with constant accumulator tiles, the fence / commit / wait around each run of them, the proxy
// fence before each barrier), its CUDA compiled by NVRTC for sm_90a with HGMMA in the SASS and no
// local memory, the architecture selection, the CPU executor against float64, and its errors.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Nvrtc.h"
#include "schedules/Gemm.h"
#include "schedules/GemmWgmma.h"
#include "schedules/WgmmaIntrinsics.h"

#include "ExactGemm.h"
#include "SassUtil.h"

#include <gtest/gtest.h>

#include <regex>

using namespace tessel;
using tessel::test::count_of;
using tessel::test::expect_error;

namespace {

std::string mismatch(const ScheduledProgram &p, int64_t M, int64_t N, int64_t K) {
  return tessel::test::exact_gemm_mismatch(lower(p.schedule, p.args).funcs[0], M, N, K);
}

GemmWgmmaTiles small_tiles(int stages) {
  return {.block_m = 128, .block_n = 64, .block_k = 32, .warpgroups_m = 2, .stages = stages};
}

} // namespace

TEST(GemmWgmma, LoweredIrBracketsEachRunOfWgmma) {
  // 128 x 256 blocks of 2 warpgroups, K step 64 (4 slices of 16), 2 stages, K = 128.
  GemmWgmmaTiles t;
  t.stages = 2;
  ScheduledProgram p = gemm_wgmma(256, 256, 128, t);
  LoweredModule m = lower(p.schedule, p.args);
  std::string ir = to_string(m);
  const LaunchConfig &l = m.funcs[0].launch;
  EXPECT_EQ(l.block[0], 128);
  EXPECT_EQ(l.block[1], 2);
  EXPECT_EQ(l.grid[0], 1);
  EXPECT_EQ(l.grid[1], 2);
  // Each warpgroup's 64 x 256 accumulator is one tile: 128 floats a thread.
  EXPECT_NE(ir.find("allocate(C.wgmma.accumulator, float32, [16384])"), std::string::npos) << ir;
  // One fill, 4 wgmma a K step (the K loop is one copy of its body), one store.
  EXPECT_EQ(count_of(ir, "@wgmma_fill(C.wgmma.accumulator, 0, 256, 0f32)"), 1) << ir;
  EXPECT_EQ(count_of(ir, "@wgmma_mma(C.wgmma.accumulator, 0, 256, "), 4) << ir;
  EXPECT_EQ(count_of(ir, "@wgmma_store(C.wgmma.accumulator, 0, 256, "), 1) << ir;
  // The four form one run: fenced, committed and waited for once.
  EXPECT_EQ(count_of(ir, "@wgmma_fence()"), 1) << ir;
  EXPECT_EQ(count_of(ir, "@wgmma_commit()"), 1) << ir;
  EXPECT_EQ(count_of(ir, "@wgmma_wait(0)"), 1) << ir;
  std::regex run(R"(@wgmma_fence\(\)\n(\s*@wgmma_mma\([^\n]*\n){4}\s*@wgmma_commit\(\)\n\s*@wgmma_wait\(0\))");
  EXPECT_TRUE(std::regex_search(ir, run)) << ir;
  // Every barrier publishes the shared tiles to the async proxy first.
  EXPECT_EQ(count_of(ir, "@fence_proxy_async()\n"), count_of(ir, "@syncthreads()")) << ir;
  EXPECT_GT(count_of(ir, "@syncthreads()"), 0);
  // A: 128 x 64 interleaved (chunk stride 1024 halves, core matrices 64 apart); B: 64 x 256,
  // MN-major (core matrices along K 64 apart, chunks 512 apart), transposed.
  EXPECT_NE(ir.find(", 1024, 64, address_of(B.shared["), std::string::npos) << ir;
  EXPECT_NE(ir.find("]), 64, 512, 1)"), std::string::npos) << ir;
  // Shared tiles filled by 16-byte cp.async.
  EXPECT_NE(ir.find("@cp_async(@address_of(A.shared["), std::string::npos) << ir;
  EXPECT_EQ(ir.find(".wgmma.accumulator["), std::string::npos) << ir;
}

TEST(GemmWgmma, CompilesForSm90aToHgmma) {
  ScheduledProgram p = gemm_wgmma(256, 256, 256);
  LoweredModule m = lower(p.schedule, p.args);
  EXPECT_EQ(target_arch(m, "sm_90"), "sm_90a");
  EXPECT_EQ(target_arch(m, "sm_90a"), "sm_90a");
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16"), std::string::npos);
  EXPECT_NE(src.find("tessel_wgmma_desc("), std::string::npos);
  CompileOptions o;
  o.arch = "sm_90a";
  CompiledKernel k = nvrtc_compile(src, nvrtc_options(o), "gemm_wgmma.cu");
  ASSERT_FALSE(k.cubin.empty());
  ASSERT_EQ(k.kernels.size(), 1u);
  EXPECT_EQ(k.kernels[0].spill_store_bytes, 0) << k.log;
  EXPECT_EQ(k.kernels[0].stack_bytes, 0) << k.log;
  std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "gemm_wgmma");
  if (!sass)
    GTEST_SKIP() << "NVRTC compiled for sm_90a, but there is no cuobjdump to check the SASS";
  EXPECT_NE(sass->find("HGMMA.64x256x16.F32"), std::string::npos) << sass->substr(0, 4000);
  EXPECT_NE(sass->find("LDGSTS"), std::string::npos);
  EXPECT_NE(sass->find("WARPGROUP"), std::string::npos);
  for (const char *local : {"LDL", "STL"})
    EXPECT_EQ(sass->find(local), std::string::npos) << local << ":\n" << sass->substr(0, 4000);
}

TEST(GemmWgmma, OtherArchitecturesAreRefused) {
  ScheduledProgram p = gemm_wgmma(128, 256, 64);
  LoweredModule m = lower(p.schedule, p.args);
  expect_error([&] { target_arch(m, "sm_80"); },
               {"uses wgmma", "sm_90a", "the target is sm_80", "gemm_tc"});
  // Kernels without wgmma keep the architecture they were given.
  GemmTensors g = gemm_definition(64, 64, 64, Float(32));
  Schedule s = create_schedule({g.C});
  EXPECT_EQ(target_arch(lower(s, {g.A, g.B, g.C}), "sm_90"), "sm_90");
}

TEST(GemmWgmma, TilesAreChecked) {
  expect_error([] { gemm_wgmma(100, 256, 64); }, {"100x256x64", "no wgmma tiling", "multiple of 64"});
  expect_error([] { gemm_wgmma(256, 256, 64, {.block_m = 96}); },
               {"block_m=96", "multiple of 64 x warpgroups_m = 128"});
  expect_error([] { gemm_wgmma(256, 256, 64, {.wgmma_n = 100}); }, {"n=100", "wgmma tiles"});
  expect_error([] { gemm_wgmma(256, 256, 64, {.stages = 5}); },
               {"5 stages", "245760 bytes", "227 KiB"});
  expect_error([] { gemm_wgmma(256, 256, 96, GemmWgmmaTiles{}); }, {"K=96", "block_k=64"});
  expect_error([] { wgmma_gemm(264); }, {"n=264", "multiple of 8 from 8 to 256"});
  // The fallback tiles for shapes the defaults do not divide.
  GemmWgmmaTiles t = gemm_wgmma_tiles(192, 96, 32);
  EXPECT_EQ(t.block_m, 64);
  EXPECT_EQ(t.block_n, 32);
  EXPECT_EQ(t.block_k, 32);
}
