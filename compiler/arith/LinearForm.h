// Integer expressions as linear combinations: sum of coeff * atom, plus a constant.
//
// Variables are atoms, and so is any non-linear subexpression (floordiv(blockIdx.z, 14)),
// compared structurally. Differences of index expressions that share terms cancel exactly,
// e.g. ((bx * 4 + ty) * 2 + ax0) - (bx * 4 + ty) * 2 is ax0.
#pragma once

#include "compiler/ir/IR.h"

#include <vector>

namespace tessel {

struct LinearForm {
  std::vector<std::pair<Expr, int64_t>> terms; ///< (atom, coefficient), no zero coefficients
  int64_t constant = 0;
  DataType type = Int(32);

  static LinearForm from(const Expr &e);
  LinearForm operator+(const LinearForm &o) const;
  LinearForm operator-(const LinearForm &o) const;
  LinearForm scaled(int64_t c) const;
  /// The coefficient of `atom` (0 if absent).
  int64_t coeff(const Expr &atom) const;
  /// Back to an expression: terms in order of first appearance, then the constant.
  Expr to_expr() const;
};

/// `e` with its linear part collected: x * 4 + y + x * 2 + 0 becomes x * 6 + y.
Expr linear_normalize(const Expr &e);

} // namespace tessel
