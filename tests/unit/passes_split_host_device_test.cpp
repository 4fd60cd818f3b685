// split_host_device: launch configuration from thread_extent attrs.
#include "compiler/passes/SplitHostDevice.h"
#include "compiler/lower/Lower.h"
#include "compiler/support/Error.h"
#include "passes_test_util.h"

#include <gtest/gtest.h>

using namespace tessel;
using namespace tessel::testing;

namespace {
Stmt bind(const char *tag, int extent, Stmt body) {
  return AttrStmt::make(thread_axis(tag), attr::thread_extent, extent, body);
}
} // namespace

TEST(PassSplitHostDevice, LaunchConfigFromThreadExtents) {
  Buffer C = Buffer::make("C", Float(32), {64});
  Var i("i");
  // threadIdx.x is declared twice (a cache stage rebinding it), with the same extent.
  Stmt inner = For::make(i, 0, 2, ForKind::Serial,
                         bind("threadIdx.x", 32, BufferStore::make(C, 1.0f, {0})));
  Stmt body = bind("blockIdx.z", 196,
                   bind("blockIdx.x", 2,
                        bind("threadIdx.y", 4,
                             bind("threadIdx.x", 32, Seq::make({inner, inner})))));
  std::vector<LoweredFunc> funcs = split_host_device(body, "conv", {C}, {{64}}, 0);
  ASSERT_EQ(funcs.size(), 1u);
  const LoweredFunc &f = funcs[0];
  EXPECT_EQ(f.name, "conv");
  EXPECT_EQ(f.launch.grid, (std::array<int64_t, 3>{2, 1, 196}));
  EXPECT_EQ(f.launch.block, (std::array<int64_t, 3>{32, 4, 1}));
  EXPECT_EQ(f.launch.dynamic_shared_bytes, 0);
  EXPECT_EQ(f.launch.threads_per_block(), 128);
  EXPECT_TRUE(f.body.same_as(body));
  ASSERT_EQ(f.args.size(), 1u);
  EXPECT_EQ(f.arg_shapes[0], std::vector<int64_t>{64});
}

// A thread axis used where none of its bindings encloses the use (a per-thread copy computed
// at the block, before the loop that binds the axis): the kernel gets one binding of it around
// its body, so every use is defined (the launch defines it for the whole kernel).
TEST(PassSplitHostDevice, ThreadAxisUsedOutsideItsBindingsIsBoundAroundTheKernel) {
  Buffer C = Buffer::make("C", Float(32), {64});
  IterVar tx = thread_axis("threadIdx.x");
  Stmt early = BufferStore::make(C, 1.0f, {tx.var()});
  Stmt late = AttrStmt::make(tx, attr::thread_extent, 32, BufferStore::make(C, 2.0f, {tx.var()}));
  Stmt body = bind("blockIdx.x", 2, Seq::make({early, late}));
  std::vector<LoweredFunc> funcs = split_host_device(body, "k", {C}, {{64}}, 0);
  ASSERT_EQ(funcs.size(), 1u);
  const auto *top = funcs[0].body.as<AttrStmt>();
  ASSERT_NE(top, nullptr) << funcs[0].body;
  const IterVar *iv = std::get_if<IterVar>(&top->node);
  ASSERT_NE(iv, nullptr);
  EXPECT_TRUE(iv->same_as(tx));
  EXPECT_EQ(top->key, attr::thread_extent);
  EXPECT_TRUE(top->body.same_as(body));
  EXPECT_EQ(funcs[0].launch.block[0], 32);
}

TEST(PassSplitHostDevice, DisagreeingExtentsNameTheTag) {
  Buffer C = Buffer::make("C", Float(32), {64});
  Stmt body = bind("threadIdx.y", 4,
                   Seq::make({bind("threadIdx.x", 32, BufferStore::make(C, 1.0f, {0})),
                              bind("threadIdx.x", 16, BufferStore::make(C, 2.0f, {0}))}));
  try {
    split_host_device(body, "k", {C}, {{64}}, 0);
    FAIL() << "expected an error";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("threadIdx.x"), std::string::npos) << msg;
    EXPECT_NE(msg.find("32"), std::string::npos) << msg;
    EXPECT_NE(msg.find("16"), std::string::npos) << msg;
  }
  EXPECT_THROW(split_host_device(body, "k", {C}, {}, 0), InternalError);
}

// With workspaces, a statement that reads what an earlier one writes starts a kernel of its
// own (named after the workspace it writes, with its own launch configuration); independent
// statements with the same block share a kernel whose grid is the larger, each guarded to its
// own. Every kernel takes all buffers.
TEST(PassSplitHostDevice, KernelsSplitWhereAStatementReadsAWorkspace) {
  Buffer A = Buffer::make("A", Float(32), {64}), P = Buffer::make("P", Float(32), {64}),
         Q = Buffer::make("Q", Float(32), {64});
  Stmt pad = bind("blockIdx.x", 8, bind("threadIdx.x", 8, BufferStore::make(P, 1.0f, {0})));
  Stmt pad2 = bind("blockIdx.x", 3,
                   bind("blockIdx.y", 2, bind("threadIdx.x", 8, BufferStore::make(Q, 1.0f, {0}))));
  Stmt use = bind("blockIdx.x", 2,
                  bind("threadIdx.x", 32,
                       BufferStore::make(A, BufferLoad::make(P, {0}) + BufferLoad::make(Q, {1}),
                                         {0})));
  std::vector<LoweredFunc> funcs = split_host_device(Seq::make({pad, pad2, use}), "k",
                                                     {A, P, Q}, {{64}, {64}, {64}}, 2);
  ASSERT_EQ(funcs.size(), 2u);
  EXPECT_EQ(funcs[0].name, "k_P");
  EXPECT_EQ(funcs[1].name, "k");
  EXPECT_EQ(funcs[0].launch.grid, (std::array<int64_t, 3>{8, 2, 1}));
  std::string ir = to_string(funcs[0]);
  EXPECT_NE(ir.find("if (blockIdx.y == 0) {"), std::string::npos) << ir; // pad: no y
  EXPECT_NE(ir.find(" < 3) {"), std::string::npos) << ir; // pad2: 3 blocks of 8
  EXPECT_TRUE(funcs[1].body.same_as(use));
  EXPECT_EQ(funcs[1].launch.block[0], 32);
  EXPECT_EQ(funcs[1].args.size(), 3u);
  // Statements that need other blocks of threads do not share a kernel.
  Stmt wide = bind("blockIdx.x", 8, bind("threadIdx.x", 64, BufferStore::make(Q, 1.0f, {0})));
  EXPECT_EQ(split_host_device(Seq::make({pad, wide, use}), "k", {A, P, Q}, {{64}, {64}, {64}}, 2)
                .size(),
            3u);
  // Without workspaces the body is one kernel, whose blocks could not wait for each other.
  EXPECT_THROW(split_host_device(Seq::make({pad, use}), "k", {A, P}, {{64}, {64}}, 0), Error);
}
