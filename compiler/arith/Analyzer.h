// Integer arithmetic analysis: interval bounds, proofs and simplification of IR.
//
// An Analyzer knows ranges of variables (loop variables, thread indices) and uses them to bound
// integer expressions, prove conditions and simplify (e.g. floormod(x, 16) with x in [0, 16)
// becomes x). Loops entered by simplify(Stmt) bind their variables as it descends.
//
// Implementation, one concept per file: ConstIntBound (interval analysis), CanonicalForm (linear
// sum-of-products normal form), RewriteSimplify (expression rules), SimplifyStmt (statement
// rules), IntEval (the IR's integer semantics and a direct evaluator, used by folding and tests).
#pragma once

#include "compiler/ir/IR.h"

#include <llvm/ADT/DenseMap.h>

#include <cstdint>
#include <limits>

namespace tessel::arith {

/// A closed integer interval [min, max]; the extremes of int64 stand for "unbounded".
struct IntInterval {
  static constexpr int64_t kNegInf = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kPosInf = std::numeric_limits<int64_t>::max();
  int64_t min = kNegInf;
  int64_t max = kPosInf;

  static IntInterval everything() { return {}; }
  static IntInterval single(int64_t v) { return {v, v}; }
  bool is_single() const { return min == max; }
  bool bounded() const { return min != kNegInf && max != kPosInf; }
};

class Analyzer {
public:
  Analyzer();
  ~Analyzer();
  Analyzer(const Analyzer &) = delete;
  Analyzer &operator=(const Analyzer &) = delete;

  /// v lies in [r.min, r.min + r.extent).
  void bind(const Var &v, const Range &r);
  /// v lies in [iv.min, iv.max].
  void bind(const Var &v, IntInterval iv);
  /// Forgets what is known about v.
  void unbind(const Var &v);

  /// Bounds of an integer expression under the known variable ranges.
  IntInterval const_int_bound(const Expr &e);
  /// True if the boolean `cond` holds for every value of the bound variables. False means
  /// "could not prove", not "false".
  bool can_prove(const Expr &cond);
  /// An equivalent, simpler expression.
  Expr simplify(const Expr &e);
  /// An equivalent, simpler statement; binds loop variables while walking into loops and
  /// drops branches and loops that are proven dead.
  Stmt simplify(const Stmt &s);

private:
  struct Impl;
  Impl *impl_;
};

/// Shorthands with no variable ranges known.
Expr simplify(const Expr &e);
Stmt simplify(const Stmt &s);
bool can_prove(const Expr &cond);

} // namespace tessel::arith
