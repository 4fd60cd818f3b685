// gemm_wgmma: the Hopper warpgroup GEMM. Its lowered IR (wgmma_mma on interleaved shared tiles
// with constant accumulator tiles, the fence / commit / wait around each run of them, the proxy
// fence before each barrier), its CUDA compiled by NVRTC for sm_90a with HGMMA in the SASS and no
// local memory, the architecture selection, the CPU executor against float64, and its errors.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/lower/LaunchLimits.h"
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Check.h"
#include "runtime/Nvrtc.h"
#include "schedules/Epilogues.h"
#include "schedules/Gemm.h"
#include "schedules/GemmWgmma.h"
#include "schedules/WgmmaIntrinsics.h"
#include "compiler/passes/SplitWarpRoles.h"

#include "ExactGemm.h"
#include "SassUtil.h"

#include <gtest/gtest.h>

#include <array>

#include <functional>
#include <regex>

using namespace tessel;
using tessel::test::count_of;
using tessel::test::expect_error;

namespace {

std::string mismatch(const ScheduledProgram &p, int64_t M, int64_t N, int64_t K) {
  return tessel::test::exact_gemm_mismatch(lower(p.schedule, p.args), M, N, K);
}

// Lowers a 128 x 128 x K GEMM whose shared copy of A `schedule` sets up, expecting a
// tessel::Error with every one of `parts`.
void expect_bulk_copy_error(
    int64_t K, const std::function<void(Schedule &, const GemmTensors &, const Tensor &)> &schedule,
    std::initializer_list<const char *> parts) {
  expect_error(
      [&] {
        GemmTensors g = gemm_definition(128, 128, K, Float(16));
        Schedule s = create_schedule({g.C});
        Tensor AS = s.cache_read(g.A, "shared", {g.C});
        schedule(s, g, AS);
        lower(s, {g.A, g.B, g.C});
      },
      parts);
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
  EXPECT_FALSE(tessel::test::compile_for_sm90(m, src, "gemm_wgmma_sw64.cu").cubin.empty());
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
  CompiledKernel k = tessel::test::compile_for_sm90(m, src, "gemm_wgmma_bf16.cu");
  std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "gemm_wgmma_bf16");
  if (sass) {
    EXPECT_NE(sass->find("HGMMA.64x256x16.F32.BF16"), std::string::npos) << sass->substr(0, 3000);
  }
  expect_error([] { gemm_wgmma(128, 256, 64, Float(32)); }, {"float16 or bfloat16", "float32"});
}

// C in float16 or bfloat16: the float32 sum stays in the accumulators and is rounded once as it
// is stored (one kernel); with fewer rows than a block (A read in place, its boxes clipped to
// its rows), the block's M rows are stored;
// with split-K the parts stay float32 and the second kernel rounds their sum. Checked against
// float64 on the executor; the one-kernel CUDA compiles for sm_90a.
TEST(GemmWgmma, NarrowOutput) {
  for (DataType in : {Float(16), BFloat(16)})
    // M, N, K, split-K parts, kernels (the GEMM; the parts' sum).
    for (auto [M, N, K, split, kernels] :
         {std::array<int64_t, 5>{128, 256, 128, 1, 1}, {40, 128, 128, 1, 1},
          {64, 128, 1024, 2, 2}}) {
      SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                   " split " + std::to_string(split) + " " + in.str());
      GemmWgmmaTiles t = gemm_wgmma_tiles(M, N, K);
      t.split_k = int(split);
      ScheduledProgram p = gemm_wgmma(M, N, K, t, in, in);
      EXPECT_EQ(p.args.back().dtype(), in);
      LoweredModule m = lower(p.schedule, p.args);
      EXPECT_EQ(m.funcs.size(), size_t(kernels));
      CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs);
      EXPECT_TRUE(r.compare.ok) << r.str();
      if (m.funcs.size() == 1) {
        EXPECT_FALSE(
            tessel::test::compile_for_sm90(m, codegen_cuda(m), "gemm_wgmma_c16.cu").cubin.empty());
      }
    }
  expect_error([] { gemm_wgmma(128, 256, 64, {}, Float(16), Int(32)); },
               {"gemm_wgmma", "C must be float32, float16 or bfloat16, got int32"});
  // The registry's knob: C16=1 stores C in A's type; other values are refused.
  const ScheduleEntry &entry = find_schedule("gemm_wgmma");
  ScheduledProgram bf = entry.build(resolve_shape(entry, {{"M", 128}, {"N", 256}, {"K", 64},
                                                          {"C16", 1}}),
                                    BFloat(16));
  EXPECT_EQ(bf.args.back().dtype(), BFloat(16));
  expect_error([&] { entry.build(resolve_shape(entry, {{"C16", 2}}), Float(16)); },
               {"C16 of schedule 'gemm_wgmma' must be one of 0, 1, got 2"});
}

// GEMM + bias + GELU in one kernel: the epilogue runs on the accumulators in registers
// (wgmma_reg / wgmma_reg_set, constant indices once unrolled), then the rounding store. Checked
// against the float64 reference (erf in double), in float16 and, with bias + ReLU, bfloat16.
TEST(GemmWgmma, FusedBiasGelu) {
  ScheduledProgram p = gemm_wgmma_fused(128, 256, 128, GemmWgmmaTiles{.stages = 2}, Float(16),
                                        Float(16), bias_gelu_epilogue(Float(16)));
  ASSERT_EQ(p.args.size(), 4u);
  EXPECT_EQ(p.args[2].name(), "bias");
  CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs);
  EXPECT_TRUE(r.compare.ok) << r.str();
  ScheduledProgram bf = gemm_wgmma_fused(128, 256, 64, {.block_m = 64, .block_n = 128,
                                                        .block_k = 64, .warpgroups_m = 1,
                                                        .stages = 2, .tma = true},
                                         BFloat(16), BFloat(16), bias_relu_epilogue(BFloat(16)));
  CheckResult rb = check_on_cpu(bf.schedule, bf.args, bf.num_inputs);
  EXPECT_TRUE(rb.compare.ok) << rb.str();

  LoweredModule m = lower(p.schedule, p.args);
  std::string ir = to_string(m);
  EXPECT_NE(ir.find("@wgmma_reg_set(C_acc, 0, 256, 0, "), std::string::npos) << ir;
  EXPECT_NE(ir.find("erf("), std::string::npos) << ir;
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("erff("), std::string::npos);
  CompiledKernel k = tessel::test::compile_for_sm90(m, src, "gemm_bias_gelu.cu");
  ASSERT_FALSE(k.cubin.empty());
  EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
  if (std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "gemm_bias_gelu")) {
    EXPECT_EQ(sass->find("LDL"), std::string::npos);
    EXPECT_EQ(sass->find("STL"), std::string::npos);
    EXPECT_NE(sass->find("HGMMA.64x256x16.F32"), std::string::npos);
  }

  WgmmaEpilogue two = bias_relu_epilogue(Float(16));
  two.column_inputs.push_back(Float(16));
  expect_error([&] { gemm_wgmma_fused(128, 256, 64, {}, Float(16), Float(16), two); },
               {"gemm_wgmma_fused", "must take one column vector"});
  expect_error([] { bias_relu_epilogue(Int(32)); }, {"float16, bfloat16 or float32", "int32"});
  WgmmaEpilogue wide{"to_double", {}, [](Expr acc, const std::vector<Expr> &) {
                       return acc.astype(Float(64));
                     }};
  expect_error([&] { wgmma_store_matrix(64, "global", Float(16), wide); },
               {"epilogue 'to_double' must give float32"});
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
  ScheduledProgram p = gemm_wgmma(256, 256, 256, GemmWgmmaTiles{}); // cp.async fills
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
// Grids of a wave or less whose blocks walk 32 K steps or more get a ring of 8 stages (as
// many as fit up to 8): memory-bound, they need more of the operands in flight. Grids of 16 K
// steps, split-K parts and large grids keep 4.
TEST(GemmWgmma, SmallGridsOfLongKGetADeepRing) {
  GemmWgmmaTiles m128 = gemm_wgmma_tiles(128, 4096, 4096);
  EXPECT_EQ(m128.stages, 8) << to_string(m128);
  EXPECT_EQ(gemm_wgmma_tiles(256, 4096, 4096).stages, 8);
  EXPECT_EQ(gemm_wgmma_tiles(1024, 1024, 1024).stages, 4);
  GemmWgmmaTiles parts = gemm_wgmma_tiles(64, 4096, 4096);
  EXPECT_GT(parts.split_k, 1);
  EXPECT_EQ(parts.stages, 4);
  EXPECT_EQ(gemm_wgmma_tiles(4096, 4096, 4096).stages, 4);
  // 8 stages of 128 x 64 and 64 x 64 tiles fit; exact on the executor with the deep ring.
  EXPECT_LE(gemm_wgmma_tiles(256, 4096, 4096).shared_bytes(), max_shared_bytes_per_block("sm_90"));
  GemmWgmmaTiles small = m128;
  EXPECT_EQ(mismatch(gemm_wgmma(128, 128, 4096, small), 128, 128, 4096), "");
}

TEST(GemmWgmma, TunerCandidatesAreLegal) {
  std::vector<GemmWgmmaTiles> all = gemm_wgmma_candidates(4096, 4096, 4096);
  // 4 blocks x 2 stage counts x 2 rasterizations x TMA with warp roles (also persistent), TMA
  // or cp.async; and at 4 stages rasterized, TMA with warp roles in clusters of 2 along M and
  // N, persistent and not (16)
  EXPECT_EQ(all.size(), 80u);
  EXPECT_EQ(to_string(all.front()),
            "wgmma bm=128 bn=256 bk=64 wg=2x1 n=256 stages=4 raster=0 swizzle=128 tma ws");
  // 256 x 128 blocks do not divide M = 128; the 3 others do. Clusters need an even number of
  // blocks along their axis: 128 x 128 blocks along N, 64 x 256 along M (2 each).
  EXPECT_EQ(gemm_wgmma_candidates(128, 256, 128).size(), 52u);
  for (const GemmWgmmaTiles &t : gemm_wgmma_candidates(256, 256, 128)) {
    SCOPED_TRACE(to_string(t));
    ScheduledProgram p = gemm_wgmma(256, 256, 128, t);
    EXPECT_FALSE(codegen_cuda(lower(p.schedule, p.args)).empty());
  }
}

TEST(GemmWgmma, TilesAreChecked) {
  expect_error([] { gemm_wgmma(256, 256, 64, {.block_m = 96}); },
               {"block_m=96", "multiple of 64 x warpgroups_m = 128"});
  expect_error([] { gemm_wgmma(256, 256, 64, {.wgmma_n = 100}); }, {"n=100", "wgmma tiles"});
  expect_error([] { gemm_wgmma(256, 256, 64, {.stages = 5}); },
               {"5 stages", "245760 bytes", "227 KiB"});
  expect_error([] { wgmma_gemm(264); }, {"n=264", "multiple of 8 from 8 to 256"});
  // The fallback tiles for shapes the defaults do not divide: the least waste first (64 x 32
  // divides 192 x 96), then the largest; a ragged shape keeps the defaults where they waste
  // under 10% (4095^2: one row and column recomputed).
  GemmWgmmaTiles t = gemm_wgmma_tiles(192, 96, 32);
  EXPECT_EQ(t.block_m, 64);
  EXPECT_EQ(t.block_n, 32);
  EXPECT_EQ(t.block_k, 32);
  GemmWgmmaTiles ragged = gemm_wgmma_tiles(4095, 4088, 4096);
  EXPECT_EQ(ragged.block_m, 128);
  EXPECT_EQ(ragged.block_n, 256);
}

// The default tiles fill the shared stages with TMA: one thread waits for an empty slot,
// announces its bytes and issues one box of A and four of B (64-column blocks of the 128-byte
// swizzle); every thread waits for the slot to be full and releases it after its wgmma group
// landed. No block barrier is left in the K loop.
TEST(GemmWgmma, TmaFillsOnAnMbarrierRing) {
  GemmWgmmaTiles t = gemm_wgmma_tiles(4096, 4096, 4096);
  EXPECT_TRUE(t.tma);
  EXPECT_TRUE(t.roles());
  EXPECT_EQ(t.raster_group, 8);
  EXPECT_EQ(t.block_n, 256);
  // Under a wave of 128 x 256 blocks the default takes the tiles that keep most SMs busy:
  // 128 x 64 at 1024^3 (128 blocks), 64 x 64 for 128 tokens through 4096 x 4096 (128 blocks).
  EXPECT_EQ(gemm_wgmma_tiles(1024, 1024, 1024).block_n, 64);
  EXPECT_EQ(gemm_wgmma_tiles(1024, 1024, 1024).block_m, 128);
  EXPECT_EQ(gemm_wgmma_tiles(128, 4096, 4096).block_m, 64);
  EXPECT_EQ(gemm_wgmma_tiles(128, 4096, 4096).block_n, 64);
  EXPECT_EQ(gemm_wgmma_tiles(2048, 2048, 2048).block_n, 256); // 64 blocks either way
  // The ring without warp roles (nor the persistent tile loop, which needs them): the leader
  // thread of the consumers issues the copies.
  t.warp_specialized = false;
  t.persistent = false;
  ScheduledProgram p = gemm_wgmma(256, 512, 512, t);
  LoweredModule m = lower(p.schedule, p.args);
  const LoweredFunc &f = m.funcs[0];
  EXPECT_EQ(f.launch.block[0], 128); // env_threads: nothing else is split over threadIdx.x
  ASSERT_EQ(f.tensor_maps.size(), 2u);
  EXPECT_EQ(f.tensor_maps[0].var.name(), "A_tmap");
  EXPECT_EQ(f.tensor_maps[0].dims, (std::vector<int64_t>{512, 256}));
  EXPECT_EQ(f.tensor_maps[0].box, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(f.tensor_maps[1].box, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(f.tensor_maps[1].strides, (std::vector<int64_t>{1, 512}));
  EXPECT_EQ(f.tensor_maps[1].swizzle, 128);
  std::string ir = to_string(m);
  EXPECT_EQ(ir.find("cp_async"), std::string::npos) << ir;
  // Prologue: 2 of the 4 slots filled ahead (one wgmma group stays in flight).
  EXPECT_EQ(count_of(ir, "@mbarrier_init("), 8) << ir;
  EXPECT_EQ(count_of(ir, "@tma_load(A_tmap, "), 3) << ir;
  EXPECT_EQ(count_of(ir, "@tma_load(B_tmap, "), 12) << ir;
  std::regex loop(
      R"(for \(k.outer: int32, 0, 8\) \{\n\s*if \(threadIdx.x == 0 && threadIdx.y == 0 && k.outer < 6\) \{\n)"
      R"(\s*@mbarrier_wait\(@address_of\(k.outer_empty\[floormod\(k.outer \+ 2, 4\)\]\), floormod\(floordiv\(k.outer \+ 2, 4\) \+ 1, 2\)\)\n)"
      R"(\s*@mbarrier_arrive_expect_tx\(@address_of\(k.outer_full\[floormod\(k.outer \+ 2, 4\)\]\), 49152\))");
  EXPECT_TRUE(std::regex_search(ir, loop)) << ir;
  std::regex tail(R"(@wgmma_wait\(1\)\n\s*if \(1 <= k.outer\) \{\n\s*@mbarrier_arrive\(@address_of\(k.outer_empty\[floormod\(k.outer \+ 3, 4\)\]\)\))");
  EXPECT_TRUE(std::regex_search(ir, tail)) << ir;
  std::string loop_body = ir.substr(ir.find("for (k.outer"));
  EXPECT_EQ(loop_body.find("@syncthreads()"), std::string::npos) << ir;

  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("const __grid_constant__ tessel_tensor_map A_tmap, const __grid_constant__ "
                     "tessel_tensor_map B_tmap"),
            std::string::npos)
      << src.substr(0, 4000);
  EXPECT_NE(src.find("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"),
            std::string::npos);
  CompiledKernel k = tessel::test::compile_for_sm90(m, src, "gemm_wgmma_tma.cu");
  ASSERT_FALSE(k.cubin.empty());
  EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
  expect_error([&] { target_arch(m, "sm_80"); }, {"uses wgmma", "the target is sm_80"});
  std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "gemm_wgmma_tma");
  if (!sass)
    GTEST_SKIP() << "NVRTC compiled for sm_90a, but there is no cuobjdump to check the SASS";
  for (const char *op : {"UTMALDG.2D", "SYNCS.PHASECHK", "SYNCS.ARRIVE", "HGMMA.64x256x16.F32"})
    EXPECT_NE(sass->find(op), std::string::npos) << op << ":\n" << sass->substr(0, 4000);
  for (const char *absent : {"LDGSTS", "LDL", "STL"})
    EXPECT_EQ(sass->find(absent), std::string::npos) << absent << ":\n" << sass->substr(0, 4000);
}

// The CPU executor runs the TMA ring: boxes land at the wait of their slot's full barrier, the
// stages are released through the empty barriers, every pipeline depth.
TEST(GemmWgmma, TmaRingOnTheCpuExecutor) {
  for (int stages : {2, 3, 4}) {
    SCOPED_TRACE("stages " + std::to_string(stages));
    GemmWgmmaTiles t{.block_m = 128, .block_n = 64, .block_k = 64, .warpgroups_m = 2,
                     .stages = stages, .tma = true};
    EXPECT_EQ(mismatch(gemm_wgmma(256, 128, 320, t), 256, 128, 320), "");
  }
  // The default tiles (128 x 128 blocks for this small grid), rasterized.
  EXPECT_EQ(mismatch(gemm_wgmma(128, 256, 256), 128, 256, 256), "");
}

TEST(GemmWgmma, TmaErrors) {
  expect_error([] { gemm_wgmma(256, 256, 64, {.swizzle = 0, .tma = true}); },
               {"TMA bulk copies", "swizzle 0"});
  // A bulk-copied stage whose axes were split.
  expect_bulk_copy_error(64, [](Schedule &s, const GemmTensors &g, const Tensor &AS) {
    auto [i, j] = s[g.C].axes<2>();
    s[AS].compute_at(s[g.C], i);
    auto [r, c] = s[AS].axes<2>();
    s[AS].split(c, 8);
    s[AS].bulk_copy().pipeline(2);
  }, {"'A.shared' is filled by TMA (bulk_copy)", "no split"});
  // Warp roles over a ring that is not filled by TMA: the producer only issues bulk copies.
  expect_bulk_copy_error(128, [](Schedule &s, const GemmTensors &g, const Tensor &AS) {
    auto [ko, ki] = s[g.C].split(s[g.C].reduce_axis()[0], 32);
    s[AS].compute_at(s[g.C], ko);
    s[AS].pipeline(2);
    s[g.C].warp_specialize();
  }, {"warp_specialize", "'A.shared'", "not a TMA bulk copy", "call bulk_copy()"});
  // Not pipelined.
  expect_bulk_copy_error(64, [](Schedule &s, const GemmTensors &, const Tensor &AS) {
    s[AS].bulk_copy();
  }, {"'A.shared' is filled by TMA", "pipelined over 2 or more stages"});
  // Padded rows (storage_align), and one stage by TMA beside one by copies in the same loop.
  expect_bulk_copy_error(64, [](Schedule &s, const GemmTensors &g, const Tensor &AS) {
    auto [i, j] = s[g.C].axes<2>();
    s[AS].compute_at(s[g.C], i);
    s[AS].storage_align(s[AS].axes<2>()[0], 64, 8);
    s[AS].bulk_copy().pipeline(2);
  }, {"'A.shared' is filled by TMA", "storage_align"});
  expect_bulk_copy_error(256, [](Schedule &s, const GemmTensors &g, const Tensor &AS) {
    Tensor BS = s.cache_read(g.B, "shared", {g.C});
    auto [i, j] = s[g.C].axes<2>();
    auto [io, ii] = s[g.C].split(i, 64);
    IterVar k = s[g.C].reduce_axis()[0];
    auto [ko, ki] = s[g.C].split(k, 64);
    s[g.C].reorder({io, ko, ii, j, ki});
    s[AS].compute_at(s[g.C], ko);
    s[BS].compute_at(s[g.C], ko);
    s[AS].bulk_copy().pipeline(2);
    s[BS].pipeline(2);
  }, {"pipelined together", "filled by TMA (bulk_copy)", "both bulk copies or neither"});
  expect_error(
      [] {
        GemmTensors g = gemm_definition(128, 128, 64, Float(16));
        Schedule s = create_schedule({g.C});
        s[g.C].env_threads({thread_axis("threadIdx.x")});
      },
      {"env_threads", "constant extent", "thread_axis(Range(0, n)"});
}

// The default Hopper GEMM has warp roles (Stage::warp_specialize): a producer warpgroup (one
// more on threadIdx.y) whose first thread waits for empty slots and issues every K step's TMA
// copies, and consumer warpgroups that only wait for full slots, compute and release them;
// setmaxnreg moves registers from the producer to the consumers. The executor runs the roles'
// warps independently (no lock step), so the ring is exact at every depth, with the K loop
// shorter or longer than the ring.
TEST(GemmWgmma, WarpRolesByDefault) {
  GemmWgmmaTiles t = gemm_wgmma_tiles(4096, 4096, 4096);
  ASSERT_TRUE(t.roles());
  t.persistent = false; // the tile loop around the roles: tests/unit/persistent_test.cpp
  ScheduledProgram p = gemm_wgmma(256, 512, 512, t);
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(m.funcs.size(), 1u);
  const LoweredFunc &f = m.funcs[0];
  EXPECT_EQ(f.launch.block[1], 3); // 2 consumer warpgroups and the producer
  std::string ir = to_string(m);
  // The barriers are set up by all, then the block splits; the fills are the producer's only.
  std::regex roles(
      R"(@syncthreads\(\)\n\s*attr \[0\] "warp_specialize" = 128;\n\s*if \(threadIdx.y == 2\) \{\n)"
      R"(\s*@setmaxnreg\(40, 0\)\n\s*if \(threadIdx.x == 0\) \{\n\s*for \(k.outer: int32, 0, 8\) \{\n)"
      R"(\s*@mbarrier_wait\(@address_of\(k.outer_empty\[floormod\(k.outer, 4\)\]\), floormod\(floordiv\(k.outer, 4\) \+ 1, 2\)\)\n)"
      R"(\s*@mbarrier_arrive_expect_tx\(@address_of\(k.outer_full\[floormod\(k.outer, 4\)\]\), 49152\))");
  EXPECT_TRUE(std::regex_search(ir, roles)) << ir;
  EXPECT_EQ(count_of(ir, "@tma_load(A_tmap, "), 1) << ir;
  std::string consumers = ir.substr(ir.find("} else {"));
  EXPECT_NE(consumers.find("@setmaxnreg(232, 1)"), std::string::npos) << ir;
  EXPECT_EQ(consumers.find("tma_load"), std::string::npos) << ir;
  EXPECT_EQ(consumers.find("syncthreads"), std::string::npos) << ir;
  bool applied = false;
  for (const Remark &r : m.remarks)
    applied |= r.kind == Remark::Kind::Applied && r.step == "split_warp_roles";
  EXPECT_TRUE(applied);

  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("__launch_bounds__(384)"), std::string::npos);
  EXPECT_NE(src.find("setmaxnreg.dec.sync.aligned.u32 40;"), std::string::npos);
  EXPECT_NE(src.find("setmaxnreg.inc.sync.aligned.u32 232;"), std::string::npos);
  CompiledKernel k = tessel::test::compile_for_sm90(m, src, "gemm_wgmma_roles.cu");
  ASSERT_FALSE(k.cubin.empty()) << k.log;
  EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
  if (std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "gemm_wgmma_roles")) {
    for (const char *op : {"USETMAXREG.DEALLOC", "USETMAXREG.TRY_ALLOC", "UTMALDG.2D",
                           "HGMMA.64x256x16.F32"})
      EXPECT_NE(sass->find(op), std::string::npos) << op << ":\n" << sass->substr(0, 4000);
    for (const char *absent : {"LDL", "STL"})
      EXPECT_EQ(sass->find(absent), std::string::npos) << absent;
  }

  // Exact on the executor: ring depths 2..4 over 5 K steps, 4 stages over 2 steps, one
  // consumer warpgroup (64-row blocks), split-K, and a narrow C.
  for (int stages : {2, 3, 4}) {
    SCOPED_TRACE("stages " + std::to_string(stages));
    GemmWgmmaTiles r{.block_m = 128, .block_n = 64, .block_k = 64, .warpgroups_m = 2,
                     .stages = stages, .tma = true, .warp_specialized = true};
    EXPECT_EQ(mismatch(gemm_wgmma(256, 128, 320, r), 256, 128, 320), "");
  }
  EXPECT_EQ(mismatch(gemm_wgmma(128, 256, 128), 128, 256, 128), "");
  GemmWgmmaTiles one{.block_m = 64, .block_n = 128, .block_k = 64, .warpgroups_m = 1,
                     .stages = 3, .tma = true, .warp_specialized = true};
  EXPECT_EQ(mismatch(gemm_wgmma(64, 128, 256, one), 64, 128, 256), "");
  GemmWgmmaTiles split = one;
  split.split_k = 2;
  EXPECT_EQ(mismatch(gemm_wgmma(64, 128, 512, split), 64, 128, 512), "");
  ScheduledProgram c16 = gemm_wgmma(128, 128, 256, one, Float(16), Float(16));
  CheckResult narrow = check_on_cpu(c16.schedule, c16.args, c16.num_inputs);
  EXPECT_TRUE(narrow.compare.ok) << narrow.str();

  // Warp roles add the producer on threadIdx.y: warpgroups along N are refused.
  expect_error([] { gemm_wgmma(256, 256, 256, {.block_m = 128, .block_n = 256, .warpgroups_m = 1,
                                               .warpgroups_n = 2, .tma = true,
                                               .warp_specialized = true}); },
               {"warp roles", "warpgroups_n = 1"});
  // One K step: nothing to run ahead of, a note, and the kernel keeps its threads.
  ScheduledProgram short_k = gemm_wgmma(128, 256, 64, t);
  LoweredModule once = lower(short_k.schedule, short_k.args);
  EXPECT_EQ(once.funcs.back().launch.block[1], 2);
  bool noted = false;
  for (const Remark &r : once.remarks)
    noted |= r.kind == Remark::Kind::Note && r.step == "split_warp_roles";
  EXPECT_TRUE(noted);
}

// setmaxnreg moves registers within the block's pool (what it got at launch): the consumers'
// raised count must fit it with the producer's 40, or setmaxnreg.inc waits forever (4 consumer
// warpgroups asking for 112 of a 96-register launch hung on the H100).
TEST(GemmWgmma, WarpRoleRegistersFitTheBlocksPool) {
  EXPECT_EQ(warp_role_registers(2), (std::pair<int, int>{40, 232}));
  EXPECT_EQ(warp_role_registers(4), (std::pair<int, int>{40, 104}));
  for (int groups = 1; groups <= 7; ++groups) {
    SCOPED_TRACE(std::to_string(groups) + " consumer warpgroups");
    const int threads = 128 * (groups + 1);
    const int at_launch = std::min(255, 65536 / threads) / 8 * 8;
    auto [producer, consumer] = warp_role_registers(groups);
    EXPECT_EQ(consumer % 8, 0);
    EXPECT_GE(consumer, at_launch); // an increase
    EXPECT_LE(128 * producer + 128 * groups * consumer, at_launch * threads);
  }
  // 256 x 128 blocks of 4 consumer warpgroups: 64 accumulators, within the 104.
  GemmWgmmaTiles t{.block_m = 256, .block_n = 128, .warpgroups_m = 4, .stages = 4, .tma = true,
                   .warp_specialized = true};
  ScheduledProgram p = gemm_wgmma(512, 512, 256, t);
  std::string src = codegen_cuda(lower(p.schedule, p.args));
  EXPECT_NE(src.find("__launch_bounds__(640)"), std::string::npos);
  EXPECT_NE(src.find("setmaxnreg.inc.sync.aligned.u32 104;"), std::string::npos);
}
