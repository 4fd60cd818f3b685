#include "runtime/Build.h"

#include "compiler/ir/Intrinsics.h"
#include "runtime/CudaDriver.h"
#include "runtime/DeviceArray.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/lower/LaunchLimits.h"
#include "compiler/support/Error.h"
#include "runtime/CudaModule.h"
#include "runtime/Device.h"
#include "runtime/KernelCache.h"

#include <llvm/ADT/StringRef.h>

#include <mutex>
#include <optional>

namespace tessel {

void check_arch_name(const std::string &arch, const char *where) {
  llvm::StringRef digits(arch);
  bool ok = digits.consume_front("sm_");
  digits.consume_back("a");
  ok = ok && digits.size() >= 2 && digits.find_first_not_of("0123456789") == llvm::StringRef::npos;
  user_check(ok, where) << "'" << arch << "' is not an architecture: give sm_ and the compute "
                        << "capability, e.g. sm_80, sm_90, or sm_90a for Hopper's "
                        << "arch-specific instructions (wgmma)";
}

std::string target_arch(const LoweredModule &m, const std::string &arch) {
  std::string wgmma_kernel, tma_kernel;
  for (const LoweredFunc &f : m.funcs)
    post_order_visit(f.body, [&](const IRNode *n) {
      const auto *c = llvm::dyn_cast<Call>(n);
      if (c && (c->name.rfind("wgmma_", 0) == 0 || c->name == intrinsic::setmaxnreg))
        wgmma_kernel = f.name;
      if (c && (c->name.rfind("tma_load", 0) == 0 || c->name.rfind("mbarrier_", 0) == 0 ||
                c->name == intrinsic::cluster_sync))
        tma_kernel = f.name;
    });
  std::string a = arch;
  if (a.empty()) {
    user_check(Device::available(), "build")
        << "no target architecture given and no GPU to take it from ("
        << Device::unavailable_reason() << "); give one, e.g. \"sm_90\"";
    a = Device::get().arch();
  }
  check_arch_name(a, "build");
  if (wgmma_kernel.empty()) {
    if (!tma_kernel.empty()) {
      int sm = a.rfind("sm_", 0) == 0 ? std::atoi(a.c_str() + 3) : 0;
      user_check(sm >= 90, "build")
          << "kernel '" << tma_kernel << "' uses TMA bulk copies, mbarriers or thread-block "
          << "clusters, which need a "
          << "Hopper GPU (sm_90) or later, but the target is " << a
          << "; use a schedule without bulk_copy";
    }
  } else {
    user_check(a == "sm_90" || a == "sm_90a", "build")
        << "kernel '" << wgmma_kernel << "' uses wgmma, which only Hopper GPUs have (sm_90a), "
        << "but the target is " << a << "; build it for sm_90, or use a schedule without wgmma "
        << "(gemm_tc, gemm_mma)";
    a = "sm_90a";
  }
  // Shared memory over 48 KiB is asked for dynamically (lower()); less fits every architecture.
  for (const LoweredFunc &f : m.funcs) {
    const int64_t smem = f.launch.dynamic_shared_bytes;
    user_check(max_shared_bytes_per_block(a) == 0 || smem <= max_shared_bytes_per_block(a), "build")
        << "kernel '" << f.name << "' needs " << smem << " bytes of shared memory per block, "
        << "but a block on " << a << " can have at most " << max_shared_bytes_per_block(a)
        << "; use smaller tiles or fewer pipeline stages, or build for a GPU with more";
  }
  return a;
}

struct Module::State {
  LoweredModule lowered;
  ModuleParams params;
  std::string source;
  CompiledKernel compiled;
  std::mutex mutex;                    ///< guards loaded and workspace
  std::optional<CudaModule> loaded;    ///< on the first launch
  std::vector<CudaFunction> functions; ///< of lowered.funcs, on the first launch
  DeviceArray workspace; ///< params.workspace_bytes, on the first launch that needs it
};

const LoweredModule &Module::lowered() const { return state_->lowered; }
const ModuleParams &Module::params() const { return state_->params; }
const std::string &Module::source() const { return state_->source; }
const CompiledKernel &Module::compiled() const { return state_->compiled; }
const LaunchConfig &Module::launch() const { return state_->lowered.funcs.back().launch; }

TensorMapEncoding tensor_map_encoding(const TensorMapParam &m, DataType t) {
  TensorMapEncoding e;
  if (t == Float(16))
    e.type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  else if (t == BFloat(16))
    e.type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  else if (t == Float(32))
    e.type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  else if (t.is_float8()) // TMA moves bytes: 8-bit floats as unsigned bytes
    e.type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  else
    user_error("tensor map") << "tensor map '" << m.var.name() << "': TMA copies of " << t
                             << " are not supported (float16, bfloat16, float32, float8)";
  size_t rank = m.dims.size();
  user_check(rank >= 1 && rank <= 5 && m.strides.size() == rank &&
                 (m.box.size() == rank || m.im2col),
             "tensor map")
      << "tensor map '" << m.var.name() << "' has " << rank << " dimensions; TMA takes 1 to 5";
  e.im2col = m.im2col;
  for (size_t d = 0; d < rank; ++d) {
    e.dims.push_back(cuuint64_t(m.dims[d]));
    e.elem_strides.push_back(1);
    if (d > 0)
      e.strides.push_back(cuuint64_t(m.strides[d]) * cuuint64_t(t.bytes()));
  }
  for (int64_t b : m.box)
    e.box.push_back(cuuint32_t(b));
  e.swizzle = m.swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
              : m.swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
              : m.swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                : CU_TENSOR_MAP_SWIZZLE_NONE;
  if (m.im2col) {
    user_check(rank == 4 && m.box.size() == 2 && m.lower_corner.size() == 2 &&
                   m.upper_corner.size() == 2 && (m.traversal.empty() || m.traversal.size() == 4),
               "tensor map")
        << "im2col tensor map '" << m.var.name()
        << "' must view a 4-D NHWC tensor with a 2-entry box and corners";
    for (size_t d = 0; d < rank; ++d)
      e.elem_strides[d] = m.traversal.empty() ? 1 : cuuint32_t(m.traversal[d]);
    e.lower_corner = {int(m.lower_corner[0]), int(m.lower_corner[1])};
    e.upper_corner = {int(m.upper_corner[0]), int(m.upper_corner[1])};
  }
  return e;
}

CUtensorMap encode_tensor_map(const TensorMapParam &m, CUdeviceptr ptr, DataType dtype) {
  TensorMapEncoding e = tensor_map_encoding(m, dtype);
  CUtensorMap map;
  auto rank = cuuint32_t(e.dims.size());
  if (e.im2col) {
    TESSEL_CU(cuTensorMapEncodeIm2col, &map, e.type, rank, reinterpret_cast<void *>(ptr),
              e.dims.data(), e.strides.data(), e.lower_corner.data(), e.upper_corner.data(),
              e.box[0], e.box[1], e.elem_strides.data(), CU_TENSOR_MAP_INTERLEAVE_NONE, e.swizzle,
              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return map;
  }
  TESSEL_CU(cuTensorMapEncodeTiled, &map, e.type, rank, reinterpret_cast<void *>(ptr),
            e.dims.data(), e.strides.data(), e.box.data(), e.elem_strides.data(),
            CU_TENSOR_MAP_INTERLEAVE_NONE, e.swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return map;
}

CUtensorMap encode_tensor_map(const TensorMapParam &m, const DeviceArray &array) {
  return encode_tensor_map(m, array.data(), array.dtype());
}

namespace {

using Launches = std::vector<std::pair<CudaFunction, std::vector<KernelArg>>>;

// The streams that name no stream of a context: the default ones.
bool is_default_stream(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

// The kernels' launches in order, with their arguments: the caller's pointers, then the
// workspaces' (the caller's block, or the Module's, allocated on the first launch and kept),
// then the tensor maps over them. Checks everything launch() promises to check.
Launches prepare(Module::State &s, const std::vector<TensorView> &args, CUstream stream,
                 CUdeviceptr workspace, const char *where) {
  const ModuleParams &params = s.params;
  check_arguments(params, args, where, workspace);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.loaded) {
    CudaModule loaded = CudaModule::load(s.compiled);
    std::vector<CudaFunction> functions;
    for (const LoweredFunc &f : s.lowered.funcs)
      functions.push_back(loaded.function(f.name));
    s.loaded = std::move(loaded);
    s.functions = std::move(functions);
  }
  Device &device = s.loaded->device();
  check_device_memory(params, args, workspace, device, where);
  if (!is_default_stream(stream)) {
    CUcontext ctx = nullptr;
    TESSEL_CU(cuStreamGetCtx, stream, &ctx);
    user_check(ctx == device.context(), where)
        << "the stream belongs to another CUDA context than the module's (device "
        << device.ordinal() << "'s primary context, which the CUDA runtime uses too); create it "
        << "with cudaStreamCreate, or with cuStreamCreate while the primary context is current";
  }
  if (!workspace && params.workspace_bytes > 0) {
    if (!s.workspace.defined()) {
      s.workspace = DeviceArray(UInt(8), {params.workspace_bytes}, &device);
      s.workspace.fill_bytes(0); // the flags between blocks start lowered (Module::launch)
    }
    workspace = s.workspace.data();
  }
  // Every kernel's parameters: the arguments, then the workspaces; their tensor maps after.
  std::vector<CUdeviceptr> pointers;
  std::vector<DataType> dtypes;
  for (const TensorView &v : args) {
    pointers.push_back(v.ptr);
    dtypes.push_back(v.dtype);
  }
  for (size_t i = 0; i < params.workspaces.size(); ++i) {
    pointers.push_back(workspace + static_cast<CUdeviceptr>(params.workspace_offsets[i]));
    dtypes.push_back(params.workspaces[i].dtype);
  }
  Launches out;
  for (size_t k = 0; k < s.lowered.funcs.size(); ++k) {
    const LoweredFunc &f = s.lowered.funcs[k];
    internal_check(f.args.size() == pointers.size())
        << "kernel '" << f.name << "' takes " << f.args.size() << " parameters, not "
        << pointers.size();
    std::vector<KernelArg> kargs;
    for (CUdeviceptr p : pointers)
      kargs.emplace_back(p);
    for (const TensorMapParam &m : f.tensor_maps)
      kargs.emplace_back(encode_tensor_map(m, pointers.at(size_t(m.arg)), dtypes.at(size_t(m.arg))));
    out.emplace_back(s.functions[k], std::move(kargs));
  }
  return out;
}

// Views of `arrays` in the parameters' shapes where the element counts agree (run() and time()
// take a DeviceArray as a dense buffer; check_arguments reports the others).
std::vector<TensorView> views_of(const ModuleParams &params,
                                 const std::vector<const DeviceArray *> &arrays) {
  std::vector<TensorView> views;
  for (size_t i = 0; i < arrays.size(); ++i) {
    user_check(arrays[i] && arrays[i]->defined(), "Module::run")
        << "argument " << i
        << (i < params.args.size() ? " ('" + params.args[i].name + "')" : std::string())
        << " is " << (arrays[i] ? "an empty DeviceArray (moved from?)" : "a null DeviceArray pointer");
    TensorView v = TensorView::of(*arrays[i]);
    if (i < params.args.size() && v.numel() == params.args[i].numel())
      v.shape = params.args[i].shape;
    views.push_back(std::move(v));
  }
  return views;
}

void enqueue(const Module::State &s, const Launches &ls, CUstream stream) {
  for (size_t i = 0; i < ls.size(); ++i)
    ls[i].first.launch(s.lowered.funcs[i].launch, ls[i].second, stream);
}

} // namespace

void Module::launch(const std::vector<TensorView> &args, CUstream stream,
                    CUdeviceptr workspace) const {
  enqueue(*state_, prepare(*state_, args, stream, workspace, "Module::launch"), stream);
}

void Module::run(const std::vector<const DeviceArray *> &args) const {
  std::vector<TensorView> views = views_of(state_->params, args);
  enqueue(*state_, prepare(*state_, views, nullptr, 0, "Module::run"), nullptr);
}

TimeResult Module::time(const std::vector<TensorView> &args, const TimeOptions &options) const {
  Launches ls = prepare(*state_, args, nullptr, 0, "Module::time");
  return time_launches([&] { enqueue(*state_, ls, nullptr); }, options,
                       &state_->loaded->device());
}

TimeResult Module::time(const std::vector<const DeviceArray *> &args,
                        const TimeOptions &options) const {
  return time(views_of(state_->params, args), options);
}

Module build(const LoweredModule &lowered, const Target &target) {
  user_check(!lowered.funcs.empty(), "build") << "the module has no kernel";
  auto state = std::make_shared<Module::State>();
  state->lowered = lowered;
  state->params = module_params(lowered);
  state->source = target.source.empty() ? codegen_cuda(lowered) : target.source;
  CompileOptions options;
  options.arch = target_arch(lowered, target.arch);
  state->compiled = KernelCache::global().compile(state->source, options, lowered.funcs[0].name + ".cu");
  Module m;
  m.state_ = std::move(state);
  return m;
}

Module build(const Schedule &s, const std::vector<Tensor> &args, const Target &target,
             const LowerOptions &options) {
  return build(lower(s, args, options), target);
}

} // namespace tessel
