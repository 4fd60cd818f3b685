// Intervals of index expressions with a symbolic base: base + [lo, hi].
//
// Bound inference asks "which elements of a tensor does this loop nest touch?". In tessel every
// extent is a constant while tile origins are symbolic (blockIdx.x * 128 + ...), so a region is
// a symbolic base plus constant offsets, and its extent hi - lo + 1 is a constant without any
// symbolic simplification.
#pragma once

#include "compiler/ir/IR.h"

#include <llvm/ADT/DenseMap.h>

#include <optional>

namespace tessel {

struct IndexInterval {
  Expr base; ///< undefined means 0
  int64_t lo = 0;
  int64_t hi = 0;

  static IndexInterval point(Expr e) { return {std::move(e), 0, 0}; }
  static IndexInterval constant(int64_t lo, int64_t hi) { return {Expr(), lo, hi}; }
  bool is_point() const { return lo == hi; }
  bool has_base() const { return base.defined(); }
  /// base + lo, as an expression.
  Expr min_expr() const;
  int64_t extent() const { return hi - lo + 1; }
};

/// What is known of variables: a variable absent from the map is a single (symbolic) point.
using VarIntervals = llvm::DenseMap<const Variable *, IndexInterval>;

/// The interval of integer expression `e` when each variable ranges over its interval; nothing
/// when `e` is beyond what this analysis understands.
std::optional<IndexInterval> eval_interval(const Expr &e, const VarIntervals &vars);

/// `e / c` when `e` is structurally a multiple of `c` (sums, differences, mins and maxes of terms
/// with constant factors that are multiples of c); nothing otherwise. An undefined `e` stands
/// for 0.
std::optional<Expr> divide_exact(const Expr &e, int64_t c);

/// The smallest interval containing both, when they have the same base.
std::optional<IndexInterval> union_interval(const IndexInterval &a, const IndexInterval &b);

} // namespace tessel
