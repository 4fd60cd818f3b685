// Ahead-of-time export: a lowered module compiled for several GPU architectures, written as
// cubins and as one self-contained C++ header that launches them with the CUDA driver API alone
// (no tessel, LLVM or NVRTC at the application's build or run time).
//
//   tessel export gemm_wgmma --shape M=4096,N=4096,K=4096 --arch sm_80,sm_90a -o out
//   // out/gemm_wgmma.h, out/gemm_wgmma.sm_80.cubin, out/gemm_wgmma.sm_90a.cubin
//
//   #include "gemm_wgmma.h"                  // application code; link with -lcuda
//   CUresult r = gemm_wgmma_launch(A, B, C, stream);
//   if (r != CUDA_SUCCESS) std::fprintf(stderr, "%s\n", gemm_wgmma_last_error());
//
// The header embeds every cubin. Its launch function takes the device's compute capability
// from the current context, picks the cubin that runs there (sm_XY runs on X.Y and later minors
// of major X; sm_XYa on X.Y alone; the newest that fits), loads it once per process
// (cuLibraryLoadData), checks each pointer's alignment, builds the TMA tensor maps from the
// pointers (cuTensorMapEncodeTiled / Im2col with the parameters baked in), raises the dynamic
// shared memory limit where a kernel needs more than 48 KiB, and enqueues every kernel of the
// module in order on the caller's stream with the grid, block and shared memory baked in,
// without waiting. Workspaces (padded copies, split-K partial sums): NAME_launch allocates
// NAME_workspace_bytes stream-ordered (cuMemAllocAsync / cuMemFreeAsync on the stream), or the
// caller passes its own block to NAME_launch_with_workspace. Errors come back as CUresult, with
// a sentence in NAME_last_error() (per thread). Argument shapes, types, sizes and alignments are
// constexpr in the header.
#pragma once

#include "compiler/lower/LoweredFunc.h"
#include "runtime/Nvrtc.h"
#include "runtime/TensorView.h"

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace tessel {

/// The architectures in "sm_80,sm_90a": each "sm_" and a number, optionally followed by "a"
/// (arch-specific: that exact compute capability). tessel::Error naming a malformed entry.
std::vector<std::string> parse_arch_list(const std::string &text);

/// One architecture to export for, and the module lowered for it (a schedule may lower
/// differently per architecture: tuned knobs, paths that exist on one GPU only).
struct ExportTarget {
  std::string arch; ///< as asked for: "sm_80", "sm_90", "sm_90a"
  LoweredModule lowered;
};

/// A target compiled.
struct ExportedVariant {
  std::string requested_arch;
  std::string arch; ///< what NVRTC compiled for (target_arch: "sm_90a" for wgmma kernels)
  LoweredModule lowered;
  ModuleParams params;
  CompiledKernel compiled;
};

struct ExportOptions {
  /// The header's name and the prefix of everything it declares (NAME.h, NAME_launch); a C
  /// identifier.
  std::string name;
  /// Lines at the top of the header saying what it is (the schedule, its shape, the command).
  std::vector<std::string> description;
  /// How many of the leading arguments are inputs (the rest are outputs), for the header's
  /// documentation; SIZE_MAX: not known.
  size_t num_inputs = std::numeric_limits<size_t>::max();
};

/// Compiles each target with NVRTC (through the kernel cache) for target_arch(lowered, arch).
/// tessel::Error naming the architecture when a kernel cannot run on it (wgmma off sm_90, TMA
/// before sm_90) or NVRTC fails for it, and when the targets' modules take different arguments.
/// Targets that compile for the same architecture (sm_90 and sm_90a of a wgmma kernel) are
/// kept once.
std::vector<ExportedVariant> compile_for_export(const std::vector<ExportTarget> &targets);

/// The header's text. Pure (no GPU, no file).
std::string export_header(const ExportOptions &options,
                          const std::vector<ExportedVariant> &variants);

/// Writes `dir`/NAME.h and `dir`/NAME.<arch>.cubin for each variant (creating `dir`), all or
/// none (runtime/WriteFiles.h); returns the paths written. tessel::Error when a file cannot be
/// written, nothing left behind.
std::vector<std::string> write_export(const std::string &dir, const ExportOptions &options,
                                      const std::vector<ExportedVariant> &variants);

} // namespace tessel
