// Running a schedule's kernel on random inputs and checking its output against the float64
// reference of the compute definition, on the CPU executor (GPU semantics, no GPU needed) or on
// the GPU, where it is also timed.
#pragma once

#include "compiler/schedule/Schedule.h"
#include "runtime/Build.h"
#include "runtime/interp/ResultCheck.h"

#include <optional>
#include <string>
#include <vector>

namespace tessel {

struct CheckResult {
  CompareResult compare;
  Tolerance tolerance;
  /// On the GPU, when timing was asked for.
  std::optional<TimeResult> time;
  /// "max abs error 1.2e-06, max rel error 3.4e-07 (tolerance abs 1e-05 + rel 1e-07): ok".
  std::string str() const;
};

/// `args` are the kernel's arguments as given to lower(): the first `num_inputs` are inputs
/// (placeholders), the last one is the output.
CheckResult check_on_cpu(const Schedule &s, const std::vector<Tensor> &args, size_t num_inputs,
                         uint64_t seed = 1);
/// On the GPU (a tessel::Error when there is none); timed when `timing` is given.
CheckResult check_on_gpu(const Schedule &s, const std::vector<Tensor> &args, size_t num_inputs,
                         const std::optional<TimeOptions> &timing = std::nullopt,
                         uint64_t seed = 1);

} // namespace tessel
