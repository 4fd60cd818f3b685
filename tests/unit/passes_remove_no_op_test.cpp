// remove_no_op: statements that do nothing disappear.
#include "compiler/ir/IRPrinter.h"
#include "compiler/passes/RemoveNoOp.h"
#include "passes_test_util.h"

#include <gtest/gtest.h>

using namespace tessel;
using namespace tessel::testing;

TEST(PassRemoveNoOp, RemovesWhatDoesNothing) {
  Buffer C = Buffer::make("C", Float(32), {64});
  Var i("i"), j("j"), x("x");
  Stmt keep = BufferStore::make(C, 1.0f, {i});
  Stmt s = For::make(
      i, 0, 8, ForKind::Serial,
      Seq::make({
          For::make(j, 0, 0, ForKind::Serial, keep),                      // zero extent
          Evaluate::make(0),                                              // constant
          Evaluate::make(Expr(i) + 1),                                    // pure
          BufferStore::make(C, C.load({i}), {i}),                         // self-store
          IfThenElse::make(i < 4, Evaluate::make(1), Evaluate::make(2)), // empty branches
          LetStmt::make(x, Expr(i) * 2, Evaluate::make(x)),               // let around nothing
          IfThenElse::make(const_true(), keep),                           // constant condition
          sync_stmt(),                                                    // has effects: kept
      }));
  EXPECT_EQ(to_string(remove_no_op(s)), "for (i: int32, 0, 8) {\n"
                                        "  C[i] = 1f32\n"
                                        "  @syncthreads()\n"
                                        "}\n");
}

TEST(PassRemoveNoOp, EverythingRemovedGivesEvaluateZeroAndUnchangedIsSame) {
  Var i("i");
  Stmt empty = For::make(i, 0, 4, ForKind::Serial, Evaluate::make(0));
  EXPECT_EQ(to_string(remove_no_op(empty)), "0\n");
  Buffer C = Buffer::make("C", Float(32), {64});
  Stmt s = For::make(i, 0, 4, ForKind::Serial, BufferStore::make(C, 1.0f, {i}));
  EXPECT_TRUE(remove_no_op(s).same_as(s));
  // Only the else branch does something: the condition is negated.
  Stmt br = IfThenElse::make(i < 2, Evaluate::make(0), BufferStore::make(C, 1.0f, {i}));
  EXPECT_EQ(to_string(remove_no_op(br)), "if (!(i < 2)) {\n  C[i] = 1f32\n}\n");
}
