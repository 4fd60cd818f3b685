// The driver, devices, arrays, launches and timing. Tests named *Gpu* skip without a GPU; the
// others check the no-GPU behaviour and run everywhere.
#include "TestUtil.h"

#include "compiler/support/Error.h"
#include "runtime/CudaDriver.h"
#include "runtime/CudaModule.h"
#include "runtime/Device.h"
#include "runtime/DeviceArray.h"
#include "runtime/Half.h"
#include "runtime/KernelCache.h"
#include "runtime/Timer.h"

#include <gtest/gtest.h>

#include <chrono>

#include <cmath>
#include <random>

using namespace tessel;

namespace {

#define SKIP_WITHOUT_GPU()                                                                         \
  if (!Device::available())                                                                        \
  GTEST_SKIP() << Device::unavailable_reason()

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -4.f, float hi = 4.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

// Test kernels build through a memory-only cache: tests must not write to the user's home.
KernelCache &test_cache() {
  static KernelCache cache("");
  return cache;
}

CudaModule build(const char *src) { return CudaModule::build(src, {}, nullptr, &test_cache()); }

LaunchConfig linear(int64_t n, int64_t block, int64_t dynamic_smem = 0) {
  LaunchConfig c;
  c.grid = {(n + block - 1) / block, 1, 1};
  c.block = {block, 1, 1};
  c.dynamic_shared_bytes = dynamic_smem;
  return c;
}

const char *kVectorAdd = R"(
#include <cuda_fp16.h>
extern "C" __global__ void add_f32(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    c[i] = a[i] + b[i];
}
extern "C" __global__ void add_f16(const __half *a, const __half *b, __half *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    c[i] = __hadd(a[i], b[i]);
}
)";

// Each block reverses its 24576-float (96 KiB) slice through dynamic shared memory.
const char *kReverse = R"(
extern "C" __global__ void reverse_blocks(const float *in, float *out, int per_block) {
  extern __shared__ float buf[];
  const float *src = in + (size_t)blockIdx.x * per_block;
  for (int i = threadIdx.x; i < per_block; i += blockDim.x)
    buf[i] = src[i];
  __syncthreads();
  float *dst = out + (size_t)blockIdx.x * per_block;
  for (int i = threadIdx.x; i < per_block; i += blockDim.x)
    dst[i] = buf[per_block - 1 - i];
}
)";

} // namespace

TEST(RuntimeDevice, MissingDriverLibraryIsAStateWithAReason) {
  std::unique_ptr<CudaDriver> d = CudaDriver::open("libtessel-no-such-driver.so.1");
  EXPECT_FALSE(d->available());
  EXPECT_NE(d->reason().find("no CUDA driver found"), std::string::npos) << d->reason();
  EXPECT_NE(d->reason().find("libtessel-no-such-driver.so.1"), std::string::npos) << d->reason();
}

TEST(RuntimeDevice, WithoutGpuUsingTheDeviceIsAClearError) {
  if (Device::available())
    GTEST_SKIP() << "a GPU is present (" << Device::get().name() << ")";
  EXPECT_EQ(Device::count(), 0);
  EXPECT_FALSE(Device::unavailable_reason().empty());
  try {
    Device::get();
    FAIL() << "expected a tessel::Error";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(Device::unavailable_reason()), std::string::npos) << msg;
    EXPECT_NE(msg.find("running needs one"), std::string::npos) << msg;
  }
  EXPECT_THROW(DeviceArray(Float(32), {16}), Error);
  // Compiling still works: only the architecture must be named.
  EXPECT_THROW(nvrtc_options(CompileOptions{}), Error);
  EXPECT_NO_THROW(nvrtc_options(CompileOptions{"sm_90", {}}));
}

TEST(RuntimeDevice, GpuDeviceProperties) {
  SKIP_WITHOUT_GPU();
  Device &d = Device::get();
  EXPECT_GE(Device::count(), 1);
  EXPECT_FALSE(d.name().empty());
  EXPECT_GE(d.compute_capability(), 75);
  EXPECT_GT(d.sm_count(), 0);
  EXPECT_GT(d.l2_cache_bytes(), 0);
  EXPECT_GT(d.max_shared_per_block_optin(), 48 * 1024);
  EXPECT_GT(CudaDriver::instance().version(), 0);
  std::cout << "device 0: " << d.name() << ", " << d.arch() << ", " << d.sm_count() << " SMs, L2 "
            << d.l2_cache_bytes() / 1024 << " KiB, driver " << CudaDriver::instance().version()
            << "\n";
  EXPECT_THROW(Device::get(Device::count()), Error);
}

TEST(RuntimeDevice, GpuArrayCopiesAndPoison) {
  SKIP_WITHOUT_GPU();
  std::vector<float> host = random_floats(1000, 1);
  DeviceArray a = DeviceArray::from_vector(Float(32), {10, 100}, host);
  EXPECT_EQ(a.numel(), 1000);
  EXPECT_EQ(a.bytes(), 4000);
  EXPECT_EQ(a.to_vector<float>(), host);

  DeviceArray b(Float(32), {1000});
  b.copy_from(a);
  EXPECT_EQ(b.to_vector<float>(), host);

  b.poison();
  for (float x : b.to_vector<float>())
    ASSERT_TRUE(std::isnan(x));

  DeviceArray moved = std::move(b);
  EXPECT_FALSE(b.defined());
  EXPECT_TRUE(moved.defined());
  EXPECT_THROW(a.to_vector<double>(), Error);         // element size mismatch
  EXPECT_THROW(a.copy_from(std::vector<float>(3)), Error); // count mismatch
  EXPECT_NO_THROW(DeviceArray(Float(16), {0}));
}

TEST(RuntimeDevice, GpuVectorAddFp32AndFp16) {
  SKIP_WITHOUT_GPU();
  const int n = 100003; // not a multiple of the block
  CudaModule m = build(kVectorAdd);
  EXPECT_EQ(m.compiled().arch, Device::get().arch());

  std::vector<float> a = random_floats(n, 2), b = random_floats(n, 3);
  DeviceArray da = DeviceArray::from_vector(Float(32), {n}, a);
  DeviceArray db = DeviceArray::from_vector(Float(32), {n}, b);
  DeviceArray dc(Float(32), {n});
  dc.poison();
  m.function("add_f32").launch(linear(n, 256), {da, db, dc, n});
  std::vector<float> c = dc.to_vector<float>();
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(c[i], a[i] + b[i]) << "at " << i;

  std::vector<uint16_t> ha = floats_to_halves(a), hb = floats_to_halves(b);
  DeviceArray ha_d = DeviceArray::from_vector(Float(16), {n}, ha);
  DeviceArray hb_d = DeviceArray::from_vector(Float(16), {n}, hb);
  DeviceArray hc_d(Float(16), {n});
  hc_d.poison();
  m.function("add_f16").launch(linear(n, 128), {ha_d, hb_d, hc_d, n});
  std::vector<uint16_t> hc = hc_d.to_vector<uint16_t>();
  for (int i = 0; i < n; ++i) {
    // The sum of two halves is exact in double; __hadd rounds it once to half.
    double exact = double(half_to_float(ha[i])) + double(half_to_float(hb[i]));
    float got = half_to_float(hc[i]);
    ASSERT_NEAR(got, exact, std::abs(exact) * 1e-3 + 1e-7) << "at " << i;
  }
}

TEST(RuntimeDevice, GpuDynamicSharedMemoryAbove48KiB) {
  SKIP_WITHOUT_GPU();
  const int per_block = 24576, blocks = 40; // 96 KiB of shared memory per block
  CudaModule m = build(kReverse);
  CudaFunction f = m.function("reverse_blocks");
  std::vector<float> in = random_floats(size_t(per_block) * blocks, 4);
  DeviceArray din = DeviceArray::from_vector(Float(32), {blocks, per_block}, in);
  DeviceArray dout(Float(32), {blocks, per_block});
  dout.poison();
  LaunchConfig cfg;
  cfg.grid = {blocks, 1, 1};
  cfg.block = {256, 1, 1};
  cfg.dynamic_shared_bytes = per_block * 4;
  f.launch(cfg, {din, dout, per_block});
  std::vector<float> out = dout.to_vector<float>();
  for (int b = 0; b < blocks; ++b)
    for (int i = 0; i < per_block; ++i)
      ASSERT_EQ(out[size_t(b) * per_block + i], in[size_t(b) * per_block + per_block - 1 - i]);

  // More than any block may have is a user error, raised before the launch.
  cfg.dynamic_shared_bytes = Device::get().max_shared_per_block_optin() + 1;
  EXPECT_THROW(f.launch(cfg, {din, dout, per_block}), Error);
}

TEST(RuntimeDevice, GpuLaunchAndLoadErrors) {
  SKIP_WITHOUT_GPU();
  CudaModule m = build(kVectorAdd);
  try {
    m.function("add_f64");
    FAIL() << "expected a tessel::Error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("add_f32"), std::string::npos) << e.what();
  }
  DeviceArray a(Float(32), {4});
  EXPECT_THROW(m.function("add_f32").launch(linear(4, 2048), {a, a, a, 4}), Error);
  LaunchConfig zero;
  zero.grid = {0, 1, 1};
  EXPECT_THROW(m.function("add_f32").launch(zero, {a, a, a, 4}), Error);
  if (Device::get().compute_capability() >= 90) {
    CompiledKernel old = test_cache().compile(kVectorAdd, CompileOptions{"sm_80", {}});
    try {
      CudaModule::load(old);
      FAIL() << "an sm_80 cubin should not load on " << Device::get().arch();
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("sm_80"), std::string::npos) << e.what();
    }
  }
  // The context is still healthy after all that.
  Device::get().synchronize();
}

TEST(RuntimeDevice, GpuTimingIsSane) {
  SKIP_WITHOUT_GPU();
  const int n = 1 << 24;
  CudaModule m = build(kVectorAdd);
  DeviceArray a = DeviceArray::from_vector(Float(32), {n}, random_floats(n, 5));
  DeviceArray b = DeviceArray::from_vector(Float(32), {n}, random_floats(n, 6));
  DeviceArray c(Float(32), {n});
  TimeOptions opts;
  opts.number = 5;
  opts.repeat = 10;
  opts.flush_l2 = true;
  TimeResult t = m.function("add_f32").time(linear(n, 256), {a, b, c, n}, opts);
  ASSERT_EQ(t.ms.size(), 10u);
  EXPECT_GT(t.min_ms, 0);
  EXPECT_LE(t.min_ms, t.median_ms);
  EXPECT_LE(t.median_ms, t.max_ms);
  EXPECT_GE(t.mean_ms, t.min_ms);
  EXPECT_LE(t.mean_ms, t.max_ms);
  EXPECT_LT(t.median_ms, 50.0) << "a 200 MB vector add cannot take this long";
  double gbps = 3.0 * n * 4 / (t.median_ms * 1e-3) / 1e9;
  std::cout << "add_f32 n=2^24: " << t.str() << ", " << gbps << " GB/s\n";

  int calls = 0;
  TimeResult t2 = time_launches([&] { ++calls; }, TimeOptions{2, 3, 1, false});
  EXPECT_EQ(calls, 1 + 2 * 3);
  EXPECT_EQ(t2.ms.size(), 3u);
  EXPECT_THROW(time_launches([] {}, TimeOptions{0, 1, 0, false}), Error);

  // A hold launches batches of `number` for that long before the warm-up.
  calls = 0;
  TimeOptions held{2, 3, 1, false};
  held.hold_seconds = 0.2;
  const auto start = std::chrono::steady_clock::now();
  (void)time_launches([&] { ++calls; }, held);
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.2);
  EXPECT_GT(calls, 1 + 2 * 3);
  EXPECT_EQ((calls - 1 - 2 * 3) % 2, 0) << "whole batches of `number`";
}

// Bad options are refused before any device is touched (so also without a GPU).
TEST(RuntimeTimer, BadOptionsAreRefused) {
  TimeOptions negative_hold;
  negative_hold.hold_seconds = -1;
  test::expect_error([&] { (void)time_launches([] {}, negative_hold); },
                     {"time_launches", "hold_seconds >= 0", "hold_seconds -1"});
  test::expect_error([&] { (void)time_launches([] {}, TimeOptions{1, 0, 0, false}); },
                     {"repeat 0"});
}

TEST(RuntimeTimer, SummaryStatistics) {
  TimeResult r = summarize_times({4.0, 1.0, 3.0, 2.0}, 7);
  EXPECT_DOUBLE_EQ(r.median_ms, 2.5);
  EXPECT_DOUBLE_EQ(r.min_ms, 1.0);
  EXPECT_DOUBLE_EQ(r.max_ms, 4.0);
  EXPECT_DOUBLE_EQ(r.mean_ms, 2.5);
  EXPECT_EQ(r.number, 7);
  EXPECT_NE(r.str().find("4 x 7 launches"), std::string::npos) << r.str();
  EXPECT_DOUBLE_EQ(summarize_times({3.0, 1.0, 2.0}).median_ms, 2.0);
}
