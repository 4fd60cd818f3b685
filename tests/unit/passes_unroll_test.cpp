// unroll_loops: explicit and automatic unrolling.
#include "compiler/ir/IRPrinter.h"
#include "compiler/passes/UnrollLoops.h"
#include "passes_test_util.h"

#include <gtest/gtest.h>

using namespace tessel;
using namespace tessel::testing;

TEST(PassUnroll, ReplicatesBodyWithConstantIndices) {
  Buffer A = Buffer::make("A", Float(32), {64}), C = Buffer::make("C", Float(32), {64});
  Var i("i"), u("u");
  Stmt body = BufferStore::make(C, A.load({i * 4 + u}) * 3.0f, {i * 4 + u});
  Stmt s = For::make(i, 0, 16, ForKind::Serial, For::make(u, 1, 3, ForKind::Unrolled, body));
  Stmt out = unroll_loops(s);
  std::string text = to_string(out);
  EXPECT_EQ(find_all<For>(out).size(), 1u) << text;
  EXPECT_EQ(find_all<BufferStore>(out).size(), 3u) << text;
  EXPECT_NE(text.find("C[i * 4 + 1] = A[i * 4 + 1] * 3f32\n"), std::string::npos) << text;
  EXPECT_NE(text.find("C[i * 4 + 3] = A[i * 4 + 3] * 3f32\n"), std::string::npos) << text;

  Interp a, b;
  for (Interp *in : {&a, &b}) {
    iota(in->memory(A, 64));
    in->memory(C, 64);
  }
  a.run(s);
  b.run(out);
  EXPECT_EQ(a.memory(C), b.memory(C));
}

TEST(PassUnroll, AutoUnrollsSmallInnermostSerialLoops) {
  Buffer C = Buffer::make("C", Float(32), {64});
  Var i("i"), j("j");
  auto nest = [&](int outer, int inner) {
    return For::make(i, 0, outer, ForKind::Serial,
                     For::make(j, 0, inner, ForKind::Serial,
                               BufferStore::make(C, 1.0f, {i * inner + j})));
  };
  // 2 x 4 stores: both loops fit in 8 steps; with a budget of 4 only the inner one does.
  EXPECT_EQ(find_all<For>(unroll_loops(nest(2, 4), 8)).size(), 0u);
  EXPECT_EQ(find_all<For>(unroll_loops(nest(2, 4), 4)).size(), 1u);
  EXPECT_EQ(find_all<For>(unroll_loops(nest(2, 4), 3)).size(), 2u);
  // Auto-unrolling is off by default.
  EXPECT_EQ(find_all<For>(unroll_loops(nest(2, 4))).size(), 2u);
}

TEST(PassUnroll, KeepsNonConstantAndNonUnrolledLoops) {
  Buffer C = Buffer::make("C", Float(32), {64});
  Var j("j"), n("n");
  Stmt dyn = For::make(j, 0, n, ForKind::Unrolled, BufferStore::make(C, 1.0f, {j}));
  EXPECT_TRUE(unroll_loops(dyn, 64).same_as(dyn));
  Stmt vec = For::make(j, 0, 4, ForKind::Vectorized, BufferStore::make(C, 1.0f, {j}));
  EXPECT_TRUE(unroll_loops(vec, 64).same_as(vec));
}
