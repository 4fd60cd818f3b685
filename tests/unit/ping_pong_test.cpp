// Ping-pong consumers (Stage::warp_specialize(ConsumerRoles::ping_pong); gemm_wgmma's PP=1):
// in a persistent kernel, two consumer warpgroups take the block's tiles in turn, each a whole
// tile, their main loops ordered by named barriers so that one's epilogue runs beside the
// other's MMAs. The IR's shape, exactness on the CPU executor (whose warps run as independent
// fibers) against float64, a protocol with a missing turn reported as a deadlock, the user
// errors, and NVRTC for sm_90a.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/tessel.h"
#include "schedules/GemmWgmma.h"

#include "ExactGemm.h"
#include "SassUtil.h"

#include <gtest/gtest.h>

#include <regex>

using namespace tessel;
using tessel::test::count_of;
using tessel::test::expect_error;

namespace {

// 128 x 128 tiles, one warpgroup each, walked by `blocks` blocks with ping-pong consumers.
GemmWgmmaTiles ping_pong_tiles(int stages, int blocks, int64_t group = 0) {
  return {.block_m = 128, .block_n = 128, .block_k = 64, .warpgroups_m = 1, .stages = stages,
          .raster_group = group, .tma = true, .warp_specialized = true, .persistent = true,
          .persistent_blocks = blocks, .ping_pong = true};
}

std::string mismatch(const ScheduledProgram &p, int64_t M, int64_t N, int64_t K) {
  return tessel::test::exact_gemm_mismatch(lower(p.schedule, p.args), M, N, K);
}

// Drops every call of one intrinsic (a broken protocol, for the deadlock test).
class DropIntrinsic : public IRMutator {
public:
  explicit DropIntrinsic(const char *name) : name_(name) {}

protected:
  Stmt visit(const Evaluate *op) override {
    if (const auto *c = op->value.as<Call>(); c && c->is_intrinsic(name_))
      return Evaluate::make(Expr(0));
    return IRMutator::visit(op);
  }

private:
  const char *name_;
};

} // namespace

// 16 tiles over 3 blocks: 6 iterations, so each consumer warpgroup walks 3 of its own
// (C.tile_iter = C.tile_iter.wg * 2 + threadIdx.y). The producer is warpgroup 2 and keeps the
// block's tile loop; the empty barriers count one warpgroup (each slot is one tile's, consumed
// by one warpgroup). A warpgroup waits for its turn (barrier 3 + its index) before its main
// loop except on the block's first tile, and gives the turn to the other (4 - its index)
// after it where the block has a next tile (guarded for the tiles running out); its
// syncthreads are a named barrier of its own 128 threads.
TEST(PingPong, TilesInTurn) {
  ScheduledProgram p = gemm_wgmma(512, 512, 320, ping_pong_tiles(4, 3));
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(m.funcs.size(), 1u);
  EXPECT_EQ(m.funcs[0].launch.grid[0], 3);
  EXPECT_EQ(m.funcs[0].launch.block[0], 128);
  EXPECT_EQ(m.funcs[0].launch.block[1], 3);
  std::string ir = to_string(m);
  EXPECT_EQ(count_of(ir, "@mbarrier_init(@address_of(k.outer_empty[0]), 128)"), 1) << ir;
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(if \(threadIdx.y == 2\) \{\n\s*@setmaxnreg\(40, 0\))")))
      << ir;
  std::string consumers = ir.substr(ir.find("@setmaxnreg(232, 1)"));
  std::regex own_tiles(R"(attr \[C.tile_iter.wg\] "tile_loop" = 16;\n)"
                       R"(\s*for \(C.tile_iter.wg: int32, 0, 3\) \{\n)"
                       R"(\s*let C.tile_iter: int32 = C.tile_iter.wg \* 2 \+ threadIdx.y\n)"
                       R"(\s*let C.tile: int32 = C.tile_iter \* 3 \+ blockIdx.x\n)"
                       R"(\s*if \(C.tile < 16\) \{)");
  EXPECT_TRUE(std::regex_search(consumers, own_tiles)) << consumers;
  std::regex turns(R"(if \(1 <= C.tile_iter\) \{\n\s*@named_barrier_sync\(threadIdx.y \+ 3, 256\)\n)"
                   R"(\s*\}\n\s*for \(k.outer: int32, 0, 5\) \{[^]*?\n\s*\}\n)"
                   R"(\s*if \(C.tile_iter < 5 && C.tile_iter \* 3 \+ blockIdx.x < 13\) \{\n)"
                   R"(\s*@named_barrier_arrive\(4 - threadIdx.y, 256\)\n\s*\}\n)"
                   R"(\s*@wgmma_wait\(0\))");
  EXPECT_TRUE(std::regex_search(consumers, turns)) << consumers;
  EXPECT_EQ(consumers.find("tma_load"), std::string::npos);

  // An odd count of iterations: the second warpgroup's last one has no tile.
  ScheduledProgram q = gemm_wgmma(512, 384, 128, ping_pong_tiles(2, 4));
  std::string odd = to_string(lower(q.schedule, q.args));
  EXPECT_NE(odd.find("for (C.tile_iter.wg: int32, 0, 2) {\n"), std::string::npos) << odd;
  EXPECT_NE(odd.find("if (C.tile_iter < 3) {"), std::string::npos) << odd;
}

// Exact against float64 on the executor: tile counts even and odd per block, ring depths 2..4
// with more K steps than slots and fewer, one block walking every tile, a grid with as many
// ragged shapes (the last row
// and column of tiles shifted inwards), grouped order.
TEST(PingPong, GemmWgmmaExactOnTheExecutor) {
  for (int stages : {2, 3, 4}) {
    SCOPED_TRACE("stages " + std::to_string(stages));
    EXPECT_EQ(mismatch(gemm_wgmma(512, 512, 320, ping_pong_tiles(stages, 3, 2)), 512, 512, 320),
              "");
    EXPECT_EQ(mismatch(gemm_wgmma(384, 256, 128, ping_pong_tiles(stages, 4)), 384, 256, 128),
              "");
  }
  EXPECT_EQ(mismatch(gemm_wgmma(256, 256, 192, ping_pong_tiles(3, 1)), 256, 256, 192), "");
  EXPECT_EQ(mismatch(gemm_wgmma(300, 200, 256, ping_pong_tiles(3, 3, 8)), 300, 200, 256), "");
  // The registry's knob: PP=1 is 128 x 128 ping-pong on PB blocks.
  ShapeParams knobs{{"M", 256}, {"N", 384}, {"K", 192}, {"TMA", 1}, {"PP", 1}, {"PB", 2}};
  GemmWgmmaTiles t = gemm_wgmma_tiles_from_knobs(knobs);
  EXPECT_TRUE(t.ping_pong && t.persistent);
  EXPECT_EQ(to_string(t), "wgmma bm=128 bn=128 bk=64 wg=1x1 n=128 stages=4 raster=0 "
                          "swizzle=128 tma ws persistent=2 ping_pong");
  EXPECT_EQ(mismatch(gemm_wgmma(256, 384, 192, t), 256, 384, 192), "");
}

// gemm_wgmma's own choice (PP=0): ping-pong for a float32 C at K <= 1024 over 2 waves or more
// of 128 x 128 tiles, through the deepest ring that fits (7 stages of 32 KiB); not at longer
// K, for a float16 C, on a small grid, with PP=2, explicit tiles, a TMA store or clusters. The
// kernel compiles for sm_90a without spills.
TEST(PingPong, ByDefaultForShortK) {
  auto tiles = [](int64_t M, int64_t N, int64_t K, ShapeParams knobs = {},
                  DataType out = Float(32)) {
    knobs.insert({{"M", M}, {"N", N}, {"K", K}, {"TMA", 1}, {"G", 8}});
    return gemm_wgmma_tiles_from_knobs(knobs, out);
  };
  GemmWgmmaTiles t = tiles(4096, 4096, 1024);
  EXPECT_EQ(to_string(t), "wgmma bm=128 bn=128 bk=64 wg=1x1 n=128 stages=7 raster=8 "
                          "swizzle=128 tma ws persistent=132 ping_pong");
  EXPECT_TRUE(tiles(8192, 8192, 1024).ping_pong); // not persistent by default otherwise
  EXPECT_TRUE(tiles(3000, 5000, 700).ping_pong);
  EXPECT_EQ(tiles(4096, 4096, 1024, {{"S", 5}}).stages, 5);
  EXPECT_FALSE(tiles(4096, 4096, 1536).ping_pong);
  EXPECT_FALSE(tiles(4096, 4096, 1024, {}, Float(16)).ping_pong);
  EXPECT_FALSE(tiles(2048, 2048, 1024).ping_pong); // 256 tiles: under 2 waves
  for (const ShapeParams &off : std::vector<ShapeParams>{
           {{"PP", 2}}, {{"BM", 128}, {"BN", 256}}, {{"TS", 1}}, {{"CL", 1}}, {{"P", 2}}})
    EXPECT_FALSE(tiles(4096, 4096, 1024, off).ping_pong) << off.begin()->first;
  // The registry's gemm_wgmma and gemm_tc take it; gemm_bias_gelu (a float16 C) does not.
  auto ring = [](const char *schedule, int64_t K) {
    const ScheduleEntry &e = find_schedule(schedule);
    ScheduledProgram p =
        e.build(resolve_shape(e, {{"M", 4096}, {"N", 4096}, {"K", K}}), Float(16));
    return lower(p.schedule, p.args).funcs.back().launch.dynamic_shared_bytes;
  };
  EXPECT_EQ(ring("gemm_wgmma", 1024), 2048 + 7 * 32768);
  EXPECT_EQ(ring("gemm_wgmma", 2048), 2048 + 4 * 49152);
  EXPECT_EQ(ring("gemm_bias_gelu", 1024), 2048 + 4 * 49152);
  ScheduledProgram p = gemm_wgmma(4096, 4096, 1024, t);
  LoweredModule m = lower(p.schedule, p.args);
  CompiledKernel k =
      tessel::test::compile_for_sm90(m, codegen_cuda(m), "gemm_wgmma_ping_pong_default.cu");
  ASSERT_FALSE(k.cubin.empty()) << k.log;
  EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
  EXPECT_EQ(k.kernels.at(0).stack_bytes, 0) << k.log;
}

// Without the turns' arrivals, warpgroup 1 waits for a turn that never comes: the executor
// reports the deadlock, naming the barrier, instead of hanging.
TEST(PingPong, MissingTurnIsADeadlock) {
  ScheduledProgram p = gemm_wgmma(256, 256, 128, ping_pong_tiles(2, 1));
  LoweredModule m = lower(p.schedule, p.args);
  for (LoweredFunc &f : m.funcs)
    f.body = DropIntrinsic(intrinsic::named_barrier_arrive).mutate(f.body);
  expect_error([&] { (void)tessel::test::exact_gemm_mismatch(m, 256, 256, 128); },
               {"deadlock", "named_barrier_sync(4"});
}

TEST(PingPong, Errors) {
  // Two warpgroups a tile: ping-pong needs one.
  GemmWgmmaTiles two = ping_pong_tiles(4, 3);
  two.warpgroups_m = 2;
  expect_error([&] { (void)gemm_wgmma(512, 512, 256, two); },
               {"gemm_wgmma", "ping-pong", "one warpgroup a tile", "2x1 warpgroups"});
  // Not persistent.
  GemmWgmmaTiles flat = ping_pong_tiles(4, 3);
  flat.persistent = false;
  expect_error([&] { (void)gemm_wgmma(512, 512, 256, flat); },
               {"ping-pong", "persistent (P=1)"});
  // A TMA store of C: one staging tile, which two warpgroups would fill with two tiles.
  GemmWgmmaTiles staged = ping_pong_tiles(4, 3);
  staged.tma_store = true;
  expect_error([&] { (void)gemm_wgmma(512, 512, 256, staged); },
               {"gemm_wgmma", "TMA store of C", "ping-pong consumers", "use one of them"});
  // 128 x 256 tiles of one warpgroup do not fit its registers.
  GemmWgmmaTiles wide = ping_pong_tiles(4, 3);
  wide.block_n = 256;
  expect_error([&] { (void)gemm_wgmma(512, 512, 256, wide); },
               {"256 float32 accumulators", "232 registers"});
}

// A block with one tile (a grid of as many blocks as tiles, or the primitive on a stage that
// is not persistent): the first consumer warpgroup computes it, the second idles, and the
// remarks say so.
TEST(PingPong, OneTileABlock) {
  EXPECT_EQ(mismatch(gemm_wgmma(256, 256, 192, ping_pong_tiles(3, 4)), 256, 256, 192), "");
  GemmWgmmaTiles plain{.block_m = 128, .block_n = 128, .block_k = 64, .warpgroups_m = 1,
                       .stages = 4, .tma = true, .warp_specialized = true};
  ScheduledProgram q = gemm_wgmma(256, 256, 256, plain);
  for (const Stage &st : q.schedule.stages())
    if (st.get()->warp_specialized)
      st.get()->consumer_roles = ConsumerRoles::ping_pong;
  LoweredModule m = lower(q.schedule, q.args);
  std::string remarks;
  for (const Remark &r : m.remarks)
    remarks += r.str() + "\n";
  EXPECT_NE(remarks.find("second consumer warpgroup idles"), std::string::npos) << remarks;
  EXPECT_NE(to_string(m).find("if (threadIdx.y == 0) {"), std::string::npos);
  EXPECT_EQ(tessel::test::exact_gemm_mismatch(m, 256, 256, 256), "");
}

// NVRTC for sm_90a at 4096^3: no spills, the roles' register moves, the turns' barriers.
TEST(PingPong, CompilesForSm90a) {
  GemmWgmmaTiles t = gemm_wgmma_tiles_from_knobs(
      {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"TMA", 1}, {"G", 8}, {"PP", 1}});
  ScheduledProgram p = gemm_wgmma(4096, 4096, 4096, t);
  LoweredModule m = lower(p.schedule, p.args);
  std::string cuda = codegen_cuda(m);
  EXPECT_NE(cuda.find("bar.arrive %0, %1;"), std::string::npos);
  CompiledKernel k = tessel::test::compile_for_sm90(m, cuda, "gemm_wgmma_ping_pong.cu");
  ASSERT_FALSE(k.cubin.empty()) << k.log;
  EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
  EXPECT_EQ(k.kernels.at(0).stack_bytes, 0) << k.log;
  if (std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "gemm_wgmma_ping_pong")) {
    for (const char *op : {"USETMAXREG", "BAR.ARV", "BAR.SYNC", "HGMMA.64x128x16.F32"})
      EXPECT_NE(sass->find(op), std::string::npos) << op << ":\n" << sass->substr(0, 4000);
    for (const char *absent : {"LDL", "STL"})
      EXPECT_EQ(sass->find(absent), std::string::npos) << absent;
  }
}

// C's rows of odd width (float32, not on 32-byte sectors) are not staged through an operand
// tile in a tile loop: the operand tiles are live at a tile's store in a persistent kernel (the
// next tile's fills) and under ping-pong (the other warpgroup's main loop). The H100 got wrong
// results for 300 x 301 x 256 with ping-pong before. A block of one tile still stages them.
TEST(PingPong, OddWidthStoresUseNoOperandTile) {
  auto cuda = [](const GemmWgmmaTiles &t) {
    ScheduledProgram p = gemm_wgmma(300, 301, 256, t);
    return codegen_cuda(lower(p.schedule, p.args));
  };
  GemmWgmmaTiles persistent = ping_pong_tiles(3, 2);
  persistent.ping_pong = false;
  for (const GemmWgmmaTiles &t : {ping_pong_tiles(3, 3), persistent}) {
    std::string src = cuda(t);
    EXPECT_EQ(src.find("float* tile"), std::string::npos) << to_string(t) << "\n" << src;
    EXPECT_EQ(count_of(src, "__syncthreads()"), 1) << to_string(t); // the ring's init
  }
  EXPECT_NE(cuda(gemm_wgmma_tiles(300, 301, 256)).find("float* tile"), std::string::npos);
  EXPECT_EQ(mismatch(gemm_wgmma(300, 301, 256, ping_pong_tiles(3, 3)), 300, 301, 256), "");
}
