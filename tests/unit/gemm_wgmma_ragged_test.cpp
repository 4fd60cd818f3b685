// gemm_wgmma on shapes its blocks do not divide: the last block shifted inwards, padded copies
// of operands whose rows TMA cannot read, ragged operands read in place through TMA's zero fill,
// fewer rows than a block, and split-K's parts of such shapes. Each exact on the CPU executor
// against float64; the CUDA compiled by NVRTC for sm_90a.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "runtime/Nvrtc.h"
#include "schedules/Epilogues.h"
#include "schedules/Gemm.h"
#include "schedules/GemmWgmma.h"
#include "schedules/Registry.h"

#include "ExactGemm.h"
#include "SassUtil.h"

#include <gtest/gtest.h>

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

// NVRTC compiles `m`'s CUDA into one sm_90a kernel with no stack frame.
void expect_one_kernel_without_stack(const LoweredModule &m, const std::string &cuda,
                                     const std::string &name) {
  CompiledKernel k = tessel::test::compile_for_sm90(m, cuda, name);
  ASSERT_EQ(k.kernels.size(), 1u) << k.log;
  EXPECT_EQ(k.kernels[0].stack_bytes, 0) << k.log;
}

} // namespace

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
  // gemm_wgmma_tiles' choice (RaggedOperands::BySize) reads only operands of 2^21 elements and
  // more in place: a small ragged GEMM copies them (a kernel of its own, as cp.async's), a large
  // one (2048 x 2000 and 2000 x 2048) reads them in place; knob PAD=1 copies, PAD=2 reads in
  // place. (The registry's default reads small ones in place too where small_ragged_by_default
  // says: SmallRaggedGemmsReadInPlaceBy64x128Blocks.)
  ScheduledProgram by_size = gemm_wgmma(200, 192, 136, gemm_wgmma_tiles(200, 192, 136));
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

// A of fewer rows than a block, K whole: read in place at any size, its boxes clipped to its
// rows (TMA's zero fill past the edge is slow) and the tiles' other rows zeroed once, before
// the ring's first fill, by one warpgroup (with warp roles too: not repeated by the producer's).
// Exact on the executor, which reports any read of shared memory never written.
TEST(GemmWgmma, FewerRowsReadThroughClippedBoxes) {
  ScheduledProgram split = gemm_wgmma(16, 512, 1024); // split-K's default tiles
  LoweredModule m = lower(split.schedule, split.args);
  ASSERT_EQ(m.funcs.size(), 2u); // split-K's parts, their sum: no copy of A
  const LoweredFunc &parts = m.funcs[0];
  ASSERT_EQ(parts.tensor_maps.size(), 2u);
  EXPECT_EQ(parts.tensor_maps[0].dims, (std::vector<int64_t>{1024, 16})); // A itself
  EXPECT_EQ(parts.tensor_maps[0].box, (std::vector<int64_t>{64, 16}));    // its 16 rows
  std::string ir = to_string(parts.body);
  // 16 rows of A's 64 halves, and B's 64 x 256.
  EXPECT_NE(ir.find("@mbarrier_arrive_expect_tx(@address_of(k.outer_full[floormod(k.outer, 4)]), "
                    "34816)"),
            std::string::npos)
      << ir;
  std::regex zeroed(R"(if \(threadIdx.y == 0\) \{\n\s*for \(zero: int32, 0, 16\) \{\n\s*)"
                    R"(A_pad.shared\[ramp\(zero \* 1024 \+ threadIdx.x \* 8, 1, 8\)\] = )"
                    R"(broadcast\(0f16, 8\)\n\s*\}\n\s*\}\n\s*@fence_proxy_async\(\)\n\s*)"
                    R"(@syncthreads\(\))");
  EXPECT_TRUE(std::regex_search(ir, zeroed)) << ir;
  for (auto [M, N, K, block_m] : {std::array<int64_t, 4>{16, 256, 1024, 0}, {16, 128, 64, 0},
                                  {100, 128, 256, 128}, {40, 128, 192, 64}}) {
    SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
    GemmWgmmaTiles t = gemm_wgmma_tiles(M, N, K);
    if (block_m) { // two warpgroups of rows: the second's rows all past M
      t.block_m = int(block_m);
      t.warpgroups_m = int(block_m / 64);
    }
    ScheduledProgram p = gemm_wgmma(M, N, K, t);
    LoweredModule lm = lower(p.schedule, p.args);
    EXPECT_EQ(lm.funcs[0].tensor_maps[0].box.back(), M);
    EXPECT_EQ(mismatch(p, M, N, K), "");
  }
  // One row is still copied (the copy's read A[0, k] names no row to box), and exact.
  ScheduledProgram one = gemm_wgmma(1, 128, 64);
  LoweredModule om = lower(one.schedule, one.args);
  EXPECT_EQ(om.funcs.size(), 2u);
  EXPECT_EQ(mismatch(one, 1, 128, 64), "");
  // Persistent kernels keep the zero fill (their ring is allocated per tile until
  // storage_rewrite) and read a small A through its padded copy.
  GemmWgmmaTiles persistent = gemm_wgmma_tiles(16, 512, 1024);
  persistent.persistent = true;
  persistent.split_k = 1;
  ScheduledProgram pp = gemm_wgmma(16, 512, 1024, persistent);
  LoweredModule pm = lower(pp.schedule, pp.args);
  EXPECT_EQ(pm.funcs.size(), 2u);
  EXPECT_EQ(pm.funcs[0].name, "default_function_A_pad");
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

// gemm_wgmma's own choice for small GEMMs with a K tail (small_ragged_by_default): A and B read
// in place by blocks of 64 x 128, in clusters of 2 along M sharing B's tile where the blocks of
// rows pair up; one kernel, no copies. Not where K has no tail, A's rows are not whole 16-byte
// units, the tiles make more than a wave, C is float16, or the knobs choose (PAD, SK, tiles,
// PP=2). Exact on the executor with and without the cluster; NVRTC compiles 1000^3 for sm_90a
// without spills.
TEST(GemmWgmma, SmallRaggedGemmsReadInPlaceBy64x128Blocks) {
  auto tiles = [](int64_t M, int64_t N, int64_t K, ShapeParams knobs = {},
                  DataType out = Float(32)) {
    ShapeParams p = resolve_shape(find_schedule("gemm_wgmma"), {{"M", M}, {"N", N}, {"K", K}});
    for (const auto &[k, v] : knobs)
      p[k] = v;
    return gemm_wgmma_tiles_from_knobs(p, out);
  };
  GemmWgmmaTiles t = tiles(1000, 1000, 1000);
  EXPECT_EQ(to_string(t), "wgmma bm=64 bn=128 bk=64 wg=1x1 n=128 stages=4 raster=8 "
                          "swizzle=128 tma ws cluster=2x1");
  EXPECT_EQ(t.ragged_operands, GemmWgmmaTiles::RaggedOperands::InPlace);
  EXPECT_EQ(to_string(gemm_wgmma_default_tiles(1000, 1000, 1000)), to_string(t));
  EXPECT_EQ(tiles(800, 1000, 1200).cluster, 0); // 13 blocks of 64 rows
  auto in_place = [](const GemmWgmmaTiles &t) {
    return t.ragged_operands == GemmWgmmaTiles::RaggedOperands::InPlace;
  };
  EXPECT_TRUE(in_place(tiles(100, 1000, 1000)));
  EXPECT_FALSE(in_place(tiles(1000, 1000, 1024))); // no K tail
  EXPECT_FALSE(in_place(tiles(1000, 1000, 500)));  // rows of 1000 bytes: A copied
  EXPECT_FALSE(in_place(tiles(2000, 1000, 1000))); // 256 tiles of 64 x 128
  EXPECT_FALSE(in_place(tiles(1000, 1000, 1000, {}, Float(16))));
  for (const ShapeParams &off : std::vector<ShapeParams>{
           {{"PAD", 1}}, {{"SK", 2}}, {{"BM", 128}}, {{"PP", 2}}, {{"P", 2}}, {{"TS", 1}}}) {
    GemmWgmmaTiles o = tiles(1000, 1000, 1000, off);
    EXPECT_FALSE(in_place(o)) << off.begin()->first;
    EXPECT_EQ(o.cluster, 0) << off.begin()->first;
  }
  // PP=1 keeps as deep a ring as 128 x 128 tiles fit (8 stages of the small grid's choice do
  // not: 7).
  EXPECT_EQ(tiles(1000, 1000, 2000, {{"PP", 1}}).stages, 7);

  ScheduledProgram p = gemm_wgmma(1000, 1000, 1000);
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(m.funcs.size(), 1u);
  EXPECT_EQ(m.num_workspaces, 0u);
  EXPECT_EQ(m.funcs[0].launch.cluster_size(), 2);
  CompiledKernel k = tessel::test::compile_for_sm90(m, codegen_cuda(m), "small_ragged.cu");
  ASSERT_EQ(k.kernels.size(), 1u) << k.log;
  EXPECT_EQ(k.kernels[0].spill_store_bytes, 0) << k.log;

  // Small enough for the executor: 4 blocks of rows (clusters of 2) and 3 (none), K of 72
  // (one step and 8) and 200.
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{256, 192, 72}, {192, 192, 200}}) {
    SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
    GemmWgmmaTiles d = gemm_wgmma_default_tiles(M, N, K);
    ASSERT_TRUE(in_place(d));
    EXPECT_EQ(d.cluster, M == 256 ? 1 : 0);
    EXPECT_EQ(mismatch(gemm_wgmma(M, N, K), M, N, K), "");
  }
}

// Swizzled tiles before unswizzled ones that waste a little less: N of 600 and 200 in
// 64-column blocks rather than 32-column ones (3.6-7x slower on the H200).
TEST(GemmWgmma, SwizzledTilesOverNarrowUnswizzledOnes) {
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1000, 600, 1024},
                         {4096, 600, 4096},
                         {4096, 200, 4096},
                         {800, 2000, 1024}}) {
    GemmWgmmaTiles t = gemm_wgmma_tiles(M, N, K);
    EXPECT_EQ(t.swizzle, 128) << M << "x" << N << "x" << K << ": " << to_string(t);
    EXPECT_TRUE(t.tma) << to_string(t);
  }
}
