// Ahead-of-time export (runtime/Export.h): the architectures it accepts and refuses, the header
// it writes (only the driver API; the shapes, kernels, launch configurations, tensor maps and
// workspaces baked in; the cubins embedded byte for byte), and on a GPU (*Gpu*, skipped without
// one) the header's launch, built into tests/export/export_main.cpp with the host compiler,
// against Module::run on the same inputs. tests/export/run.sh compiles exported headers in CI.
#include "TestUtil.h"

#include "compiler/lower/Lower.h"
#include "runtime/Build.h"
#include "runtime/Device.h"
#include "runtime/DeviceArray.h"
#include "runtime/Export.h"
#include "runtime/interp/Executor.h"
#include "schedules/Registry.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace tessel;
using tessel::test::count_of;
using tessel::test::expect_error;

namespace {

struct Program {
  ScheduledProgram program;
  LoweredModule lowered;
};

Program lower_registered(const std::string &name, const ShapeParams &shape,
                         DataType dtype = DataType()) {
  const ScheduleEntry &e = find_schedule(name);
  ScheduledProgram p = e.build(resolve_shape(e, shape), dtype.bits() ? dtype : e.dtypes.at(0));
  LowerOptions options;
  options.name = name;
  LoweredModule m = lower(p.schedule, p.args, options);
  return {std::move(p), std::move(m)};
}

std::string read_file(const std::filesystem::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The bytes of the cubin array `cubin_<i>` in a header.
std::string embedded_cubin(const std::string &header, int i) {
  std::string start = "cubin_" + std::to_string(i) + "[";
  size_t at = header.find(start);
  if (at == std::string::npos)
    return "";
  size_t open = header.find('{', at), close = header.find('}', open);
  std::string out;
  std::regex byte("0x([0-9a-f]{2})");
  std::string body = header.substr(open, close - open);
  for (std::sregex_iterator it(body.begin(), body.end(), byte), end; it != end; ++it)
    out += char(std::stoi((*it)[1].str(), nullptr, 16));
  return out;
}

std::filesystem::path fresh_dir(const std::string &name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("tessel_export_test_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  return dir;
}

} // namespace

TEST(Export, ArchList) {
  EXPECT_EQ(parse_arch_list("sm_80,sm_90a"), (std::vector<std::string>{"sm_80", "sm_90a"}));
  EXPECT_EQ(parse_arch_list("sm_90,sm_90,sm_100a"), (std::vector<std::string>{"sm_90", "sm_100a"}));
  expect_error([] { parse_arch_list("sm80"); }, {"'sm80' is not an architecture", "sm_90a"});
  expect_error([] { parse_arch_list("sm_8"); }, {"'sm_8' is not an architecture"});
  expect_error([] { parse_arch_list("sm_90b"); }, {"'sm_90b' is not an architecture"});
  expect_error([] { parse_arch_list("compute_90"); }, {"'compute_90'"});
  expect_error([] { parse_arch_list(""); }, {"no architecture"});
}

TEST(Export, RefusesAnArchTheKernelsCannotRunOn) {
  Program wgmma = lower_registered("gemm_wgmma", {{"M", 128}, {"N", 128}, {"K", 128}});
  expect_error([&] { compile_for_export({{"sm_80", wgmma.lowered}}); },
               {"export for sm_80", "wgmma", "the target is sm_80"});
  // Any bad architecture of several is named.
  expect_error([&] { compile_for_export({{"sm_90a", wgmma.lowered}, {"sm_86", wgmma.lowered}}); },
               {"export for sm_86"});
  // sm_90 and sm_90a of a wgmma kernel are one cubin, for sm_90a.
  std::vector<ExportedVariant> v =
      compile_for_export({{"sm_90", wgmma.lowered}, {"sm_90a", wgmma.lowered}});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].arch, "sm_90a");
  EXPECT_EQ(v[0].requested_arch, "sm_90");
  EXPECT_FALSE(v[0].compiled.cubin.empty());

  // One header launches one signature.
  Program other = lower_registered("gemm_wgmma", {{"M", 128}, {"N", 256}, {"K", 128}});
  Program wmma = lower_registered("gemm_wmma", {{"M", 128}, {"N", 128}, {"K", 64}});
  expect_error([&] { compile_for_export({{"sm_80", wmma.lowered}, {"sm_90a", other.lowered}}); },
               {"the module for sm_90a takes (A: float16 [128, 128], B: float16 [128, 256]",
                "export them separately"});
}

TEST(Export, HeaderOfOneKernelForTwoArchs) {
  Program p = lower_registered("gemm_wmma", {{"M", 128}, {"N", 128}, {"K", 64}});
  std::vector<ExportedVariant> v = compile_for_export({{"sm_80", p.lowered}, {"sm_90", p.lowered}});
  ASSERT_EQ(v.size(), 2u);
  ExportOptions o;
  o.name = "gemm_wmma";
  o.num_inputs = 2;
  o.description = {"a GEMM"};
  std::string h = export_header(o, v);
  // Only the driver API and the standard library.
  std::regex include("#include ([^\n]*)");
  for (std::sregex_iterator it(h.begin(), h.end(), include), end; it != end; ++it)
    EXPECT_TRUE(std::regex_match((*it)[1].str(), std::regex("<(cuda\\.h|cstddef|cstdint|cstdio|mutex)>")))
        << (*it)[0];
  EXPECT_EQ(h.find("tessel::"), std::string::npos);
  EXPECT_NE(h.find("// a GEMM\n"), std::string::npos);
  EXPECT_NE(h.find("inline CUresult gemm_wmma_launch(CUdeviceptr A, CUdeviceptr B, CUdeviceptr C, "
                   "CUstream stream) {"),
            std::string::npos);
  EXPECT_NE(h.find("inline CUresult gemm_wmma_launch_with_workspace(CUdeviceptr A, CUdeviceptr B, "
                   "CUdeviceptr C, CUdeviceptr workspace, CUstream stream) {"),
            std::string::npos);
  EXPECT_NE(h.find("inline constexpr int64_t gemm_wmma_A_shape[] = {128, 64};"), std::string::npos);
  EXPECT_NE(h.find("inline constexpr size_t gemm_wmma_C_bytes = 65536;"), std::string::npos);
  EXPECT_NE(h.find("inline constexpr size_t gemm_wmma_C_alignment = 32;"), std::string::npos);
  EXPECT_NE(h.find("inline constexpr size_t gemm_wmma_workspace_bytes = 0;"), std::string::npos);
  EXPECT_NE(h.find("inline constexpr int gemm_wmma_num_inputs = 2;"), std::string::npos);
  EXPECT_NE(h.find("{\"C\", \"float32\", 4, 2, {128, 128}, 65536, 32, false},"), std::string::npos);
  // The launch configuration, baked in.
  const LaunchConfig &c = p.lowered.funcs[0].launch;
  std::string kernel = "{\"gemm_wmma\", {" + std::to_string(c.grid[0]) + ", " +
                       std::to_string(c.grid[1]) + ", " + std::to_string(c.grid[2]) + "}, {" +
                       std::to_string(c.block[0]) + ", " + std::to_string(c.block[1]) + ", " +
                       std::to_string(c.block[2]) + "}, " +
                       std::to_string(c.dynamic_shared_bytes) + ", 0, 0},";
  EXPECT_EQ(count_of(h, kernel), 2) << kernel;
  // Both cubins, byte for byte; sm_80 runs on 8.x, sm_90 on 9.x.
  EXPECT_EQ(embedded_cubin(h, 0), v[0].compiled.cubin);
  EXPECT_EQ(embedded_cubin(h, 1), v[1].compiled.cubin);
  EXPECT_NE(h.find("{\"sm_80\", 8, 0, false, cubin_0"), std::string::npos);
  EXPECT_NE(h.find("{\"sm_90\", 9, 0, false, cubin_1"), std::string::npos);
  EXPECT_EQ(h.find("maps_0"), std::string::npos);

  ExportOptions bad = o;
  bad.name = "gemm-wmma";
  expect_error([&] { export_header(bad, v); }, {"'gemm-wmma' is not a C identifier"});
}

TEST(Export, HeaderOfSplitKWithTensorMapsAndWorkspaces) {
  // A's 16 rows in a block of 64, copied (PAD=1): a padded copy, a workspace.
  Program p = lower_registered("gemm_wgmma", {{"M", 16}, {"N", 512}, {"K", 1024}, {"PAD", 1}});
  ASSERT_EQ(p.lowered.funcs.size(), 3u);
  std::vector<ExportedVariant> v = compile_for_export({{"sm_90a", p.lowered}});
  ExportOptions o;
  o.name = "splitk";
  std::string h = export_header(o, v);
  ModuleParams params = module_params(p.lowered);
  EXPECT_NE(h.find("inline constexpr size_t splitk_workspace_bytes = " +
                   std::to_string(params.workspace_bytes) + ";"),
            std::string::npos);
  EXPECT_NE(h.find("inline constexpr size_t workspace_offsets_0[] = {0, " +
                   std::to_string(params.workspace_offsets[1]) + "};"),
            std::string::npos);
  EXPECT_NE(h.find("{\"sm_90a\", 9, 0, true, cubin_0"), std::string::npos);
  // The kernels in order, the second with > 48 KiB of dynamic shared memory and two maps.
  size_t pad = h.find("{\"gemm_wgmma_A_pad\", "), part = h.find("{\"gemm_wgmma_C_part\", "),
         sum = h.find("{\"gemm_wgmma\", ");
  ASSERT_NE(pad, std::string::npos);
  EXPECT_LT(pad, part);
  EXPECT_LT(part, sum);
  const LaunchConfig &c = p.lowered.funcs[1].launch;
  EXPECT_GT(c.dynamic_shared_bytes, 48 * 1024);
  EXPECT_NE(h.find("}, " + std::to_string(c.dynamic_shared_bytes) + ", 0, 2},"), std::string::npos);
  EXPECT_NE(h.find("cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"),
            std::string::npos);
  // The maps' encodings, as the runtime encodes them: B (parameter 1) and A_pad (parameter 3,
  // the first workspace).
  for (const TensorMapParam &m : p.lowered.funcs[1].tensor_maps) {
    TensorMapEncoding e = tensor_map_encoding(m, Float(16));
    std::string dims = "{";
    for (size_t d = 0; d < 5; ++d)
      dims += (d ? ", " : "") + std::to_string(d < e.dims.size() ? e.dims[d] : 0);
    dims += "}";
    EXPECT_NE(h.find("    {" + std::to_string(m.arg) +
                     ", false, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, " + dims),
              std::string::npos)
        << m.var.name();
  }
  EXPECT_NE(h.find("cuTensorMapEncodeTiled(&maps[m]"), std::string::npos);
  EXPECT_NE(h.find("cuMemAllocAsync(&workspace"), std::string::npos);
  EXPECT_EQ(embedded_cubin(h, 0), v[0].compiled.cubin);
}

TEST(Export, WritesTheHeaderAndTheCubins) {
  Program p = lower_registered("gemm_naive", {{"M", 16}, {"N", 16}, {"K", 16}}, Float(32));
  std::vector<ExportedVariant> v = compile_for_export({{"sm_80", p.lowered}});
  ExportOptions o;
  o.name = "naive";
  auto dir = fresh_dir("writes");
  std::vector<std::string> written = write_export(dir.string(), o, v);
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[0], (dir / "naive.sm_80.cubin").string());
  EXPECT_EQ(written[1], (dir / "naive.h").string());
  EXPECT_EQ(read_file(dir / "naive.sm_80.cubin"), v[0].compiled.cubin);
  EXPECT_EQ(read_file(dir / "naive.h"), export_header(o, v));
  std::filesystem::remove_all(dir);
}

// A disk that fills up midway (here a file-size limit smaller than the header, in a child
// process) fails the export with a tessel::Error, and leaves nothing behind: no cubin without
// its header, no temporary, not even the directory it created. It used to abort (LLVM's
// "IO failure on output stream") with the cubin written.
TEST(Export, FullDiskWritesNothing) {
  Program p = lower_registered("gemm_naive", {{"M", 16}, {"N", 16}, {"K", 16}}, Float(32));
  std::vector<ExportedVariant> v = compile_for_export({{"sm_80", p.lowered}});
  ExportOptions o;
  o.name = "naive";
  const std::string header = export_header(o, v);
  ASSERT_GT(header.size(), v[0].compiled.cubin.size() + 4096);
  auto dir = fresh_dir("full");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN); // a write past the limit fails with EFBIG instead
    rlimit limit{rlim_t(v[0].compiled.cubin.size() + 4096), rlim_t(v[0].compiled.cubin.size() + 4096)};
    int status = 2;
    if (::setrlimit(RLIMIT_FSIZE, &limit) == 0) {
      try {
        write_export(dir.string(), o, v);
        status = 3; // written in spite of the limit
      } catch (const Error &e) {
        std::string what = e.what();
        status = what.find("naive.h' failed: File too large; nothing was written") !=
                         std::string::npos
                     ? 0
                     : 4;
        if (status)
          std::fprintf(stderr, "%s\n", e.what());
      }
    }
    ::_exit(status);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: no limit, 3: written anyway, 4: another message";
  EXPECT_FALSE(std::filesystem::exists(dir)) << "nothing left behind";
  std::filesystem::remove_all(dir);
}

namespace {

// Runs `command` through the shell; its output (stdout and stderr) in `output`.
int run_command(const std::string &command, std::string *output) {
  std::string log = std::filesystem::temp_directory_path() /
                    ("tessel_export_test_" + std::to_string(::getpid()) + ".log");
  int status = std::system((command + " >" + log + " 2>&1").c_str());
  *output = read_file(log);
  std::filesystem::remove(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string env_or(const char *name, const char *fallback) {
  const char *v = std::getenv(name);
  return v && *v ? v : fallback;
}

// Exports `name` at `shape` for `archs` into a fresh directory and builds export_main.cpp on its
// header; returns the program's path ("" after a failure, reported).
std::string build_exported(const std::string &name, const ShapeParams &shape,
                           const std::vector<std::string> &archs, const std::string &tag,
                           Program *program) {
  *program = lower_registered(name, shape);
  std::vector<ExportTarget> targets;
  for (const std::string &a : archs)
    targets.push_back({a, program->lowered});
  ExportOptions o;
  o.name = name;
  o.num_inputs = program->program.num_inputs;
  auto dir = fresh_dir(tag);
  write_export(dir.string(), o, compile_for_export(targets));
  std::string cxx = env_or("TESSEL_TEST_CXX", TESSEL_TEST_CXX);
  std::string main_cpp = env_or("TESSEL_EXPORT_MAIN", TESSEL_EXPORT_MAIN);
  std::string libcuda = env_or("TESSEL_LIBCUDA", TESSEL_LIBCUDA_STUB);
  // The stub found where the tests were built may not be where they run (the GPU machine keeps
  // its toolkit's stubs elsewhere): link the driver itself there, which the GPU test has.
  if (!libcuda.empty() && libcuda[0] == '/' && !std::filesystem::exists(libcuda))
    libcuda = "-l:libcuda.so.1";
  std::string exe = (dir / "export_main").string();
  std::string command = cxx + " -std=c++17 -O1 -I " + dir.string() + " -I " + cuda_include_dir() +
                        " '-DEXPORT_HEADER=\"" + name + ".h\"' -DEXPORT_NAME=" + name + " " +
                        main_cpp + " -o " + exe + " " + (libcuda.empty() ? "-lcuda" : libcuda);
  std::string out;
  int rc = run_command(command, &out);
  EXPECT_EQ(rc, 0) << command << "\n" << out;
  return rc == 0 ? exe : "";
}

bool has_compiler() {
  std::string out;
  return run_command(env_or("TESSEL_TEST_CXX", TESSEL_TEST_CXX) + " --version", &out) == 0 &&
         std::filesystem::exists(env_or("TESSEL_EXPORT_MAIN", TESSEL_EXPORT_MAIN));
}

void expect_header_matches_module(const std::string &name, const ShapeParams &shape) {
  SCOPED_TRACE(name);
  Program p;
  std::string exe = build_exported(name, shape, {Device::get().arch()}, name, &p);
  if (exe.empty())
    return;
  auto data = std::filesystem::path(exe).parent_path();
  Module m = build(p.lowered);
  const ModuleParams &params = m.params();
  std::vector<DeviceArray> arrays;
  std::vector<const DeviceArray *> ptrs;
  for (size_t i = 0; i < params.args.size(); ++i) {
    const ParamSpec &s = params.args[i];
    arrays.emplace_back(s.dtype, s.shape);
    if (i < p.program.num_inputs) {
      interp::HostBuffer b = interp::HostBuffer::from_doubles(
          s.dtype, test::dyadic_values(size_t(s.numel()), 7 + i));
      arrays.back().copy_from_host(b.data(), arrays.back().bytes());
      std::ofstream(data / ("arg" + std::to_string(i) + ".bin"), std::ios::binary)
          .write(reinterpret_cast<const char *>(b.data()), std::streamsize(s.bytes()));
    } else {
      arrays.back().poison();
    }
  }
  for (const DeviceArray &a : arrays)
    ptrs.push_back(&a);
  m.run(ptrs);
  Device::get().synchronize();
  for (const char *mode : {"own", "caller"}) {
    std::string out;
    ASSERT_EQ(run_command(exe + " " + data.string() + " " + mode, &out), 0) << out;
    for (size_t i = p.program.num_inputs; i < params.args.size(); ++i) {
      std::string want(size_t(arrays[i].bytes()), '\0');
      arrays[i].copy_to_host(want.data(), arrays[i].bytes());
      EXPECT_TRUE(read_file(data / ("arg" + std::to_string(i) + ".out")) == want)
          << "output " << params.args[i].name << " differs from Module::run's (" << mode
          << " workspace)";
    }
  }
  std::filesystem::remove_all(data);
}

} // namespace

// The exported header's launch (built by the host compiler against the driver alone) gives the
// same bytes as Module::run on the same inputs: one kernel; on Hopper TMA maps (tiled and
// im2col), split-K's three kernels and workspaces (the header's own, stream-ordered, and the
// caller's). A header without a cubin for the device says so.
TEST(Export, GpuHeaderLaunchMatchesModule) {
  if (!Device::available())
    GTEST_SKIP() << Device::unavailable_reason();
  if (!has_compiler())
    GTEST_SKIP() << "no host compiler (TESSEL_TEST_CXX) or export_main.cpp (TESSEL_EXPORT_MAIN)";
  expect_header_matches_module("gemm_wmma", {{"M", 128}, {"N", 128}, {"K", 64}});
  expect_header_matches_module("softmax", {{"R", 8}, {"C", 1024}});
  bool hopper = Device::get().arch() == "sm_90";
  if (hopper) {
    expect_header_matches_module("gemm_wgmma", {{"M", 256}, {"N", 256}, {"K", 256}});
    expect_header_matches_module("gemm_wgmma", {{"M", 16}, {"N", 512}, {"K", 1024}});
    expect_header_matches_module("gemm_wgmma", {{"M", 100}, {"N", 99}, {"K", 77}});
    expect_header_matches_module("conv2d_wgmma",
                                 {{"N", 2}, {"H", 8}, {"W", 8}, {"C", 64}, {"K", 64}});
  }
  // Only a cubin of another major version: refused at launch, naming the device's.
  Program p;
  std::string other = Device::get().compute_capability() / 10 == 8 ? "sm_90" : "sm_80";
  std::string exe = build_exported("gemm_wmma", {{"M", 128}, {"N", 128}, {"K", 64}}, {other},
                                   "other_arch", &p);
  ASSERT_FALSE(exe.empty());
  auto data = std::filesystem::path(exe).parent_path();
  for (size_t i = 0; i < p.program.num_inputs; ++i)
    std::ofstream(data / ("arg" + std::to_string(i) + ".bin"), std::ios::binary)
        << std::string(size_t(module_params(p.lowered).args[i].bytes()), '\0');
  std::string out;
  EXPECT_EQ(run_command(exe + " " + data.string() + " own", &out), 1) << out;
  int cc = Device::get().compute_capability();
  std::string says = "no cubin runs on this device (compute capability " + std::to_string(cc / 10) +
                     "." + std::to_string(cc % 10) + "); the header has " + other;
  EXPECT_NE(out.find(says), std::string::npos) << out;
  std::filesystem::remove_all(data);
}
