#include "runtime/CudaModule.h"

#include "compiler/support/Error.h"
#include "runtime/CudaDriver.h"
#include "runtime/Device.h"
#include "runtime/DeviceArray.h"
#include "runtime/KernelCache.h"

#include <map>
#include <mutex>

namespace tessel {

namespace detail {

// What every launch checks, queried once per kernel so that timed loops of launches pay nothing.
struct KernelInfo {
  int max_threads = 0;
  int64_t static_smem = 0;
  int64_t dynamic_smem_limit = 0; // what launches may use without (another) opt-in
};

struct LoadedModule {
  Device *device = nullptr;
  CUmodule module = nullptr;
  CompiledKernel compiled;
  std::mutex mutex;
  std::map<std::string, KernelInfo> kernels; // node addresses are stable

  ~LoadedModule() {
    if (!module)
      return;
    // Errors are ignored: a destructor cannot throw, and unload fails only in a dead context.
    const CudaDriver &d = CudaDriver::instance();
    d.cuCtxSetCurrent(device->context());
    d.cuModuleUnload(module);
  }
};

} // namespace detail

KernelArg::KernelArg(const DeviceArray &array) {
  user_check(array.defined(), "launch") << "an empty DeviceArray passed as a kernel argument";
  CUdeviceptr p = array.data();
  std::memcpy(storage_, &p, sizeof(p));
}

CudaModule CudaModule::load(const CompiledKernel &kernel, Device *device) {
  auto m = std::make_shared<detail::LoadedModule>();
  m->device = device ? device : &Device::get();
  m->compiled = kernel;
  m->device->make_current();
  const CudaDriver &d = CudaDriver::require();
  CUresult r = d.cuModuleLoadData(&m->module, kernel.cubin.data());
  if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE) {
    m->module = nullptr;
    user_error("CudaModule") << "the cubin was compiled for " << kernel.arch << ", which cannot run on "
                             << m->device->name() << " (" << m->device->arch()
                             << "); compile for the device's architecture";
  }
  d.check(r, "cuModuleLoadData");
  CudaModule out;
  out.module_ = std::move(m);
  return out;
}

CudaModule CudaModule::build(const std::string &source, CompileOptions options, Device *device,
                             KernelCache *cache) {
  Device &dev = device ? *device : Device::get();
  if (options.arch.empty())
    options.arch = dev.arch();
  KernelCache &c = cache ? *cache : KernelCache::global();
  return load(c.compile(source, options), &dev);
}

const CompiledKernel &CudaModule::compiled() const { return module_->compiled; }

Device &CudaModule::device() const { return *module_->device; }

CudaFunction CudaModule::function(const std::string &name) const {
  internal_check(module_) << "function() of an empty CudaModule";
  module_->device->make_current();
  CudaFunction f;
  const CudaDriver &d = CudaDriver::require();
  CUresult r = d.cuModuleGetFunction(&f.func_, module_->module, name.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) {
    std::string names;
    for (const KernelStats &k : module_->compiled.kernels)
      names += (names.empty() ? "" : ", ") + k.name;
    user_error("CudaModule") << "no kernel named '" << name << "' in the module (kernels: "
                             << (names.empty() ? "unknown" : names)
                             << "); C++ kernels need extern \"C\" to keep their plain names";
  }
  d.check(r, "cuModuleGetFunction");
  f.module_ = module_;
  f.name_ = name;
  std::lock_guard<std::mutex> lock(module_->mutex);
  auto [it, inserted] = module_->kernels.try_emplace(name);
  if (inserted) {
    it->second.max_threads = f.attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    it->second.static_smem = f.attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    it->second.dynamic_smem_limit = f.attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  }
  f.info_ = &it->second;
  return f;
}

int CudaFunction::attribute(CUfunction_attribute attr) const {
  int v = 0;
  TESSEL_CU(cuFuncGetAttribute, &v, attr, func_);
  return v;
}

void CudaFunction::launch(const LaunchConfig &config, const std::vector<KernelArg> &args,
                          CUstream stream) const {
  internal_check(func_) << "launch() of an empty CudaFunction";
  Device &dev = *module_->device;
  dev.make_current();
  for (int i = 0; i < 3; ++i)
    user_check(config.grid[i] >= 1 && config.block[i] >= 1, "launch")
        << "kernel '" << name_ << "': grid and block extents must be >= 1 (grid " << config.grid[0]
        << "x" << config.grid[1] << "x" << config.grid[2] << ", block " << config.block[0] << "x"
        << config.block[1] << "x" << config.block[2] << ")";
  user_check(config.grid[0] <= 0x7fffffff && config.grid[1] <= 65535 && config.grid[2] <= 65535,
             "launch")
      << "kernel '" << name_ << "': grid " << config.grid[0] << "x" << config.grid[1] << "x"
      << config.grid[2] << " exceeds the limits (2^31-1, 65535, 65535)";
  int max_threads = info_->max_threads;
  user_check(config.threads_per_block() <= max_threads && config.block[2] <= 64, "launch")
      << "kernel '" << name_ << "': " << config.threads_per_block()
      << " threads per block, but it can run at most " << max_threads
      << " (limited by its registers and the device)";
  // Clusters are compiled into the kernel (__cluster_dims__), so cuLaunchKernel (and
  // cuLaunchKernelEx without a cluster attribute) launches them; the grid must be whole
  // clusters, and the device a Hopper or later.
  if (config.cluster_size() > 1) {
    user_check(dev.compute_capability() >= 90, "launch")
        << "kernel '" << name_ << "' is launched in clusters of " << config.cluster[0] << "x"
        << config.cluster[1] << "x" << config.cluster[2] << " blocks, which need sm_90 or later; "
        << dev.name() << " is sm_" << dev.compute_capability();
    for (int i = 0; i < 3; ++i)
      user_check(config.grid[i] % config.cluster[i] == 0, "launch")
          << "kernel '" << name_ << "': grid " << config.grid[0] << "x" << config.grid[1] << "x"
          << config.grid[2] << " is not a whole number of its clusters of " << config.cluster[0]
          << "x" << config.cluster[1] << "x" << config.cluster[2] << " blocks";
  }
  int64_t static_smem = info_->static_smem;
  int64_t optin = dev.max_shared_per_block_optin();
  user_check(config.dynamic_shared_bytes >= 0 && static_smem + config.dynamic_shared_bytes <= optin,
             "launch")
      << "kernel '" << name_ << "': " << config.dynamic_shared_bytes << " bytes of dynamic and "
      << static_smem << " of static shared memory exceed the " << optin
      << " bytes a block may use on " << dev.name();
  if (config.dynamic_shared_bytes > info_->dynamic_smem_limit) {
    // Above 48 KiB of shared memory in all a kernel must opt in; the setting sticks, so it is
    // made once per larger size.
    std::lock_guard<std::mutex> lock(module_->mutex);
    if (config.dynamic_shared_bytes > info_->dynamic_smem_limit) {
      TESSEL_CU(cuFuncSetAttribute, func_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                static_cast<int>(config.dynamic_shared_bytes));
      info_->dynamic_smem_limit = config.dynamic_shared_bytes;
    }
  }
  std::vector<void *> params;
  params.reserve(args.size());
  for (const KernelArg &a : args)
    params.push_back(a.address());
  if (config.after_previous && dev.compute_capability() >= 90) {
    // Programmatic dependent launch: the kernel's blocks may be scheduled while the previous
    // kernel on the stream drains; its code waits for it (griddepcontrol.wait, emitted by
    // codegen for such kernels).
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig c{};
    c.gridDimX = static_cast<unsigned>(config.grid[0]);
    c.gridDimY = static_cast<unsigned>(config.grid[1]);
    c.gridDimZ = static_cast<unsigned>(config.grid[2]);
    c.blockDimX = static_cast<unsigned>(config.block[0]);
    c.blockDimY = static_cast<unsigned>(config.block[1]);
    c.blockDimZ = static_cast<unsigned>(config.block[2]);
    c.sharedMemBytes = static_cast<unsigned>(config.dynamic_shared_bytes);
    c.hStream = stream;
    c.attrs = &attr;
    c.numAttrs = 1;
    TESSEL_CU(cuLaunchKernelEx, &c, func_, params.empty() ? nullptr : params.data(), nullptr);
    return;
  }
  TESSEL_CU(cuLaunchKernel, func_, static_cast<unsigned>(config.grid[0]),
            static_cast<unsigned>(config.grid[1]), static_cast<unsigned>(config.grid[2]),
            static_cast<unsigned>(config.block[0]), static_cast<unsigned>(config.block[1]),
            static_cast<unsigned>(config.block[2]),
            static_cast<unsigned>(config.dynamic_shared_bytes), stream,
            params.empty() ? nullptr : params.data(), nullptr);
}

TimeResult CudaFunction::time(const LaunchConfig &config, const std::vector<KernelArg> &args,
                              const TimeOptions &options) const {
  return time_launches([&] { launch(config, args); }, options, module_->device);
}

} // namespace tessel
