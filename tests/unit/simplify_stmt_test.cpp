// Tests of statement simplification: binding loop and thread variables, dead code, lets.
#include "compiler/arith/Analyzer.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"

#include <gtest/gtest.h>

using namespace tessel;

namespace {
Buffer buf() { return Buffer::make("A", Int(32), {Expr(1024)}); }
Stmt store(const Expr &index, const Expr &value) {
  return BufferStore::make(buf(), value, {index});
}
} // namespace

TEST(SimplifyStmt, BindsLoopVariables) {
  Var i("i"), j("j");
  Stmt body = store(floordiv(i * 16 + j, 16) * 16 + floormod(i * 16 + j, 16), Expr(0));
  Stmt s = For::make(i, 0, 64, ForKind::Serial, For::make(j, 0, 16, ForKind::Serial, body));
  Stmt r = arith::simplify(s);
  std::string text = to_string(r);
  EXPECT_NE(text.find("A[i * 16 + j] = 0"), std::string::npos) << text;
  // Outside the loop, j is unknown again.
  EXPECT_EQ(to_string(arith::simplify(floormod(j, 16))), "floormod(j, 16)");
}

TEST(SimplifyStmt, DropsProvenGuards) {
  Var i("i"), j("j");
  Stmt guarded = IfThenElse::make(i * 16 + j < 1024, store(i * 16 + j, Expr(1)));
  Stmt s = For::make(i, 0, 64, ForKind::Serial, For::make(j, 0, 16, ForKind::Serial, guarded));
  std::string text = to_string(arith::simplify(s));
  EXPECT_EQ(text.find("if"), std::string::npos) << text;

  Stmt dead =
      IfThenElse::make(i * 16 + j >= 1024, store(Expr(0), Expr(1)), store(Expr(1), Expr(2)));
  Stmt s2 = For::make(i, 0, 64, ForKind::Serial, For::make(j, 0, 16, ForKind::Serial, dead));
  text = to_string(arith::simplify(s2));
  EXPECT_EQ(text.find("if"), std::string::npos) << text;
  EXPECT_NE(text.find("A[1] = 2"), std::string::npos) << text;

  // Not provable: kept.
  Stmt partial = IfThenElse::make(i * 16 + j < 1000, store(i * 16 + j, Expr(1)));
  Stmt s3 = For::make(i, 0, 64, ForKind::Serial, For::make(j, 0, 16, ForKind::Serial, partial));
  text = to_string(arith::simplify(s3));
  EXPECT_NE(text.find("if"), std::string::npos) << text;
}

TEST(SimplifyStmt, ConditionNarrowsVariableInThenBranch) {
  Var i("i");
  Stmt inner = IfThenElse::make(i < 16, store(floormod(i, 16), Expr(1)));
  Stmt s = For::make(i, 0, 20, ForKind::Serial, inner);
  std::string text = to_string(arith::simplify(s));
  EXPECT_NE(text.find("A[i] = 1"), std::string::npos) << text;
}

TEST(SimplifyStmt, LoopsOfOneAndZeroIterations) {
  Var i("i"), j("j");
  Stmt one = For::make(i, 5, 1, ForKind::Serial, store(i * 2, i));
  EXPECT_EQ(to_string(arith::simplify(one)), to_string(store(Expr(10), Expr(5))));
  Stmt zero = For::make(i, 0, 0, ForKind::Serial, store(i, i));
  Stmt seq = Seq::make({zero, store(Expr(3), Expr(4))});
  EXPECT_EQ(to_string(arith::simplify(seq)), to_string(store(Expr(3), Expr(4))));
  // A loop whose body vanishes vanishes too; the whole statement is then a no-op.
  Stmt empty = For::make(j, 0, 8, ForKind::Serial, zero);
  Stmt r = arith::simplify(empty);
  ASSERT_TRUE(r.as<Evaluate>());
  EXPECT_TRUE(is_zero(r.as<Evaluate>()->value));
  // Thread-bound loops keep their single iteration (the launch configuration reads them).
  Stmt bound = For::make(i, 0, 1, ForKind::ThreadBinding, store(i, i), "threadIdx.x");
  EXPECT_TRUE(arith::simplify(bound).as<For>());
}

TEST(SimplifyStmt, BindsThreadExtent) {
  IterVar tx = thread_axis("threadIdx.x");
  IterVar bx = thread_axis("blockIdx.x");
  Expr t = tx.var(), b = bx.var();
  Stmt body = store(floordiv(b * 128 + t, 128) + floormod(t, 128), Expr(0));
  Stmt s = AttrStmt::make(bx, attr::thread_extent, Expr(8),
                          AttrStmt::make(tx, attr::thread_extent, Expr(128), body));
  std::string text = to_string(arith::simplify(s));
  EXPECT_NE(text.find("A[blockIdx.x + threadIdx.x] = 0"), std::string::npos) << text;
}

TEST(SimplifyStmt, LetStmts) {
  Var v("v"), i("i"), w("w");
  Stmt s = LetStmt::make(v, Expr(4), store(v * i, Expr(0)));
  EXPECT_EQ(to_string(arith::simplify(s)), to_string(store(i * 4, Expr(0))));
  Stmt s2 = LetStmt::make(v, i, store(v + 1, Expr(0)));
  EXPECT_EQ(to_string(arith::simplify(s2)), to_string(store(i + 1, Expr(0))));
  // A let of a non-trivial value stays, and bounds the variable inside.
  Stmt s3 =
      For::make(i, 0, 8, ForKind::Serial, LetStmt::make(w, i * 2, store(floormod(w, 16), Expr(0))));
  std::string text = to_string(arith::simplify(s3));
  EXPECT_NE(text.find("A[w] = 0"), std::string::npos) << text;
  // An unused let disappears.
  Stmt s4 = LetStmt::make(w, i * 2, store(Expr(0), Expr(0)));
  EXPECT_EQ(to_string(arith::simplify(s4)), to_string(store(Expr(0), Expr(0))));
}

TEST(SimplifyStmt, AllocateOfDeadCodeIsDropped) {
  Var i("i");
  Var data("B", Handle());
  Stmt dead = IfThenElse::make(Expr(1) < Expr(0), store(Expr(0), Expr(0)));
  Stmt s = Allocate::make(data, Float(32), {Expr(16)}, "shared", dead);
  Stmt r = arith::simplify(s);
  ASSERT_TRUE(r.as<Evaluate>()) << to_string(r);
}

// A loop bounded by data (ReduceBounds' form: for (t, 0, select(C, max(min(min(floordiv(x - 1,
// 16), u) + 1, 4), 0), 0))) runs its body under C, t < u + 1 and 16 t <= x - 1: the guards it
// already tested go (packed sequences' key loop), others stay; loads of a buffer the body
// writes are no facts.
TEST(SimplifyStmt, GuardsALoopsBoundTestedGo) {
  Var t("t"), r("r"), b("b");
  Buffer len = Buffer::make("len", Int(32), {Expr(8)});
  Expr x = BufferLoad::make(len, {b}), u = BufferLoad::make(len, {b + 1});
  Expr count = max(min(min(floordiv(x - 1, 16), u) + 1, Expr(4)), Expr(0));
  auto loop = [&](const Expr &start, Stmt body) {
    Expr extent = select(start < x, count, Expr(0));
    return For::make(t, 0, extent, ForKind::Serial,
                     For::make(r, 0, 16, ForKind::Serial, std::move(body)));
  };
  Expr start = b * 16;
  // start < x (the loop's select), t * 16 < x (its floordiv), 16 t <= 16 u + r (t <= u, r >= 0).
  Stmt tested = IfThenElse::make(start < x && t * 16 < x && t * 16 <= u * 16 + r,
                                 store(t * 16 + r, Expr(1)));
  std::string text = to_string(arith::simplify(loop(start, tested)));
  EXPECT_EQ(text.find("if ("), std::string::npos) << text;
  // t * 16 + r < x is not tested by the bound (the last block's rows past x): kept.
  Stmt partial = IfThenElse::make(t * 16 + r < x, store(t * 16 + r, Expr(1)));
  text = to_string(arith::simplify(loop(start, partial)));
  EXPECT_NE(text.find("if ("), std::string::npos) << text;
  // The body writes len: its loads in the bound may change, no facts.
  Stmt writes = Seq::make({BufferStore::make(len, Expr(0), {b}), tested});
  text = to_string(arith::simplify(loop(start, writes)));
  EXPECT_NE(text.find("if ("), std::string::npos) << text;
}
