// Deliberately broken kernels: the executor reports each mistake as tessel::Error naming the
// buffer, index, thread(s) and block.
#include "interp_kernels.h"

#include "compiler/support/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace tessel;
using namespace tessel::interp;
using namespace tessel::interp_test;
using ::testing::AllOf;
using ::testing::HasSubstr;

namespace {

/// Runs the 64x64x64 tiled GEMM with `o` and returns the error message ("" if none).
std::string run_tiled(const TiledGemmOptions &o, const ExecOptions &eo = {}) {
  const int n = 64;
  HostBuffer A = HostBuffer::from_doubles(Float(32), random_values(n * n, 1));
  HostBuffer B = HostBuffer::from_doubles(Float(32), random_values(n * n, 2));
  HostBuffer C = HostBuffer::zeros(Float(32), n * n);
  try {
    execute(tiled_gemm(n, n, n, o), {&A, &B, &C}, eo);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(InterpErrors, CorrectTiledKernelRunsClean) { EXPECT_EQ(run_tiled({}), ""); }

// Without the barrier after the loads, a thread reads a tile element another thread has just
// written in the same barrier interval.
TEST(InterpErrors, MissingBarrierAfterLoadIsWriteReadRace) {
  TiledGemmOptions o;
  o.sync_after_load = false;
  std::string msg = run_tiled(o);
  EXPECT_THAT(msg, AllOf(HasSubstr("data race (write/read)"), HasSubstr("'A_shared'["),
                         HasSubstr("thread ("), HasSubstr("block (0,0,0)")));
  // Two different threads are named.
  auto first = msg.find("thread ("), second = msg.find("thread (", first + 1);
  ASSERT_NE(second, std::string::npos) << msg;
  EXPECT_NE(msg.substr(first, 16), msg.substr(second, 16)) << msg;
}

// Without the barrier after the compute, the next iteration overwrites a tile element another
// thread read in the same interval.
TEST(InterpErrors, MissingBarrierAfterComputeIsReadWriteRace) {
  TiledGemmOptions o;
  o.sync_after_compute = false;
  EXPECT_THAT(run_tiled(o), AllOf(HasSubstr("data race (read/write)"), HasSubstr("A_shared"),
                                  HasSubstr("read it and thread (")));
}

TEST(InterpErrors, RaceCheckingCanBeTurnedOff) {
  TiledGemmOptions o;
  o.sync_after_compute = false;
  ExecOptions eo;
  eo.check_races = false;
  EXPECT_EQ(run_tiled(o, eo), "");
}

TEST(InterpErrors, WriteWriteRace) {
  Buffer out = flat("out", Float(32), 1), s = flat("s", Float(32), 4, "shared");
  IterVar tx = thread_axis("threadIdx.x");
  Stmt body = allocate(s, Seq::make({st(s, 0, cast(Float(32), Expr(tx))), sync_threads(),
                                     st(out, 0, ld(s, 0))}));
  LoweredFunc f{"ww", {out}, {{1}}, bind(tx, 8, body), launch(1, 1, 8, 1), {}};
  HostBuffer o = HostBuffer::zeros(Float(32), 1);
  try {
    execute(f, {&o});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_THAT(std::string(e.what()),
                AllOf(HasSubstr("data race (write/write) on shared buffer 's'[0]"),
                      HasSubstr("thread (0,0,0) wrote it and thread (1,0,0) writes it")));
  }
}

// The tile's rows are shifted by one: the last block row reads one row past the end of A.
TEST(InterpErrors, OutOfBoundsTileNamesBufferIndexThreadAndBlock) {
  TiledGemmOptions o;
  o.a_row_offset = 1;
  EXPECT_THAT(run_tiled(o), AllOf(HasSubstr("out-of-bounds read of global buffer 'A'"),
                                  HasSubstr("at index 4096 (valid: 0..4095)"),
                                  HasSubstr("by thread (0,14,0)"), HasSubstr("of block (0,1,0)")));
}

TEST(InterpErrors, OutOfBoundsVectorStoreNamesTheLaneIndex) {
  Buffer out = flat("out", Float(32), 30);
  IterVar tx = thread_axis("threadIdx.x");
  Stmt body = st(out, Ramp::make(Expr(tx) * 4, 1, 4), Broadcast::make(Expr(1.0f), 4));
  LoweredFunc f{"vec_oob", {out}, {{30}}, bind(tx, 8, body), launch(1, 1, 8, 1), {}};
  HostBuffer o = HostBuffer::zeros(Float(32), 30);
  try {
    execute(f, {&o});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_THAT(std::string(e.what()),
                AllOf(HasSubstr("out-of-bounds write to global buffer 'out' at index 30"),
                      HasSubstr("thread (7,0,0)")));
  }
}

// Only 3 of the 4 load iterations run: the last quarter of each tile is never written.
TEST(InterpErrors, UninitializedSharedRead) {
  TiledGemmOptions o;
  o.load_iterations = 3;
  EXPECT_THAT(run_tiled(o), AllOf(HasSubstr("read of uninitialized shared memory"),
                                  HasSubstr("reads 'A_shared'[768]"), HasSubstr("thread ("),
                                  HasSubstr("block (0,0,0)")));
}

TEST(InterpErrors, BarrierInsideThreadDependentIf) {
  TiledGemmOptions o;
  o.barrier_under_thread_condition = true;
  EXPECT_THAT(run_tiled(o), AllOf(HasSubstr("divergent barrier"),
                                  HasSubstr("reached by only 128 of the 256 threads of block "
                                            "(0,0,0)"),
                                  HasSubstr("thread (8,0,0) does not reach it")));
}

// A condition that is the same for every thread of the block keeps the barrier legal.
TEST(InterpErrors, BarrierUnderBlockUniformIfIsFine) {
  Buffer out = flat("out", Float(32), 64), s = flat("s", Float(32), 32, "shared");
  IterVar bx = thread_axis("blockIdx.x"), tx = thread_axis("threadIdx.x");
  Stmt inner = Seq::make({st(s, tx, cast(Float(32), Expr(tx))), sync_threads(),
                          st(out, Expr(bx) * 32 + tx, ld(s, 31 - Expr(tx)))});
  Stmt body = allocate(s, IfThenElse::make(Expr(bx) < 5, inner));
  LoweredFunc f{"uniform_if", {out}, {{64}}, bind(bx, 2, bind(tx, 32, body)), launch(2, 1, 32, 1), {}};
  HostBuffer o = HostBuffer::zeros(Float(32), 64);
  execute(f, {&o});
  EXPECT_EQ(o.get(0), 31.0);
  EXPECT_EQ(o.get(63), 0.0);
}

TEST(InterpErrors, BarrierInLoopWithThreadDependentTripCount) {
  Buffer out = flat("out", Int(32), 32);
  IterVar tx = thread_axis("threadIdx.x");
  Var i("i");
  Stmt body = For::make(i, Expr(0), Expr(tx) % 4 + 1, ForKind::Serial,
                        Seq::make({st(out, tx, ld(out, tx) + 1), sync_threads()}));
  LoweredFunc f{"loop_sync", {out}, {{32}}, bind(tx, 32, body), launch(1, 1, 32, 1), {}};
  HostBuffer o = HostBuffer::zeros(Int(32), 32);
  try {
    execute(f, {&o});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_THAT(std::string(e.what()), AllOf(HasSubstr("divergent barrier"),
                                             HasSubstr("thread (0,0,0) does not reach it")));
  }
}

TEST(InterpErrors, ThreadDependentLoopWithoutBarrierRuns) {
  Buffer out = flat("out", Int(32), 32);
  IterVar tx = thread_axis("threadIdx.x");
  Var i("i");
  Stmt body = For::make(i, Expr(0), Expr(tx) % 4 + 1, ForKind::Serial,
                        st(out, tx, ld(out, tx) + i));
  LoweredFunc f{"loop", {out}, {{32}}, bind(tx, 32, body), launch(1, 1, 32, 1), {}};
  HostBuffer o = HostBuffer::zeros(Int(32), 32);
  execute(f, {&o});
  for (int t = 0; t < 32; ++t)
    EXPECT_EQ(o.get_int(t), (t % 4) * (t % 4 + 1) / 2) << t;
}

TEST(InterpErrors, MismatchedArgumentsAndLaunch) {
  LoweredFunc f = tiled_gemm(64, 64, 64);
  HostBuffer small = HostBuffer::zeros(Float(32), 10), ok = HostBuffer::zeros(Float(32), 4096);
  EXPECT_THROW(execute(f, {&ok, &ok}), Error);
  try {
    execute(f, {&small, &ok, &ok});
    FAIL();
  } catch (const Error &e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("argument 'A' has 4096 elements"));
  }
  f.launch.block[0] = 32;
  try {
    execute(f, {&ok, &ok, &ok});
    FAIL();
  } catch (const Error &e) {
    EXPECT_THAT(std::string(e.what()),
                HasSubstr("threadIdx.x is bound with extent 16 but the launch configuration has 32"));
  }
}

// cp_async used outside what it can do: a copy from shared memory, a size it cannot copy, or a
// destination past the end of the tile.
TEST(InterpErrors, AsyncCopyMisuse) {
  Buffer A = flat("A", Float(32), 64), B = flat("B", Float(32), 64);
  Buffer S = flat("S", Float(32), 32, "shared"), T = flat("T", Float(32), 32, "shared");
  Axes ax;
  Expr tx = ax.tx.var();
  auto address = [](const Buffer &b, Expr i) {
    return Call::make(Handle(), intrinsic::address_of, {ld(b, std::move(i))}, Call::Intrinsic);
  };
  auto call = [](const char *name, std::vector<Expr> args) {
    return Evaluate::make(Call::make(Void(), name, std::move(args), Call::Intrinsic));
  };
  auto run = [&](Stmt copy) -> std::string {
    Stmt body = Seq::make({copy, call(intrinsic::cp_async_commit, {}),
                           call(intrinsic::cp_async_wait, {Expr(0)}), sync_threads(),
                           st(B, tx, ld(S, tx))});
    LoweredFunc f;
    f.name = "async";
    f.args = {A, B};
    f.arg_shapes = {{64}, {64}};
    f.launch = launch(1, 1, 32, 1);
    f.body = ax.bind_all(f.launch, allocate(S, allocate(T, body)));
    HostBuffer a = HostBuffer::from_doubles(Float(32), random_values(64, 3));
    HostBuffer b = HostBuffer::zeros(Float(32), 64);
    try {
      execute(f, {&a, &b});
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  };
  Stmt good = call(intrinsic::cp_async, {address(S, tx), address(A, tx), Expr(4), const_true()});
  EXPECT_EQ(run(good), "");
  // A wait that leaves the copy pending (1 group allowed) keeps it for the wait(0) after it.
  EXPECT_EQ(run(Seq::make({good, call(intrinsic::cp_async_commit, {}),
                           call(intrinsic::cp_async_wait, {Expr(1)})})),
            "");
  EXPECT_THAT(run(call(intrinsic::cp_async,
                       {address(S, tx), address(T, tx), Expr(4), const_true()})),
              AllOf(HasSubstr("cp_async copies global to shared memory"), HasSubstr("'T'")));
  EXPECT_THAT(run(call(intrinsic::cp_async,
                       {address(S, tx), address(A, tx), Expr(2), const_true()})),
              HasSubstr("cp_async copies 4, 8 or 16 bytes"));
  EXPECT_THAT(run(call(intrinsic::cp_async,
                       {address(S, tx + 16), address(A, tx), Expr(4), const_true()})),
              AllOf(HasSubstr("out-of-bounds"), HasSubstr("'S'")));
}

// flag_release / flag_wait between blocks (Stage::split_last_wave's parts): block 0 writes
// and raises, block 1 waits and reads; the wait lowers the flag again. Waiting for a flag that
// only a later block raises is reported (the executor runs blocks in order; on the GPU the
// waiting block could hold an SM the raising one needs).
TEST(InterpErrors, FlagsBetweenBlocks) {
  auto kernel = [](bool raise_first) {
    Buffer data = flat("data", Float(32), 32), out = flat("out", Float(32), 32),
           flag = flat("flag", Int(32), 1);
    IterVar bx = thread_axis("blockIdx.x"), tx = thread_axis("threadIdx.x");
    Stmt give = Seq::make({st(data, tx, cast(Float(32), Expr(tx))),
                           call(intrinsic::flag_release, {address_of(flag, 0)})});
    Stmt take = Seq::make({call(intrinsic::flag_wait, {address_of(flag, 0)}),
                           st(out, tx, ld(data, tx) * 2.0f)});
    Stmt body = raise_first ? IfThenElse::make(Expr(bx) == 0, give, take)
                            : IfThenElse::make(Expr(bx) == 0, take, give);
    return LoweredFunc{"flags", {data, out, flag}, {{32}, {32}, {1}}, bind(bx, 2, bind(tx, 32, body)),
                       launch(2, 1, 32, 1), {}};
  };
  HostBuffer d = HostBuffer::zeros(Float(32), 32), o = HostBuffer::zeros(Float(32), 32),
             f = HostBuffer::zeros(Int(32), 1);
  execute(kernel(true), {&d, &o, &f});
  EXPECT_EQ(o.get(31), 62.0);
  EXPECT_EQ(f.get(0), 0.0); // lowered by the wait
  try {
    execute(kernel(false), {&d, &o, &f});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_THAT(std::string(e.what()),
                AllOf(HasSubstr("flag_wait by warp 0 of block (0,0,0)"),
                      HasSubstr("flag 'flag'[0] is not raised"),
                      HasSubstr("raised by an earlier block")));
  }
}
