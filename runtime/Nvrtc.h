// Compiling CUDA C++ source to a cubin with NVRTC.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

struct CompileOptions {
  /// Target architecture, e.g. "sm_80", "sm_90", "sm_90a". Empty: the default device's.
  std::string arch;
  /// More NVRTC options, appended as given (e.g. "--use_fast_math", "-lineinfo").
  std::vector<std::string> extra;
};

/// Resource usage of one kernel, as ptxas reported it.
struct KernelStats {
  std::string name; ///< the entry's symbol name (unmangled for extern "C" kernels)
  int registers = 0;
  int64_t static_shared_bytes = 0;
  int64_t stack_bytes = 0;
  int64_t spill_store_bytes = 0;
  int64_t spill_load_bytes = 0;
};

/// A compiled program: its cubin, NVRTC's log and the resources of each kernel in it.
struct CompiledKernel {
  std::string arch;
  std::string cubin; ///< the ELF image, for cuModuleLoadData
  std::string log;   ///< NVRTC's log, ptxas' verbose report included
  std::vector<KernelStats> kernels;

  /// The stats of the kernel named `name`, or nullptr.
  const KernelStats *stats(const std::string &name) const;
};

/// The full NVRTC option list for `options`: architecture, -std=c++17, the CUDA include directory
/// (TESSEL_CUDA_INCLUDE in the environment, else the one found when tessel was configured) and
/// ptxas' verbose report, then `options.extra`. Resolves an empty arch from the default device.
std::vector<std::string> nvrtc_options(const CompileOptions &options);

/// The CUDA include directory NVRTC is given.
std::string cuda_include_dir();

/// Compiles `source` to a cubin with exactly `nvrtc_options` (no cache; see KernelCache).
/// Throws tessel::Error with NVRTC's log and the numbered source when compilation fails.
/// `program_name` is the file name NVRTC's messages use.
CompiledKernel nvrtc_compile(const std::string &source, const std::vector<std::string> &nvrtc_options,
                             const std::string &program_name = "tessel_kernel.cu");

/// NVRTC's version as major * 1000 + minor * 10 (13000 for 13.0).
int nvrtc_version();

/// How many times this process has run NVRTC's compiler (tests use it to prove cache hits).
int64_t nvrtc_invocation_count();

/// Parses the per-kernel report of `ptxas -v` out of an NVRTC log.
std::vector<KernelStats> parse_ptxas_report(const std::string &log);

} // namespace tessel
