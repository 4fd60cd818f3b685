#include "runtime/CudaDriver.h"

#include "compiler/support/Error.h"

#include <dlfcn.h>

namespace tessel {

namespace {

std::string cu_error_text(const CudaDriver &d, CUresult r) {
  const char *name = nullptr;
  const char *text = nullptr;
  if (d.cuGetErrorName)
    d.cuGetErrorName(r, &name);
  if (d.cuGetErrorString)
    d.cuGetErrorString(r, &text);
  std::string s = name ? name : "CUresult " + std::to_string(static_cast<int>(r));
  if (text)
    s += std::string(" (") + text + ")";
  return s;
}

} // namespace

std::unique_ptr<CudaDriver> CudaDriver::open(const std::string &library) {
  std::unique_ptr<CudaDriver> d(new CudaDriver());
  // Never dlclose'd: function pointers and contexts from it may outlive any owner we could name.
  void *handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    d->reason_ = "no CUDA driver found (" + library + " could not be loaded: " +
                 (why ? why : "unknown reason") + ")";
    return d;
  }
  std::string missing;
#define TESSEL_CUDA_DRIVER_LOOKUP(name)                                                            \
  d->name = reinterpret_cast<decltype(d->name)>(dlsym(handle, #name));                             \
  if (!d->name)                                                                                    \
    missing += std::string(missing.empty() ? "" : ", ") + #name;
  TESSEL_CUDA_DRIVER_FUNCTIONS(TESSEL_CUDA_DRIVER_LOOKUP)
#undef TESSEL_CUDA_DRIVER_LOOKUP
  if (!missing.empty()) {
    d->reason_ = "the CUDA driver in " + library + " is too old: it lacks " + missing +
                 " (tessel needs a driver for CUDA 12.8 or newer)";
    return d;
  }
  if (CUresult r = d->cuInit(0); r != CUDA_SUCCESS) {
    d->reason_ = "the CUDA driver did not initialize: cuInit failed: " + cu_error_text(*d, r) +
                 (r == CUDA_ERROR_NO_DEVICE ? " (no GPU is visible to this process)" : "");
    return d;
  }
  d->cuDriverGetVersion(&d->version_);
  int count = 0;
  if (CUresult r = d->cuDeviceGetCount(&count); r != CUDA_SUCCESS || count == 0) {
    d->reason_ = "the CUDA driver found no GPU" +
                 (r != CUDA_SUCCESS ? ": cuDeviceGetCount failed: " + cu_error_text(*d, r) : "");
    return d;
  }
  d->available_ = true;
  return d;
}

const CudaDriver &CudaDriver::instance() {
  static const std::unique_ptr<CudaDriver> driver = open("libcuda.so.1");
  return *driver;
}

const CudaDriver &CudaDriver::require() {
  const CudaDriver &d = instance();
  user_check(d.available(), "CUDA") << d.reason()
                                    << "; tessel can lower and compile without a GPU, but "
                                       "running needs one";
  return d;
}

void CudaDriver::check(CUresult result, const char *call) const {
  if (result == CUDA_SUCCESS)
    return;
  // Kernel faults are sticky and surface at whatever call comes next; say so, or the message
  // blames an innocent memcpy.
  bool sticky = result == CUDA_ERROR_ILLEGAL_ADDRESS || result == CUDA_ERROR_LAUNCH_FAILED ||
                result == CUDA_ERROR_MISALIGNED_ADDRESS || result == CUDA_ERROR_ILLEGAL_INSTRUCTION ||
                result == CUDA_ERROR_HARDWARE_STACK_ERROR || result == CUDA_ERROR_ASSERT;
  user_error("CUDA") << call << " failed: " << cu_error_text(*this, result)
                     << (sticky ? "; this is likely a fault of an earlier kernel launch, which "
                                  "leaves the context unusable"
                                : "");
}

} // namespace tessel
