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

// `t` reading ragged operands in place by TMA whatever their size (by default only those of
// 2^21 elements and more are; smaller ones through padded copies).
GemmWgmmaTiles reading_in_place(GemmWgmmaTiles t) {
  t.ragged_operands = GemmWgmmaTiles::RaggedOperands::InPlace;
  return t;
}

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

// NVRTC compiles `m`'s CUDA into one sm_90a kernel with no stack frame.
void expect_one_kernel_without_stack(const LoweredModule &m, const std::string &cuda,
                                     const std::string &name) {
  CompiledKernel k = tessel::test::compile_for_sm90(m, cuda, name);
  ASSERT_EQ(k.kernels.size(), 1u) << k.log;
  EXPECT_EQ(k.kernels[0].stack_bytes, 0) << k.log;
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
// is stored (one kernel); with fewer rows than a block, the block's M rows are stored;
// with split-K the parts stay float32 and the second kernel rounds their sum. Checked against
// float64 on the executor; the one-kernel CUDA compiles for sm_90a.
TEST(GemmWgmma, NarrowOutput) {
  for (DataType in : {Float(16), BFloat(16)})
    // M, N, K, split-K parts, kernels (the GEMM; the parts' sum).
    for (auto [M, N, K, split, kernels] :
         {std::array<int64_t, 5>{128, 256, 128, 1, 1}, {40, 128, 128, 1, 2},
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

// M and N that the blocks do not divide: the last block row / column shifts inwards to end at
// the edge (TailStrategy::ShiftInwards), so every block, copy and wgmma stays whole: TMA boxes
// start at min(b * 128, M - 128). Exact on the executor, TMA and cp.async fills.
TEST(GemmWgmma, RaggedShapesShiftTheLastBlockInwards) {
  for (bool tma : {true, false}) {
    SCOPED_TRACE(tma ? "TMA" : "cp.async");
    GemmWgmmaTiles t{.block_m = 128, .block_n = 128, .block_k = 64, .warpgroups_m = 2,
                     .stages = 2, .raster_group = 8, .tma = tma};
    ScheduledProgram p = gemm_wgmma(200, 136, 128, t);
    EXPECT_EQ(mismatch(p, 200, 136, 128), "");
    if (tma) {
      std::string ir = to_string(lower(p.schedule, p.args));
      EXPECT_NE(ir.find("@tma_load(A_tmap, @address_of(A.shared[0]), @address_of(k.outer_full[0]), "
                        "0, min(i.outer.raster * 128, 72))"),
                std::string::npos)
          << ir;
      // The shifted start min(j * 128, 8) is still a multiple of 4: float4 stores.
      EXPECT_NE(codegen_cuda(lower(p.schedule, p.args)).find("*(float4*)(wgmma_quad_out"),
                std::string::npos);
    }
  }
  // Two warpgroups along M in 256-row blocks, N = 8 past a 64-column block.
  EXPECT_EQ(mismatch(gemm_wgmma(300, 72, 64, {.block_m = 256, .block_n = 64, .block_k = 64,
                                              .warpgroups_m = 2, .stages = 2, .tma = true}),
                     300, 72, 64),
            "");
  expect_error([] { gemm_wgmma(128, 128, 64, GemmWgmmaTiles{.block_n = 256}); },
               {"N=128 is smaller than block_n=256"});
}

// K that no K step divides, and rows of A or B that are not whole 16-byte units (K or N not a
// multiple of 8 halves), run on copies padded with zeros: workspaces, written by a kernel that
// runs before the GEMM's (the two copies, independent, share one: its grid the larger of
// theirs, each guarded to its own). C keeps its shape: its last block row shifts inwards;
// where N is not a multiple of 8 its last block column cannot (B's copies would start off a
// 16-byte boundary), so it stays in place, reads B padded to whole blocks and stores only the
// columns inside (wgmma_store's limit), a float at a time where C's rows are odd. Exact on the
// executor, TMA and cp.async.
TEST(GemmWgmma, RaggedKAndUnalignedRowsRunOnPaddedCopies) {
  ScheduledProgram p = gemm_wgmma(100, 99, 100);
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(m.funcs.size(), 2u);
  EXPECT_EQ(m.num_workspaces, 2u);
  EXPECT_EQ(m.funcs[0].name, "default_function_A_pad");
  EXPECT_EQ(m.funcs[0].launch.grid[0], 8); // B_pad's 8 blocks; A_pad's 7 guarded
  EXPECT_NE(to_string(m.funcs[0]).find("if (blockIdx.x < 7) {"), std::string::npos);
  ASSERT_EQ(m.funcs[1].args.size(), 5u);
  EXPECT_EQ(m.funcs[1].arg_shapes[3], (std::vector<int64_t>{100, 128})); // K to 2 steps of 64
  // B's rows: to a whole block past 99, then to 128-byte lines (64 halves).
  GemmWgmmaTiles chosen = gemm_wgmma_tiles(100, 99, 100);
  int64_t np = (99 / chosen.block_n + 1) * chosen.block_n;
  EXPECT_EQ(m.funcs[1].arg_shapes[4], (std::vector<int64_t>{128, (np + 63) / 64 * 64}));
  // The GEMM's kernel follows the copies' as a programmatic dependent on sm_90: it waits for
  // them (griddepcontrol.wait) before anything else; the first kernel waits for nothing.
  EXPECT_FALSE(m.funcs[0].launch.after_previous);
  EXPECT_TRUE(m.funcs[1].launch.after_previous);
  EXPECT_NE(to_string(m.funcs[1]).find(", after the previous kernel\n"), std::string::npos);
  // Only the GEMM's kernel has tensor maps, of the padded copies.
  EXPECT_TRUE(m.funcs[0].tensor_maps.empty());
  ASSERT_EQ(m.funcs[1].tensor_maps.size(), 2u);
  EXPECT_EQ(m.funcs[1].tensor_maps[0].arg, 3);
  EXPECT_EQ(m.funcs[1].tensor_maps[0].strides.at(1), 128);
  EXPECT_EQ(mismatch(p, 100, 99, 100), "");
  // Odd rows of C (wgmma_store lanes 8), up to the limit: each warp's rows through a tile of
  // shared memory lent by the largest operand tile (B_pad_shared, after the barriers), stored
  // a row at a time.
  std::string cuda = codegen_cuda(m);
  EXPECT_EQ(cuda.find("*(float2*)(wgmma_out"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("const int wgmma_limit = 99 - j_outer_raster * " +
                      std::to_string(chosen.block_n) + ";"),
            std::string::npos)
      << cuda;
  EXPECT_TRUE(std::regex_search(
      cuda, std::regex(R"(float\* tile = \(float\*\)\(tessel_dynamic_smem \+ \d+\) \+ warp \* 640;)")))
      << cuda;
  EXPECT_NE(cuda.find("if (c < lim) rows[r * 99 + c] = tile[r * 40 + lane];"), std::string::npos);
  EXPECT_EQ(cuda.find("*(float2*)(row + c)"), std::string::npos);
  const size_t wait = cuda.find("griddepcontrol.wait");
  EXPECT_NE(wait, std::string::npos);
  // One consumer warpgroup and the producer's.
  EXPECT_GT(wait, cuda.find("void __launch_bounds__(256) default_function("));
  EXPECT_EQ(cuda.find("griddepcontrol.wait", wait + 1), std::string::npos);
  // The two kernels compile for Hopper; the stores' register choices stay constant (no local
  // memory).
  CompiledKernel k = tessel::test::compile_for_sm90(m, cuda, "ragged.cu");
  ASSERT_EQ(k.kernels.size(), 2u) << k.log;
  for (const KernelStats &ks : k.kernels)
    EXPECT_EQ(ks.stack_bytes, 0) << ks.name << "\n" << k.log;
  // Tiles whose operands hold less than the warps' 2560 bytes each (4 KiB of B, 8 KiB of A
  // against 10 KiB): the quads exchange registers so that each store writes whole sectors.
  ScheduledProgram narrow = gemm_wgmma(
      100, 99, 100,
      {.block_m = 64, .block_n = 32, .block_k = 32, .warpgroups_m = 1, .stages = 2, .swizzle = 64});
  LoweredModule small = lower(narrow.schedule, narrow.args);
  std::string sectors = codegen_cuda(small);
  EXPECT_NE(sectors.find("*(float2*)(row + c) = make_float2(v[0], v[1]);"), std::string::npos)
      << sectors;
  EXPECT_EQ(sectors.find(") + warp * 640;"), std::string::npos);
  CompiledKernel ks = tessel::test::compile_for_sm90(small, sectors, "ragged_sectors.cu");
  for (const KernelStats &s : ks.kernels)
    EXPECT_EQ(s.stack_bytes, 0) << s.name << "\n" << ks.log;
  chosen.tma = false; // cp.async: the block column in place starts on a 16-byte boundary
  chosen.raster_group = 0;
  EXPECT_EQ(mismatch(gemm_wgmma(100, 99, 100, chosen), 100, 99, 100), "");
  // K alone (aligned rows, 96 = 1.5 steps of 64): only K is padded, in both; cp.async fills.
  GemmWgmmaTiles t{.block_m = 64, .block_n = 64, .warpgroups_m = 1, .stages = 2};
  EXPECT_EQ(mismatch(gemm_wgmma(64, 72, 96, t), 64, 72, 96), "");
  // N alone: B's rows padded to 16-byte units, A untouched.
  ScheduledProgram n_only = gemm_wgmma(64, 66, 64, t);
  LoweredModule mn = lower(n_only.schedule, n_only.args);
  ASSERT_EQ(mn.funcs.size(), 2u);
  EXPECT_EQ(mn.funcs[0].name, "default_function_B_pad");
  EXPECT_EQ(mismatch(n_only, 64, 66, 64), "");
  // An aligned shape is one kernel, as before.
  ScheduledProgram aligned = gemm_wgmma(64, 64, 64, t);
  EXPECT_EQ(lower(aligned.schedule, aligned.args).funcs.size(), 1u);
}

// With TMA fills, operands whose rows are whole 16-byte units are read in place wherever they
// are short of the blocks: the padded copy computed inline into the shared tile is a read zero
// outside the tensor, which lower_bulk_copy issues as boxes of the operand itself, TMA filling
// what lies past K (and past M) with zeros. No copy kernel, no workspace; exact on the
// executor; NVRTC for sm_90a. cp.async fills, and rows that are not whole 16-byte units (K
// odd), still read padded copies.
TEST(GemmWgmma, RaggedKReadsTheOperandsInPlaceThroughTma) {
  // 136 = 2 K steps of 64 and 8.
  ScheduledProgram p = gemm_wgmma(200, 192, 136, reading_in_place(gemm_wgmma_tiles(200, 192, 136)));
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(m.funcs.size(), 1u);
  EXPECT_EQ(m.num_workspaces, 0u);
  const LoweredFunc &f = m.funcs[0];
  ASSERT_EQ(f.tensor_maps.size(), 2u);
  EXPECT_EQ(f.tensor_maps[0].arg, 0);
  EXPECT_EQ(f.tensor_maps[0].dims, (std::vector<int64_t>{136, 200}));
  EXPECT_EQ(f.tensor_maps[1].arg, 1);
  EXPECT_EQ(f.tensor_maps[1].dims, (std::vector<int64_t>{192, 136}));
  std::string cuda = codegen_cuda(m);
  EXPECT_EQ(cuda.find("_pad("), std::string::npos) << cuda;
  EXPECT_EQ(mismatch(p, 200, 192, 136), "");
  expect_one_kernel_without_stack(m, cuda, "ragged_k_in_place.cu");

  // A long ragged K (1000 = 15 steps and 40), 16 rows: one block of 64 rows whose rows past M
  // are zeros too; whole K and split into 4 parts (the last part past K but for 40 of its 256).
  GemmWgmmaTiles small{.block_m = 64, .block_n = 128, .block_k = 64, .warpgroups_m = 1,
                       .stages = 4, .tma = true, .warp_specialized = true,
                       .ragged_operands = GemmWgmmaTiles::RaggedOperands::InPlace};
  for (int parts : {1, 4}) {
    SCOPED_TRACE("split_k " + std::to_string(parts));
    small.split_k = parts;
    ScheduledProgram q = gemm_wgmma(16, 128, 1000, small);
    LoweredModule mq = lower(q.schedule, q.args);
    for (const LoweredFunc &g : mq.funcs)
      EXPECT_EQ(g.name.find("_pad"), std::string::npos) << g.name;
    EXPECT_EQ(mismatch(q, 16, 128, 1000), "");
  }
  // Ragged K with two warpgroups a block, a float16 C, and the fused bias + GELU.
  EXPECT_EQ(mismatch(gemm_wgmma(256, 128, 104,
                                reading_in_place({.block_m = 128, .block_n = 128, .block_k = 64,
                                                  .warpgroups_m = 2, .stages = 2, .tma = true})),
                     256, 128, 104),
            "");
  ScheduledProgram c16 = gemm_wgmma(128, 256, 136, reading_in_place(gemm_wgmma_tiles(128, 256, 136)),
                                    Float(16), Float(16));
  EXPECT_EQ(lower(c16.schedule, c16.args).funcs.size(), 1u);
  CheckResult r16 = check_on_cpu(c16.schedule, c16.args, c16.num_inputs);
  EXPECT_TRUE(r16.compare.ok) << r16.str();
  ScheduledProgram gelu = gemm_wgmma_fused(128, 128, 200,
                                           reading_in_place(gemm_wgmma_tiles(128, 128, 200)),
                                           Float(16), Float(16), bias_gelu_epilogue(Float(16)));
  EXPECT_EQ(lower(gelu.schedule, gelu.args).funcs.size(), 1u);
  CheckResult rg = check_on_cpu(gelu.schedule, gelu.args, gelu.num_inputs, 7);
  EXPECT_TRUE(rg.compare.ok) << rg.str();

  // cp.async fills: the padded copies, as before.
  GemmWgmmaTiles copies = gemm_wgmma_tiles(200, 192, 136);
  copies.tma = copies.warp_specialized = copies.persistent = false;
  copies.raster_group = 0;
  ScheduledProgram c = gemm_wgmma(200, 192, 136, copies);
  LoweredModule mc = lower(c.schedule, c.args);
  ASSERT_EQ(mc.funcs.size(), 2u);
  EXPECT_EQ(mc.funcs[0].name, "default_function_A_pad");
  EXPECT_EQ(mc.num_workspaces, 2u);
  EXPECT_EQ(mismatch(c, 200, 192, 136), "");
  // K = 100: A's rows of 200 bytes are no tensor map's; A is copied, B (rows of 384 bytes)
  // still read in place.
  ScheduledProgram odd = gemm_wgmma(200, 192, 100, reading_in_place(gemm_wgmma_tiles(200, 192, 100)));
  LoweredModule mo = lower(odd.schedule, odd.args);
  ASSERT_EQ(mo.funcs.size(), 2u);
  EXPECT_EQ(mo.funcs[0].name, "default_function_A_pad");
  EXPECT_EQ(mo.num_workspaces, 1u);
  ASSERT_EQ(mo.funcs[1].tensor_maps.size(), 2u);
  EXPECT_EQ(mo.funcs[1].tensor_maps[1].arg, 1); // B
  EXPECT_EQ(mismatch(odd, 200, 192, 100), "");
  // By default (RaggedOperands::BySize) only operands of 2^21 elements and more are read in
  // place: a small ragged GEMM copies them (a kernel of its own, as cp.async's), a large one
  // (2048 x 2000 and 2000 x 2048) reads them in place; knob PAD=1 copies, PAD=2 reads in place.
  ScheduledProgram by_size = gemm_wgmma(200, 192, 136);
  LoweredModule ms = lower(by_size.schedule, by_size.args);
  ASSERT_EQ(ms.funcs.size(), 2u);
  EXPECT_EQ(ms.funcs[0].name, "default_function_A_pad");
  ScheduledProgram large = gemm_wgmma(2048, 2048, 2000);
  EXPECT_EQ(lower(large.schedule, large.args).funcs.size(), 1u);
  const ScheduleEntry &e = find_schedule("gemm_wgmma");
  for (auto [pad, kernels] : {std::pair<int64_t, size_t>{1, 2}, {2, 1}}) {
    ScheduledProgram q =
        e.build(resolve_shape(e, {{"M", 2048}, {"N", 2048}, {"K", 2000}, {"PAD", pad}}), Float(16));
    EXPECT_EQ(lower(q.schedule, q.args).funcs.size(), kernels) << "PAD=" << pad;
  }
}

// Fewer rows than a block (a batch of 16 tokens through a layer): the kernel computes a whole
// block of rows from A, whose rows past M its TMA boxes read as zeros (or, through cp.async,
// from A padded with zero rows), and stores the M rows inside (wgmma_store's row limit; a
// warpgroup whose rows all lie past M stores none). One kernel with TMA; exact on the
// executor, with and without a fused epilogue, and with blocks of 2 and 4 wgmma tiles.
TEST(GemmWgmma, FewerRowsThanABlock) {
  ScheduledProgram p = gemm_wgmma(40, 128, 64, reading_in_place(gemm_wgmma_tiles(40, 128, 64)));
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(m.funcs.size(), 1u);
  EXPECT_EQ(m.num_workspaces, 0u);
  ASSERT_EQ(m.funcs[0].tensor_maps.size(), 2u);
  EXPECT_EQ(m.funcs[0].tensor_maps[0].dims, (std::vector<int64_t>{64, 40})); // A itself
  std::string cuda = codegen_cuda(m);
  EXPECT_NE(cuda.find("const int wgmma_row_limit = 40;"), std::string::npos) << cuda;
  EXPECT_EQ(mismatch(p, 40, 128, 64), "");
  expect_one_kernel_without_stack(m, cuda, "few_rows.cu");
  GemmWgmmaTiles copies = gemm_wgmma_tiles(40, 128, 64);
  copies.tma = copies.warp_specialized = copies.persistent = false;
  ScheduledProgram padded = gemm_wgmma(40, 128, 64, copies);
  LoweredModule mp = lower(padded.schedule, padded.args);
  ASSERT_EQ(mp.funcs.size(), 2u);
  EXPECT_EQ(mp.funcs[0].name, "default_function_A_pad");
  EXPECT_EQ(mp.funcs[0].arg_shapes[3], (std::vector<int64_t>{64, 64})); // A_pad
  EXPECT_EQ(mismatch(padded, 40, 128, 64), "");
  // 64 rows in a block of 128 (the second warpgroup's tile past M) or 256 (two tiles a
  // warpgroup, the second warpgroup's both past M), and 100 rows in 256.
  for (auto [M, block_m] : {std::pair<int64_t, int>{64, 128}, {64, 256}, {100, 256}}) {
    SCOPED_TRACE(std::to_string(M) + " rows in blocks of " + std::to_string(block_m));
    ScheduledProgram q = gemm_wgmma(M, 128, 64,
                                    reading_in_place({.block_m = block_m, .block_n = 128,
                                                      .warpgroups_m = 2, .stages = 2, .tma = true}));
    EXPECT_EQ(mismatch(q, M, 128, 64), "");
  }
  expect_error([] { gemm_wgmma(40, 128, 64, {.block_m = 64, .block_n = 128, .warpgroups_m = 1,
                                             .stages = 2, .tma = true, .tma_store = true}); },
               {"TMA store of C", "M=40 is less than block_m=64", "TS=0"});
  EXPECT_EQ(mismatch(gemm_wgmma(16, 72, 40), 16, 72, 40), ""); // and ragged N and K
  ScheduledProgram fused = gemm_wgmma_fused(16, 64, 64, gemm_wgmma_tiles(16, 64, 64), Float(16),
                                            Float(16), bias_gelu_epilogue(Float(16)));
  CheckResult r = check_on_cpu(fused.schedule, fused.args, fused.num_inputs, 7);
  EXPECT_TRUE(r.compare.ok) << r.str();
  // Tiles that fit M come first: 100 rows in two shifted 64-row blocks, no copies.
  EXPECT_EQ(gemm_wgmma_tiles(100, 256, 64).block_m, 64);
  // conv2d_wgmma reads its operands in place: there a block must fit.
  expect_error([] { check_gemm_wgmma_tiles("conv2d_wgmma", 40, 128, 64, GemmWgmmaTiles{.block_m = 64, .block_n = 128, .warpgroups_m = 1}, false); },
               {"M=40 is smaller than block_m=64"});
}

// Grids under half a wave split K: each block sums one part into a float32 workspace of
// partial sums (blockIdx.z), which a second kernel adds in order into C (deterministic); where
// M is less than a block the parts hold its M rows only. Exact on the executor.
TEST(GemmWgmma, SplitKAddsPartsInOrder) {
  GemmWgmmaTiles t = gemm_wgmma_tiles(16, 4096, 1024);
  EXPECT_EQ(t.split_k, 2); // 64 blocks of 64 x 64, 16 K steps: two parts of 8
  EXPECT_EQ(gemm_wgmma_tiles(16, 4096, 4096).split_k, 4); // 64 K steps: four parts of 16
  EXPECT_EQ(gemm_wgmma_tiles(4096, 4096, 4096).split_k, 1);
  // A wave of blocks already (1024^3: 128 blocks of 128 x 64; 2048^3: 128 of 128 x 256): whole K.
  EXPECT_EQ(gemm_wgmma_tiles(1024, 1024, 1024).split_k, 1);
  EXPECT_EQ(gemm_wgmma_tiles(2048, 2048, 2048).split_k, 1);
  ScheduledProgram p = gemm_wgmma(16, 4096, 1024, reading_in_place(t));
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(m.funcs.size(), 2u); // A read in place (TMA's zero rows past M)
  EXPECT_EQ(m.funcs[0].name, "default_function_C_part");
  EXPECT_EQ(m.funcs[0].launch.grid[2], 2);
  EXPECT_EQ(m.funcs[0].arg_shapes[3], (std::vector<int64_t>{2, 16, 4096})); // M rows a part
  std::string ir = to_string(m);
  // The parts added in order, in a register (the loop unrolled).
  EXPECT_NE(ir.find("  C.local[0] = C.local[0] + C_part[threadIdx.x + blockIdx.x * 256]\n"
                    "  C.local[0] = C.local[0] + C_part[threadIdx.x + blockIdx.x * 256 + 65536]\n"
                    "  C[threadIdx.x + blockIdx.x * 256] = C.local[0]"),
            std::string::npos)
      << ir;
  EXPECT_EQ(mismatch(gemm_wgmma(16, 256, 512, {.block_m = 64, .block_n = 128, .warpgroups_m = 1,
                                               .stages = 2, .tma = true, .split_k = 4}),
                     16, 256, 512),
            "");
  EXPECT_EQ(mismatch(gemm_wgmma(130, 72, 192, {.block_m = 64, .block_n = 64, .block_k = 32,
                                               .warpgroups_m = 1, .stages = 2, .swizzle = 0,
                                               .split_k = 3}),
                     130, 72, 192),
            "");
  expect_error([] { gemm_wgmma(256, 256, 256, {.split_k = 0}); }, {"split_k must be at least 1"});
  expect_error(
      [] {
        gemm_wgmma_fused(64, 64, 256, {.block_m = 64, .block_n = 64, .warpgroups_m = 1,
                                       .stages = 2, .split_k = 2},
                         Float(16), Float(16), bias_gelu_epilogue(Float(16)));
      },
      {"gemm_wgmma_fused", "K cannot be split", "split_k=2"});
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
