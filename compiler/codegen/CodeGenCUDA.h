// CUDA C++ code generation: flat (Form 2) device kernels -> one translation unit for NVRTC.
//
// Each LoweredFunc becomes
//   extern "C" __global__ void __launch_bounds__(threads) name(const float* __restrict__ A, ...)
// with thread indices read from threadIdx / blockIdx, `shared` allocations as __shared__ arrays
// (or slices of one `extern __shared__` array when the launch asks for dynamic shared memory),
// `local` allocations as arrays, `wmma.*` allocations as arrays of nvcuda::wmma::fragment, and
// Ramp(base, 1, lanes) accesses of 4, 8 or 16 bytes as single vector loads and stores.
//
// Assumptions the generated code relies on: argument pointers are aligned to 16 bytes (device
// allocations are aligned to 256; module_params() in runtime/TensorView.h says exactly what each
// argument needs, which Module::launch checks of the caller's pointers), and the kernel is
// launched with the LaunchConfig it was generated for (blockDim is not checked at run time).
#pragma once

#include "compiler/lower/LoweredFunc.h"

#include <string>

namespace tessel {

/// The CUDA C++ source of all kernels of `m`, with the headers and helpers they need. Kernel
/// names are the LoweredFuncs' names (which must be C identifiers); parameters are in `args`
/// order. Throws tessel::Error for IR that cannot be expressed in CUDA (a fragment indexed like
/// an array, an unknown intrinsic, an unsupported storage scope) and InternalError for IR that
/// is not in Form 2.
std::string codegen_cuda(const LoweredModule &m);

/// Bytes of dynamic shared memory that the kernel generated for `f` uses when its launch
/// requests dynamic shared memory: the `shared` allocations laid out one after another, each
/// aligned to 32 bytes (the alignment WMMA needs).
int64_t cuda_shared_memory_bytes(const LoweredFunc &f);

} // namespace tessel
