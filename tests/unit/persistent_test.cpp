// Persistent kernels (Stage::persistent): a fixed grid of blocks walking the output tiles in a
// tile loop of the IR, in grouped order. The primitive on a plain schedule, and gemm_wgmma's
// persistent variant: its TMA ring runs across the tiles (barriers initialized once, slot and
// parity from a running step count, the last step's slot released before the epilogue), its
// producer keeps the tile loop. Exact on the CPU executor against float64 where tiles do not
// divide among the blocks, and compiled by NVRTC for sm_90a without spills.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "schedules/Gemm.h"
#include "schedules/GemmWgmma.h"

#include "ExactGemm.h"
#include "SassUtil.h"

#include <gtest/gtest.h>

#include <regex>

using namespace tessel;
using tessel::test::count_of;
using tessel::test::expect_error;

namespace {

std::string mismatch(const ScheduledProgram &p, int64_t M, int64_t N, int64_t K) {
  return tessel::test::exact_gemm_mismatch(lower(p.schedule, p.args), M, N, K);
}

// 128 x 64 blocks of two consumer warpgroups, TMA with warp roles, walked by `blocks` blocks.
GemmWgmmaTiles persistent_tiles(int stages, int blocks, int64_t group = 0) {
  return {.block_m = 128, .block_n = 64, .block_k = 64, .warpgroups_m = 2, .stages = stages,
          .raster_group = group, .tma = true, .warp_specialized = true, .persistent = true,
          .persistent_blocks = blocks};
}

// C = A B (float32) with 32 x 16 tiles walked by `blocks` blocks of 32 threads.
Schedule plain_persistent(const GemmTensors &g, int64_t group, int64_t blocks) {
  Schedule s = create_schedule({g.C});
  auto [i, j] = s[g.C].axes<2>();
  IterVar k = s[g.C].reduce_axis()[0];
  auto [bi, ii] = s[g.C].split(i, 32);
  auto [bj, jj] = s[g.C].split(j, 16);
  s[g.C].reorder({bi, bj, ii, jj, k});
  s[g.C].bind(ii, thread_axis("threadIdx.x"));
  s[g.C].persistent(bi, bj, group, blocks);
  return s;
}

} // namespace

// The primitive alone: 3 x 5 tiles over 4 blocks (the last iteration of three of them has no
// tile), in groups of 2 rows (the last group short). The thread binding is the block's, above
// the tile loop; the tile's indices are lets inside it.
TEST(Persistent, TileLoopOnAPlainSchedule) {
  GemmTensors g = gemm_definition(96, 80, 8, Float(32));
  Schedule s = plain_persistent(g, 2, 4);
  LoweredModule m = lower(s, {g.A, g.B, g.C});
  ASSERT_EQ(m.funcs.size(), 1u);
  EXPECT_EQ(m.funcs[0].launch.grid[0], 4);
  EXPECT_EQ(m.funcs[0].launch.grid[1], 1);
  std::string ir = to_string(m);
  std::regex loop(
      R"("thread_extent" = 4;\n(.*\n)*?\s*attr \[IterVar\(threadIdx.x[^\n]*"thread_extent" = 32;\n)"
      R"(\s*attr \[C.tile_iter\] "tile_loop" = 15;\n)"
      R"(\s*for \(C.tile_iter: int32, 0, 4\) \{\n)"
      R"(\s*let C.tile: int32 = C.tile_iter \* 4 \+ blockIdx.x\n)"
      R"(\s*if \(C.tile < 15\) \{\n)"
      R"(\s*let i.outer.raster: int32 = )");
  EXPECT_TRUE(std::regex_search(ir, loop)) << ir;
  CheckResult r = check_on_cpu(s, {g.A, g.B, g.C}, 2);
  EXPECT_TRUE(r.compare.ok) << r.str();
  // More blocks than tiles: the grid is the tiles, one iteration, no guard.
  GemmTensors small = gemm_definition(32, 32, 8, Float(32));
  Schedule one = plain_persistent(small, 8, 132);
  LoweredModule m1 = lower(one, {small.A, small.B, small.C});
  EXPECT_EQ(m1.funcs[0].launch.grid[0], 2);
  EXPECT_EQ(to_string(m1).find("if (C.tile <"), std::string::npos) << to_string(m1);
  CheckResult r1 = check_on_cpu(one, {small.A, small.B, small.C}, 2);
  EXPECT_TRUE(r1.compare.ok) << r1.str();
}

TEST(Persistent, ScheduleErrors) {
  auto with = [](const std::function<void(Stage, IterVar, IterVar, IterVar)> &f) {
    return [f] {
      GemmTensors g = gemm_definition(64, 64, 8, Float(32));
      Schedule s = create_schedule({g.C});
      auto [i, j] = s[g.C].axes<2>();
      auto [bi, ii] = s[g.C].split(i, 32);
      auto [bj, jj] = s[g.C].split(j, 32);
      s[g.C].reorder({bi, bj, ii, jj});
      f(s[g.C], bi, bj, ii);
      lower(s, {g.A, g.B, g.C});
    };
  };
  expect_error(with([](Stage c, IterVar bi, IterVar bj, IterVar) {
                 c.bind(bi, thread_axis("blockIdx.y"));
                 c.persistent(bi, bj);
               }),
               {"persistent", "'i.outer' is bound to blockIdx.y", "leave both axes plain loops"});
  expect_error(with([](Stage c, IterVar bi, IterVar bj, IterVar) {
                 c.persistent(bi, bj);
                 c.bind(bj, thread_axis("blockIdx.x"));
               }),
               {"bind", "persistent", "its tile axes are not bound"});
  expect_error(with([](Stage c, IterVar bi, IterVar bj, IterVar ii) {
                 c.bind(ii, thread_axis("blockIdx.x"));
                 c.persistent(bi, bj);
               }),
               {"persistent", "bound to blockIdx.x", "blockIdx.y or .z"});
  expect_error(with([](Stage c, IterVar bi, IterVar bj, IterVar) {
                 c.rasterize(bi, bj, 8);
                 c.persistent(bi, bj);
               }),
               {"persistent", "already has a tile order", "rasterize"});
  expect_error(with([](Stage c, IterVar bi, IterVar bj, IterVar) { c.persistent(bi, bj, 8, 0); }),
               {"persistent", "blocks must be at least 1", "got 0"});
  expect_error(with([](Stage c, IterVar bi, IterVar bj, IterVar ii) {
                 c.reorder({bi, ii, bj});
                 c.persistent(bi, bj);
               }),
               {"persistent", "is not the loop just outside 'j.outer'", "adjacent"});
  expect_error(with([](Stage c, IterVar bi, IterVar bj, IterVar) {
                 c.persistent(bi, bj);
                 c.split(bi, 2);
               }),
               {"split", "persistent (walked by a tile loop)", "before calling persistent"});
  // A TMA ring in the tile loop without warp roles: the pipeline refuses it.
  expect_error(
      [] {
        GemmTensors g = gemm_definition(256, 256, 256, Float(16));
        Schedule s = create_schedule({g.C});
        WgmmaGemmStages st;
        st.C = g.C;
        st.AS = s.cache_read(g.A, "shared", {g.C});
        st.BS = s.cache_read(g.B, "shared", {g.C});
        st.CF = s.cache_write(g.C, "wgmma.accumulator");
        GemmWgmmaTiles t = persistent_tiles(3, 3);
        t.warp_specialized = false;
        schedule_wgmma_gemm(s, st, t);
        lower(s, {g.A, g.B, g.C});
      },
      {"persistent", "runs in the tile loop of a persistent stage", "needs warp roles",
       "warp_specialize()"});
  // gemm_wgmma: persistent needs warp roles and whole K per tile.
  expect_error([] { gemm_wgmma(256, 256, 128, {.tma = true, .persistent = true}); },
               {"persistent", "warp roles", "TMA=1 WS=1"});
  expect_error(
      [] {
        GemmWgmmaTiles t = persistent_tiles(2, 4);
        t.split_k = 2;
        gemm_wgmma(128, 128, 256, t);
      },
      {"persistent", "split_k = 1"});
}

// gemm_wgmma, persistent: the ring's barriers are initialized once, before the tile loop; its
// slot and parity come from the running step count (tile iteration x 5 K steps + k); the
// producer keeps the tile loop; the consumers release the last step's slot after its
// wgmma_wait(0), before the store.
TEST(Persistent, GemmWgmmaRingAcrossTiles) {
  ScheduledProgram p = gemm_wgmma(256, 256, 320, persistent_tiles(4, 3));
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(m.funcs.size(), 1u);
  EXPECT_EQ(m.funcs[0].launch.grid[0], 3);
  EXPECT_EQ(m.funcs[0].launch.block[1], 3);
  std::string ir = to_string(m);
  std::regex init_then_roles(
      R"(@fence_barrier_init\(\)\n\s*\}\n\s*@fence_proxy_async\(\)\n\s*@syncthreads\(\)\n)"
      R"(\s*attr \[0\] "warp_specialize" = 128;\n\s*if \(threadIdx.y == 2\) \{\n)"
      R"(\s*@setmaxnreg\(40, 0\)\n\s*if \(threadIdx.x == 0\) \{\n)"
      R"(\s*attr \[C.tile_iter\] "tile_loop" = 8;\n)"
      R"(\s*for \(C.tile_iter: int32, 0, 3\) \{\n)"
      R"(\s*let C.tile: int32 = C.tile_iter \* 3 \+ blockIdx.x\n)"
      R"(\s*if \(C.tile < 8\) \{\n)");
  EXPECT_TRUE(std::regex_search(ir, init_then_roles)) << ir;
  EXPECT_EQ(count_of(ir, "@mbarrier_init(@address_of(k.outer_full[0]), 1)"), 1) << ir;
  EXPECT_NE(ir.find("@mbarrier_wait(@address_of(k.outer_empty[floormod(C.tile_iter * 5 + "
                    "k.outer, 4)]), floormod(floordiv(C.tile_iter * 5 + k.outer, 4) + 1, 2))"),
            std::string::npos)
      << ir;
  std::string consumers = ir.substr(ir.find("} else {"));
  EXPECT_EQ(consumers.find("tma_load"), std::string::npos) << ir;
  std::regex release_before_store(
      R"(@wgmma_wait\(0\)\n\s*@mbarrier_arrive\(@address_of\(k.outer_empty\[floormod\(C.tile_iter \* 5, 4\)\]\)\)\n)"
      R"(\s*@wgmma_store\()");
  EXPECT_TRUE(std::regex_search(consumers, release_before_store)) << ir;

  // NVRTC: the default 4096^3 tiles (128 x 256 blocks, 2 consumer warpgroups), persistent on
  // 132 blocks, compile for sm_90a without spills.
  GemmWgmmaTiles big = gemm_wgmma_tiles(4096, 4096, 4096);
  big.persistent = true;
  ScheduledProgram q = gemm_wgmma(512, 512, 512, big);
  LoweredModule mq = lower(q.schedule, q.args);
  CompiledKernel k =
      tessel::test::compile_for_sm90(mq, codegen_cuda(mq), "gemm_wgmma_persistent.cu");
  ASSERT_FALSE(k.cubin.empty()) << k.log;
  EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
  EXPECT_EQ(k.kernels.at(0).stack_bytes, 0) << k.log;
  if (std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "gemm_wgmma_persistent")) {
    for (const char *op : {"USETMAXREG.DEALLOC", "UTMALDG.2D", "HGMMA.64x256x16.F32"})
      EXPECT_NE(sass->find(op), std::string::npos) << op << ":\n" << sass->substr(0, 4000);
    for (const char *absent : {"LDL", "STL"})
      EXPECT_EQ(sass->find(absent), std::string::npos) << absent;
  }
}

// Exact against float64 on the executor, whose warps run as independent fibers (the producer
// runs ahead into the next tile): 8 tiles over 3 blocks at ring depths 2..4 with 5 K steps
// (more than the ring) and 2 (fewer), in grouped order; one tile on a grid of one; one K step
// per tile (the tile's copy filled once, on a barrier that completes once per tile); a ragged
// shape (the last block row and column shifted inwards) in groups of 8.
TEST(Persistent, GemmWgmmaExactOnTheExecutor) {
  for (int stages : {2, 3, 4}) {
    SCOPED_TRACE("stages " + std::to_string(stages));
    EXPECT_EQ(mismatch(gemm_wgmma(256, 256, 320, persistent_tiles(stages, 3, 2)), 256, 256, 320),
              "");
    EXPECT_EQ(mismatch(gemm_wgmma(256, 256, 128, persistent_tiles(stages, 3)), 256, 256, 128),
              "");
  }
  EXPECT_EQ(mismatch(gemm_wgmma(128, 64, 256, persistent_tiles(4, 132)), 128, 64, 256), "");
  EXPECT_EQ(mismatch(gemm_wgmma(256, 128, 64, persistent_tiles(3, 3)), 256, 128, 64), "");
  EXPECT_EQ(mismatch(gemm_wgmma(200, 136, 192, persistent_tiles(3, 4, 8)), 200, 136, 192), "");
}

// The registry's knobs: P=1 on PB blocks, in the tuner's name, and its candidates.
TEST(Persistent, GemmWgmmaKnobs) {
  GemmWgmmaTiles t = gemm_wgmma_tiles_from_knobs(
      {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"G", 8}, {"TMA", 1}, {"P", 1}, {"PB", 114}});
  EXPECT_TRUE(t.persistent);
  EXPECT_EQ(t.persistent_blocks, 114);
  EXPECT_EQ(to_string(t),
            "wgmma bm=128 bn=256 bk=64 wg=2x1 n=256 stages=4 raster=8 swizzle=128 tma ws "
            "persistent=114");
  // P=0 (absent): the tiles' choice, persistent for 1 to 8 waves of blocks (4096^3: 512 tiles;
  // 8192^3: 2048, not); P=2: never; a split K: not.
  // (TMA=1: the registry's default; without it the knobs ask for cp.async, and no warp roles.)
  EXPECT_TRUE(gemm_wgmma_tiles_from_knobs({{"M", 4096}, {"N", 4096}, {"K", 4096}, {"TMA", 1}})
                  .persistent);
  EXPECT_FALSE(gemm_wgmma_tiles_from_knobs({{"M", 8192}, {"N", 8192}, {"K", 8192}, {"TMA", 1}})
                   .persistent);
  EXPECT_FALSE(gemm_wgmma_tiles_from_knobs(
                   {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"TMA", 1}, {"P", 2}})
                   .persistent);
  EXPECT_FALSE(gemm_wgmma_tiles_from_knobs(
                   {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"TMA", 1}, {"SK", 2}})
                   .persistent);
  // Nor without warp roles (TMA=0 or WS=0), which the tile loop needs: those shapes still build.
  for (const char *off : {"TMA", "WS"}) {
    ShapeParams p{{"M", 4096}, {"N", 4096}, {"K", 4096}, {off, 0}};
    EXPECT_FALSE(gemm_wgmma_tiles_from_knobs(p).persistent) << off;
    EXPECT_NO_THROW(find_schedule("gemm_wgmma").build(
        resolve_shape(find_schedule("gemm_wgmma"), p), Float(16)))
        << off;
  }
  // Small grids: P=1 takes whole K per tile (no split-K) unless SK asks.
  GemmWgmmaTiles small =
      gemm_wgmma_tiles_from_knobs({{"M", 64}, {"N", 4096}, {"K", 4096}, {"TMA", 1}, {"P", 1}});
  EXPECT_EQ(small.split_k, 1);
  EXPECT_EQ(small.persistent_blocks, 132);
}
