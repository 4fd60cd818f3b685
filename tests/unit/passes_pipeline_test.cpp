// The passes in pipeline order on a hand-built Form 1 tiled GEMM: block tiles, a shared A tile
// double-buffered in the K loop with a padded row stride, an unrolled k loop and vectorized
// column loops.
#include "compiler/ir/IRPrinter.h"
#include "compiler/passes/InjectPipeline.h"
#include "compiler/passes/InsertThreadSyncs.h"
#include "compiler/passes/RemoveNoOp.h"
#include "compiler/passes/SplitHostDevice.h"
#include "compiler/passes/StorageFlatten.h"
#include "compiler/passes/StorageRewrite.h"
#include "compiler/passes/UnrollLoops.h"
#include "compiler/passes/VectorizeLoops.h"
#include "passes_test_util.h"

#include <gtest/gtest.h>

using namespace tessel;
using namespace tessel::testing;

namespace {

// C[64, 48] = A[64, 32] x B[32, 48]. Block bx computes rows bx*16 .. bx*16+15; "thread" tx
// row bx*16+tx. With `threads`, tx is threadIdx.x around the whole block body, as ScheduleOps
// binds it; without, each stage has its own serial loop over tx, which the single-thread test
// interpreter can run.
struct Gemm {
  Buffer A = Buffer::make("A", Float(32), {64, 32});
  Buffer B = Buffer::make("B", Float(32), {32, 48});
  Buffer C = Buffer::make("C", Float(32), {64, 48});
  Buffer AS = Buffer::make("A.shared", Float(32), {64, 32}, "shared");
  Buffer CL = Buffer::make("C.local", Float(32), {64, 48}, "local");
  IterVar bx = thread_axis("blockIdx.x"), txa = thread_axis("threadIdx.x");
  Var tx = txa.var(), ko{"ko"}, ax{"ax"}, k{"k"}, jo{"jo"}, ji{"ji"};

  Stmt per_thread(bool threads, Stmt s) {
    return threads ? s : For::make(tx, 0, 16, ForKind::Serial, s);
  }
  Stmt columns(Stmt s) {
    return For::make(jo, 0, 12, ForKind::Serial, For::make(ji, 0, 4, ForKind::Vectorized, s));
  }

  Stmt form1(bool threads) {
    Expr r = Expr(bx) * 16 + tx, j = jo * 4 + ji, kk = ko * 8 + k;
    // 16 threads load the 16 x 8 tile: thread tx loads column tx % 8 of rows ax*2 + tx/8.
    Expr lr = Expr(bx) * 16 + ax * 2 + floordiv(Expr(tx), 8), lc = ko * 8 + floormod(Expr(tx), 8);
    Stmt fill = per_thread(threads, For::make(ax, 0, 8, ForKind::Serial,
                                              BufferStore::make(AS, A.load({lr, lc}), {lr, lc})));
    fill = AttrStmt::make(AS, attr::pipeline_scope, 2, fill);
    Stmt update = BufferStore::make(CL, CL.load({r, j}) + AS.load({r, kk}) * B.load({kk, j}),
                                    {r, j});
    Stmt compute =
        per_thread(threads, For::make(k, 0, 8, ForKind::Unrolled, columns(update)));
    Stmt tile = BufferRealize::make(AS, {Range(Expr(bx) * 16, 16), Range(ko * 8, 8)},
                                    Seq::make({fill, compute}));
    tile = AttrStmt::make(AS, "storage_align",
                          Call::make(Handle(), "tuple", {0, 8, 1}, Call::PureIntrinsic), tile);
    Stmt init = per_thread(threads, columns(BufferStore::make(CL, 0.0f, {r, j})));
    Stmt out = per_thread(threads, columns(BufferStore::make(C, CL.load({r, j}), {r, j})));
    Stmt body = BufferRealize::make(
        CL, {Range(Expr(bx) * 16, 16), Range(0, 48)},
        Seq::make({init, For::make(ko, 0, 4, ForKind::Serial, tile), out}));
    if (threads)
      body = AttrStmt::make(txa, attr::thread_extent, 16, body);
    return AttrStmt::make(bx, attr::thread_extent, 4, body);
  }

  LoweredFunc lower(bool threads) {
    std::vector<Buffer> flat_args;
    Stmt s = storage_flatten(form1(threads), {A, B, C}, &flat_args);
    s = vectorize_loops(s);
    s = unroll_loops(s);
    s = inject_pipeline(s);
    s = storage_rewrite(s);
    s = insert_thread_syncs(s);
    s = remove_no_op(s);
    return split_host_device(s, "gemm", flat_args, {{64, 32}, {32, 48}, {64, 48}}, 0).at(0);
  }

  std::vector<double> run(const Stmt &s) {
    Interp in;
    iota(in.memory(A, 64 * 32), 0.5);
    iota(in.memory(B, 32 * 48), 0.25);
    in.memory(C, 64 * 48);
    in.run(s);
    return in.memory(C);
  }
};

} // namespace

TEST(PassPipeline, TiledGemmLowersToExpectedStructure) {
  Gemm g;
  LoweredFunc f = g.lower(true);
  std::string text = to_string(f.body);
  EXPECT_EQ(f.launch.grid, (std::array<int64_t, 3>{4, 1, 1}));
  EXPECT_EQ(f.launch.block, (std::array<int64_t, 3>{16, 1, 1}));
  ASSERT_EQ(f.args.size(), 3u);
  EXPECT_EQ(f.args[2].ndim(), 1u);

  // Allocations at the kernel top: the padded (row stride 8 -> 9) doubled tile, the
  // accumulator.
  size_t top = text.find("\"thread_extent\" = 16;\n");
  ASSERT_NE(top, std::string::npos) << text;
  EXPECT_EQ(text.find("allocate(C.local, float32, [768]), storage_scope = local;\n"
                      "allocate(A.shared, float32, [288]), storage_scope = shared;\n"),
            top + 22)
      << text;
  EXPECT_EQ(count_of(text, "allocate"), 2) << text;
  // Vector code for the column loops, the k loop unrolled, no attrs left but the launch ones.
  EXPECT_NE(text.find("C.local[ramp(jo * 4 + "), std::string::npos) << text;
  // init jo, prologue ax, ko, guarded ax, 8 unrolled copies of compute jo, output jo.
  EXPECT_EQ(find_all<For>(f.body).size(), 13u) << text;
  EXPECT_EQ(text.find("pipeline_scope"), std::string::npos) << text;
  EXPECT_EQ(text.find("pipeline_fill"), std::string::npos) << text;
  EXPECT_EQ(text.find("storage_align"), std::string::npos) << text;
  // Double buffering: a prologue, then a guarded fill of the other stage in the loop, the
  // 4-byte copies from global to shared asynchronous.
  EXPECT_NE(text.find("if (ko + 1 < 4)"), std::string::npos) << text;
  EXPECT_NE(text.find("floormod(ko, 2) * 144"), std::string::npos) << text;
  EXPECT_EQ(count_of(text, "@cp_async(@address_of(A.shared["), 2) << text;
  EXPECT_EQ(count_of(text, "@cp_async_commit()"), 2) << text;
  EXPECT_EQ(count_of(text, "@cp_async_wait(0)"), 1) << text;
  // One barrier, at the top of the K loop: it publishes this iteration's tile and ends the
  // reads of the stage the next fill overwrites.
  EXPECT_EQ(count_of(text, "@syncthreads()"), 1) << text;
  EXPECT_LT(text.find("@cp_async_wait(0)"), text.find("@syncthreads()")) << text;
  if (getenv("TESSEL_PRINT_IR"))
    std::cerr << text;
}

TEST(PassPipeline, SingleThreadVariantComputesTheGemm) {
  Gemm g;
  Stmt f1 = g.form1(false);
  LoweredFunc f = g.lower(false);
  std::vector<double> expect(64 * 48);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 48; ++j) {
      float acc = 0;
      for (int k = 0; k < 32; ++k)
        acc += float((i * 32 + k) * 0.5) * float((k * 48 + j) * 0.25);
      expect[i * 48 + j] = acc;
    }
  EXPECT_EQ(g.run(f1), expect);
  std::vector<Buffer> flat_args;
  Stmt s = storage_flatten(f1, {g.A, g.B, g.C}, &flat_args);
  EXPECT_EQ(g.run(s), expect) << "flatten";
  s = vectorize_loops(s);
  EXPECT_EQ(g.run(s), expect) << "vectorize";
  s = unroll_loops(s);
  EXPECT_EQ(g.run(s), expect) << "unroll";
  s = inject_pipeline(s);
  EXPECT_EQ(g.run(s), expect) << "pipeline";
  EXPECT_EQ(g.run(f.body), expect) << to_string(f.body);
}
