// Running a schedule's kernel on random inputs and checking its output against the float64
// reference of the compute definition, on the CPU executor (GPU semantics, no GPU needed) or on
// the GPU, where it is also timed.
#pragma once

#include "compiler/schedule/Schedule.h"
#include "runtime/Build.h"
#include "runtime/interp/Executor.h"
#include "runtime/interp/ResultCheck.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

struct CheckResult {
  /// The last output's comparison, or the first failing one's of a program of several outputs.
  CompareResult compare;
  Tolerance tolerance;
  /// A program of several outputs: each one's name and comparison, in argument order.
  std::vector<std::pair<std::string, CompareResult>> outputs;
  /// On the GPU, when timing was asked for.
  std::optional<TimeResult> time;
  /// CompareResult::str(): "ok: 0 of 4096 elements outside |got - ref| <= ...", each output's
  /// after its name where there are several, and the time.
  std::string str() const;
};

/// The tolerance check_on_cpu / check_on_gpu compare `out` with, element by element: a multiple
/// of the unit roundoff of the definition's arithmetic times the element's magnitude (the same
/// definition on the absolute values of its terms, magnitude_of in interp/Magnitude.h), the
/// output type's rounding relative to the value, and its subnormal spacing. A value near zero
/// made of large terms that cancel is within it; a missing or wrong term is not.
Tolerance output_tolerance(const Tensor &out);

/// A check's data: random inputs for a kernel's arguments and the float64 reference of its
/// output, in full or at sampled elements (a large output whose full reference would take the
/// CPU minutes: `tessel tune` checks each candidate at a few thousand outputs).
/// The float64 reference of one output of a program of several, in full.
struct OutputReference {
  std::string name;
  std::vector<double> reference, magnitudes;
  Tolerance tolerance;
  DataType dtype;
  std::vector<int64_t> shape;
};

struct CheckProblem {
  std::vector<HostTensor> inputs;
  /// Each input's strides as its argument takes it (a strided placeholder's; empty: compact).
  std::vector<std::vector<int64_t>> input_strides;
  /// The output's row-major indices the reference holds; empty: every element.
  std::vector<int64_t> samples;
  std::vector<double> reference;
  std::vector<double> magnitudes; ///< of the reference's elements, for the tolerance
  Tolerance tolerance;
  DataType out_dtype;
  std::vector<int64_t> out_shape;
  /// The outputs before the last one (the fields above), in argument order: a program of
  /// several outputs (attention's O and its rows' logsumexp).
  std::vector<OutputReference> earlier_outputs;
};

/// The problem of `args` (inputs then the outputs) with inputs from `seed`; `samples` > 0 and
/// smaller than the output: the reference at that many distinct outputs chosen from `seed`
/// (the first and last elements among them), else at all of them.
/// `given`: the values of some inputs (ScheduledProgram::given_inputs: by argument index,
/// row-major), the others drawn from `seed`.
CheckProblem make_check_problem(const std::vector<Tensor> &args, size_t num_inputs, uint64_t seed,
                                size_t samples = 0,
                                const std::map<size_t, std::vector<double>> &given = {});
/// The problem of `args` on the given `inputs` (one per input, of its type and shape): data a
/// random draw cannot make (sequence offsets, indices); `seed` draws the samples.
CheckProblem make_check_problem(const std::vector<Tensor> &args, std::vector<HostTensor> inputs,
                                uint64_t seed = 1, size_t samples = 0);
/// The problem's inputs as a kernel's arguments take them: host buffers for the CPU executor,
/// laid out with each input's strides (NaN between the elements of a strided one).
std::vector<interp::HostBuffer> input_buffers(const CheckProblem &p);
/// `h`'s values in a new device array laid out with `strides` (empty: compact).
DeviceArray device_array(const HostTensor &h, const std::vector<int64_t> &strides = {});

/// Compares a kernel's whole output (row-major, as read back from the device or the executor)
/// with the problem's reference at its samples.
CheckResult check_output(const CheckProblem &p, const interp::HostBuffer &out);

/// `args` are the kernel's arguments as given to lower(): the first `num_inputs` are inputs
/// (placeholders), the others outputs, each checked (samples, where asked, of the last only).
CheckResult check_on_cpu(const Schedule &s, const std::vector<Tensor> &args, size_t num_inputs,
                         uint64_t seed = 1);
/// check_on_cpu on the problem `p` of `args` (make_check_problem).
CheckResult check_on_cpu(const Schedule &s, const std::vector<Tensor> &args,
                         const CheckProblem &p);
/// On the GPU (a tessel::Error when there is none), lowered with `options` and built for
/// `target` (build()'s); timed when `timing` is given. A module with workspaces is launched
/// twice, the outputs poisoned in between, and its second result checked: what a launch leaves
/// in its workspace (the flags of Stage::split_last_wave) must not change the next one's.
CheckResult check_on_gpu(const Schedule &s, const std::vector<Tensor> &args, size_t num_inputs,
                         const std::optional<TimeOptions> &timing = std::nullopt,
                         uint64_t seed = 1, const Target &target = {},
                         const LowerOptions &options = {});
/// check_on_gpu on the problem `p` of `args` (make_check_problem).
CheckResult check_on_gpu(const Schedule &s, const std::vector<Tensor> &args,
                         const CheckProblem &p,
                         const std::optional<TimeOptions> &timing = std::nullopt,
                         const Target &target = {}, const LowerOptions &options = {});

} // namespace tessel
