// Stage::split_last_wave: the tiles of a persistent kernel's last, partial round split into
// parts of K on the blocks that round leaves idle; the parts past the first hand their float32
// sums to the first through a workspace and a flag per warp (reduce_last_wave_parts). The tile
// loop's mapping and the handing in the IR, exact results on the CPU executor (which runs the
// blocks in order: the waiting first parts have the higher blocks), the epilogues that must see
// the whole sum, the errors, NVRTC's sm_90a build of the 4096 x 11008 x 4096 kernel, the
// registry's choice, and gemm_fp8's fast accumulation.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "schedules/Epilogues.h"
#include "schedules/Gemm.h"
#include "schedules/GemmWgmma.h"
#include "schedules/Registry.h"

#include "ExactGemm.h"
#include "SassUtil.h"

#include <gtest/gtest.h>

using namespace tessel;
using tessel::test::count_of;
using tessel::test::expect_error;

namespace {

// 128 x 256 blocks of two consumer warpgroups, persistent on `blocks` blocks, the last wave
// split into up to `parts` parts.
GemmWgmmaTiles split_tiles(int blocks, int parts) {
  return {.block_m = 128, .block_n = 256, .block_k = 64, .warpgroups_m = 2, .stages = 4,
          .tma = true, .warp_specialized = true, .persistent = true,
          .persistent_blocks = blocks, .split_last_wave = parts};
}

std::string mismatch(const ScheduledProgram &p, int64_t M, int64_t N, int64_t K) {
  return tessel::test::exact_gemm_mismatch(lower(p.schedule, p.args), M, N, K);
}

} // namespace

// 2 x 3 tiles on 4 blocks: one whole round, then 2 tiles in 2 parts of K on blocks 0..3, block
// b taking part 1 - b / 2 of tile 4 + b % 2 (the first parts on blocks 2, 3; every block has
// a part, so no guard is left). Part 1 leaves
// its 128 registers a thread (256 threads) for each of 2 tiles, and raises one flag per warp.
TEST(SplitLastWave, TileLoopAndHandOff) {
  ScheduledProgram p = gemm_wgmma(256, 768, 512, split_tiles(4, 8));
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(m.funcs.size(), 1u);
  EXPECT_EQ(m.funcs[0].launch.grid[0], 4);
  ASSERT_EQ(m.num_workspaces, 2u);
  const LoweredFunc &f = m.funcs[0];
  EXPECT_EQ(f.args[3].name(), "C.last_wave_parts");
  EXPECT_EQ(f.arg_shapes[3], std::vector<int64_t>{2 * 128 * 256});
  EXPECT_EQ(f.args[4].name(), "C.last_wave_flags");
  EXPECT_EQ(f.arg_shapes[4], std::vector<int64_t>{2 * 8});
  std::string ir = to_string(m);
  for (const char *line :
       {"let C.tile: int32 = select(1 <= C.tile_iter, floormod(blockIdx.x, 2) + 4, blockIdx.x)",
        "let C.part: int32 = select(1 <= C.tile_iter, 1 - floordiv(blockIdx.x, 2), 0)",
        "let k.outer.begin: int32 = C.part * 4",
        "let k.outer.end: int32 = select(1 <= C.tile_iter, C.part * 4 + 4, 8)",
        "for (k.outer: int32, k.outer.begin, k.outer.end - k.outer.begin) {",
        "if (0 < C.part) {", "@flag_release(", "@flag_wait("})
    EXPECT_NE(ir.find(line), std::string::npos) << line << "\n" << ir;
  // Both roles walk the same parts (the producer loads the part's K steps); the consumers
  // hand 128 registers each way and store the tile in one place.
  EXPECT_EQ(count_of(ir, "for (k.outer: int32, k.outer.begin, k.outer.end - k.outer.begin)"), 2);
  EXPECT_EQ(count_of(ir, "C.last_wave_parts["), 2 * 128) << ir;
  EXPECT_EQ(count_of(ir, "@wgmma_store("), 2) << ir; // the first part's, a whole tile's
  EXPECT_EQ(mismatch(p, 256, 768, 512), "");
}

// Exact on the executor: 2 parts; 5 parts of 8 steps (one tile left for 5 blocks) and 3 of 9
// (uneven: 3, 3, 3 and 1, 2, 2, 2, 2 steps); a round that the grid divides (nothing split: no
// workspace); grouped order with a K tail.
TEST(SplitLastWave, ExactOnTheExecutor) {
  EXPECT_EQ(mismatch(gemm_wgmma(256, 768, 512, split_tiles(5, 8)), 256, 768, 512), "");
  EXPECT_EQ(mismatch(gemm_wgmma(256, 768, 576, split_tiles(5, 3)), 256, 768, 576), "");
  EXPECT_EQ(mismatch(gemm_wgmma(256, 768, 576, split_tiles(5, 8)), 256, 768, 576), "");
  ScheduledProgram whole = gemm_wgmma(256, 768, 512, split_tiles(3, 8));
  EXPECT_EQ(lower(whole.schedule, whole.args).num_workspaces, 0u);
  EXPECT_EQ(mismatch(whole, 256, 768, 512), "");
  GemmWgmmaTiles grouped = split_tiles(4, 2);
  grouped.raster_group = 2;
  EXPECT_EQ(mismatch(gemm_wgmma(384, 768, 520, grouped), 384, 768, 520), "");
}

// What the store does to the whole sum (rounding to float16, bias and GELU) is done once, by
// the first part, after the others' sums are added: the other parts hand over the raw sums.
TEST(SplitLastWave, EpiloguesSeeTheWholeSum) {
  ScheduledProgram narrow = gemm_wgmma(256, 768, 512, split_tiles(5, 8), Float(16), Float(16));
  CheckResult r = check_on_cpu(narrow.schedule, narrow.args, narrow.num_inputs, 3);
  EXPECT_TRUE(r.compare.ok) << r.str();
  ScheduledProgram gelu = gemm_wgmma_fused(256, 768, 512, split_tiles(5, 8), Float(16),
                                           Float(16), bias_gelu_epilogue(Float(16)));
  std::string ir = to_string(lower(gelu.schedule, gelu.args));
  // The GELU appears in the first part's branch only: once a tile (no copy in the handing).
  EXPECT_EQ(count_of(ir, "erf("), count_of(ir, "@wgmma_store(") * 128) << ir;
  r = check_on_cpu(gelu.schedule, gelu.args, gelu.num_inputs, 4);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

TEST(SplitLastWave, Errors) {
  // The registry's knob on kernels that cannot take it.
  GemmWgmmaTiles t = split_tiles(4, 8);
  t.persistent = false;
  expect_error([&] { gemm_wgmma(256, 768, 512, t); },
               {"split_last_wave", "LW=8", "persistent kernel (P=1)", "persistent=0"});
  t = split_tiles(4, 8);
  t.tma_store = true;
  expect_error([&] { gemm_wgmma(256, 768, 512, t); }, {"LW=8", "tma_store=1"});
  // The primitive: a reduction axis, at least 2 parts, inside a persistent stage's tiles.
  GemmTensors g = gemm_definition(64, 64, 64, Float(32));
  Schedule s = create_schedule({g.C});
  auto [i, j] = s[g.C].axes<2>();
  IterVar k = s[g.C].reduce_axis()[0];
  expect_error([&] { s[g.C].split_last_wave(i); }, {"axis 'i'", "not a reduction axis"});
  expect_error([&] { s[g.C].split_last_wave(k, 1); }, {"max_parts must be at least 2"});
  s[g.C].split_last_wave(k);
  expect_error([&] { lower(s, {g.A, g.B, g.C}); },
               {"loop 'k'", "not computed inside the tiles of a persistent stage"});
  // A persistent stage whose tile is not a wgmma accumulator's store.
  Schedule q = create_schedule({g.C});
  auto [qi, qj] = q[g.C].axes<2>();
  IterVar qk = q[g.C].reduce_axis()[0];
  auto [bi, ii] = q[g.C].split(qi, 32);
  auto [bj, jj] = q[g.C].split(qj, 32);
  q[g.C].reorder({bi, bj, ii, jj, qk});
  q[g.C].bind(ii, thread_axis("threadIdx.x"));
  q[g.C].persistent(bi, bj, 1, 3);
  q[g.C].split_last_wave(qk);
  expect_error([&] { lower(q, {g.A, g.B, g.C}); }, {"not stored by wgmma_store"});
}

// The 4096 x 11008 x 4096 kernel the option is for (1376 tiles on 132 blocks: 10 rounds, then
// 56 tiles in halves): NVRTC builds it for sm_90a without spills, with the flags' release and
// acquire.
TEST(SplitLastWave, CompilesForSm90a) {
  GemmWgmmaTiles t = gemm_wgmma_tiles(4096, 11008, 4096);
  t.persistent = true;
  t.split_last_wave = 8;
  ScheduledProgram p = gemm_wgmma(4096, 11008, 4096, t);
  LoweredModule m = lower(p.schedule, p.args);
  std::string ir = to_string(m);
  EXPECT_NE(ir.find("let C.part: int32 = select(10 <= C.tile_iter, 1 - floordiv(blockIdx.x, 56), 0)"),
            std::string::npos)
      << ir.substr(0, 6000);
  CompiledKernel k = tessel::test::compile_for_sm90(m, codegen_cuda(m), "gemm_wgmma_lw.cu");
  ASSERT_FALSE(k.cubin.empty()) << k.log;
  EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
  if (std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "gemm_wgmma")) {
    for (const char *op : {"STG.E.STRONG.GPU", "LDG.E.STRONG.GPU", "HGMMA.64x256x16.F32"})
      EXPECT_NE(sass->find(op), std::string::npos) << op;
    EXPECT_EQ(sass->find("STL"), std::string::npos);
  }
}

// The registry's choice (LW=0): persistent with the last round split where the split would
// save 4% of the rounds or more: 4096x11008x4096 (1376 tiles: 10 rounds and 56 tiles, in
// halves) but not 8192^3 (31 rounds and 4 tiles) nor 4096^3 (100 tiles left: no block free
// for a second part); LW=1 never; LW=4 with P=1 at most 4 parts.
TEST(SplitLastWave, RegistryChoice) {
  GemmWgmmaTiles t = gemm_wgmma_default_tiles(4096, 11008, 4096);
  EXPECT_TRUE(t.persistent);
  EXPECT_EQ(t.split_last_wave, 8);
  EXPECT_TRUE(last_wave_split_by_default(4096, 11008, 4096, gemm_wgmma_tiles(4096, 11008, 4096)));
  for (int64_t n : {4096, 8192}) {
    GemmWgmmaTiles d = gemm_wgmma_default_tiles(n, n, n);
    EXPECT_EQ(d.split_last_wave, 0) << n;
  }
  ShapeParams p{{"M", 4096}, {"N", 11008}, {"K", 4096}, {"G", 8}, {"TMA", 1}, {"LW", 1}};
  EXPECT_EQ(gemm_wgmma_tiles_from_knobs(p).split_last_wave, 0);
  EXPECT_FALSE(gemm_wgmma_tiles_from_knobs(p).persistent);
  p["LW"] = 4;
  p["P"] = 1;
  EXPECT_EQ(to_string(gemm_wgmma_tiles_from_knobs(p)),
            "wgmma bm=128 bn=256 bk=64 wg=2x1 n=256 stages=4 raster=8 swizzle=128 tma ws "
            "persistent=132 last_wave_parts=4");
}

// gemm_fp8 with fast accumulation takes the split (knob LW, with P=1): one tile in 5 parts,
// against float64 on the executor; the promoted kernels (FAST=0) refuse it.
TEST(SplitLastWave, Fp8FastAccumulation) {
  const ScheduleEntry &e = find_schedule("gemm_fp8");
  ShapeParams p = resolve_shape(e, {{"M", 256}, {"N", 768}, {"K", 512}, {"SCALE", 0},
                                    {"FAST", 1}, {"BM", 128}, {"BN", 256}, {"P", 1},
                                    {"PB", 5}, {"LW", 8}});
  ScheduledProgram f = e.build(p, Float8E4M3());
  EXPECT_EQ(count_of(to_string(lower(f.schedule, f.args)), "@flag_wait("), 1);
  CheckResult r = check_on_cpu(f.schedule, f.args, f.num_inputs, 5);
  EXPECT_TRUE(r.compare.ok) << r.str();
  p["FAST"] = 0;
  p["BN"] = 128;
  expect_error([&] { e.build(p, Float8E4M3()); }, {"knob LW", "fast accumulation (FAST=1)"});
}
