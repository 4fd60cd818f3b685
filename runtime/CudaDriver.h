// The CUDA driver API, loaded at run time.
//
// tessel never links libcuda: machines without a GPU (CI, laptops) must still lower and compile
// kernels. The driver is opened with dlopen("libcuda.so.1") on first use and its entry points are
// looked up by their versioned symbol names (cuMemAlloc_v2, ...), which is what <cuda.h>'s macros
// would have bound to at link time. "No driver" and "no GPU" are states, reported by
// CudaDriver::available() and reason(); only using the GPU without one raises tessel::Error.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

// Every entry point tessel uses: X(member and symbol name). Members carry the versioned names so
// that each call site says exactly which symbol it calls.
#define TESSEL_CUDA_DRIVER_FUNCTIONS(X)                                                            \
  X(cuInit)                                                                                        \
  X(cuDriverGetVersion)                                                                            \
  X(cuGetErrorName)                                                                                \
  X(cuGetErrorString)                                                                              \
  X(cuDeviceGetCount)                                                                              \
  X(cuDeviceGet)                                                                                   \
  X(cuDeviceGetName)                                                                               \
  X(cuDeviceGetAttribute)                                                                          \
  X(cuDeviceTotalMem_v2)                                                                           \
  X(cuDevicePrimaryCtxRetain)                                                                      \
  X(cuCtxSetCurrent)                                                                               \
  X(cuCtxSynchronize)                                                                              \
  X(cuMemAlloc_v2)                                                                                 \
  X(cuMemFree_v2)                                                                                  \
  X(cuMemcpyHtoD_v2)                                                                               \
  X(cuMemcpyHtoDAsync_v2)                                                                          \
  X(cuMemcpyDtoH_v2)                                                                               \
  X(cuMemcpyDtoD_v2)                                                                               \
  X(cuMemsetD8_v2)                                                                                 \
  X(cuMemsetD8Async)                                                                               \
  X(cuPointerGetAttributes)                                                                        \
  X(cuStreamGetCtx)                                                                                \
  X(cuStreamCreate)                                                                                \
  X(cuStreamDestroy_v2)                                                                            \
  X(cuStreamSynchronize)                                                                           \
  X(cuModuleLoadData)                                                                              \
  X(cuModuleUnload)                                                                                \
  X(cuModuleGetFunction)                                                                           \
  X(cuFuncGetAttribute)                                                                            \
  X(cuFuncSetAttribute)                                                                            \
  X(cuLaunchKernel)                                                                                \
  X(cuLaunchKernelEx)                                                                              \
  X(cuTensorMapEncodeTiled)                                                                        \
  X(cuTensorMapEncodeIm2col)                                                                       \
  X(cuEventCreate)                                                                                 \
  X(cuEventDestroy_v2)                                                                             \
  X(cuEventRecord)                                                                                 \
  X(cuEventSynchronize)                                                                            \
  X(cuEventElapsedTime_v2)

namespace tessel {

/// The loaded driver: a table of entry points, or the reason there is none.
class CudaDriver {
public:
#define TESSEL_CUDA_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  TESSEL_CUDA_DRIVER_FUNCTIONS(TESSEL_CUDA_DRIVER_MEMBER)
#undef TESSEL_CUDA_DRIVER_MEMBER

  /// The process-wide driver, loaded and initialized (cuInit) once. Never throws: look at
  /// available().
  static const CudaDriver &instance();

  /// Loads the driver from `library` without touching the process-wide one (tests use this to
  /// see the no-driver path on a machine that has a driver).
  static std::unique_ptr<CudaDriver> open(const std::string &library);

  /// True when the library loaded, every entry point was found and cuInit succeeded.
  bool available() const { return available_; }
  /// Why the driver is unavailable (empty when it is available).
  const std::string &reason() const { return reason_; }
  /// The driver's CUDA version, e.g. 13000; 0 when unavailable.
  int version() const { return version_; }

  /// The process-wide driver, or tessel::Error saying that none could be loaded and why.
  static const CudaDriver &require();

  /// Throws tessel::Error naming `call` and the driver's name and description of `result`.
  void check(CUresult result, const char *call) const;

private:
  CudaDriver() = default;
  bool available_ = false;
  std::string reason_;
  int version_ = 0;
};

} // namespace tessel

/// Calls a driver entry point of the process-wide driver and turns a failure into tessel::Error
/// naming the call: TESSEL_CU(cuMemAlloc_v2, &ptr, bytes).
#define TESSEL_CU(fn, ...)                                                                         \
  do {                                                                                             \
    const ::tessel::CudaDriver &tessel_cu_ = ::tessel::CudaDriver::require();                      \
    tessel_cu_.check(tessel_cu_.fn(__VA_ARGS__), #fn);                                             \
  } while (0)
