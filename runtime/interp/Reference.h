// A float64 reference of a compute definition, evaluated directly from the DSL. The
// tolerances and comparisons for checking a kernel against it are in ResultCheck.h.
//
//   HostTensor a = random_tensor(A, 1), b = random_tensor(B, 2);
//   std::vector<double> ref = evaluate_reference(C, {{A, a}, {B, b}});
//   ... run the kernel into `out` (float) ...
//   CompareResult r = compare(ref, out.data(), out.size(), tolerance_for(C.dtype(), A.dtype(), K));
//   EXPECT_TRUE(r.ok) << r.str();
//
// Semantics: float arithmetic is done in double (a higher-precision reference, not a model of
// the GPU); only a Cast to a narrower float type rounds, because the definition's values really
// pass through that type. Integer arithmetic wraps to its type as the generated C does, with
// floor (FloorDiv/FloorMod) and truncating (Div/Mod) division as in the IR. Every intermediate
// compute is evaluated once over its whole shape; a read outside a tensor is a tessel::Error.
#pragma once

#include "compiler/te/Operation.h"

#include <llvm/ADT/STLFunctionalExtras.h>

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace tessel {

/// A tensor on the host: row-major values, each exactly representable in `dtype`.
struct HostTensor {
  DataType dtype;
  std::vector<int64_t> shape;
  std::vector<double> values;

  /// The number of elements the shape holds.
  int64_t num_elements() const;
  /// The values where memory laid out with `strides` (in elements; a strided placeholder's)
  /// holds them: storage_elements(shape, strides) values, the ones no element lands on NaN (a
  /// kernel that reads one shows it). The values themselves where `strides` is empty.
  std::vector<double> in_storage(const std::vector<int64_t> &strides) const;
};

/// A placeholder and the values it stands for: evaluate_reference(C, {{A, a}, {B, b}}).
struct TensorBinding {
  TensorBinding(Tensor tensor, const HostTensor &value) : tensor(std::move(tensor)), value(&value) {}
  Tensor tensor;
  const HostTensor *value;
};

/// The values of `output` (row-major, one double per element) computed from its definition in
/// float64, with each placeholder read from `inputs`. A placeholder without an input, an input
/// whose dtype, shape or values do not fit its placeholder, an out-of-range read or an integer
/// division by zero is a tessel::Error (where several elements err, one of them is named). A
/// large tensor's elements are computed on the machine's threads (llvm::parallelForEachN),
/// each alone: the values do not depend on the split.
std::vector<double> evaluate_reference(const Tensor &output,
                                       const std::map<const OperationNode *, const HostTensor *> &inputs);
std::vector<double> evaluate_reference(const Tensor &output, const std::vector<TensorBinding> &inputs);
/// The output's elements at `at` (row-major indices) only, in that order: a check of a large
/// kernel on sampled outputs. The tensors the output reads are still evaluated in full.
std::vector<double> evaluate_reference_at(const Tensor &output,
                                          const std::vector<TensorBinding> &inputs,
                                          const std::vector<int64_t> &at);

/// The shape of a tensor whose extents are constants (as every tensor in tessel).
std::vector<int64_t> constant_shape(const Tensor &t);

} // namespace tessel
