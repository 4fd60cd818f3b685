// A cubin loaded into a device context, its kernels, and launching them.
#pragma once

#include "compiler/lower/LoweredFunc.h"
#include "runtime/Nvrtc.h"
#include "runtime/Timer.h"

#include <cuda.h>

#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace tessel {

class Device;
class DeviceArray;
class KernelCache;

/// One kernel argument, held by value: a DeviceArray (its device pointer), a TMA tensor map, or
/// a scalar whose C++ type must match the kernel parameter's (int, int64_t, float, ...).
class KernelArg {
public:
  KernelArg(const DeviceArray &array);
  KernelArg(const CUtensorMap &map) { std::memcpy(storage_, &map, sizeof(map)); }
  template <typename T>
    requires std::is_arithmetic_v<T>
  KernelArg(T value) {
    static_assert(sizeof(T) <= sizeof(storage_));
    std::memcpy(storage_, &value, sizeof(T));
  }
  /// What cuLaunchKernel's kernelParams entry for this argument points to.
  void *address() const { return const_cast<unsigned char *>(storage_); }

private:
  alignas(64) unsigned char storage_[sizeof(CUtensorMap)] = {};
};

namespace detail {
struct LoadedModule;
struct KernelInfo;
}

/// A kernel of a loaded module. Keeps its module loaded while it lives.
class CudaFunction {
public:
  const std::string &name() const { return name_; }
  CUfunction handle() const { return func_; }
  int attribute(CUfunction_attribute attr) const;

  /// Enqueues one launch on `stream` (the default stream when null); does not wait. Checks the
  /// configuration against the kernel's and the device's limits first, and raises the kernel's
  /// dynamic shared memory limit when `config` asks for more than the default 48 KiB.
  void launch(const LaunchConfig &config, const std::vector<KernelArg> &args,
              CUstream stream = nullptr) const;

  /// Times launches of this kernel (see time_launches).
  TimeResult time(const LaunchConfig &config, const std::vector<KernelArg> &args,
                  const TimeOptions &options = {}) const;

private:
  friend class CudaModule;
  std::shared_ptr<detail::LoadedModule> module_;
  std::string name_;
  CUfunction func_ = nullptr;
  detail::KernelInfo *info_ = nullptr; // limits queried once, owned by module_
};

class CudaModule {
public:
  /// Loads `kernel`'s cubin on `device` (the default device when null).
  static CudaModule load(const CompiledKernel &kernel, Device *device = nullptr);
  /// Compiles `source` through `cache` (the global cache when null) and loads it. An empty
  /// options.arch means the device's architecture.
  static CudaModule build(const std::string &source, CompileOptions options = {},
                          Device *device = nullptr, KernelCache *cache = nullptr);

  /// The kernel named `name` (its symbol name: extern "C" kernels are unmangled).
  CudaFunction function(const std::string &name) const;
  const CompiledKernel &compiled() const;
  Device &device() const;

private:
  std::shared_ptr<detail::LoadedModule> module_;
};

} // namespace tessel
