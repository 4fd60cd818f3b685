// storage_rewrite: on-chip allocations hoisted to the kernel top, unused ones removed.
#include "compiler/ir/IRPrinter.h"
#include "compiler/passes/StorageRewrite.h"
#include "passes_test_util.h"

#include <gtest/gtest.h>

using namespace tessel;
using namespace tessel::testing;

namespace {

Stmt alloc(const Buffer &b, int size, Stmt body) {
  return Allocate::make(Var(b->data.as<Variable>()), b.dtype(), {size}, b.scope(), body);
}

Stmt kernel(Stmt body) {
  IterVar bx = thread_axis("blockIdx.x"), tx = thread_axis("threadIdx.x");
  return AttrStmt::make(bx, attr::thread_extent, 4, AttrStmt::make(tx, attr::thread_extent, 32,
                                                                    body));
}

} // namespace

TEST(PassStorageRewrite, HoistsToKernelTopInProgramOrder) {
  Buffer A = Buffer::make("A", Float(32), {1024});
  Buffer AS = Buffer::make("A.shared", Float(32), {64}, "shared");
  Buffer CL = Buffer::make("C.local", Float(32), {4}, "local");
  Buffer G = Buffer::make("tmp", Float(32), {8}, "global");
  Buffer U = Buffer::make("unused", Float(32), {8}, "shared");
  Var ko("ko"), i("i");
  Stmt inner = Seq::make({BufferStore::make(AS, A.load({ko}), {i}),
                          BufferStore::make(CL, AS.load({i}), {0}),
                          BufferStore::make(G, CL.load({0}), {0})});
  Stmt body = For::make(
      ko, 0, 8, ForKind::Serial,
      alloc(AS, 64, alloc(U, 8, For::make(i, 0, 2, ForKind::Serial,
                                          alloc(CL, 4, alloc(G, 8, inner))))));
  Stmt out = storage_rewrite(kernel(body));
  std::string text = to_string(out);
  EXPECT_EQ(text.rfind("attr [IterVar(blockIdx.x: int32, (nullptr), \"ThreadIndex\", "
                       "\"blockIdx.x\")] \"thread_extent\" = 4;\n"
                       "attr [IterVar(threadIdx.x: int32, (nullptr), \"ThreadIndex\", "
                       "\"threadIdx.x\")] \"thread_extent\" = 32;\n"
                       "allocate(A.shared, float32, [64]), storage_scope = shared;\n"
                       "allocate(C.local, float32, [4]), storage_scope = local;\n"
                       "for (ko: int32, 0, 8) {\n",
                       0),
            0u)
      << text;
  EXPECT_EQ(text.find("unused"), std::string::npos) << text;
  // Global storage cannot be declared in a kernel: it stays where it was.
  EXPECT_NE(text.find("    allocate(tmp, float32, [8]), storage_scope = global;"),
            std::string::npos)
      << text;
  EXPECT_EQ(count_of(text, "allocate"), 3) << text;
}

TEST(PassStorageRewrite, MergesRepeatedAllocationsAndMovesOnesOutsideTheKernelIn) {
  Buffer AS = Buffer::make("A.shared", Float(32), {64}, "shared");
  Buffer C = Buffer::make("C", Float(32), {64});
  // As unrolling leaves it: two allocations of the same var in sequence, of different sizes.
  Stmt twice = Seq::make({alloc(AS, 32, BufferStore::make(AS, 1.0f, {0})),
                          alloc(AS, 64, BufferStore::make(C, AS.load({0}), {0}))});
  Stmt out = storage_rewrite(alloc(AS, 16, kernel(twice)));
  std::string text = to_string(out);
  EXPECT_EQ(count_of(text, "allocate"), 1) << text;
  EXPECT_NE(text.find("\"thread_extent\" = 32;\nallocate(A.shared, float32, [64])"),
            std::string::npos)
      << text;
}

TEST(PassStorageRewrite, LeavesCodeOutsideKernelsAlone) {
  Buffer T = Buffer::make("T", Float(32), {8}, "local");
  Stmt s = alloc(T, 8, BufferStore::make(T, 1.0f, {0}));
  EXPECT_TRUE(storage_rewrite(s).same_as(s));
}
