// Checking a kernel's output against the float64 reference: random inputs, the tolerance a
// kernel's float arithmetic earns, and element-by-element comparison.
//
//   HostTensor a = random_tensor(A, 1), b = random_tensor(B, 2);
//   std::vector<double> ref = evaluate_reference(C, {{A, a}, {B, b}});
//   CompareResult r = compare(ref, out.data(), out.size(), tolerance_for(C.dtype(), A.dtype(), K));
//   EXPECT_TRUE(r.ok) << r.str();
#pragma once

#include "runtime/interp/Reference.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/STLFunctionalExtras.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace tessel {

/// Random values for `t`'s shape and dtype, uniform in [lo, hi) and exactly representable in
/// the dtype (rounded through runtime/Half.h for float16/bfloat16, integers for integer types).
/// Never zero, so an ignored input or an output never written shows up; bool tensors are the
/// exception and get random 0/1.
HostTensor random_tensor(const Tensor &t, uint64_t seed, double lo = -1.0, double hi = 1.0);

/// |got - ref| <= abs + magnitude * M + rel * |ref| element by element, M the element's
/// magnitude (magnitude_of in Magnitude.h) where the comparison is given magnitudes.
struct Tolerance {
  double rel = 0;
  double abs = 0;
  double magnitude = 0;
};

/// The tolerance for a kernel whose output of type `out` accumulates `reduction_length` terms
/// (products of `in` values) in `out`, checked against the float64 reference. Assumes terms of
/// the size random_tensor's default range gives (inputs in [-1, 1]; for inputs in [-s, s] scale
/// `abs` by s^2); see the .cpp for the derivation. Integer outputs are exact.
Tolerance tolerance_for(DataType out, DataType in, int64_t reduction_length);

struct CompareResult {
  bool ok = true;
  size_t count = 0;
  size_t num_mismatches = 0; ///< elements outside the tolerance
  double max_abs_error = 0;
  double max_rel_error = 0; ///< |got - ref| / |ref|, over elements with ref != 0
  /// The element furthest outside (or closest to the edge of) the tolerance.
  size_t worst_index = 0;
  double worst_expected = 0, worst_got = 0;
  Tolerance tolerance;

  /// "ok: 4096 elements, max abs error ..., max rel error ..., worst [17]: got ..., expected ...".
  std::string str() const;
};

/// Compares `n` values read through `got` with `ref` (which must hold n values), with the
/// elements' magnitudes (n values, or none when tol.magnitude is 0). NaN where the reference is
/// not NaN is a mismatch.
CompareResult compare(const std::vector<double> &ref, llvm::function_ref<double(size_t)> got,
                      size_t n, Tolerance tol, llvm::ArrayRef<double> magnitudes = {});

/// compare() for a kernel's output array of float, double or integers. 16-bit floats come as raw
/// bits: use compare_16bit, which knows whether they are half or bfloat16.
template <typename T>
CompareResult compare(const std::vector<double> &ref, const T *got, size_t n, Tolerance tol,
                      llvm::ArrayRef<double> magnitudes = {}) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, uint16_t>,
                "uint16_t is ambiguous (half, bfloat16 or an integer): use compare_16bit");
  return compare(ref, [got](size_t i) { return static_cast<double>(got[i]); }, n, tol,
                 magnitudes);
}

/// compare() for float16 or bfloat16 outputs held as their 16-bit encodings.
CompareResult compare_16bit(const std::vector<double> &ref, const uint16_t *bits, size_t n,
                            DataType dtype, Tolerance tol);

} // namespace tessel
