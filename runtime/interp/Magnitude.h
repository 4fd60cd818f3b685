// The magnitude of a definition: the same computation on the absolute values of its terms,
// in float64 (Higham's running error bound).
//
//   Tensor m = magnitude_of(C);   // C = sum(A[i, k] * B[k, j])  ->  m = sum(|A[i, k]| |B[k, j]|)
//   std::vector<double> mags = evaluate_reference(m, bindings);
//
// Sums and differences add their operands' magnitudes, products multiply them, a quotient
// a / b is (M(a) + |a / b| M(b)) / |b|, min / max (and their reductions) take the larger
// magnitude, a math function f(x) is |f(x)| + |f'(x)| M(x), a cast keeps its operand's, and an
// input element is its absolute value; conditions and indices keep their real values. Every
// rounding of a floating-point kernel errs by at most its unit roundoff times the magnitude of
// what it rounds, so the kernel's error on an element is bounded by a small multiple of u times
// that element's magnitude: a tolerance that follows it accepts a value near zero made of large
// terms that cancel, and still catches a missing or wrong term.
#pragma once

#include "compiler/te/Operation.h"

namespace tessel {

/// The magnitude tensor of `t` (float64, `t`'s shape), which reads `t`'s inputs and, for its
/// conditions, `t`'s own intermediate tensors. A function with no known derivative is a
/// tessel::Error.
Tensor magnitude_of(const Tensor &t);

/// x where `e` is |x| as magnitude_of writes it (max(x, 0 - x) in float64), else undefined: for
/// an evaluator that runs those absolute values without evaluating the expression.
Expr absolute_operand(const Expr &e);

} // namespace tessel
