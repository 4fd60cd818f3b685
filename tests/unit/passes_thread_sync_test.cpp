// insert_thread_syncs: barriers between shared-memory producers and consumers.
#include "compiler/ir/IRPrinter.h"
#include "compiler/passes/InsertThreadSyncs.h"
#include "passes_test_util.h"

#include <gtest/gtest.h>

using namespace tessel;
using namespace tessel::testing;

namespace {

struct Kernel {
  Buffer A = Buffer::make("A", Float(32), {4096});
  Buffer C = Buffer::make("C", Float(32), {128});
  Buffer AS = Buffer::make("A.shared", Float(32), {128}, "shared");
  Buffer CL = Buffer::make("C.local", Float(32), {1}, "local");
  IterVar bx = thread_axis("blockIdx.x"), tx = thread_axis("threadIdx.x");
  Var ko{"ko"}, ax{"ax"}, k{"k"};

  Stmt fill() {
    return For::make(ax, 0, 8, ForKind::Serial,
                     BufferStore::make(AS, A.load({ko * 128 + ax * 16 + tx}), {ax * 16 + tx}));
  }
  Stmt compute() {
    return For::make(k, 0, 8, ForKind::Serial,
                     BufferStore::make(CL, CL.load({0}) + AS.load({k * 16 + tx}), {0}));
  }
  Stmt wrap(Stmt body) {
    body = Allocate::make(Var(CL->data.as<Variable>()), Float(32), {1}, "local", body);
    body = Allocate::make(Var(AS->data.as<Variable>()), Float(32), {128}, "shared", body);
    return AttrStmt::make(bx, attr::thread_extent, 8,
                          AttrStmt::make(tx, attr::thread_extent, 16, body));
  }
  // The body of the kernel under its attrs and allocations.
  static Stmt kernel_body(const Stmt &s) {
    Stmt b = s;
    while (true) {
      if (const auto *a = b.as<AttrStmt>())
        b = a->body;
      else if (const auto *a = b.as<Allocate>())
        b = a->body;
      else
        return b;
    }
  }
};

int count_syncs(const Stmt &s) { return count_of(to_string(s), "@syncthreads()"); }

} // namespace

// The shared tile loaded in a K loop: a barrier after the load (before the reads, outside the
// compute loop) and one at the end of the iteration (before the next load overwrites it).
TEST(PassThreadSync, TileLoopGetsBarrierAfterLoadAndAtBackEdge) {
  Kernel g;
  Stmt loop = For::make(g.ko, 0, 4, ForKind::Serial, Seq::make({g.fill(), g.compute()}));
  Stmt out = insert_thread_syncs(g.wrap(loop));
  EXPECT_EQ(count_syncs(out), 2) << to_string(out);
  const auto *ko = Kernel::kernel_body(out).as<For>();
  ASSERT_NE(ko, nullptr) << to_string(out);
  const auto *seq = ko->body.as<Seq>();
  ASSERT_NE(seq, nullptr);
  ASSERT_EQ(seq->stmts.size(), 4u) << to_string(out);
  EXPECT_TRUE(seq->stmts[0].as<For>());
  EXPECT_TRUE(is_sync(seq->stmts[1]));
  EXPECT_TRUE(seq->stmts[2].as<For>());
  EXPECT_TRUE(is_sync(seq->stmts[3]));
}

TEST(PassThreadSync, NoBarrierWithoutSharedMemoryOrWhenOneIsThere) {
  Kernel g;
  Stmt local_only = For::make(g.ko, 0, 4, ForKind::Serial, g.compute());
  local_only = insert_thread_syncs(g.wrap(
      For::make(g.ko, 0, 4, ForKind::Serial,
                BufferStore::make(g.CL, g.A.load({g.ko}), {0}))));
  EXPECT_EQ(count_syncs(local_only), 0);

  // Barriers already where they are needed are respected, not doubled.
  Stmt synced = For::make(g.ko, 0, 4, ForKind::Serial,
                          Seq::make({g.fill(), sync_stmt(), g.compute(), sync_stmt()}));
  EXPECT_EQ(count_syncs(insert_thread_syncs(g.wrap(synced))), 2);
}

// A branch on threadIdx may not contain a barrier: it goes after the branch, at the
// enclosing level.
TEST(PassThreadSync, BarrierHoistedOutOfDivergentBranch) {
  Kernel g;
  Stmt guarded_fill = IfThenElse::make(Expr(g.tx) < 8, g.fill());
  Stmt out = insert_thread_syncs(g.wrap(Seq::make({guarded_fill, g.compute()})));
  EXPECT_EQ(count_syncs(out), 1);
  const auto *seq = Kernel::kernel_body(out).as<Seq>();
  ASSERT_NE(seq, nullptr) << to_string(out);
  ASSERT_EQ(seq->stmts.size(), 3u) << to_string(out);
  EXPECT_TRUE(seq->stmts[0].as<IfThenElse>());
  EXPECT_TRUE(is_sync(seq->stmts[1]));
  for (const IfThenElse *br : find_all<IfThenElse>(out))
    EXPECT_EQ(count_syncs(br), 0) << to_string(out);

  // A branch whose own hazard is inside it gets no barrier inside either.
  Stmt both = IfThenElse::make(Expr(g.tx) < 8, Seq::make({g.fill(), g.compute()}));
  Stmt out2 = insert_thread_syncs(g.wrap(both));
  for (const IfThenElse *br : find_all<IfThenElse>(out2))
    EXPECT_EQ(count_syncs(br), 0) << to_string(out2);
}

// A branch every thread of a block agrees on (on blockIdx, loop variables) may hold barriers.
TEST(PassThreadSync, UniformBranchMayContainBarriers) {
  Kernel g;
  Stmt loop = For::make(g.ko, 0, 4, ForKind::Serial,
                        IfThenElse::make(Expr(g.bx) * 4 + g.ko < 30,
                                         Seq::make({g.fill(), g.compute()})));
  Stmt out = insert_thread_syncs(g.wrap(loop));
  ASSERT_EQ(find_all<IfThenElse>(out).size(), 1u);
  EXPECT_EQ(count_syncs(find_all<IfThenElse>(out)[0]), 1) << to_string(out);
  EXPECT_EQ(count_syncs(out), 2) << to_string(out); // and one at the loop's back edge
}

// A loop over a count read from memory (packed sequences' offsets) is uniform where every
// thread reads the same element of global memory the kernel never writes: barriers go inside.
// Indexed by threadIdx, or of a buffer the kernel writes, it stays one unit.
TEST(PassThreadSync, LoopOverUniformLoadedCountMayContainBarriers) {
  Kernel g;
  Buffer offsets = Buffer::make("offsets", Int(32), {9});
  auto loop_to = [&](const Expr &extent) {
    return For::make(g.ko, 0, extent, ForKind::Serial, Seq::make({g.fill(), g.compute()}));
  };
  Stmt uniform = insert_thread_syncs(
      g.wrap(loop_to(offsets.load({Expr(g.bx) + 1}) - offsets.load({Expr(g.bx)}))));
  const auto *ko = Kernel::kernel_body(uniform).as<For>();
  ASSERT_NE(ko, nullptr) << to_string(uniform);
  EXPECT_EQ(count_syncs(ko->body), 2) << to_string(uniform);

  Stmt per_thread = insert_thread_syncs(g.wrap(loop_to(offsets.load({Expr(g.tx)}))));
  for (const For *f : find_all<For>(per_thread))
    EXPECT_EQ(count_syncs(f->body), 0) << to_string(per_thread);

  // The kernel writes offsets: threads may read it at different times.
  Stmt written = insert_thread_syncs(g.wrap(
      Seq::make({BufferStore::make(offsets, Expr(0), {Expr(g.tx)}),
                 loop_to(offsets.load({Expr(g.bx)}))})));
  for (const For *f : find_all<For>(written))
    EXPECT_EQ(count_syncs(f->body), 0) << to_string(written);
}

// Loading a tile before the loop (a double-buffering prologue) needs a barrier before the loop.
TEST(PassThreadSync, PrologueBeforeLoopAndIntrinsicAccesses) {
  Kernel g;
  Stmt s = Seq::make({g.fill(), For::make(g.ko, 0, 4, ForKind::Serial, g.compute())});
  Stmt out = insert_thread_syncs(g.wrap(s));
  const auto *seq = Kernel::kernel_body(out).as<Seq>();
  ASSERT_NE(seq, nullptr) << to_string(out);
  ASSERT_EQ(seq->stmts.size(), 3u) << to_string(out);
  EXPECT_TRUE(is_sync(seq->stmts[1]));
  EXPECT_EQ(count_syncs(out), 1) << to_string(out);

  // A WMMA load through address_of reads shared memory: it follows the fill after a barrier.
  Var frag("frag", Handle());
  Expr ptr = Call::make(Handle(), intrinsic::address_of, {g.AS.load({0})}, Call::PureIntrinsic);
  Stmt wmma = Evaluate::make(Call::make(Void(), intrinsic::wmma_load_matrix_sync,
                                        {frag, 16, 16, 16, 0, ptr, 16, StringImm::make("row_major")},
                                        Call::Intrinsic));
  Stmt out2 = insert_thread_syncs(g.wrap(Seq::make({g.fill(), wmma})));
  EXPECT_EQ(count_syncs(out2), 1) << to_string(out2);
}

// Fragment loads in a loop only read the shared tile: no barrier between iterations (the
// tutorial's inner loops would otherwise sync after every load_matrix_sync), while a fragment
// store through address_of writes shared memory and does need one before it is read again (and
// only writes it).
TEST(PassThreadSync, FragmentLoadsOnlyReadSharedMemory) {
  Kernel g;
  Var frag("frag", Handle()), i("i");
  auto ptr = [&](Expr idx) {
    return Call::make(Handle(), intrinsic::address_of, {g.AS.load({idx})}, Call::PureIntrinsic);
  };
  auto wmma = [&](const char *name, Expr idx) {
    return Evaluate::make(Call::make(Void(), name,
                                     {frag, 16, 16, 16, 0, ptr(idx), 16, StringImm::make("row_major")},
                                     Call::Intrinsic));
  };
  Stmt loads = For::make(i, 0, 4, ForKind::Serial, wmma(intrinsic::wmma_load_matrix_sync, i * 16));
  Stmt out = insert_thread_syncs(g.wrap(Seq::make({g.fill(), loads})));
  EXPECT_EQ(count_syncs(out), 1) << to_string(out);
  Stmt stores = For::make(i, 0, 4, ForKind::Serial,
                          Seq::make({wmma(intrinsic::wmma_store_matrix_sync, i * 16),
                                     BufferStore::make(g.C, g.AS.load({i * 16 + g.tx}), {i})}));
  Stmt out2 = insert_thread_syncs(g.wrap(stores));
  EXPECT_GE(count_syncs(out2), 1) << to_string(out2);

  // Fragment stores only write: a loop of them (each warp's tiles of a shared buffer) needs no
  // barrier between its iterations, only one before the tile is read; a store after a read of
  // the tile still waits for it.
  Stmt store_loop = For::make(i, 0, 4, ForKind::Serial,
                              wmma(intrinsic::wmma_store_matrix_sync, i * 16));
  Stmt read = BufferStore::make(g.C, g.AS.load({g.tx}), {g.tx});
  Stmt out3 = insert_thread_syncs(g.wrap(Seq::make({store_loop, read})));
  EXPECT_EQ(count_syncs(out3), 1) << to_string(out3);
  const auto *seq = Kernel::kernel_body(out3).as<Seq>();
  ASSERT_NE(seq, nullptr) << to_string(out3);
  ASSERT_EQ(seq->stmts.size(), 3u) << to_string(out3);
  EXPECT_TRUE(is_sync(seq->stmts[1])) << to_string(out3);
  Stmt out4 = insert_thread_syncs(g.wrap(Seq::make({read, store_loop})));
  EXPECT_EQ(count_syncs(out4), 1) << to_string(out4);
}
