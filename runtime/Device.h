// A CUDA device and its primary context.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

namespace tessel {

class Device {
public:
  /// True when a CUDA driver is loaded and at least one GPU is visible. Never throws.
  static bool available();
  /// Why no device is available (empty when one is).
  static std::string unavailable_reason();
  /// Number of visible GPUs (0 without a driver).
  static int count();

  /// The device with this ordinal, its primary context retained and made current on the calling
  /// thread. Throws tessel::Error when there is no driver, no GPU or no such ordinal.
  static Device &get(int ordinal = 0);

  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  int ordinal() const { return ordinal_; }
  CUdevice handle() const { return device_; }
  CUcontext context() const { return context_; }
  const std::string &name() const { return name_; }
  /// Compute capability as major * 10 + minor (90 for an H100).
  int compute_capability() const { return cc_; }
  /// The NVRTC architecture name of this device ("sm_90").
  std::string arch() const { return "sm_" + std::to_string(cc_); }

  int attribute(CUdevice_attribute attr) const;
  int sm_count() const { return attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT); }
  int64_t l2_cache_bytes() const { return attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE); }
  /// The most shared memory a block may use when it opts in (static + dynamic).
  int64_t max_shared_per_block_optin() const { return smem_optin_; }
  int64_t total_memory_bytes() const;

  /// Makes this device's primary context current on the calling thread. Every runtime call that
  /// touches the device does this first, so threads other than the first one work too.
  void make_current() const;
  /// Waits for all work on the device; reports asynchronous kernel faults as tessel::Error.
  void synchronize() const;

private:
  explicit Device(int ordinal);
  int ordinal_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::string name_;
  int cc_ = 0;
  int64_t smem_optin_ = 0; // cached: every launch checks against it
};

} // namespace tessel
