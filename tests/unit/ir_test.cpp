#include "compiler/ir/IR.h"
#include "compiler/ir/IREquality.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"

#include <gtest/gtest.h>

using namespace tessel;

TEST(IR, PrintsArithmeticWithFewestParentheses) {
  Var x("x"), y("y");
  EXPECT_EQ(to_string(x * 16 + y), "x * 16 + y");
  EXPECT_EQ(to_string((x + y) * 2), "(x + y) * 2");
  EXPECT_EQ(to_string(x - (y - 1)), "x - (y - 1)");
  EXPECT_EQ(to_string(floordiv(x, 14) + floormod(y, 14)), "floordiv(x, 14) + floormod(y, 14)");
}

TEST(IR, RttiWorksOnHandles) {
  Var x("x");
  Expr e = x + 1;
  EXPECT_TRUE(llvm::isa<Add>(e));
  EXPECT_FALSE(llvm::isa<Mul>(e));
  const Add *add = llvm::dyn_cast<Add>(e);
  ASSERT_NE(add, nullptr);
  EXPECT_TRUE(add->a.same_as(x));
  EXPECT_EQ(e.as<Sub>(), nullptr);
}
