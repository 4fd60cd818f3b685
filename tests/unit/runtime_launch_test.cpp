// Launching a module on the caller's device memory and stream (Module::launch, TensorView): what
// the lowered kernels need of each argument (module_params: types, shapes, alignments,
// workspaces), the pure checks of views against it, which run without a GPU, and on a GPU
// (*Gpu* tests, skipped without one) launches on cuMemAlloc'ed pointers on a stream of the
// caller's, compared with Module::run on DeviceArrays, and the driver's checks of the memory.
#include "TestUtil.h"

#include "compiler/lower/Lower.h"
#include "runtime/Build.h"
#include "runtime/CudaDriver.h"
#include "runtime/Device.h"
#include "runtime/DeviceArray.h"
#include "runtime/KernelCache.h"
#include "runtime/TensorView.h"
#include "runtime/interp/Executor.h"
#include "runtime/interp/Reference.h"
#include "schedules/Registry.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace tessel;
using tessel::test::expect_error;

namespace {

LoweredModule lower_registered(const std::string &name, const ShapeParams &shape,
                               DataType dtype = DataType()) {
  const ScheduleEntry &e = find_schedule(name);
  ScheduledProgram p = e.build(resolve_shape(e, shape), dtype.bits() ? dtype : e.dtypes.at(0));
  return lower(p.schedule, p.args);
}

const ParamSpec &arg(const ModuleParams &p, const std::string &name) {
  for (const ParamSpec &s : p.args)
    if (s.name == name)
      return s;
  for (const ParamSpec &s : p.workspaces)
    if (s.name == name)
      return s;
  throw std::runtime_error("no parameter " + name);
}

// Views of the module's arguments at the given pointers, in their own types and shapes.
std::vector<TensorView> views(const ModuleParams &p, const std::vector<CUdeviceptr> &ptrs) {
  std::vector<TensorView> v;
  for (size_t i = 0; i < p.args.size(); ++i)
    v.emplace_back(ptrs.at(i), p.args[i].dtype, p.args[i].shape);
  return v;
}

} // namespace

// The alignment comes from what the kernels do with each pointer: nothing wider than an
// element (gemm_naive), vector loads (softmax), WMMA stores (gemm_wmma's C), mma.sync's float2
// stores (gemm_mma's C), cp.async (gemm_wgmma with TMA=0), TMA tensor maps (gemm_wgmma).
TEST(RuntimeLaunch, ParamsAndAlignmentsFromTheKernels) {
  ModuleParams naive = module_params(lower_registered("gemm_naive", {{"M", 64}, {"N", 48}, {"K", 32}}));
  ASSERT_EQ(naive.args.size(), 3u);
  EXPECT_EQ(naive.args[0].name, "A");
  EXPECT_EQ(naive.args[0].dtype, Float(32));
  EXPECT_EQ(naive.args[0].shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(naive.args[1].shape, (std::vector<int64_t>{32, 48}));
  EXPECT_EQ(naive.args[2].shape, (std::vector<int64_t>{64, 48}));
  for (const ParamSpec &s : naive.args) {
    EXPECT_EQ(s.alignment, 4) << s.name;
    EXPECT_EQ(s.alignment_reason, "") << s.name;
  }
  EXPECT_TRUE(naive.workspaces.empty());
  EXPECT_EQ(naive.workspace_bytes, 0);

  ModuleParams naive16 =
      module_params(lower_registered("gemm_naive", {{"M", 64}, {"N", 48}, {"K", 32}}, Float(16)));
  EXPECT_EQ(arg(naive16, "A").alignment, 2);

  ModuleParams softmax = module_params(lower_registered("softmax", {{"R", 8}, {"C", 1024}}));
  EXPECT_EQ(arg(softmax, "x").alignment, 16);
  EXPECT_NE(arg(softmax, "x").alignment_reason.find("16-byte vector loads"), std::string::npos);
  EXPECT_NE(arg(softmax, "y").alignment_reason.find("16-byte vector stores"), std::string::npos);

  ModuleParams wmma = module_params(lower_registered("gemm_wmma", {{"M", 128}, {"N", 128}, {"K", 64}}));
  EXPECT_EQ(arg(wmma, "C").alignment, 32);
  EXPECT_NE(arg(wmma, "C").alignment_reason.find("WMMA stores"), std::string::npos);

  ModuleParams mma = module_params(lower_registered("gemm_mma", {{"M", 128}, {"N", 128}, {"K", 64}}));
  EXPECT_EQ(arg(mma, "C").alignment, 8); // float2
  EXPECT_EQ(arg(mma, "A").alignment, 16);

  ModuleParams cp_async = module_params(
      lower_registered("gemm_wgmma", {{"M", 128}, {"N", 128}, {"K", 128}, {"TMA", 0}}));
  EXPECT_EQ(arg(cp_async, "A").alignment, 16);
  EXPECT_NE(arg(cp_async, "A").alignment_reason.find("16-byte cp.async copies"), std::string::npos);

  ModuleParams tma = module_params(lower_registered("gemm_wgmma", {{"M", 128}, {"N", 128}, {"K", 128}}));
  EXPECT_EQ(arg(tma, "A").alignment, 16);
  EXPECT_NE(arg(tma, "A").alignment_reason.find("TMA tensor map 'A_tmap'"), std::string::npos);
  EXPECT_EQ(arg(tma, "B").alignment, 16);
  EXPECT_EQ(arg(tma, "C").alignment, 16); // float4 stores

  ModuleParams im2col = module_params(
      lower_registered("conv2d_wgmma", {{"N", 2}, {"H", 8}, {"W", 8}, {"C", 64}, {"K", 64}}));
  EXPECT_NE(arg(im2col, "x").alignment_reason.find("TMA im2col tensor map"), std::string::npos);
}

// Split-K with A copied (PAD=1): three kernels, a padded copy of A (16 rows to a block of 64)
// and the partial sums as workspaces, laid out in one block at 256-byte boundaries.
TEST(RuntimeLaunch, WorkspacesOfSplitK) {
  LoweredModule m =
      lower_registered("gemm_wgmma", {{"M", 16}, {"N", 512}, {"K", 1024}, {"PAD", 1}});
  ASSERT_EQ(m.funcs.size(), 3u);
  ModuleParams p = module_params(m);
  ASSERT_EQ(p.args.size(), 3u);
  ASSERT_EQ(p.workspaces.size(), 2u);
  EXPECT_EQ(p.workspaces[0].name, "A_pad");
  EXPECT_EQ(p.workspaces[0].shape, (std::vector<int64_t>{64, 1024}));
  EXPECT_EQ(p.workspaces[1].name, "C_part");
  EXPECT_EQ(p.workspace_offsets[0], 0);
  EXPECT_EQ(p.workspace_offsets[1], 64 * 1024 * 2);
  EXPECT_EQ(p.workspace_bytes, 64 * 1024 * 2 + 2 * 16 * 512 * 4); // C_part: M rows a part
  for (int64_t o : p.workspace_offsets)
    EXPECT_EQ(o % kWorkspaceAlignment, 0);
  // B is read through a tensor map by the second kernel, A only copied by the first (rows of
  // 1024 halves, 16 bytes a thread).
  EXPECT_NE(arg(p, "B").alignment_reason.find("TMA tensor map"), std::string::npos);
  EXPECT_EQ(arg(p, "A").alignment, 16);
  EXPECT_EQ(arg(p, "A_pad").alignment, 16);

  // Workspaces of odd sizes still start at 256-byte boundaries.
  ModuleParams ragged = module_params(lower_registered("gemm_wgmma", {{"M", 100}, {"N", 99}, {"K", 77}}));
  ASSERT_EQ(ragged.workspaces.size(), 2u);
  EXPECT_EQ(ragged.workspace_offsets[1], (100 * 128 * 2 + 255) / 256 * 256);
}

TEST(RuntimeLaunch, CheckArgumentsNamesTheArgument) {
  ModuleParams p = module_params(lower_registered("gemm_wgmma", {{"M", 128}, {"N", 128}, {"K", 128}}));
  const CUdeviceptr base = 0x7f0000000000ull;
  std::vector<CUdeviceptr> ptrs = {base, base + 0x100000, base + 0x200000};
  EXPECT_NO_THROW(check_arguments(p, views(p, ptrs), "test"));

  expect_error([&] { check_arguments(p, {views(p, ptrs)[0]}, "test"); },
               {"test: ", "the module takes 3 arguments", "A: float16 [128, 128]",
                "C: float32 [128, 128]", "got 1"});

  auto with = [&](size_t i, auto change) {
    std::vector<TensorView> v = views(p, ptrs);
    change(v[i]);
    return v;
  };
  expect_error([&] { check_arguments(p, with(1, [](TensorView &v) { v.dtype = Float(32); }), "test"); },
               {"argument 1 ('B') must be float16 [128, 128]", "got float32"});
  expect_error([&] { check_arguments(p, with(2, [](TensorView &v) { v.shape = {128 * 128}; }), "test"); },
               {"argument 2 ('C')", "(rank 2)", "got rank 1 [16384]", "element count matches"});
  expect_error([&] { check_arguments(p, with(0, [](TensorView &v) { v.shape = {128, 64}; }), "test"); },
               {"argument 0 ('A') must be float16 [128, 128], got shape [128, 64]"});
  expect_error([&] { check_arguments(p, with(0, [](TensorView &v) { v.ptr = 0; }), "test"); },
               {"argument 0 ('A') is a null pointer"});
  // A is read through a TMA map: 16 bytes. An 8-byte aligned pointer is refused, saying why.
  expect_error([&] { check_arguments(p, with(0, [](TensorView &v) { v.ptr += 8; }), "test"); },
               {"argument 0 ('A') at 0x7f0000000008 is aligned to 8 bytes", "need 16",
                "TMA tensor map 'A_tmap'", "multiple of 16 bytes"});
  // C is stored as float4 (4 elements a lane): 16 bytes do, 8 do not.
  EXPECT_NO_THROW(check_arguments(p, with(2, [](TensorView &v) { v.ptr += 16; }), "test"));
  expect_error([&] { check_arguments(p, with(2, [](TensorView &v) { v.ptr += 8; }), "test"); },
               {"argument 2 ('C')", "aligned to 8 bytes", "need 16", "wgmma stores of 4 elements"});

  // Element alignment only: a float32 pointer off by 2 bytes.
  ModuleParams naive = module_params(lower_registered("gemm_naive", {{"M", 16}, {"N", 16}, {"K", 16}}));
  std::vector<TensorView> v = views(naive, ptrs);
  v[1].ptr += 4;
  EXPECT_NO_THROW(check_arguments(naive, v, "test"));
  v[1].ptr += 2;
  expect_error([&] { check_arguments(naive, v, "test"); },
               {"argument 1 ('B')", "aligned to 2 bytes", "need 4 (its element size)"});
}

// Outputs and workspaces written by the kernels share no byte with another argument: a launch
// that would overwrite its own inputs or results is refused. Inputs may alias each other.
TEST(RuntimeLaunch, CheckArgumentsRefusesOverlapsWithWrittenMemory) {
  ModuleParams p = module_params(lower_registered("gemm_wgmma", {{"M", 16}, {"N", 512}, {"K", 1024}}));
  ASSERT_GT(p.workspace_bytes, 0);
  EXPECT_FALSE(arg(p, "A").written);
  EXPECT_FALSE(arg(p, "B").written);
  EXPECT_TRUE(arg(p, "C").written);
  for (const ParamSpec &w : p.workspaces)
    EXPECT_TRUE(w.written) << w.name;
  const CUdeviceptr base = 0x7f0000000000ull;
  std::vector<CUdeviceptr> ptrs = {base, base + 0x100000, base + 0x200000};
  std::vector<TensorView> v = views(p, ptrs);
  EXPECT_NO_THROW(check_arguments(p, v, "test", base + 0x300000));

  std::vector<TensorView> w = v;
  w[2].ptr = base + 16 * 1024 * 2 - 256; // C's first bytes on A's last
  expect_error([&] { check_arguments(p, w, "test"); },
               {"argument 0 ('A') at [0x7f0000000000, 0x7f0000008000)",
                "argument 2 ('C') at [0x7f0000007f00,", "overlap", "the kernels write C",
                "give it separate memory"});
  w = v;
  w[0].ptr = w[1].ptr; // both inputs read from one buffer: fine
  EXPECT_NO_THROW(check_arguments(p, w, "test"));
  expect_error([&] { check_arguments(p, v, "test", base + 0x200000 + 16 * 512 * 4 - 256); },
               {"the workspace at [0x7f0000207f00,", "overlaps argument 2 ('C')",
                "memory of its own"});
}

// The checks come before anything needs a GPU: a wrong argument is reported as such on a
// machine without one, and right ones reach the driver (and, here, the missing GPU).
TEST(RuntimeLaunch, LaunchChecksArgumentsBeforeTheDevice) {
  const ScheduleEntry &e = find_schedule("gemm_naive");
  ScheduledProgram p = e.build(resolve_shape(e, {{"M", 16}, {"N", 16}, {"K", 16}}), Float(32));
  KernelCache::global().set_disk_enabled(false);
  Module m = build(p.schedule, p.args, Target::cuda("sm_80"));
  KernelCache::global().set_disk_enabled(true);
  EXPECT_EQ(m.params().args.size(), 3u);
  std::vector<TensorView> v = views(m.params(), {0x10000, 0x20000, 0x30000});
  v[2].dtype = Float(16);
  expect_error([&] { m.launch(v); }, {"Module::launch: argument 2 ('C') must be float32"});
  if (Device::available())
    return;
  v[2].dtype = Float(32);
  expect_error([&] { m.launch(v); }, {"running needs one"});
}

namespace {

#define SKIP_WITHOUT_GPU()                                                                         \
  if (!Device::available())                                                                        \
  GTEST_SKIP() << Device::unavailable_reason()

// Device memory from the driver directly, freed on every path out.
struct RawAlloc {
  CUdeviceptr ptr = 0;
  explicit RawAlloc(size_t bytes) {
    Device::get().make_current();
    TESSEL_CU(cuMemAlloc_v2, &ptr, bytes);
  }
  ~RawAlloc() {
    if (ptr)
      CudaDriver::instance().cuMemFree_v2(ptr);
  }
  RawAlloc(const RawAlloc &) = delete;
  RawAlloc &operator=(const RawAlloc &) = delete;
};

struct RawStream {
  CUstream stream = nullptr;
  RawStream() {
    Device::get().make_current();
    TESSEL_CU(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
  }
  ~RawStream() {
    if (stream)
      CudaDriver::instance().cuStreamDestroy_v2(stream);
  }
};

std::vector<std::byte> download(CUdeviceptr p, size_t bytes) {
  std::vector<std::byte> out(bytes);
  TESSEL_CU(cuMemcpyDtoH_v2, out.data(), p, bytes);
  return out;
}

// One registered schedule at one shape: Module::run on DeviceArrays, then launch() on
// cuMemAlloc'ed copies of the same inputs on a non-blocking stream of the caller's, with the
// Module's workspace and with one of the caller's (poisoned: the kernels may not rely on what
// it holds); the outputs must be the same bytes. Every copy and poison goes on the caller's
// stream: a non-blocking stream does not wait for cuMemcpy / cuMemset on the legacy default
// stream, and this test did once (issue 24: on an H200 the poison of C landed after the split-K
// GEMM's 3 kernels had written it, and C read back all 0xFF).
void expect_raw_launch_matches_run(const std::string &name, const ShapeParams &shape) {
  SCOPED_TRACE(name + " " + params_string(shape));
  const ScheduleEntry &e = find_schedule(name);
  ScheduledProgram p = e.build(resolve_shape(e, shape), e.dtypes.at(0));
  Module m = build(p.schedule, p.args);
  const ModuleParams &params = m.params();
  ASSERT_EQ(params.args.size(), p.args.size());

  std::vector<interp::HostBuffer> host;
  std::vector<DeviceArray> arrays;
  for (size_t i = 0; i < p.args.size(); ++i) {
    const ParamSpec &s = params.args[i];
    host.push_back(interp::HostBuffer::from_doubles(
        s.dtype, test::dyadic_values(size_t(s.numel()), 100 + i)));
    arrays.emplace_back(s.dtype, s.shape);
    if (i < p.num_inputs)
      arrays.back().copy_from_host(host.back().data(), arrays.back().bytes());
    else
      arrays.back().poison();
  }
  std::vector<const DeviceArray *> ptrs;
  for (const DeviceArray &a : arrays)
    ptrs.push_back(&a);
  m.run(ptrs);
  Device::get().synchronize();

  std::vector<std::unique_ptr<RawAlloc>> raw;
  std::vector<TensorView> views;
  for (size_t i = 0; i < p.args.size(); ++i) {
    const ParamSpec &s = params.args[i];
    raw.push_back(std::make_unique<RawAlloc>(size_t(s.bytes())));
    views.emplace_back(raw.back()->ptr, s.dtype, s.shape);
  }
  RawStream stream;
  const size_t workspace_bytes = size_t(std::max<int64_t>(params.workspace_bytes, 256));
  RawAlloc workspace(workspace_bytes);
  for (CUdeviceptr ws : {CUdeviceptr(0), workspace.ptr, CUdeviceptr(0), workspace.ptr}) {
    for (size_t i = 0; i < p.args.size(); ++i) {
      if (i < p.num_inputs)
        TESSEL_CU(cuMemcpyHtoDAsync_v2, views[i].ptr, host[i].data(), size_t(views[i].bytes()),
                  stream.stream);
      else
        TESSEL_CU(cuMemsetD8Async, views[i].ptr, 0xff, size_t(views[i].bytes()), stream.stream);
    }
    if (ws)
      TESSEL_CU(cuMemsetD8Async, ws, 0xff, workspace_bytes, stream.stream);
    m.launch(views, stream.stream, ws);
    TESSEL_CU(cuStreamSynchronize, stream.stream);
    for (size_t i = p.num_inputs; i < p.args.size(); ++i) {
      std::vector<std::byte> want(size_t(arrays[i].bytes()));
      arrays[i].copy_to_host(want.data(), arrays[i].bytes());
      EXPECT_EQ(download(views[i].ptr, want.size()), want)
          << "output " << params.args[i].name << (ws ? " (caller's workspace)" : "");
    }
  }
}

} // namespace

TEST(RuntimeLaunch, GpuRawPointersOnCallersStreamMatchRun) {
  SKIP_WITHOUT_GPU();
  expect_raw_launch_matches_run("gemm_naive", {{"M", 64}, {"N", 48}, {"K", 32}});
  expect_raw_launch_matches_run("gemm_wmma", {{"M", 128}, {"N", 128}, {"K", 64}});
  expect_raw_launch_matches_run("softmax", {{"R", 8}, {"C", 1024}});
  if (Device::get().arch() == "sm_90") {
    // TMA maps built from the caller's pointers; split-K and padded copies in workspaces.
    expect_raw_launch_matches_run("gemm_wgmma", {{"M", 256}, {"N", 256}, {"K", 256}});
    expect_raw_launch_matches_run("gemm_wgmma", {{"M", 16}, {"N", 512}, {"K", 1024}});
    expect_raw_launch_matches_run("gemm_wgmma", {{"M", 100}, {"N", 99}, {"K", 77}});
    expect_raw_launch_matches_run("conv2d_wgmma",
                                  {{"N", 2}, {"H", 8}, {"W", 8}, {"C", 64}, {"K", 64}});
  }
}

// What the driver knows of the pointers: too small an allocation, host memory, a workspace too
// small; each refused naming the argument.
TEST(RuntimeLaunch, GpuDeviceMemoryChecks) {
  SKIP_WITHOUT_GPU();
  const ScheduleEntry &e = find_schedule("gemm_naive");
  ScheduledProgram p = e.build(resolve_shape(e, {{"M", 64}, {"N", 64}, {"K", 64}}), Float(32));
  Module m = build(p.schedule, p.args);
  const int64_t bytes = 64 * 64 * 4;
  RawAlloc a(bytes), b(bytes), c(bytes), small(bytes / 2);
  std::vector<TensorView> v = views(m.params(), {a.ptr, b.ptr, c.ptr});
  m.launch(v);
  Device::get().synchronize();

  std::vector<TensorView> w = v;
  w[1].ptr = small.ptr;
  expect_error([&] { m.launch(w); },
               {"argument 1 ('B')", "needs 16384 bytes", "holds only", "from the pointer on"});
  w = v;
  w[2].ptr = c.ptr + 64; // inside the allocation, but running past its end
  expect_error([&] { m.launch(w); }, {"argument 2 ('C')", "needs 16384 bytes", "holds only"});
  std::vector<float> on_host(64 * 64);
  w = v;
  w[0].ptr = reinterpret_cast<CUdeviceptr>(on_host.data());
  expect_error([&] { m.launch(w); }, {"argument 0 ('A')", "not memory the CUDA driver knows"});

  // gemm_wgmma's split-K on Hopper needs a workspace; a too small one of the caller's is refused.
  if (Device::get().arch() != "sm_90")
    return;
  const ScheduleEntry &g = find_schedule("gemm_wgmma");
  ScheduledProgram q = g.build(resolve_shape(g, {{"M", 16}, {"N", 512}, {"K", 1024}}), Float(16));
  Module split = build(q.schedule, q.args);
  ASSERT_GT(split.params().workspace_bytes, 0);
  RawAlloc A(16 * 1024 * 2), B(1024 * 512 * 2), C(16 * 512 * 4),
      ws(size_t(split.params().workspace_bytes - 256));
  std::vector<TensorView> sv = views(split.params(), {A.ptr, B.ptr, C.ptr});
  const std::string needs = "needs " + std::to_string(split.params().workspace_bytes) + " bytes";
  expect_error([&] { split.launch(sv, nullptr, ws.ptr); }, {"the workspace", needs.c_str()});
  expect_error([&] { split.launch(sv, nullptr, ws.ptr + 16); }, {"the workspace", "aligned to 16"});
}
