// NVRTC compilation (runtime/Nvrtc.h). Needs no GPU: these run in CI.
#include "compiler/support/Error.h"
#include "runtime/Nvrtc.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace tessel;

namespace {

const char *kSaxpy = R"(
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
  __shared__ float tile[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (i < n)
    y[i] = a * tile[threadIdx.x] + y[i];
}
)";

// One 16x16x16 WMMA tile in half precision with float accumulation.
const char *kWmma = R"(
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;
extern "C" __global__ void wmma_tile(const __half *a, const __half *b, float *c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
extern "C" __global__ void hadd(const __half *a, const __half *b, __half *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    c[i] = __hadd(a[i], b[i]);
}
)";

CompiledKernel compile(const char *src, const std::string &arch) {
  return nvrtc_compile(src, nvrtc_options(CompileOptions{arch, {}}));
}

} // namespace

TEST(RuntimeNvrtc, OptionsHaveArchStdIncludeAndPtxasReport) {
  std::vector<std::string> o = nvrtc_options(CompileOptions{"sm_80", {"--use_fast_math"}});
  bool no_cache = nvrtc_version() >= 12090;
  ASSERT_EQ(o.size(), no_cache ? 6u : 5u);
  EXPECT_EQ(o[0], "--gpu-architecture=sm_80");
  EXPECT_EQ(o[1], "-std=c++17");
  EXPECT_EQ(o[2], "--include-path=" + cuda_include_dir());
  EXPECT_EQ(o[3], "--ptxas-options=-v");
  if (no_cache) {
    EXPECT_EQ(o[4], "--no-cache");
  }
  EXPECT_EQ(o.back(), "--use_fast_math");
  EXPECT_GT(nvrtc_version(), 0);
}

TEST(RuntimeNvrtc, IncludeDirectoryFromEnvironment) {
  setenv("TESSEL_CUDA_INCLUDE", "/opt/somewhere/include", 1);
  std::string dir = cuda_include_dir();
  unsetenv("TESSEL_CUDA_INCLUDE");
  EXPECT_EQ(dir, "/opt/somewhere/include");
  EXPECT_EQ(cuda_include_dir(), TESSEL_CUDA_INCLUDE_DIR);
}

TEST(RuntimeNvrtc, CompilesForSm80AndSm90WithStats) {
  for (std::string arch : {"sm_80", "sm_90"}) {
    int64_t before = nvrtc_invocation_count();
    CompiledKernel k = compile(kSaxpy, arch);
    EXPECT_EQ(nvrtc_invocation_count(), before + 1);
    EXPECT_EQ(k.arch, arch);
    ASSERT_GT(k.cubin.size(), 4u);
    EXPECT_EQ(k.cubin.substr(0, 4), "\x7f" "ELF") << "a cubin is an ELF image";
    EXPECT_NE(k.log.find("Used"), std::string::npos) << "ptxas report missing from log:\n" << k.log;
    const KernelStats *s = k.stats("saxpy");
    ASSERT_NE(s, nullptr) << k.log;
    EXPECT_GT(s->registers, 0);
    EXPECT_EQ(s->static_shared_bytes, 256 * 4);
    EXPECT_EQ(s->spill_store_bytes, 0);
    EXPECT_EQ(s->spill_load_bytes, 0);
  }
}

TEST(RuntimeNvrtc, CompilesFp16AndWmmaForSm80AndSm90) {
  for (std::string arch : {"sm_80", "sm_90"}) {
    CompiledKernel k = compile(kWmma, arch);
    ASSERT_EQ(k.kernels.size(), 2u) << k.log;
    ASSERT_NE(k.stats("wmma_tile"), nullptr);
    EXPECT_GT(k.stats("wmma_tile")->registers, 0);
    ASSERT_NE(k.stats("hadd"), nullptr);
  }
}

// With a driver present, NVRTC's own cache (12.9+) would return later compiles without the
// ptxas report; this runs meaningfully only on a machine with a GPU.
TEST(RuntimeNvrtc, RepeatedCompileKeepsPtxasReport) {
  for (int i = 0; i < 3; ++i) {
    CompiledKernel k = compile(kSaxpy, "sm_90");
    ASSERT_NE(k.stats("saxpy"), nullptr) << "compile " << i << ", log:\n" << k.log;
  }
}

TEST(RuntimeNvrtc, SyntaxErrorGivesLogAndNumberedListing) {
  const char *bad = "extern \"C\" __global__ void broken(float *x) {\n"
                    "  x[threadIdx.x] = 1.0f\n"
                    "}\n";
  try {
    compile(bad, "sm_90");
    FAIL() << "expected a tessel::Error";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("NVRTC_ERROR_COMPILATION"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tessel_kernel.cu(3)"), std::string::npos) << "NVRTC's log:\n" << msg;
    EXPECT_NE(msg.find("expected a \";\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("   2    x[threadIdx.x] = 1.0f"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--gpu-architecture=sm_90"), std::string::npos) << msg;
  }
}

TEST(RuntimeNvrtc, VirtualArchitectureIsRejected) {
  EXPECT_THROW(compile(kSaxpy, "compute_90"), Error);
}

TEST(RuntimeNvrtc, ParsesPtxasReport) {
  const char *log = "ptxas info    : 0 bytes gmem\n"
                    "ptxas info    : Compiling entry function 'k1' for 'sm_90'\n"
                    "ptxas info    : Function properties for helper\n"
                    "ptxas         .     64 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
                    "ptxas info    : Function properties for k1\n"
                    "ptxas         .     16 bytes stack frame, 12 bytes spill stores, 20 bytes spill loads\n"
                    "ptxas info    : Used 255 registers, used 1 barriers, 49152 bytes smem\n"
                    "ptxas info    : Compiling entry function 'k2' for 'sm_80'\n"
                    "ptxas info    : Function properties for k2\n"
                    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                    "ptxas info    : Used 32 registers, 1024 bytes smem, 380 bytes cmem[0]\n";
  std::vector<KernelStats> s = parse_ptxas_report(log);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "k1");
  EXPECT_EQ(s[0].registers, 255);
  EXPECT_EQ(s[0].static_shared_bytes, 49152);
  EXPECT_EQ(s[0].stack_bytes, 16);
  EXPECT_EQ(s[0].spill_store_bytes, 12);
  EXPECT_EQ(s[0].spill_load_bytes, 20);
  EXPECT_EQ(s[1].name, "k2");
  EXPECT_EQ(s[1].registers, 32);
  EXPECT_EQ(s[1].static_shared_bytes, 1024);
  EXPECT_EQ(s[1].spill_store_bytes, 0);
}
