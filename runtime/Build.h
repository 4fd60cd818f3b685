// build(): a schedule all the way to a loaded GPU kernel.
//
//   Module m = build(s, {A, W, Conv}, Target::cuda());   // lower, CUDA source, NVRTC cubin
//   std::cout << m.source();
//   m.run({&a, &w, &c});                                  // needs a GPU
//   TimeResult t = m.time({&a, &w, &c}, {.number = 10, .repeat = 30});
#pragma once

#include "compiler/lower/Lower.h"
#include "runtime/DeviceArray.h"
#include "runtime/Nvrtc.h"
#include "runtime/Timer.h"

#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

namespace tessel {

struct Target {
  /// "sm_80", "sm_90", ...; empty means the architecture of the GPU in use.
  std::string arch;
  static Target cuda(std::string arch = "") { return Target{std::move(arch)}; }
};

/// The architecture to compile `m` for: `arch` ("sm_80", "sm_90", ...; empty: the GPU's), made
/// "sm_90a" when a kernel uses wgmma, whose instructions exist only on that arch-specific target.
/// tessel::Error when a kernel uses wgmma and `arch` is not a Hopper architecture, or TMA /
/// mbarriers and `arch` is older than sm_90.
std::string target_arch(const LoweredModule &m, const std::string &arch);

/// The TMA descriptor of tensor map `m` over `array` (its argument), through the driver's
/// cuTensorMapEncodeTiled; tessel::Error when the driver rejects it.
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

  /// Runs the module's kernels once, in order, on the GPU; `args` in the order given to build().
  /// Their types and sizes are checked against the kernels' parameters. Workspaces are
  /// allocated on the first run and kept.
  void run(const std::vector<const DeviceArray *> &args) const;
  /// Times the module's kernels (all of them, back to back) with CUDA events (warm-up, `number`
  /// runs per measurement, median of `repeat` measurements).
  TimeResult time(const std::vector<const DeviceArray *> &args, const TimeOptions &options = {}) const;

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
