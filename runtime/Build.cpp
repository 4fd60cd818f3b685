#include "runtime/Build.h"

#include "compiler/ir/Intrinsics.h"
#include "runtime/CudaDriver.h"
#include "runtime/DeviceArray.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/support/Error.h"
#include "runtime/CudaModule.h"
#include "runtime/Device.h"
#include "runtime/KernelCache.h"

#include <optional>

namespace tessel {

std::string target_arch(const LoweredModule &m, const std::string &arch) {
  std::string wgmma_kernel, tma_kernel;
  for (const LoweredFunc &f : m.funcs)
    post_order_visit(f.body, [&](const IRNode *n) {
      const auto *c = llvm::dyn_cast<Call>(n);
      if (c && c->name.rfind("wgmma_", 0) == 0)
        wgmma_kernel = f.name;
      if (c && (c->name.rfind("tma_load", 0) == 0 || c->name.rfind("mbarrier_", 0) == 0))
        tma_kernel = f.name;
    });
  std::string a = arch;
  if (a.empty()) {
    user_check(Device::available(), "build")
        << "no target architecture given and no GPU to take it from ("
        << Device::unavailable_reason() << "); give one, e.g. \"sm_90\"";
    a = Device::get().arch();
  }
  if (wgmma_kernel.empty()) {
    if (!tma_kernel.empty()) {
      int sm = a.rfind("sm_", 0) == 0 ? std::atoi(a.c_str() + 3) : 0;
      user_check(sm >= 90, "build")
          << "kernel '" << tma_kernel << "' uses TMA bulk copies and mbarriers, which need a "
          << "Hopper GPU (sm_90) or later, but the target is " << a
          << "; use a schedule without bulk_copy";
    }
    return a;
  }
  user_check(a == "sm_90" || a == "sm_90a", "build")
      << "kernel '" << wgmma_kernel << "' uses wgmma, which only Hopper GPUs have (sm_90a), but "
      << "the target is " << a << "; build it for sm_90, or use a schedule without wgmma "
      << "(gemm_tc, gemm_mma)";
  return "sm_90a";
}

struct Module::State {
  LoweredModule lowered;
  std::string source;
  CompiledKernel compiled;
  std::optional<CudaModule> loaded; ///< on first run
  std::vector<DeviceArray> workspaces; ///< LoweredModule's workspaces, on first run
};

const LoweredModule &Module::lowered() const { return state_->lowered; }
const std::string &Module::source() const { return state_->source; }
const CompiledKernel &Module::compiled() const { return state_->compiled; }
const LaunchConfig &Module::launch() const { return state_->lowered.funcs.back().launch; }

CUtensorMap encode_tensor_map(const TensorMapParam &m, const DeviceArray &array) {
  CUtensorMapDataType type;
  DataType t = array.dtype();
  if (t == Float(16))
    type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  else if (t == BFloat(16))
    type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  else if (t == Float(32))
    type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  else
    user_error("tensor map") << "tensor map '" << m.var.name() << "': TMA copies of " << t
                             << " are not supported (float16, bfloat16, float32)";
  size_t rank = m.dims.size();
  user_check(rank >= 1 && rank <= 5 && m.strides.size() == rank &&
                 (m.box.size() == rank || m.im2col),
             "tensor map")
      << "tensor map '" << m.var.name() << "' has " << rank << " dimensions; TMA takes 1 to 5";
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], elem_strides[5];
  for (size_t d = 0; d < rank; ++d) {
    dims[d] = cuuint64_t(m.dims[d]);
    box[d] = d < m.box.size() ? cuuint32_t(m.box[d]) : 1;
    elem_strides[d] = 1;
    if (d > 0)
      strides[d - 1] = cuuint64_t(m.strides[d]) * t.bytes();
  }
  CUtensorMapSwizzle swizzle = m.swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                               : m.swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                               : m.swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                 : CU_TENSOR_MAP_SWIZZLE_NONE;
  CUtensorMap map;
  if (m.im2col) {
    user_check(rank == 4 && m.box.size() == 2 && m.lower_corner.size() == 2 &&
                   m.upper_corner.size() == 2 && (m.traversal.empty() || m.traversal.size() == 4),
               "tensor map")
        << "im2col tensor map '" << m.var.name()
        << "' must view a 4-D NHWC tensor with a 2-entry box and corners";
    for (size_t d = 0; d < rank; ++d)
      elem_strides[d] = m.traversal.empty() ? 1 : cuuint32_t(m.traversal[d]);
    int lower[2] = {int(m.lower_corner[0]), int(m.lower_corner[1])};
    int upper[2] = {int(m.upper_corner[0]), int(m.upper_corner[1])};
    TESSEL_CU(cuTensorMapEncodeIm2col, &map, type, cuuint32_t(rank),
              reinterpret_cast<void *>(array.data()), dims, strides, lower, upper,
              cuuint32_t(m.box[0]), cuuint32_t(m.box[1]), elem_strides,
              CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return map;
  }
  TESSEL_CU(cuTensorMapEncodeTiled, &map, type, cuuint32_t(rank),
            reinterpret_cast<void *>(array.data()), dims, strides, box, elem_strides,
            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return map;
}

static std::vector<KernelArg> kernel_args(const LoweredFunc &f,
                                          const std::vector<const DeviceArray *> &args) {
  internal_check(args.size() == f.args.size())
      << "kernel '" << f.name << "' takes " << f.args.size() << " arguments, got " << args.size();
  std::vector<KernelArg> out;
  for (size_t i = 0; i < args.size(); ++i) {
    int64_t n = 1;
    for (int64_t e : f.arg_shapes[i])
      n *= e;
    user_check(args[i] && args[i]->dtype() == f.args[i].dtype() && args[i]->numel() == n,
               "Module::run")
        << "argument " << i << " ('" << f.args[i].name() << "') must be " << f.args[i].dtype()
        << " with " << n << " elements, got "
        << (args[i] ? args[i]->dtype().str() + " with " + std::to_string(args[i]->numel()) +
                          " elements"
                    : std::string("nothing"));
    out.emplace_back(*args[i]);
  }
  for (const TensorMapParam &m : f.tensor_maps)
    out.emplace_back(encode_tensor_map(m, *args.at(m.arg)));
  return out;
}

static const CudaModule &loaded(Module::State &s) {
  if (!s.loaded)
    s.loaded = CudaModule::load(s.compiled);
  return *s.loaded;
}

// The kernels' launches in order, with their arguments: the caller's, then the workspaces
// (allocated on the first run, kept for the next).
static std::vector<std::pair<CudaFunction, std::vector<KernelArg>>>
launches(Module::State &s, const std::vector<const DeviceArray *> &args) {
  const LoweredModule &m = s.lowered;
  const LoweredFunc &first = m.funcs.at(0);
  size_t num_args = first.args.size() - m.num_workspaces;
  user_check(args.size() == num_args, "Module::run")
      << "kernel '" << first.name << "' takes " << num_args << " arguments, got " << args.size();
  if (s.workspaces.empty())
    for (size_t i = num_args; i < first.args.size(); ++i)
      s.workspaces.emplace_back(first.args[i].dtype(), first.arg_shapes[i]);
  std::vector<const DeviceArray *> all = args;
  for (const DeviceArray &w : s.workspaces)
    all.push_back(&w);
  std::vector<std::pair<CudaFunction, std::vector<KernelArg>>> out;
  for (const LoweredFunc &f : m.funcs)
    out.emplace_back(loaded(s).function(f.name), kernel_args(f, all));
  return out;
}

void Module::run(const std::vector<const DeviceArray *> &args) const {
  auto ls = launches(*state_, args);
  for (size_t i = 0; i < ls.size(); ++i)
    ls[i].first.launch(state_->lowered.funcs[i].launch, ls[i].second);
}

TimeResult Module::time(const std::vector<const DeviceArray *> &args,
                        const TimeOptions &options) const {
  auto ls = launches(*state_, args);
  return time_launches([&] {
    for (size_t i = 0; i < ls.size(); ++i)
      ls[i].first.launch(state_->lowered.funcs[i].launch, ls[i].second);
  }, options);
}

Module build(const LoweredModule &lowered, const Target &target) {
  user_check(!lowered.funcs.empty(), "build") << "the module has no kernel";
  auto state = std::make_shared<Module::State>();
  state->lowered = lowered;
  state->source = codegen_cuda(lowered);
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
