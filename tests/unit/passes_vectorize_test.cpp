// vectorize_loops: dense vector code for vectorized loops, serial fallback otherwise.
#include "compiler/ir/IRPrinter.h"
#include "compiler/passes/VectorizeLoops.h"
#include "passes_test_util.h"

#include <gtest/gtest.h>

using namespace tessel;
using namespace tessel::testing;

namespace {

Buffer flat(const char *name, int size, DataType t = Float(32)) {
  return Buffer::make(name, t, {size});
}

// Runs `s` with A, B = 0, 0.5, 1, ... and C = 0, returns C.
std::vector<double> run(const Stmt &s, const Buffer &A, const Buffer &B, const Buffer &C) {
  Interp in;
  iota(in.memory(A, 64), 0.5);
  iota(in.memory(B, 64), 0.25);
  in.memory(C, 64);
  in.run(s);
  return in.memory(C);
}

} // namespace

TEST(PassVectorize, DenseLoopBecomesRampsAndBroadcasts) {
  Buffer A = flat("A", 64), B = flat("B", 64), C = flat("C", 64);
  Var i("i"), v("v");
  Expr idx = i * 4 + v;
  Stmt body = BufferStore::make(C, A.load({idx}) + B.load({idx}) * 2.0f, {idx});
  Stmt s = For::make(i, 0, 16, ForKind::Serial,
                     For::make(v, 0, 4, ForKind::Vectorized, body));
  Stmt out = vectorize_loops(s);
  EXPECT_EQ(to_string(out), "for (i: int32, 0, 16) {\n"
                            "  C[ramp(i * 4, 1, 4)] = A[ramp(i * 4, 1, 4)] + B[ramp(i * 4, 1, 4)] "
                            "* broadcast(2f32, 4)\n"
                            "}\n");
  EXPECT_EQ(run(out, A, B, C), run(s, A, B, C));
}

TEST(PassVectorize, WidensCastsSelectsLetsAndNonZeroMin) {
  Buffer A = flat("A", 64), C = flat("C", 64), I = flat("I", 64, Int(32));
  Var v("v"), x("x", Float(32));
  Expr val = Let::make(x, A.load({v + 1}),
                       select(v < 6, x, cast(Float(32), I.load({v})) + 1.0f));
  Stmt s = For::make(v, 2, 8, ForKind::Vectorized, BufferStore::make(C, val, {v}));
  Stmt out = vectorize_loops(s);
  std::string text = to_string(out);
  EXPECT_EQ(find_all<For>(out).size(), 0u) << text;
  EXPECT_NE(text.find("C[ramp(2, 1, 8)] = (let x = A[ramp(3, 1, 8)]"), std::string::npos) << text;
  EXPECT_NE(text.find("cast(float32x8, I[ramp(2, 1, 8)])"), std::string::npos) << text;
  EXPECT_NE(text.find("ramp(2, 1, 8) < broadcast(6, 8)"), std::string::npos) << text;

  Interp a, b;
  for (Interp *in : {&a, &b}) {
    iota(in->memory(A, 64), 0.5);
    iota(in->memory(I, 64), 3);
    in->memory(C, 64);
  }
  a.run(s);
  b.run(out);
  EXPECT_EQ(a.memory(C), b.memory(C));
}

TEST(PassVectorize, LoopInvariantBranchIsKept) {
  Buffer A = flat("A", 64), C = flat("C", 64);
  Var i("i"), v("v");
  Stmt store = BufferStore::make(C, A.load({i * 4 + v}), {i * 4 + v});
  Stmt s = For::make(i, 0, 16, ForKind::Serial,
                     For::make(v, 0, 4, ForKind::Vectorized, IfThenElse::make(i < 8, store)));
  Stmt out = vectorize_loops(s);
  EXPECT_NE(to_string(out).find("if (i < 8) {\n    C[ramp(i * 4, 1, 4)] = A[ramp(i * 4, 1, 4)]"),
            std::string::npos)
      << to_string(out);
}

// if_then_else(c, load, 0) with c the same in every lane (an im2col row over the padding) becomes
// a branch around two vector stores, so the taken side stays one vector copy.
TEST(PassVectorize, LaneInvariantIfThenElseBecomesBranch) {
  Buffer A = flat("A", 64), B = flat("B", 64), C = flat("C", 64);
  Var i("i"), v("v");
  Expr idx = i * 4 + v;
  Expr value = if_then_else(i % 3 != 1, A.load({idx}), make_zero(Float(32)));
  Stmt s = For::make(i, 0, 16, ForKind::Serial,
                     For::make(v, 0, 4, ForKind::Vectorized, BufferStore::make(C, value, {idx})));
  Stmt out = vectorize_loops(s);
  EXPECT_EQ(to_string(out), "for (i: int32, 0, 16) {\n"
                            "  if (floormod(i, 3) != 1) {\n"
                            "    C[ramp(i * 4, 1, 4)] = A[ramp(i * 4, 1, 4)]\n"
                            "  } else {\n"
                            "    C[ramp(i * 4, 1, 4)] = broadcast(0f32, 4)\n"
                            "  }\n"
                            "}\n");
  EXPECT_EQ(run(out, A, B, C), run(s, A, B, C));

  // A condition that moves with the lane cannot be hoisted: the loop stays serial.
  Stmt lane = For::make(v, 0, 4, ForKind::Vectorized,
                        BufferStore::make(C, if_then_else(v < 2, A.load({v}), make_zero(Float(32))),
                                          {v}));
  std::string text = to_string(vectorize_loops(lane));
  EXPECT_NE(text.find("for (v: int32, 0, 4)"), std::string::npos) << text;
  EXPECT_EQ(text.find("ramp"), std::string::npos) << text;
}

// A condition on the lane that no lane's value changes (a padded copy's columns: a source of
// 40 columns in vectors of 4, `i * 4 + v < 40` is `i < 10` in every lane) is hoisted too; one
// that some vectors cross (42 columns) is not.
TEST(PassVectorize, ConditionOnTheLaneThatNoVectorCrossesBecomesBranch) {
  Buffer A = flat("A", 64), B = flat("B", 64), C = flat("C", 64);
  Var i("i"), v("v");
  Expr idx = i * 4 + v;
  auto copy = [&](int columns) {
    Expr value = if_then_else(idx < columns && i > 1, A.load({idx}), make_zero(Float(32)));
    return For::make(i, 0, 16, ForKind::Serial,
                     For::make(v, 0, 4, ForKind::Vectorized, BufferStore::make(C, value, {idx})));
  };
  Stmt s = copy(40);
  Stmt out = vectorize_loops(s);
  EXPECT_EQ(to_string(out), "for (i: int32, 0, 16) {\n"
                            "  if (i < 10 && i > 1) {\n"
                            "    C[ramp(i * 4, 1, 4)] = A[ramp(i * 4, 1, 4)]\n"
                            "  } else {\n"
                            "    C[ramp(i * 4, 1, 4)] = broadcast(0f32, 4)\n"
                            "  }\n"
                            "}\n");
  EXPECT_EQ(run(out, A, B, C), run(s, A, B, C));
  std::string crossed = to_string(vectorize_loops(copy(42)));
  EXPECT_NE(crossed.find("for (v: int32, 0, 4)"), std::string::npos) << crossed;
  EXPECT_EQ(crossed.find("ramp"), std::string::npos) << crossed;
}

// Each of these bodies must not be vectorized; the loop stays, serial, with the same results.
TEST(PassVectorize, FallsBackToSerialLoop) {
  Buffer A = flat("A", 64), B = flat("B", 64), C = flat("C", 64);
  Var v("v"), k("k");
  Expr zero = make_zero(Float(32));
  std::vector<std::pair<const char *, Stmt>> bodies = {
      {"strided", BufferStore::make(C, A.load({v * 2}), {v})},
      {"inner loop",
       For::make(k, 0, 2, ForKind::Serial, BufferStore::make(C, A.load({v + k}), {v}))},
      {"branch on the lane",
       IfThenElse::make(v < 2, BufferStore::make(C, A.load({v}), {v}))},
      {"reduction into a scalar", BufferStore::make(C, C.load({0}) + A.load({v}), {0})},
      {"read after write at another index",
       Seq::make({BufferStore::make(C, A.load({v}), {v}),
                  BufferStore::make(B, C.load({v + 1}), {v})})},
      {"call", BufferStore::make(C, Call::make(Float(32), "expf", {A.load({v})},
                                               Call::PureExtern),
                                 {v})},
      {"intrinsic", Seq::make({BufferStore::make(C, zero, {v}), sync_stmt()})},
      {"store not moving with the lane", BufferStore::make(C, zero, {3})},
  };
  for (auto &[what, body] : bodies) {
    Stmt s = For::make(v, 0, 4, ForKind::Vectorized, body);
    Stmt out = vectorize_loops(s);
    std::string text = to_string(out);
    EXPECT_NE(text.find("for (v: int32, 0, 4)"), std::string::npos) << what << "\n" << text;
    EXPECT_EQ(text.find("ramp"), std::string::npos) << what << "\n" << text;
    if (std::string(what) != "call") {
      EXPECT_EQ(run(out, A, B, C), run(s, A, B, C)) << what;
    }
  }
}

TEST(PassVectorize, ExtentOneIsSubstitutedAndNonConstantIsSerial) {
  Buffer C = flat("C", 64);
  Var v("v"), n("n");
  Stmt one = For::make(v, 5, 1, ForKind::Vectorized, BufferStore::make(C, 1.0f, {v}));
  EXPECT_EQ(to_string(vectorize_loops(one)), "C[5] = 1f32\n");
  Stmt dyn = For::make(v, 0, n, ForKind::Vectorized, BufferStore::make(C, 1.0f, {v}));
  EXPECT_EQ(to_string(vectorize_loops(dyn)), "for (v: int32, 0, n) {\n  C[v] = 1f32\n}\n");
}
