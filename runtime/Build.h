// build(): a schedule all the way to a loaded GPU kernel.
//
//   Module m = build(s, {A, W, Conv}, Target::cuda());   // lower, CUDA source, NVRTC cubin
//   std::cout << m.source();
//   m.run({&a, &w, &c});                                  // needs a GPU
//   TimeResult t = m.time({&a, &w, &c}, {.number = 10, .repeat = 30});
//   m.launch({{x_ptr, Float(16), {N, H, W, C}}, ...}, stream);   // the caller's memory and stream
#pragma once

#include "compiler/lower/Lower.h"
#include "runtime/DeviceArray.h"
#include "runtime/Nvrtc.h"
#include "runtime/TensorView.h"
#include "runtime/Timer.h"

#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

namespace tessel {

struct Target {
  /// "sm_80", "sm_90", ...; empty means the architecture of the GPU in use.
  std::string arch;
  /// Non-empty: compiled instead of the CUDA that codegen generates from the lowered module, which
  /// still gives the kernels' names, parameters and launch configurations (the source must keep
  /// them). A developer's hook for timing a hand edit of a generated kernel before writing the
  /// transformation that produces it, as TVM's tvm_callback_cuda_postproc is.
  std::string source;
  static Target cuda(std::string arch = "") { return Target{std::move(arch), {}}; }
};

/// tessel::Error unless `arch` names an architecture: "sm_" and the compute capability's two or
/// more digits, optionally "a" (sm_80, sm_90, sm_90a). `where` names the operation.
void check_arch_name(const std::string &arch, const char *where);

/// The architecture to compile `m` for: `arch` ("sm_80", "sm_90", ...; empty: the GPU's), made
/// "sm_90a" when a kernel uses wgmma, whose instructions exist only on that arch-specific target.
/// tessel::Error when `arch` is no architecture name, when a kernel uses wgmma and `arch` is not
/// a Hopper architecture, or TMA / mbarriers and `arch` is older than sm_90, or a kernel needs
/// more shared memory than a block has there.
std::string target_arch(const LoweredModule &m, const std::string &arch);

/// What cuTensorMapEncodeTiled (or cuTensorMapEncodeIm2col) is given for tensor map `m` over
/// a tensor of `dtype`, all but the global address: the runtime encodes these at launch, and
/// exported headers (runtime/Export.h) bake them in. tessel::Error for an element type TMA does
/// not copy or a map of the wrong rank.
struct TensorMapEncoding {
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  std::vector<cuuint64_t> dims;         ///< rank entries, innermost first
  std::vector<cuuint64_t> strides;      ///< rank - 1 entries, in bytes
  std::vector<cuuint32_t> box;          ///< tiled: rank entries; im2col: channels, pixels
  std::vector<cuuint32_t> elem_strides; ///< rank entries
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  bool im2col = false;
  std::vector<int> lower_corner, upper_corner; ///< im2col: W, H
  // Always: CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
  // CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE.
};
TensorMapEncoding tensor_map_encoding(const TensorMapParam &m, DataType dtype);

/// The TMA descriptor of tensor map `m` over the tensor of `dtype` at `ptr` (its argument),
/// through the driver's cuTensorMapEncodeTiled / Im2col; tessel::Error when the driver rejects
/// it.
CUtensorMap encode_tensor_map(const TensorMapParam &m, CUdeviceptr ptr, DataType dtype);
CUtensorMap encode_tensor_map(const TensorMapParam &m, const DeviceArray &array);

class Module {
public:
  const LoweredModule &lowered() const;
  /// The CUDA C++ translation unit.
  const std::string &source() const;
  /// The cubin and what ptxas reported (registers, shared memory, spills).
  const CompiledKernel &compiled() const;

  /// The launch configuration of the last kernel (the one that writes the outputs).
  const LaunchConfig &launch() const;

  /// What the kernels expect of each argument (type, shape, alignment) and the workspace they
  /// need (runtime/TensorView.h).
  const ModuleParams &params() const;

  /// Enqueues the module's kernels, in order, on `stream` (a CUstream of the module's device's
  /// primary context, the one the CUDA runtime uses; null: the default stream) on the caller's
  /// device memory, `args` in the order given to build(); does not wait. Each argument is
  /// checked against params(): element type, rank and shape, a non-null pointer aligned as the
  /// kernels need, and, through the driver, device memory of the module's device whose
  /// allocation holds the whole tensor; an output may share no byte with another argument or
  /// the workspace; tessel::Error names the argument that is not.
  /// The kernels are ordered after earlier work on `stream` only: what the caller queued
  /// elsewhere (another stream's copies; cuMemcpy / cuMemset, which run on the legacy default
  /// stream, before a launch on a CU_STREAM_NON_BLOCKING stream) must be ordered by the caller
  /// (cuStreamWaitEvent, or the *Async copies on `stream`).
  /// `workspace`: device memory of at least params().workspace_bytes bytes, 256-byte aligned,
  /// that the kernels use as scratch until they finish; 0 (or a module without workspaces):
  /// the Module's own, allocated at the first launch and kept, which launches of this Module
  /// on several streams at once would share: give each stream its own workspace then. A
  /// workspace must be zero the first time (the flags of Stage::split_last_wave, which every
  /// launch leaves at zero again); the Module's own is.
  void launch(const std::vector<TensorView> &args, CUstream stream = nullptr,
              CUdeviceptr workspace = 0) const;

  /// Runs the module's kernels once, in order, on the GPU (launch() on the default stream with
  /// the Module's workspace); `args` in the order given to build(). Each array's type and
  /// element count are checked against the kernels' parameters (its shape may differ: a
  /// DeviceArray is taken as a dense buffer of the parameter's shape).
  void run(const std::vector<const DeviceArray *> &args) const;
  /// Times the module's kernels (all of them, back to back) with CUDA events (warm-up, `number`
  /// runs per measurement, median of `repeat` measurements).
  TimeResult time(const std::vector<const DeviceArray *> &args, const TimeOptions &options = {}) const;
  /// The same on the caller's device memory (checked as launch() checks it).
  TimeResult time(const std::vector<TensorView> &args, const TimeOptions &options = {}) const;

  struct State;

private:
  friend Module build(const LoweredModule &, const Target &);
  std::shared_ptr<State> state_;
};

/// Lowers, generates CUDA and compiles it (through the kernel cache).
Module build(const Schedule &s, const std::vector<Tensor> &args, const Target &target = {},
             const LowerOptions &options = {});
Module build(const LoweredModule &lowered, const Target &target = {});

} // namespace tessel
