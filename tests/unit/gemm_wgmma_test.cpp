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

GemmWgmmaTiles small_tiles(int stages, int swizzle = 0) {
  return {.block_m = 128, .block_n = 64, .block_k = swizzle ? 64 : 32, .warpgroups_m = 2,
          .stages = stages, .swizzle = swizzle};
}

} // namespace

// Exact inputs, so the executor's result must equal float64 exactly. The executor lands each
// wgmma at the wgmma_wait of its group and reports operands overwritten before then, so these
// runs also check the order of fills, barriers and waits of each pipeline depth.
TEST(GemmWgmma, CpuExecutorMatchesReference) {
  for (int swizzle : {128, 0})
    for (int stages : {1, 2, 3, 4}) {
      SCOPED_TRACE("stages " + std::to_string(stages) + ", swizzle " + std::to_string(swizzle));
      EXPECT_EQ(mismatch(gemm_wgmma(128, 64, 256, small_tiles(stages, swizzle)), 128, 64, 256), "");
    }
  // One warpgroup, 64 x 32 tiles; two warpgroups side by side along N (threadIdx.z).
  EXPECT_EQ(mismatch(gemm_wgmma(192, 96, 64), 192, 96, 64), "");
  GemmWgmmaTiles wide{.block_m = 64, .block_n = 128, .block_k = 32, .warpgroups_m = 1,
                      .warpgroups_n = 2, .stages = 3, .swizzle = 0};
  EXPECT_EQ(mismatch(gemm_wgmma(64, 256, 96, wide), 64, 256, 96), "");
  // Two instructions of n = 32 per warpgroup row, two tiles of rows per warpgroup.
  GemmWgmmaTiles tiles{.block_m = 128, .block_n = 64, .block_k = 32, .warpgroups_m = 1,
                       .wgmma_n = 32, .stages = 2, .swizzle = 0};
  EXPECT_EQ(mismatch(gemm_wgmma(128, 128, 64, tiles), 128, 128, 64), "");
  // Swizzled: two warpgroups along N, each 64 x 128 of two n = 64 instructions, K step 128
  // (two swizzle chunks), 2 stages.
  tiles = {.block_m = 64, .block_n = 256, .block_k = 128, .warpgroups_m = 1, .warpgroups_n = 2,
           .wgmma_n = 64, .stages = 2};
  EXPECT_EQ(mismatch(gemm_wgmma(128, 256, 384, tiles), 128, 256, 384), "");
}

// The 64- and 32-byte swizzles (rows of 32 / 16 halves: K steps of 32 with swizzled tiles), on
// the executor at every pipeline depth and through NVRTC (descriptor layout types 2 and 3).
TEST(GemmWgmma, NarrowSwizzles) {
  for (int swizzle : {64, 32})
    for (int stages : {1, 2, 4}) {
      SCOPED_TRACE("swizzle " + std::to_string(swizzle) + ", stages " + std::to_string(stages));
      GemmWgmmaTiles t{.block_m = 128, .block_n = 64, .block_k = 32, .warpgroups_m = 2,
                       .stages = stages, .swizzle = swizzle};
      EXPECT_EQ(mismatch(gemm_wgmma(128, 128, 128, t), 128, 128, 128), "");
    }
  GemmWgmmaTiles t{.block_m = 128, .block_n = 256, .block_k = 32, .warpgroups_m = 2, .stages = 8,
                   .swizzle = 64};
  ScheduledProgram p = gemm_wgmma(256, 256, 256, t);
  LoweredModule m = lower(p.schedule, p.args);
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find(", 512, 2)), \"l\"(tessel_wgmma_desc(&B_shared["), std::string::npos);
  CompileOptions o;
  o.arch = target_arch(m, "sm_90");
  EXPECT_FALSE(nvrtc_compile(src, nvrtc_options(o), "gemm_wgmma_sw64.cu").cubin.empty());
  expect_error([] { gemm_wgmma(128, 256, 48, {.block_k = 24, .swizzle = 32}); },
               {"block_k=24", "multiples of 16", "rows of 16 halves (32 bytes)"});
  expect_error([] { gemm_wgmma(128, 256, 64, {.swizzle = 16}); }, {"swizzle must be 128, 64, 32 or 0"});
}

// bfloat16 inputs: the same schedule, wgmma's .bf16 form.
TEST(GemmWgmma, Bfloat16Inputs) {
  ScheduledProgram p = gemm_wgmma(128, 256, 192, GemmWgmmaTiles{.stages = 3}, BFloat(16));
  EXPECT_EQ(mismatch(p, 128, 256, 192), "");
  LoweredModule m = lower(p.schedule, p.args);
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"), std::string::npos);
  CompileOptions o;
  o.arch = target_arch(m, "sm_90");
  CompiledKernel k = nvrtc_compile(src, nvrtc_options(o), "gemm_wgmma_bf16.cu");
  std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "gemm_wgmma_bf16");
  if (sass)
    EXPECT_NE(sass->find("HGMMA.64x256x16.F32.BF16"), std::string::npos) << sass->substr(0, 3000);
  expect_error([] { gemm_wgmma(128, 256, 64, Float(32)); }, {"float16 or bfloat16", "float32"});
}

// With 3 or more stages the fills stay one more step behind, so each K step's wgmma group can
// stay in flight across the next barrier: wait(1) in the loop, wait(0) after it.
TEST(GemmWgmma, DeepPipelinesLeaveOneGroupInFlight) {
  ScheduledProgram p = gemm_wgmma(128, 64, 256, small_tiles(4));
  std::string ir = to_string(lower(p.schedule, p.args));
  std::regex loop(R"(@cp_async_wait\(1\)\n\s*@fence_proxy_async\(\)\n\s*@syncthreads\(\))");
  EXPECT_TRUE(std::regex_search(ir, loop)) << ir;
  std::regex tail(R"(@wgmma_commit\(\)\n\s*@wgmma_wait\(1\)\n\s*\}\n\s*@wgmma_wait\(0\))");
  EXPECT_TRUE(std::regex_search(ir, tail)) << ir;
  // Two of the four stages are filled ahead: the prologue commits two groups.
  EXPECT_EQ(ir.find("attr [] \"pipeline_async_reads\""), std::string::npos) << ir;
}

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
  // A: 128 x 64 in rows of 64 swizzled halves: atoms of 8 rows 512 halves apart, LBO unused;
  // the k slices 16 halves (2 units) apart inside the row. B: 64 x 256, MN-major: blocks of 64
  // columns 4096 halves apart (LBO), atoms of 8 k 512 apart (SBO), transposed.
  EXPECT_NE(ir.find("address_of(A.shared[k.outer * 8192 + threadIdx.y * 4096 + 16]), 8, 512, "
                    "address_of(B.shared[k.outer * 16384 + 1024]), 4096, 512, 1, 128)"),
            std::string::npos)
      << ir;
  // Copies: a unit's place is its column unit ^ its row % 8.
  EXPECT_NE(ir.find("bitwise_xor(floormod(threadIdx.x, 8), floormod(floordiv(threadIdx.x, 8), 8)) * 8]"),
            std::string::npos)
      << ir;
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

// The tuner's search space: legal tilings only, each of which lowers and compiles.
TEST(GemmWgmma, TunerCandidatesAreLegal) {
  std::vector<GemmWgmmaTiles> all = gemm_wgmma_candidates(4096, 4096, 4096);
  EXPECT_EQ(all.size(), 16u); // 4 blocks x 2 stage counts x 2 rasterizations
  EXPECT_EQ(to_string(all.front()),
            "wgmma bm=128 bn=256 bk=64 wg=2x1 n=256 stages=4 raster=0 swizzle=128");
  // 256 x 128 blocks do not divide M = 128; the 3 others do.
  EXPECT_EQ(gemm_wgmma_candidates(128, 256, 128).size(), 12u);
  for (const GemmWgmmaTiles &t : gemm_wgmma_candidates(256, 256, 128)) {
    SCOPED_TRACE(to_string(t));
    ScheduledProgram p = gemm_wgmma(256, 256, 128, t);
    EXPECT_FALSE(codegen_cuda(lower(p.schedule, p.args)).empty());
  }
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
