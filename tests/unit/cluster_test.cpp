// Thread-block clusters (Stage::cluster) with TMA multicast of the shared operand
// (Stage::multicast): gemm_wgmma's clusters of 2 blocks along M (B's tile multicast, CL=1) and
// along N (A's, CL=2). The lowered IR (cluster dims, half boxes issued by each block to both,
// the ring's empty barriers counting both blocks' consumers and released by remote arrivals,
// the cluster barriers), exact results on the CPU executor (a cluster's blocks run together),
// a broken protocol caught there, NVRTC for sm_90a with the multicast in the SASS, and the
// errors for what cannot be clustered.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/Intrinsics.h"
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

// 128 x 128 blocks of two consumer warpgroups, TMA with warp roles, clusters of 2 along M
// (cluster 1) or N (cluster 2).
GemmWgmmaTiles cluster_tiles(int cluster, int stages, int64_t group = 0) {
  return {.block_m = 128, .block_n = 128, .block_k = 64, .warpgroups_m = 2, .stages = stages,
          .raster_group = group, .tma = true, .warp_specialized = true, .cluster = cluster};
}

std::string mismatch(const LoweredModule &m, int64_t M, int64_t N, int64_t K) {
  return tessel::test::exact_gemm_mismatch(m, M, N, K);
}
std::string mismatch(const ScheduledProgram &p, int64_t M, int64_t N, int64_t K) {
  return mismatch(lower(p.schedule, p.args), M, N, K);
}

// The module with `f` applied to every statement of its kernels' bodies: a protocol broken on
// purpose.
LoweredModule rewritten(LoweredModule m, IRMutator &&f) {
  for (LoweredFunc &k : m.funcs)
    k.body = f.mutate(k.body);
  return m;
}

// Sets the count of the ring's empty barriers (those initialized with `from`) to `to`.
class EmptyCount : public IRMutator {
public:
  EmptyCount(int64_t from, int64_t to) : from_(from), to_(to) {}

protected:
  Expr visit(const Call *op) override {
    Expr e = IRMutator::visit(op);
    const auto *c = e.as<Call>();
    if (c->is_intrinsic(intrinsic::mbarrier_init) && is_const_int(c->args[1], from_))
      return Call::make(c->type, c->name, {c->args[0], Expr(int(to_))}, c->call_kind);
    return e;
  }

private:
  int64_t from_, to_;
};

// Drops the first cluster_sync (the one after the rings' initialization).
class DropFirstClusterSync : public IRMutator {
protected:
  Stmt visit(const Evaluate *op) override {
    const auto *c = op->value.as<Call>();
    if (!dropped_ && c && c->is_intrinsic(intrinsic::cluster_sync)) {
      dropped_ = true;
      return Evaluate::make(Expr(0));
    }
    return IRMutator::visit(op);
  }

private:
  bool dropped_ = false;
};

} // namespace

// The primitive on a plain schedule (no TMA): 32 x 32 tiles, clusters of 2 along blockIdx.y.
// The kernel's cluster dims, and one cluster_sync (before exit: no barriers to publish); the
// executor runs each cluster's two blocks together.
TEST(Cluster, PlainSchedule) {
  GemmTensors g = gemm_definition(128, 64, 8, Float(32));
  Schedule s = create_schedule({g.C});
  auto [i, j] = s[g.C].axes<2>();
  auto [bi, ii] = s[g.C].split(i, 32);
  auto [bj, jj] = s[g.C].split(j, 32);
  s[g.C].reorder({bi, bj, ii, jj});
  s[g.C].bind(bi, thread_axis("blockIdx.y")).bind(bj, thread_axis("blockIdx.x"));
  s[g.C].bind(jj, thread_axis("threadIdx.x"));
  s[g.C].cluster(bi, 2);
  LoweredModule m = lower(s, {g.A, g.B, g.C});
  EXPECT_EQ(m.funcs[0].launch.cluster, (std::array<int64_t, 3>{1, 2, 1}));
  std::string ir = to_string(m);
  EXPECT_NE(ir.find("grid (2, 4, 1), block (32, 1, 1), cluster (1, 2, 1)"), std::string::npos)
      << ir;
  EXPECT_EQ(count_of(ir, "@cluster_sync()"), 1) << ir;
  CheckResult r = check_on_cpu(s, {g.A, g.B, g.C}, 2);
  EXPECT_TRUE(r.compare.ok) << r.str();
}

// 1x2 (CL=2): two blocks along N share A's 128 x 64 tile; each issues half of its box (64
// rows) to both with a mask of 3, at the offset of its rank (blockIdx.x % 2, here blockIdx.x:
// the grid is one cluster wide); B stays per block. The empty barriers count the consumers of both blocks (2 x 256) and each consumer
// releases a slot in both blocks; cluster_sync after the barriers' init and at the end.
TEST(Cluster, GemmWgmmaLoweredIR) {
  ScheduledProgram p = gemm_wgmma(256, 256, 320, cluster_tiles(2, 4));
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(m.funcs.size(), 1u);
  const LaunchConfig &l = m.funcs[0].launch;
  EXPECT_EQ(l.cluster, (std::array<int64_t, 3>{2, 1, 1}));
  EXPECT_EQ(l.grid, (std::array<int64_t, 3>{2, 2, 1}));
  std::string ir = to_string(m);
  EXPECT_NE(ir.find("grid (2, 2, 1), block (128, 3, 1), dynamic shared 133120 bytes, cluster "
                    "(2, 1, 1)"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("@mbarrier_init(@address_of(k.outer_empty[0]), 512)"), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("@mbarrier_init(@address_of(k.outer_full[0]), 1)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("@tma_load_multicast(A_tmap, @address_of(A.shared[floormod(k.outer, 4) * "
                    "8192 + blockIdx.x * 4096]), @address_of(k.outer_full[floormod(k.outer, 4)]), "
                    "3, k.outer * 64, blockIdx.y * 128 + blockIdx.x * 64)"),
            std::string::npos)
      << ir;
  EXPECT_EQ(count_of(ir, "@tma_load_multicast("), 1) << ir;
  EXPECT_EQ(count_of(ir, "@tma_load(B_tmap"), 2) << ir; // two 64-column boxes, per block
  EXPECT_NE(ir.find("@mbarrier_arrive_expect_tx(@address_of(k.outer_full[floormod(k.outer, 4)]), "
                    "32768)"),
            std::string::npos)
      << ir; // the whole A tile and B's: the peer's half lands here too
  EXPECT_EQ(count_of(ir, "@mbarrier_arrive_cluster(@address_of(k.outer_empty["), 2) << ir;
  EXPECT_EQ(count_of(ir, "@mbarrier_arrive(@address_of(k.outer_empty"), 0) << ir;
  std::regex init_sync(R"(@fence_barrier_init\(\)\n\s*\}\n\s*@fence_proxy_async\(\)\n)"
                       R"(\s*@syncthreads\(\)\n\s*@cluster_sync\(\)\n\s*attr \[0\] "warp_specialize")");
  EXPECT_TRUE(std::regex_search(ir, init_sync)) << ir;
  EXPECT_EQ(count_of(ir, "@cluster_sync()"), 2) << ir;
  // The tensor map of A's half box: 64 columns x 64 rows.
  bool half_box = false;
  for (const TensorMapParam &t : m.funcs[0].tensor_maps)
    half_box |= t.var.name() == "A_tmap" && t.box == std::vector<int64_t>{64, 64};
  EXPECT_TRUE(half_box);

  // 2x1 (CL=1): along M (blockIdx.y), B's 64 x 128 tile shared: each block issues 32 of its 64
  // K rows of each of its two column boxes.
  ScheduledProgram q = gemm_wgmma(256, 256, 320, cluster_tiles(1, 4));
  LoweredModule mq = lower(q.schedule, q.args);
  EXPECT_EQ(mq.funcs[0].launch.cluster, (std::array<int64_t, 3>{1, 2, 1}));
  std::string irq = to_string(mq);
  EXPECT_EQ(count_of(irq, "@tma_load_multicast(B_tmap"), 2) << irq;
  EXPECT_NE(irq.find("@tma_load_multicast(B_tmap, @address_of(B.shared[floormod(k.outer, 4) * "
                     "8192 + blockIdx.y * 2048]), @address_of(k.outer_full[floormod(k.outer, 4)]), "
                     "3, blockIdx.x * 128, k.outer * 64 + blockIdx.y * 32)"),
            std::string::npos)
      << irq;
  EXPECT_EQ(count_of(irq, "@tma_load(A_tmap"), 1) << irq;

  // The CUDA: __cluster_dims__, the multicast copy, remote arrivals, the cluster barrier.
  std::string cu = codegen_cuda(m);
  for (const char *s :
       {"__launch_bounds__(384) __cluster_dims__(2, 1, 1) ",
        "tessel_tma_load_multicast_2d(&A_shared[", "(unsigned short)3, k_outer * 64",
        "mbarrier.arrive.shared::cluster.b64 _, [remote]", "mapa.shared::cluster.u32",
        ".multicast::cluster", "barrier.cluster.arrive.release.aligned", "tessel_cluster_sync();"})
    EXPECT_NE(cu.find(s), std::string::npos) << s;
}

// Exact against float64 on the executor, the two blocks of each cluster running together:
// both cluster shapes, ring depths 2..4 with 5 K steps (more than the ring), rasterized and
// not; a longer M (4 block rows, 2 clusters along it); without warp roles (the first thread of
// each block issues its half, every thread releases both blocks' slots).
TEST(Cluster, GemmWgmmaExactOnTheExecutor) {
  for (int cluster : {1, 2})
    for (int stages : {2, 3, 4}) {
      SCOPED_TRACE("cluster " + std::to_string(cluster) + ", stages " + std::to_string(stages));
      EXPECT_EQ(mismatch(gemm_wgmma(256, 256, 320, cluster_tiles(cluster, stages)), 256, 256, 320),
                "");
    }
  EXPECT_EQ(mismatch(gemm_wgmma(256, 256, 320, cluster_tiles(2, 4, 8)), 256, 256, 320), "");
  EXPECT_EQ(mismatch(gemm_wgmma(512, 256, 192, cluster_tiles(1, 3, 8)), 512, 256, 192), "");
  // Clusters of 4 along M and along N: each block multicasts a quarter of the shared tile and
  // releases each slot in all four blocks.
  GemmWgmmaTiles four_m = cluster_tiles(1, 3), four_n = cluster_tiles(2, 3);
  four_m.cluster_size = four_n.cluster_size = 4;
  EXPECT_EQ(mismatch(gemm_wgmma(512, 256, 192, four_m), 512, 256, 192), "");
  EXPECT_EQ(mismatch(gemm_wgmma(256, 512, 192, four_n), 256, 512, 192), "");
  GemmWgmmaTiles no_roles = cluster_tiles(2, 3);
  no_roles.warp_specialized = false;
  EXPECT_EQ(mismatch(gemm_wgmma(256, 256, 320, no_roles), 256, 256, 320), "");
}

// Persistent and clustered: the grid's clusters walk pairs of tiles that share the operand (a
// cluster tile), each block the tile of its rank; 4 cluster tiles over 2 clusters, and over 1.
TEST(Cluster, PersistentExactOnTheExecutor) {
  for (int cluster : {1, 2}) {
    SCOPED_TRACE("cluster " + std::to_string(cluster));
    GemmWgmmaTiles t = cluster_tiles(cluster, 3, 2);
    t.persistent = true;
    t.persistent_blocks = 4;
    ScheduledProgram p = gemm_wgmma(512, 256, 320, t);
    LoweredModule m = lower(p.schedule, p.args);
    EXPECT_EQ(m.funcs[0].launch.grid[0], 4);
    EXPECT_EQ(m.funcs[0].launch.cluster, (std::array<int64_t, 3>{2, 1, 1}));
    std::string ir = to_string(m);
    EXPECT_NE(ir.find("let C.tile: int32 = C.tile_iter * 2 + floordiv(blockIdx.x, 2)"),
              std::string::npos)
        << ir;
    EXPECT_EQ(mismatch(m, 512, 256, 320), "");
    t.persistent_blocks = 3; // one cluster: the grid is whole clusters
    ScheduledProgram q = gemm_wgmma(512, 256, 320, t);
    LoweredModule mq = lower(q.schedule, q.args);
    EXPECT_EQ(mq.funcs[0].launch.grid[0], 2);
    EXPECT_EQ(mismatch(mq, 512, 256, 320), "");
    // One K step per tile: no ring; the tile's copies filled once per tile, the multicast one
    // after a cluster_sync (it overwrites the peer's copy of the previous tile too).
    ScheduledProgram one = gemm_wgmma(512, 256, 64, t);
    LoweredModule mo = lower(one.schedule, one.args);
    EXPECT_EQ(count_of(to_string(mo), "@cluster_sync()"), 4) << to_string(mo);
    EXPECT_EQ(mismatch(mo, 512, 256, 64), "");
    // With C stored by TMA (the cluster is C's block, not its staging tile's) and with
    // ping-pong consumers (a block's tiles in turn, each a cluster tile).
    GemmWgmmaTiles ts = cluster_tiles(cluster, 3, 2);
    ts.tma_store = true;
    EXPECT_EQ(mismatch(gemm_wgmma(512, 512, 320, ts), 512, 512, 320), "");
    ts.persistent = true;
    ts.persistent_blocks = 4;
    EXPECT_EQ(mismatch(gemm_wgmma(512, 512, 320, ts), 512, 512, 320), "");
    GemmWgmmaTiles pp = t;
    pp.warpgroups_m = 1;
    pp.ping_pong = true;
    pp.persistent_blocks = 4;
    EXPECT_EQ(mismatch(gemm_wgmma(512, 512, 320, pp), 512, 512, 320), "");
  }
}

// Drops the last cluster_sync (the one before the blocks exit).
class DropLastClusterSync : public IRMutator {
protected:
  Stmt visit(const Evaluate *op) override {
    const auto *c = op->value.as<Call>();
    if (c && c->is_intrinsic(intrinsic::cluster_sync) && ++seen_ == 2)
      return Evaluate::make(Expr(0));
    return IRMutator::visit(op);
  }

private:
  int seen_ = 0;
};

// Releases a slot in block 0 only (of the arrivals on ranks 0 and 1, the first is kept as a
// local one and the second dropped): the empty barriers' counts are never reached.
class LocalReleases : public IRMutator {
protected:
  Stmt visit(const Evaluate *op) override {
    const auto *c = op->value.as<Call>();
    if (!c || !c->is_intrinsic(intrinsic::mbarrier_arrive_cluster))
      return IRMutator::visit(op);
    if (!is_zero(c->args[1]))
      return Evaluate::make(Expr(0));
    return Evaluate::make(Call::make(c->type, intrinsic::mbarrier_arrive, {c->args[0]},
                                     c->call_kind));
  }
};

// A broken protocol fails on the executor: the empty barriers counting one block's consumers
// (a producer refills a slot of its peer that the peer has not consumed), no cluster barrier
// after the barriers' init (a block multicasts into a peer whose barriers it is not ordered
// after), none before the exit (a block arrives on its exited peer's barrier), the consumers
// releasing their own block's slot only (the count of both blocks is never reached: deadlock).
TEST(Cluster, BrokenProtocolFailsOnTheExecutor) {
  ScheduledProgram p = gemm_wgmma(256, 256, 320, cluster_tiles(2, 2));
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(mismatch(m, 256, 256, 320), "");
  expect_error([&] { mismatch(rewritten(m, EmptyCount(512, 256)), 256, 256, 320); },
               {"interp", "tma_load_multicast", "of block (1,0,0) (multicast from block (0,0,0))",
                "while the tma_load_multicast", "is in flight"});
  expect_error([&] { mismatch(rewritten(m, DropFirstClusterSync()), 256, 256, 320); },
               {"interp", "of block (1,0,0) (rank 1 of the cluster) is used before its "
                          "mbarrier_init is ordered before the use", "cluster_sync"});
  expect_error([&] { mismatch(rewritten(m, DropLastClusterSync()), 256, 256, 320); },
               {"interp", "mbarrier_arrive_cluster", "has exited", "a cluster_sync at the end"});
  expect_error([&] { mismatch(rewritten(m, LocalReleases()), 256, 256, 320); },
               {"interp", "deadlock in the cluster of blocks (0,0,0) (1,0,0)", "mbarrier_wait on "
                                                                           "barrier "
                                                                           "'k.outer_empty'"});
}

// NVRTC compiles the clustered kernels for sm_90a at the default 128 x 256 tiles of 4096^3
// without spills: 2x1 persistent, 1x2 not (1x2 persistent spills 8 bytes at the 168 registers
// of the launch bound: docs/WGMMA.md); the SASS has the multicast TMA load.
TEST(Cluster, CompilesForSm90a) {
  for (int cluster : {1, 2}) {
    SCOPED_TRACE("cluster " + std::to_string(cluster));
    GemmWgmmaTiles big = gemm_wgmma_tiles(4096, 4096, 4096);
    big.cluster = cluster;
    big.persistent = cluster == 1;
    // K = 1024: at 512 of K the persistent clustered kernel spills 24 bytes at its 168
    // registers (ptxas's choice, with a float32 C stored 4 elements a lane and, before that,
    // with a float16 C; 4096 x 4096 x 512 P=1,CL=1 spills 160 bytes either way).
    ScheduledProgram q = gemm_wgmma(512, 512, 1024, big);
    LoweredModule mq = lower(q.schedule, q.args);
    const std::string tag = "gemm_wgmma_cluster" + std::to_string(cluster);
    CompiledKernel k = tessel::test::compile_for_sm90(mq, codegen_cuda(mq), tag + ".cu");
    ASSERT_FALSE(k.cubin.empty()) << k.log;
    EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
    EXPECT_EQ(k.kernels.at(0).stack_bytes, 0) << k.log;
    if (std::optional<std::string> sass = tessel::test::sass_of(k.cubin, tag)) {
      std::regex multicast(R"(UTMALDG\.2D[.A-Z0-9_]*MULTICAST)");
      EXPECT_TRUE(std::regex_search(*sass, multicast)) << sass->substr(0, 6000);
      for (const char *op : {"HGMMA.64x256x16.F32", "USETMAXREG.DEALLOC"})
        EXPECT_NE(sass->find(op), std::string::npos) << op;
      for (const char *absent : {"LDL", "STL"})
        EXPECT_EQ(sass->find(absent), std::string::npos) << absent;
    }
  }
}

// What cannot be clustered or multicast, each a tessel::Error naming the stage and what to do.
TEST(Cluster, Errors) {
  // The primitive on a plain schedule: C in 32 x 32 tiles on blockIdx.y / x.
  auto with = [](int64_t M, const std::function<void(Stage, IterVar, IterVar)> &f) {
    return [M, f] {
      GemmTensors g = gemm_definition(M, 64, 8, Float(32));
      Schedule s = create_schedule({g.C});
      auto [i, j] = s[g.C].axes<2>();
      auto [bi, ii] = s[g.C].split(i, 32);
      auto [bj, jj] = s[g.C].split(j, 32);
      s[g.C].reorder({bi, bj, ii, jj});
      s[g.C].bind(bi, thread_axis("blockIdx.y"));
      f(s[g.C], bi, bj);
      lower(s, {g.A, g.B, g.C});
    };
  };
  expect_error(with(96, [](Stage c, IterVar bi, IterVar) { c.cluster(bi); }),
               {"cluster", "stage 'C'", "'i.outer' has 3 tiles", "not a multiple of the cluster "
                                                                 "size 2"});
  expect_error(with(64, [](Stage c, IterVar, IterVar bj) { c.cluster(bj); }),
               {"cluster", "stage 'C'", "'j.outer'", "not bound to a thread index", "blockIdx"});
  expect_error(with(64, [](Stage c, IterVar bi, IterVar) { c.cluster(bi, 3); }),
               {"cluster", "clusters of 3 blocks", "2, 4 or 8"});
  expect_error(with(64,
                    [](Stage c, IterVar bi, IterVar bj) {
                      c.cluster(bi);
                      c.cluster(bj);
                    }),
               {"cluster", "already launched in clusters of 2 along 'i.outer'"});
  // Multicast: of a stage not filled by TMA (cp.async fills); outside any cluster.
  auto wgmma_schedule = [](const GemmWgmmaTiles &t, const std::function<void(Schedule &,
                                                                              WgmmaGemmStages &)> &f) {
    return [t, f] {
      GemmTensors g = gemm_definition(256, 256, 128, Float(16));
      Schedule s = create_schedule({g.C});
      WgmmaGemmStages st;
      st.C = g.C;
      st.AS = s.cache_read(g.A, "shared", {g.C});
      st.BS = s.cache_read(g.B, "shared", {g.C});
      st.CF = s.cache_write(g.C, "wgmma.accumulator");
      schedule_wgmma_gemm(s, st, t);
      f(s, st);
      lower(s, {g.A, g.B, g.C});
    };
  };
  GemmWgmmaTiles copies = cluster_tiles(2, 3);
  copies.tma = false;
  expect_error(wgmma_schedule(copies, [](Schedule &, WgmmaGemmStages &) {}),
               {"multicast", "stage 'A.shared'", "not filled by TMA", "bulk_copy()"});
  expect_error(wgmma_schedule(cluster_tiles(0, 3),
                              [](Schedule &s, WgmmaGemmStages &st) { s[st.AS].multicast(); }),
      {"multicast", "stage 'A.shared'", "no stage it is computed in is launched in clusters",
       "cluster(axis)"});
  // The operand the cluster's blocks do not share: B with clusters along N.
  expect_error(wgmma_schedule(cluster_tiles(2, 3),
                              [](Schedule &s, WgmmaGemmStages &st) { s[st.BS].multicast(); }),
      {"bulk_copy", "stage 'B.shared'", "depends on the clustered axis", "Multicast the operand "
                                                                        "they share"});
  // gemm_wgmma: an odd number of blocks along the cluster's axis; clusters without TMA.
  expect_error([] { gemm_wgmma(384, 256, 128, cluster_tiles(1, 3)); },
               {"gemm_wgmma", "clusters of 2 blocks along M", "makes 3 of 128", "CL=0"});
  expect_error([] { gemm_wgmma(256, 384, 128, cluster_tiles(2, 3)); },
               {"gemm_wgmma", "clusters of 2 blocks along N", "makes 3 of 128"});
  expect_error(
      [] {
        GemmWgmmaTiles t = cluster_tiles(1, 3);
        t.cluster_size = 4;
        gemm_wgmma(256, 256, 128, t);
      },
      {"gemm_wgmma", "clusters of 4 blocks along M", "CS=4", "makes 2 of 128"});
  expect_error(
      [] {
        GemmWgmmaTiles t = cluster_tiles(1, 3);
        t.cluster_size = 3;
        gemm_wgmma(256, 256, 128, t);
      },
      {"gemm_wgmma", "knob CS", "2, 4 or 8", "got 3"});
  expect_error(
      [] {
        GemmWgmmaTiles t = cluster_tiles(2, 3);
        t.tma = false;
        gemm_wgmma(256, 256, 128, t);
      },
      {"gemm_wgmma", "need TMA fills", "TMA=1"});
  // A persistent grid smaller than a cluster.
  expect_error(
      [] {
        GemmWgmmaTiles t = cluster_tiles(2, 3);
        t.persistent = true;
        t.persistent_blocks = 1;
        ScheduledProgram p = gemm_wgmma(256, 256, 128, t);
        lower(p.schedule, p.args);
      },
      {"cluster", "persistent on 1 block(s)", "at least 2"});
}

// The registry's knobs CL (1: 2x1, 2: 1x2) and CS (the cluster's size), in the tuner's name and
// candidates.
TEST(Cluster, GemmWgmmaKnobs) {
  GemmWgmmaTiles t = gemm_wgmma_tiles_from_knobs(
      {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"G", 8}, {"TMA", 1}, {"P", 2}, {"CL", 2}});
  EXPECT_EQ(t.cluster, 2);
  EXPECT_EQ(to_string(t), "wgmma bm=128 bn=256 bk=64 wg=2x1 n=256 stages=4 raster=8 "
                          "swizzle=128 tma ws cluster=1x2");
  EXPECT_EQ(gemm_wgmma_tiles_from_knobs({{"M", 4096}, {"N", 4096}, {"K", 4096}}).cluster, 0);
  EXPECT_EQ(to_string(gemm_wgmma_tiles_from_knobs(
                {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"G", 8}, {"TMA", 1}, {"P", 2}, {"CL", 1}, {"CS", 4}})),
            "wgmma bm=128 bn=256 bk=64 wg=2x1 n=256 stages=4 raster=8 swizzle=128 tma ws "
            "cluster=4x1");
  int clustered = 0;
  for (const GemmWgmmaTiles &c : gemm_wgmma_candidates(4096, 4096, 4096))
    clustered += c.cluster != 0;
  EXPECT_EQ(clustered, 16);
  EXPECT_NO_THROW(find_schedule("gemm_wgmma").build(
      resolve_shape(find_schedule("gemm_wgmma"),
                    {{"M", 512}, {"N", 512}, {"K", 256}, {"CL", 1}}),
      Float(16)));
}

