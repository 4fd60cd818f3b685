// A half-open integer interval [min, min + extent), as loops and regions use it.
#pragma once

#include "compiler/ir/Expr.h"

namespace tessel {

struct Range {
  Expr min;
  Expr extent;

  Range() = default;
  Range(Expr min, Expr extent) : min(std::move(min)), extent(std::move(extent)) {}
  /// Range::from_min_extent(0, n) and Range{0, n} are the same; kept for readability at call sites.
  static Range from_min_extent(Expr min, Expr extent) { return Range(std::move(min), std::move(extent)); }
  bool defined() const { return min.defined() && extent.defined(); }
};

} // namespace tessel
