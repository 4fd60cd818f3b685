// The simplifier (private to compiler/arith; users call Analyzer::simplify).
//
// One bottom-up mutator: each node's children are simplified first, then the rules for that
// node run on simplified operands. Expression rules are in RewriteSimplify.cpp, statement rules
// (binding loop variables, dropping dead code) in SimplifyStmt.cpp. Every rule result is itself
// simplified, so a rule may call the others (add, floordiv, ...) to build its result.
#pragma once

#include "compiler/arith/CanonicalForm.h"
#include "compiler/arith/ConstIntBound.h"
#include "compiler/ir/IRMutator.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace tessel::arith {

/// A scalar integer (not bool): what the integer rules and the interval analysis work on.
inline bool is_int_scalar(DataType t) {
  return t.is_scalar() && t.is_integer_like() && !t.is_bool();
}

/// Narrows what is known about a variable for a scope, and restores the previous state.
class BindScope {
public:
  BindScope(VarBounds &bounds, const Variable *v, IntInterval iv);
  ~BindScope();
  BindScope(const BindScope &) = delete;
  BindScope &operator=(const BindScope &) = delete;

private:
  VarBounds &bounds_;
  const Variable *var_;
  std::optional<IntInterval> old_;
};

class Simplifier : public IRMutator {
public:
  explicit Simplifier(VarBounds &bounds) : bounds_(bounds) {}
  using IRMutator::mutate;

  IntInterval bound(const Expr &e) const { return const_int_bound(e, bounds_); }

  // Rules. Operands must already be simplified; results are simplified.
  Expr add(const Expr &a, const Expr &b);
  Expr sub(const Expr &a, const Expr &b);
  Expr mul(const Expr &a, const Expr &b);
  Expr floordiv(const Expr &a, const Expr &b);
  Expr floormod(const Expr &a, const Expr &b);
  Expr truncdiv(const Expr &a, const Expr &b);
  Expr truncmod(const Expr &a, const Expr &b);
  Expr min_max(bool is_min, const Expr &a, const Expr &b);
  /// kind is one of EQ, NE, LT, LE, GT, GE.
  Expr compare(IRNodeKind kind, Expr a, Expr b);
  Expr logic_and(const Expr &a, const Expr &b);
  Expr logic_or(const Expr &a, const Expr &b);
  Expr logic_not(const Expr &a);
  Expr select(const Expr &c, const Expr &t, const Expr &f);
  Expr cast(DataType t, const Expr &v);

protected:
  // Expressions (RewriteSimplify.cpp).
  Expr visit(const Variable *op) override;
  Expr visit(const Add *op) override;
  Expr visit(const Sub *op) override;
  Expr visit(const Mul *op) override;
  Expr visit(const FloorDiv *op) override;
  Expr visit(const FloorMod *op) override;
  Expr visit(const Div *op) override;
  Expr visit(const Mod *op) override;
  Expr visit(const Min *op) override;
  Expr visit(const Max *op) override;
  Expr visit(const EQ *op) override;
  Expr visit(const NE *op) override;
  Expr visit(const LT *op) override;
  Expr visit(const LE *op) override;
  Expr visit(const GT *op) override;
  Expr visit(const GE *op) override;
  Expr visit(const And *op) override;
  Expr visit(const Or *op) override;
  Expr visit(const Not *op) override;
  Expr visit(const Select *op) override;
  Expr visit(const Cast *op) override;
  Expr visit(const Let *op) override;
  Expr visit(const Call *op) override;

  // Statements (SimplifyStmt.cpp).
  Stmt visit(const LetStmt *op) override;
  Stmt visit(const AttrStmt *op) override;
  Stmt visit(const AssertStmt *op) override;
  Stmt visit(const For *op) override;
  Stmt visit(const Allocate *op) override;
  Stmt visit(const BufferRealize *op) override;
  Stmt visit(const IfThenElse *op) override;
  Stmt visit(const Seq *op) override;
  Stmt visit(const Evaluate *op) override;

private:
  Expr linear_floordiv(const Expr &a, int64_t c);
  Expr linear_floormod(const Expr &a, int64_t c);
  /// Splits f into (aligned, small) with aligned a multiple of some g > 1 dividing c and small
  /// in [0, g), small not empty; the largest such g.
  std::optional<std::pair<LinearForm, LinearForm>> split_aligned(const LinearForm &f, int64_t c);
  Expr linear_compare(IRNodeKind kind, const Expr &a, const Expr &b);
  Expr vector_arith(IRNodeKind kind, const Expr &a, const Expr &b);
  /// Narrows variable bounds by the conjuncts of `cond` of the form `v < e`, `e <= v`, `v == e`.
  void assume(const Expr &cond, std::vector<std::unique_ptr<BindScope>> &scopes);
  /// `e` simplified where `cond` (simplified) is known to hold.
  Expr mutate_assuming(const Expr &cond, const Expr &e);
  Stmt mutate_assuming(const Expr &cond, const Stmt &s);
  /// Whether integer comparison `c` follows from one of `facts_` (f <= 0, c's own f' = f + d
  /// with d <= 0 over the variables' ranges: a guard its loop's bound already tested).
  bool implied_by_facts(const Expr &c);

  VarBounds &bounds_;
  /// Comparisons known to hold where the simplifier is, as f with f <= 0: inside a loop whose
  /// extent is select(C, n, 0) (a reduction's loop bounded by data, ReduceBounds), C's
  /// conjuncts and the loop variable's bounds from n (SimplifyStmt.cpp, loop_facts).
  std::vector<Expr> facts_;
};

} // namespace tessel::arith
