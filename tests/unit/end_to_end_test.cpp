// Registered schedules lowered through the whole pipeline, run by the CPU executor with GPU
// semantics against a float64 reference, and compiled by NVRTC for sm_80 and sm_90.
#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Nvrtc.h"
#include "runtime/interp/Executor.h"
#include "schedules/Conv2dTensorCoreTutorial.h"
#include "schedules/Gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace tessel;

namespace {

// Values exactly representable in float16, so fp16 and fp32 inputs hold the same numbers.
std::vector<double> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(-64, 64);
  std::vector<double> v(n);
  for (double &x : v) {
    int k = d(rng);
    x = (k == 0 ? 1 : k) / 32.0;
  }
  return v;
}

void check_gemm(ScheduledProgram (*schedule)(int64_t, int64_t, int64_t, DataType), int64_t M,
                int64_t N, int64_t K, DataType dtype) {
  ScheduledProgram p = schedule(M, N, K, dtype);
  LoweredModule m = lower(p.schedule, p.args);
  std::vector<double> a = random_values(M * K, 1), b = random_values(K * N, 2);
  interp::HostBuffer A = interp::HostBuffer::from_doubles(dtype, a);
  interp::HostBuffer B = interp::HostBuffer::from_doubles(dtype, b);
  // Poisoned output: every element must be written.
  interp::HostBuffer C = interp::HostBuffer::from_doubles(Float(32), std::vector<double>(M * N, NAN));
  interp::execute(m.funcs[0], {&A, &B, &C});
  std::vector<double> c = C.to_doubles();
  // Products of these inputs are exact in fp32 and sums of K of them stay exact below 2^24
  // units of 2^-10, so the result must match the float64 reference exactly.
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k)
        ref += a[i * K + k] * b[k * N + j];
      ASSERT_EQ(c[i * N + j], ref) << "C[" << i << ", " << j << "] with M=" << M << " N=" << N
                                   << " K=" << K << " " << dtype;
    }
}

void check_compiles(const LoweredModule &m) {
  std::string src = codegen_cuda(m);
  for (const char *arch : {"sm_80", "sm_90"}) {
    CompileOptions o;
    o.arch = arch;
    CompiledKernel k = nvrtc_compile(src, nvrtc_options(o), m.funcs[0].name + ".cu");
    EXPECT_FALSE(k.cubin.empty()) << arch;
  }
}

} // namespace

TEST(EndToEnd, GemmNaiveOnCpuExecutor) {
  check_gemm(gemm_naive, 64, 48, 32, Float(32));
  check_gemm(gemm_naive, 50, 37, 29, Float(32));
  check_gemm(gemm_naive, 33, 20, 17, Float(16));
}

TEST(EndToEnd, GemmSharedOnCpuExecutor) {
  check_gemm(gemm_shared, 128, 128, 128, Float(32));
  check_gemm(gemm_shared, 100, 70, 40, Float(32));
  check_gemm(gemm_shared, 64, 64, 48, Float(16));
  check_gemm(gemm_shared, 65, 63, 17, Float(16));
}

TEST(EndToEnd, RegisteredSchedulesCompileWithNvrtc) {
  for (const auto &[name, entry] : schedule_registry()) {
    SCOPED_TRACE(name);
    ScheduledProgram p = entry.build(entry.default_shape, entry.dtypes[0]);
    check_compiles(lower(p.schedule, p.args));
  }
}
