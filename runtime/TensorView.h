// Launching a built module on the caller's own device memory: views of raw device pointers
// (CUdeviceptr), what the module expects of each of its parameters (element type, shape,
// alignment) and the checks that say which argument is wrong and why.
//
//   Module m = build(s, {A, B, C}, Target::cuda());
//   m.launch({{a_ptr, Float(16), {M, K}}, {b_ptr, Float(16), {K, N}}, {c_ptr, Float(32), {M, N}}},
//            stream);                            // enqueued on the caller's stream, not waited for
//
// module_params() reads the expectations off the lowered kernels (no GPU needed);
// check_arguments() checks views against them (a pure function: no driver); with a driver,
// check_device_memory() also asks it that each pointer is device memory of the module's device
// whose allocation holds the whole tensor.
#pragma once

#include "compiler/ir/Type.h"
#include "compiler/lower/LoweredFunc.h"

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

class Device;
class DeviceArray;

/// A tensor in device memory that the caller owns: where it starts, its element type, its
/// shape and its strides in elements (empty: dense row-major).
struct TensorView {
  CUdeviceptr ptr = 0;
  DataType dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;

  TensorView() = default;
  TensorView(CUdeviceptr ptr, DataType dtype, std::vector<int64_t> shape,
             std::vector<int64_t> strides = {})
      : ptr(ptr), dtype(dtype), shape(std::move(shape)), strides(std::move(strides)) {}
  /// A view of `array`: its pointer, element type, shape and strides.
  static TensorView of(const DeviceArray &array);

  /// The elements its memory spans: storage_elements(shape, strides).
  int64_t numel() const;
  int64_t bytes() const { return numel() * dtype.bytes(); }
};

/// What the kernels of a module expect of one of their buffer parameters.
struct ParamSpec {
  std::string name; ///< the tensor's name in the schedule ("A")
  DataType dtype;
  std::vector<int64_t> shape;
  /// In elements (a strided placeholder's); empty: dense row-major.
  std::vector<int64_t> strides;
  /// The pointer must be a multiple of this many bytes: the element size, or more where a
  /// kernel reads or writes it in wider units (vector accesses, cp.async, WMMA, TMA).
  int64_t alignment = 1;
  /// What needs that alignment, e.g. "TMA tensor map 'A_tmap' of kernel 'gemm_wgmma'" (empty
  /// when it is the element size).
  std::string alignment_reason;
  /// A kernel of the module writes it (an output, or a workspace): it may share no byte with
  /// another argument or the workspace.
  bool written = false;

  /// The elements its memory spans: storage_elements(shape, strides).
  int64_t numel() const;
  int64_t bytes() const { return numel() * dtype.bytes(); }
};

/// The parameters of a lowered module: the caller's arguments and the module's workspaces.
struct ModuleParams {
  /// The caller's arguments, in the order given to build() / lower().
  std::vector<ParamSpec> args;
  /// Scratch buffers in global memory the kernels pass between them (padded copies, split-K
  /// partial sums; LoweredModule::num_workspaces), laid out one after another in a single block
  /// of `workspace_bytes` bytes: workspace i at `workspace_offsets[i]`, a multiple of
  /// kWorkspaceAlignment.
  std::vector<ParamSpec> workspaces;
  std::vector<int64_t> workspace_offsets;
  int64_t workspace_bytes = 0;
};

/// Alignment of each workspace in the workspace block (and of the block itself), in bytes: what
/// cuMemAlloc gives, and more than any kernel asks of a pointer.
inline constexpr int64_t kWorkspaceAlignment = 256;

/// The parameters of `m` with the alignment its kernels need of each: the element size; the
/// width of vector loads and stores (4, 8 or 16 bytes); the bytes of a cp.async from it; 32
/// for WMMA loads and stores (256-bit aligned pointers); 16 for a TMA tensor map over it (what
/// cuTensorMapEncode needs of the global address); 16 for a pointer to it passed to any other
/// intrinsic (what the generated code assumes). Pure: no GPU.
ModuleParams module_params(const LoweredModule &m);

/// Checks `args` against `params.args`: their number, and of each its element type, rank,
/// shape, a non-null pointer and its alignment; that no argument the kernels write shares a
/// byte with another argument; and that a caller's `workspace` (non-zero) shares none with any.
/// Throws tessel::Error naming the first argument that does not fit (its position and name),
/// what the module needs and what was given. Pure: no driver, no GPU. `where` names the
/// operation in the message ("Module::launch").
void check_arguments(const ModuleParams &params, const std::vector<TensorView> &args,
                     const char *where, CUdeviceptr workspace = 0);

/// Asks the driver about each argument's pointer: it must be device (or managed) memory,
/// usable in `device`'s primary context, and its allocation must hold the whole tensor from
/// the pointer on. A non-zero `workspace` is checked the same way for params.workspace_bytes
/// bytes and kWorkspaceAlignment. tessel::Error naming the argument otherwise; needs a driver.
void check_device_memory(const ModuleParams &params, const std::vector<TensorView> &args,
                         CUdeviceptr workspace, const Device &device, const char *where);

/// "[1024, 512]".
std::string shape_str(const std::vector<int64_t> &shape);

} // namespace tessel
