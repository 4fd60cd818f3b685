// The linear normal form of integer index arithmetic: sum of coefficient * atom, plus a constant.
//
// Atoms are the non-linear parts (variables, floordiv/floormod/min/... nodes, products of
// non-constants), compared structurally, so `x*4 + y + x*2` collects to `x*6 + y` and `x - x`
// cancels. Coefficients live in the ring of the type (they wrap like the type), so the form is
// exact for Add, Sub and Mul even when they overflow.
#pragma once

#include "compiler/ir/IR.h"

#include <llvm/ADT/SmallVector.h>

#include <cstdint>
#include <optional>
#include <utility>

namespace tessel::arith {

struct LinearForm {
  DataType type;
  /// Atoms with their coefficients, in order of first appearance; no zero coefficients, no
  /// atom twice.
  llvm::SmallVector<std::pair<Expr, int64_t>, 4> terms;
  int64_t constant = 0;

  explicit LinearForm(DataType t) : type(t) {}

  bool is_constant() const { return terms.empty(); }
  /// Adds coeff * atom, merging it with a structurally equal atom.
  void add_term(const Expr &atom, int64_t coeff);
  /// Adds scale * other.
  void add(const LinearForm &other, int64_t scale);
  /// The coefficient of `atom` (0 when absent).
  int64_t coeff_of(const Expr &atom) const;
  /// Wraps a coefficient to the type's width (as a signed number of that width).
  int64_t wrap(int64_t v) const;
};

/// The linear form of a scalar integer expression: looks through Add, Sub, and Mul by a
/// constant; anything else is an atom. Also recombines `floordiv(e, c)*c + floormod(e, c)`
/// into `e` and `e - floordiv(e, c)*c` into `floormod(e, c)`.
LinearForm linear_form(const Expr &e);

/// Builds the expression: positive terms first, then the negative ones subtracted, then the
/// constant (`x*6 + y - z*2 + 3`).
Expr to_expr(const LinearForm &f);

/// to_expr(linear_form(e)).
Expr canonical_sum(const Expr &e);

/// f such that the integer comparison `c` (<=, <, >=, >) is f <= 0 (`a < b`: a - b + 1);
/// nothing for anything else.
std::optional<Expr> as_nonpositive(const Expr &c);

/// The greatest common divisor of the absolute values of the coefficients (0 for no terms).
int64_t coeff_gcd(const LinearForm &f);

} // namespace tessel::arith
