// The executor's independent-warps mode (runtime/interp/WarpScheduler.h): registered kernels give
// bit-identical results with each warp running as its own fiber; a hand-built warp-specialized
// kernel (a producer warp filling a two-slot ring of full / empty mbarriers with stores or
// tma_load, two consumer warps reading it) runs and sums correctly; deadlocking role schedules
// are errors naming what each warp waits for (never a hang: a watchdog fails the test instead);
// named barriers order two warpgroups in ping-pong; and the race checker still catches a
// producer that refills a stage without waiting and consumers that read before their wait or
// release a stage before reading it, without reporting the correct ring.
#include "TestUtil.h"
#include "interp_kernels.h"

#include "compiler/tessel.h"
#include "schedules/Registry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
#include <sstream>

using namespace tessel;
using namespace tessel::interp;
using namespace tessel::interp_test;
using tessel::test::expect_error;

namespace {

/// Runs f, failing (and ending the test program, which cannot stop the stuck thread) if it takes
/// longer than `seconds`: a deadlock the executor fails to report must not hang CI.
template <typename F> void within_deadline(F f, double seconds = 60) {
  auto done = std::async(std::launch::async, std::move(f));
  if (done.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::timeout) {
    std::fprintf(stderr, "FATAL: the executor did not return within %.0f s (a hang)\n", seconds);
    std::fflush(stderr);
    std::_Exit(1);
  }
  done.get(); // rethrows
}

ExecOptions independent() {
  ExecOptions o;
  o.independent_warps = true;
  return o;
}

// ---- (a) registered kernels, lock step against independent warps ---------------------------

/// The program's output buffers after running its kernels on fixed inputs.
std::vector<HostBuffer> run_program(const ScheduledProgram &p, const LoweredModule &m,
                                    const ExecOptions &o) {
  std::vector<HostBuffer> bufs;
  for (size_t i = 0; i < p.args.size(); ++i) {
    int64_t n = 1;
    for (const Expr &e : p.args[i].shape())
      n *= *as_const_int(e);
    const DataType t = p.args[i].dtype();
    bufs.push_back(i < p.num_inputs
                       ? HostBuffer::from_doubles(t, test::dyadic_values(size_t(n), 11 + i))
                       : HostBuffer::from_doubles(t, std::vector<double>(size_t(n), NAN)));
  }
  std::vector<HostBuffer *> ptrs;
  for (HostBuffer &b : bufs)
    ptrs.push_back(&b);
  within_deadline([&] { execute(m, ptrs, o); });
  return std::vector<HostBuffer>(bufs.begin() + std::ptrdiff_t(p.num_inputs), bufs.end());
}

void expect_same_both_ways(const std::string &name, const ShapeParams &shape,
                           DataType dtype = Float(16)) {
  SCOPED_TRACE(name + " " + params_string(shape));
  const ScheduleEntry &e = find_schedule(name);
  ScheduledProgram p = e.build(resolve_shape(e, shape), dtype);
  LoweredModule m = lower(p.schedule, p.args);
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  std::vector<HostBuffer> lock_step = run_program(p, m, {});
  auto t1 = clock::now();
  std::vector<HostBuffer> warps = run_program(p, m, independent());
  auto t2 = clock::now();
  std::printf("[ timing   ] %s %s: lock step %.3f s, independent warps %.3f s\n", name.c_str(),
              params_string(shape).c_str(), std::chrono::duration<double>(t1 - t0).count(),
              std::chrono::duration<double>(t2 - t1).count());
  ASSERT_EQ(lock_step.size(), warps.size());
  for (size_t i = 0; i < warps.size(); ++i) {
    const size_t bytes = warps[i].elements() * size_t(std::max(1, warps[i].dtype().bytes()));
    EXPECT_EQ(std::memcmp(lock_step[i].data(), warps[i].data(), bytes), 0) << "output " << i;
    // And the run computed something: no NaN left.
    for (double v : warps[i].to_doubles())
      ASSERT_FALSE(std::isnan(v)) << "output " << i;
  }
}

// ---- (b, c, e) a hand-built warp-specialized kernel ------------------------------------------

// Block (32, 3): warp 2 (threadIdx.y == 2) is the producer, warps 0 and 1 the consumers, in the
// role branch of attr::warp_specialize, each branch starting with setmaxnreg. Thread (0, 0)
// initializes full[s] (the producer's arrivals: its 32 threads, or 1 with tma_load) and empty[s]
// (the 64 consumer threads) of a ring of `stages` slots of 64 floats. Step k (of `steps`): the
// producer waits on empty[k % S] (parity (k / S + 1) % 2: the first round passes at once), fills
// the slot with row k of A (stores then an arrival of every producer thread, or tma_load after
// thread 0's arrive_expect_tx) ; each consumer waits on full[k % S] (parity (k / S) % 2), adds
// the 64 values into its own row of Out (Out[c][j] += slot[j], each thread two of them), and
// arrives on empty[k % S]. So Out[c][j] = sum_k A[k][j] for both consumers.
struct WarpSpecialized {
  int steps = 5;
  int stages = 2;
  bool tma = false;
  // Mistakes.
  bool producer_waits = true;         ///< the producer waits on empty before refilling
  bool parity_off_by_one = false;     ///< the producer waits on empty with parity (k / S) % 2
  bool consumers_wait = true;         ///< consumers wait on full before reading
  bool consumers_arrive = true;       ///< consumers arrive on empty
  bool early_release = false;         ///< consumers arrive on empty before reading the slot
  int extra_consumer_steps = 0;       ///< consumers wait for steps the producer never fills
  bool consumers_sync_at_end = false; ///< a syncthreads that the producer never reaches

  LoweredFunc build() const {
    const DataType f32 = Float(32);
    Buffer A = flat("A", f32, int64_t(steps) * 64), Out = flat("Out", f32, 128);
    Buffer stage = flat("stage", f32, int64_t(stages) * 64, "shared");
    Buffer full = flat("full", UInt(64), stages, "shared"),
           empty = flat("empty", UInt(64), stages, "shared");
    Var map("A_map", Handle()), k("k"), i("i"), s("s");
    Axes ax;
    Expr tx = ax.tx, ty = ax.ty;
    Expr slot = floormod(k, stages), round = floordiv(k, stages);

    Stmt fill;
    if (tma)
      fill = IfThenElse::make(
          tx == 0,
          Seq::make({call(intrinsic::mbarrier_arrive_expect_tx, {address_of(full, slot), 64 * 4}),
                     call(intrinsic::tma_load,
                          {map, address_of(stage, slot * 64), address_of(full, slot), 0, k})}));
    else
      fill = Seq::make({loop(i, 2, st(stage, slot * 64 + tx * 2 + i, ld(A, k * 64 + tx * 2 + i))),
                        call(intrinsic::mbarrier_arrive, {address_of(full, slot)})});
    Expr empty_parity = floormod(round + (parity_off_by_one ? 0 : 1), 2);
    Stmt producer =
        Seq::make({call(intrinsic::setmaxnreg, {40, 0}),
                   loop(k, steps,
                        Seq::make({producer_waits ? call(intrinsic::mbarrier_wait,
                                                         {address_of(empty, slot), empty_parity})
                                                  : Stmt(),
                                   fill}))});

    Expr o = ty * 64 + tx * 2 + i;
    Stmt read = loop(i, 2, st(Out, o, ld(Out, o) + ld(stage, slot * 64 + tx * 2 + i)));
    Stmt arrive =
        consumers_arrive ? call(intrinsic::mbarrier_arrive, {address_of(empty, slot)}) : Stmt();
    Stmt consumer = Seq::make(
        {call(intrinsic::setmaxnreg, {232, 1}),
         loop(k, steps + extra_consumer_steps,
              Seq::make({consumers_wait ? call(intrinsic::mbarrier_wait,
                                               {address_of(full, slot), floormod(round, 2)})
                                        : Stmt(),
                         early_release ? arrive : Stmt(), read, early_release ? Stmt() : arrive})),
         consumers_sync_at_end ? sync_threads() : Stmt()});

    Stmt init = IfThenElse::make(
        tx == 0 && ty == 0,
        Seq::make(
            {loop(s, stages,
                  Seq::make({call(intrinsic::mbarrier_init, {address_of(full, s), tma ? 1 : 32}),
                             call(intrinsic::mbarrier_init, {address_of(empty, s), 64})})),
             call(intrinsic::fence_barrier_init)}));
    Stmt roles = AttrStmt::make(std::monostate{}, attr::warp_specialize, 32,
                                IfThenElse::make(ty == 2, producer, consumer));
    Stmt body = Seq::make({init, sync_threads(), roles});

    LoweredFunc f;
    f.name = "warp_specialized";
    f.args = {A, Out};
    if (tma)
      f.tensor_maps = {TensorMapParam{map, 0, {64, steps}, {1, 64}, {64, 1}, 0}};
    f.launch = launch(1, 1, 32, 3);
    f.body = ax.bind_all(f.launch, allocate(stage, allocate(full, allocate(empty, body))));
    return f;
  }

  /// Runs (with a watchdog); "" when Out holds the sums, else the first difference.
  std::string mismatch(const ExecOptions &o = {}) const {
    std::vector<double> a(size_t(steps) * 64);
    for (size_t x = 0; x < a.size(); ++x)
      a[x] = double(int(x * 37 % 101) - 50);
    HostBuffer Ah = HostBuffer::from_doubles(Float(32), a), Oh = HostBuffer::zeros(Float(32), 128);
    within_deadline([&] { execute(build(), {&Ah, &Oh}, o); });
    std::vector<double> out = Oh.to_doubles();
    for (int c = 0; c < 2; ++c)
      for (int j = 0; j < 64; ++j) {
        double want = 0;
        for (int kk = 0; kk < steps; ++kk)
          want += a[size_t(kk) * 64 + j];
        if (out[size_t(c * 64 + j)] != want) {
          std::ostringstream os;
          os << "Out[" << c << "][" << j << "] = " << out[size_t(c * 64 + j)] << ", expected "
             << want;
          return os.str();
        }
      }
    return "";
  }

  void expect_error(std::initializer_list<const char *> parts) const {
    test::expect_error([&] { mismatch(); }, parts);
  }
};

// ---- (d) named barriers ----------------------------------------------------------------------

// Two warpgroups (threadIdx.y = 0, 1; 256 threads) take `rounds` turns in ping-pong: group g
// waits for its turn on named barrier 1 + g (named_barrier_sync(1 + g, 256)), its first thread
// appends g to Log (at Log[Pos[0]], then Pos[0] += 1), and it gives the turn to the other group
// (named_barrier_arrive(2 - g, 256)). Group 1 gives group 0 the first turn before its loop.
struct PingPong {
  int rounds = 3;
  int first_turn_threads = 256; ///< the count of group 1's first arrive (mismatch: 128)
  bool give_first_turn = true;

  LoweredFunc build() const {
    Buffer Log = flat("Log", Int(32), 2 * rounds), Pos = flat("Pos", Int(32), 1);
    Axes ax;
    Expr tx = ax.tx, ty = ax.ty;
    Var r("r");
    auto named = [](const char *op, Expr id, Expr threads) {
      return call(op, {std::move(id), std::move(threads)});
    };
    Stmt append =
        IfThenElse::make(tx == 0, Seq::make({st(Log, ld(Pos, 0), ty), st(Pos, 0, ld(Pos, 0) + 1)}));
    Stmt turn = Seq::make({named(intrinsic::named_barrier_sync, ty + 1, 256), append,
                           named(intrinsic::named_barrier_arrive, 2 - ty, 256)});
    Stmt first = give_first_turn ? IfThenElse::make(ty == 1, named(intrinsic::named_barrier_arrive,
                                                                   1, first_turn_threads))
                                 : Stmt();
    LoweredFunc f;
    f.name = "ping_pong";
    f.args = {Log, Pos};
    f.launch = launch(1, 1, 128, 2);
    f.body = ax.bind_all(f.launch, Seq::make({first, loop(r, rounds, turn)}));
    return f;
  }

  std::vector<double> run() const {
    HostBuffer L = HostBuffer::from_doubles(Int(32), std::vector<double>(size_t(2 * rounds), -1));
    HostBuffer P = HostBuffer::zeros(Int(32), 1);
    within_deadline([&] { execute(build(), {&L, &P}); });
    return L.to_doubles();
  }
};

} // namespace

// (a) The registry's kernels give the same bits with every warp on its own.
TEST(InterpWarps, RegisteredKernelsMatchLockStep) {
  expect_same_both_ways("gemm_wgmma", {{"M", 128}, {"N", 128}, {"K", 128}, {"TMA", 1}});
  expect_same_both_ways("gemm_wgmma", {{"M", 128}, {"N", 128}, {"K", 128}, {"TMA", 0}});
  expect_same_both_ways("gemm_mma", {{"M", 64}, {"N", 64}, {"K", 64}});
  expect_same_both_ways("gemm_wmma", {{"M", 64}, {"N", 64}, {"K", 64}});
  expect_same_both_ways("gemm_shared", {{"M", 64}, {"N", 64}, {"K", 64}}, Float(32));
  expect_same_both_ways("softmax", {{"R", 4}, {"C", 512}});
  expect_same_both_ways("layernorm", {{"R", 2}, {"C", 256}});
}

// A hand-built kernel with syncthreads in a loop, both ways, and what switching warps costs.
TEST(InterpWarps, TiledGemmMatchesLockStep) {
  const int M = 128, N = 128, K = 128;
  auto a = random_values(M * K, 5), b = random_values(K * N, 6);
  LoweredFunc f = tiled_gemm(M, N, K);
  std::vector<double> results[2];
  for (int mode = 0; mode < 2; ++mode) {
    HostBuffer A = HostBuffer::from_doubles(Float(32), a),
               B = HostBuffer::from_doubles(Float(32), b);
    HostBuffer C = HostBuffer::zeros(Float(32), M * N);
    ExecOptions o;
    o.independent_warps = mode == 1;
    auto start = std::chrono::steady_clock::now();
    within_deadline([&] { execute(f, {&A, &B, &C}, o); });
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // 16 blocks x 8 warps, each through 2 syncthreads per K step (4): about 1000 switches.
    std::printf("[ timing   ] tiled 128^3 GEMM, %s: %.3f s\n",
                mode ? "independent warps" : "lock step", seconds);
    results[mode] = C.to_doubles();
  }
  EXPECT_EQ(results[0], results[1]);
}

// (b) The warp-specialized ring: stores or tma_load, with several depths and lengths.
TEST(InterpWarps, WarpSpecializedRingSums) {
  for (bool tma : {false, true})
    for (int stages : {1, 2, 3})
      for (int steps : {1, 5, 8}) {
        SCOPED_TRACE(std::string(tma ? "tma_load" : "stores") + ", " + std::to_string(stages) +
                     " stages, " + std::to_string(steps) + " steps");
        WarpSpecialized ws;
        ws.tma = tma;
        ws.stages = stages;
        ws.steps = steps;
        EXPECT_EQ(ws.mismatch(), "");
      }
}

// attr::warp_specialize alone chooses the mode; forced lock step, the producer's first wait on
// an empty phase that the consumers have not completed is the lock-step hang error, which names
// the way out.
TEST(InterpWarps, WarpSpecializeSelectsIndependentWarps) {
  WarpSpecialized ws;
  EXPECT_EQ(ws.mismatch(independent()), "");
  ExecOptions lock_step;
  lock_step.independent_warps = false;
  expect_error([&] { ws.mismatch(lock_step); },
               {"mbarrier_wait by thread (0,2,0)", "never returns", "barrier 'empty'[0]",
                "run with independent warps"});
}

// (c) Deadlocks: errors that say what each warp waits for, never hangs.
TEST(InterpWarps, DeadlockedRolesAreReported) {
  WarpSpecialized parity;
  parity.parity_off_by_one = true;
  parity.expect_error({"deadlock in block (0,0,0) of kernel 'warp_specialized'",
                       "warps 0..1 (thread (0,0,0)..thread (31,1,0)) wait in mbarrier_wait on "
                       "barrier 'full'[0] for parity 0: phase 0 has 0 of 32 arrivals",
                       "warp 2 (thread (0,2,0)..thread (31,2,0)) waits in mbarrier_wait on "
                       "barrier 'empty'[0] for parity 0: phase 0 has 0 of 64 arrivals",
                       "an off-by-one parity"});
  WarpSpecialized no_arrivals;
  no_arrivals.consumers_arrive = false;
  no_arrivals.expect_error({"deadlock", "barrier 'empty'[0] for parity 0: phase 0 has 0 of 64",
                            "barrier 'full'[0] for parity 1",
                            "check that the other role arrives on it"});
  WarpSpecialized too_deep;
  too_deep.extra_consumer_steps = 2;
  too_deep.expect_error(
      {"deadlock", "warps 0..1", "barrier 'full'[1] for parity 0", "finished the kernel: warp 2"});
  WarpSpecialized sync_at_end;
  sync_at_end.consumers_sync_at_end = true;
  sync_at_end.expect_error({"deadlock",
                            "wait in syncthreads (all 3 warps of the block): arrived: "
                            "warps 0, 1; not arrived: none; warp 2 has finished the kernel and "
                            "will never arrive",
                            "a role that finishes the kernel early"});
}

// (e) The race checker with roles: the correct ring above reports nothing (consumers' reads
// happen before their arrivals on empty, which the producer's wait acquires before its
// refill); these do.
TEST(InterpWarps, RoleRacesAreStillCaught) {
  // The producer refills a stage without waiting on its empty barrier.
  WarpSpecialized refill;
  refill.tma = true;
  refill.producer_waits = false;
  refill.expect_error({"tma_load by thread (0,2,0)", "writes 'stage'[0] while the tma_load",
                       "into it is in flight"});
  // Consumers read a stage without waiting on full.
  WarpSpecialized no_wait;
  no_wait.tma = true;
  no_wait.consumers_wait = false;
  no_wait.expect_error({"read of shared buffer 'stage'[0] by thread (0,0,0)", "in flight"});
  no_wait.tma = false;
  no_wait.expect_error({"data race (write/read) on shared buffer 'stage'[0]",
                        "thread (0,2,0) wrote it and thread (0,0,0) reads it"});
  // Consumers release a stage (arrive on empty) before reading it: the producer's refill, after
  // its wait, is not ordered after those reads.
  for (bool tma : {false, true}) {
    WarpSpecialized early;
    early.tma = tma;
    early.early_release = true;
    early.expect_error({"data race", "shared buffer 'stage'[0]", "thread (0,2,0)"});
  }
}

// (d) Named barriers: the ping-pong order, a mismatched count, a deadlock.
TEST(InterpWarps, NamedBarrierPingPong) {
  PingPong p;
  EXPECT_EQ(p.run(), (std::vector<double>{0, 1, 0, 1, 0, 1}));
  PingPong mismatch;
  mismatch.first_turn_threads = 128;
  expect_error([&] { mismatch.run(); },
               {"named_barrier_arrive(1, 128) by warp 4",
                "phase 0 of named barrier 1 counts 256 "
                "threads (arrived: warp 0 (sync), warp 1 (sync), warp 2 (sync), warp 3 (sync))",
                "every arrival of one phase must pass the same thread count"});
  PingPong stuck;
  stuck.give_first_turn = false;
  expect_error([&] { stuck.run(); },
               {"deadlock in block (0,0,0) of kernel 'ping_pong'",
                "warps 0..3 (thread (0,0,0)..thread (127,0,0)) wait in named_barrier_sync(1, 256): "
                "phase 0 of named barrier 1 has 128 of 256 threads",
                "warps 4..7", "named_barrier_sync(2, 256)", "in a ping-pong"});
}

// In lock step a named barrier over the whole block is a syncthreads; over part of it, an error.
TEST(InterpWarps, NamedBarrierInLockStep) {
  const DataType f32 = Float(32);
  Buffer Out = flat("Out", f32, 64), sh = flat("sh", f32, 64, "shared");
  Axes ax;
  Expr tx = ax.tx;
  auto kernel = [&](Expr threads, Stmt around) {
    Stmt bar = call(intrinsic::named_barrier_sync, {1, std::move(threads)});
    if (around.defined())
      bar = IfThenElse::make(tx < 32, bar);
    Stmt body = Seq::make({st(sh, tx, cast(f32, tx)), bar, st(Out, tx, ld(sh, 63 - tx))});
    LoweredFunc f;
    f.name = "named_lock_step";
    f.args = {Out};
    f.launch = launch(1, 1, 64, 1);
    f.body = ax.bind_all(f.launch, allocate(sh, body));
    return f;
  };
  ExecOptions lock_step;
  lock_step.independent_warps = false;
  for (const ExecOptions &o : {lock_step, independent()}) {
    HostBuffer out = HostBuffer::zeros(f32, 64);
    within_deadline([&] { execute(kernel(64, Stmt()), {&out}, o); });
    EXPECT_EQ(out.to_doubles()[0], 63.0);
    EXPECT_EQ(out.to_doubles()[63], 0.0);
  }
  expect_error(
      [&] {
        HostBuffer out = HostBuffer::zeros(f32, 64);
        execute(kernel(32, sync_threads()), {&out}, lock_step);
      },
      {"named_barrier_sync(1, 32) is reached by 32 of the 64 threads", "lock step",
       "ExecOptions::independent_warps"});
}

// An error inside one warp's fiber reaches the caller, the other fibers stopped, again and
// again (no thread left behind, no terminate).
TEST(InterpWarps, ErrorsInAFiberPropagate) {
  for (int run = 0; run < 3; ++run) {
    LoweredFunc f = tiled_gemm(64, 64, 64, {.sync_after_load = false});
    HostBuffer A = HostBuffer::zeros(Float(32), 64 * 64), B = HostBuffer::zeros(Float(32), 64 * 64),
               C = HostBuffer::zeros(Float(32), 64 * 64);
    expect_error([&] { within_deadline([&] {
                         execute(f, {&A, &B, &C}, independent());
                       }); },
                 {"data race (write/read) on shared buffer 'A_shared'[0]"});
  }
  // A divergent syncthreads within a warp.
  LoweredFunc g = tiled_gemm(64, 64, 64, {.barrier_under_thread_condition = true});
  HostBuffer A = HostBuffer::zeros(Float(32), 64 * 64), B = HostBuffer::zeros(Float(32), 64 * 64),
             C = HostBuffer::zeros(Float(32), 64 * 64);
  expect_error(
      [&] { within_deadline([&] {
              execute(g, {&A, &B, &C}, independent());
            }); },
      {"divergent barrier: syncthreads is reached by only 16 of the 32 threads of warp 0"});
}

// What a switch between warps costs: two warps through 2000 syncthreads (one hand-over each with
// independent warps), against lock step. Printed, not asserted (machines differ).
TEST(InterpWarps, SwitchCost) {
  const int iterations = 2000;
  Buffer Out = flat("Out", Int(32), 64), sh = flat("sh", Int(32), 64, "shared");
  Axes ax;
  Expr tx = ax.tx;
  Var i("i");
  Stmt step =
      Seq::make({st(sh, tx, i), sync_threads(), st(Out, tx, ld(sh, 63 - tx)), sync_threads()});
  LoweredFunc f;
  f.name = "syncs";
  f.args = {Out};
  f.launch = launch(1, 1, 64, 1);
  f.body = ax.bind_all(f.launch, allocate(sh, loop(i, iterations / 2, step)));
  double seconds[2];
  for (int mode = 0; mode < 2; ++mode) {
    HostBuffer out = HostBuffer::zeros(Int(32), 64);
    ExecOptions o;
    o.independent_warps = mode == 1;
    auto start = std::chrono::steady_clock::now();
    within_deadline([&] { execute(f, {&out}, o); });
    seconds[mode] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(out.to_doubles()[0], iterations / 2 - 1);
  }
  std::printf("[ timing   ] %d syncthreads of 2 warps: lock step %.4f s, independent warps %.4f s "
              "(%.1f us per switch)\n",
              iterations, seconds[0], seconds[1], (seconds[1] - seconds[0]) / iterations * 1e6);
}
