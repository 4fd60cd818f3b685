#include "runtime/Device.h"

#include "compiler/support/Error.h"
#include "runtime/CudaDriver.h"

#include <memory>
#include <mutex>
#include <vector>

namespace tessel {

bool Device::available() { return CudaDriver::instance().available(); }

std::string Device::unavailable_reason() { return CudaDriver::instance().reason(); }

int Device::count() {
  const CudaDriver &d = CudaDriver::instance();
  int n = 0;
  if (d.available())
    d.check(d.cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

Device &Device::get(int ordinal) {
  CudaDriver::require();
  int n = count();
  user_check(ordinal >= 0 && ordinal < n, "CUDA")
      << "no GPU with ordinal " << ordinal << "; " << n << " visible";
  // Devices are created once and never destroyed: the primary context then lives until the
  // process exits, and no static destructor races the driver's own teardown at exit.
  static std::mutex mutex;
  static std::vector<Device *> devices;
  std::lock_guard<std::mutex> lock(mutex);
  if (devices.empty())
    devices.resize(n, nullptr);
  if (!devices[ordinal])
    devices[ordinal] = new Device(ordinal);
  devices[ordinal]->make_current();
  return *devices[ordinal];
}

Device::Device(int ordinal) : ordinal_(ordinal) {
  TESSEL_CU(cuDeviceGet, &device_, ordinal);
  char name[256] = {0};
  TESSEL_CU(cuDeviceGetName, name, sizeof(name) - 1, device_);
  name_ = name;
  cc_ = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) * 10 +
        attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  smem_optin_ = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  TESSEL_CU(cuDevicePrimaryCtxRetain, &context_, device_);
}

int Device::attribute(CUdevice_attribute attr) const {
  int v = 0;
  TESSEL_CU(cuDeviceGetAttribute, &v, attr, device_);
  return v;
}

int64_t Device::total_memory_bytes() const {
  size_t bytes = 0;
  TESSEL_CU(cuDeviceTotalMem_v2, &bytes, device_);
  return static_cast<int64_t>(bytes);
}

void Device::make_current() const { TESSEL_CU(cuCtxSetCurrent, context_); }

void Device::synchronize() const {
  make_current();
  TESSEL_CU(cuCtxSynchronize);
}

} // namespace tessel
