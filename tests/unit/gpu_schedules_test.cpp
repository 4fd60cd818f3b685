// Registered schedules on a real GPU: results checked against a float64 reference
// on random data, at divisible and non-divisible shapes, fp32 and fp16. Skipped without a GPU.
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Check.h"
#include "runtime/Device.h"
#include "runtime/Half.h"
#include "runtime/KernelCache.h"
#include "schedules/Epilogues.h"
#include "schedules/Gemm.h"
#include "schedules/GemmMma.h"
#include "schedules/GemmWgmma.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>

using namespace tessel;

namespace {

#define SKIP_WITHOUT_GPU()                                                                         \
  if (!Device::available())                                                                        \
  GTEST_SKIP() << Device::unavailable_reason()

// Inputs in [-1, 1] rounded to the input type; the reference multiplies those same values in
// float64. fp32 accumulation over K terms: |error| <= K * 2^-24 * sum |a_ik * b_kj|; we allow
// 4 * K * 2^-24 of it.
using GemmSchedule = std::function<ScheduledProgram(int64_t, int64_t, int64_t, DataType)>;

void run_gemm(const GemmSchedule &schedule, int64_t M, int64_t N, int64_t K, DataType dtype) {
  ScheduledProgram p = schedule(M, N, K, dtype);
  Module m = build(p.schedule, p.args);
  std::mt19937_64 rng(M * 131 + N * 7 + K);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<double> a(M * K), b(K * N);
  DeviceArray da(dtype, {M, K}), db(dtype, {K, N}), dc(Float(32), {M, N});
  auto fill = [&](std::vector<double> &v, DeviceArray &arr) {
    std::vector<float> f(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      f[i] = d(rng);
      if (dtype == Float(16))
        f[i] = half_to_float(float_to_half(f[i]));
      v[i] = f[i];
    }
    if (dtype == Float(16)) {
      std::vector<uint16_t> h = floats_to_halves(f);
      arr.copy_from_host(h.data(), arr.bytes());
    } else {
      arr.copy_from_host(f.data(), arr.bytes());
    }
  };
  fill(a, da);
  fill(b, db);
  dc.poison();
  m.run({&da, &db, &dc});
  std::vector<float> c(M * N);
  dc.copy_to_host(c.data(), dc.bytes());
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        ref += a[i * K + k] * b[k * N + j];
        mag += std::fabs(a[i * K + k] * b[k * N + j]);
      }
      double err = std::fabs(c[i * N + j] - ref);
      worst = std::max(worst, err / std::max(mag, 1e-30));
      ASSERT_LE(err, 4.0 * K * std::ldexp(1.0, -24) * mag + 1e-30)
          << "C[" << i << ", " << j << "] = " << c[i * N + j] << ", expected " << ref;
    }
  TimeResult t = m.time({&da, &db, &dc}, {.number = 10, .repeat = 30});
  std::cout << "  " << p.args[2].name() << " " << M << "x" << N << "x" << K << " " << dtype
            << ": worst error " << worst << " of sum|a*b|; median " << t.median_ms << " ms, "
            << p.flops / (t.median_ms * 1e9) << " TFLOP/s\n";
}

} // namespace

TEST(GpuSchedules, GemmNaive) {
  SKIP_WITHOUT_GPU();
  for (DataType t : {Float(32), Float(16)}) {
    run_gemm(gemm_naive, 512, 512, 512, t);
    run_gemm(gemm_naive, 1000, 1000, 1000, t);
    run_gemm(gemm_naive, 333, 77, 129, t);
  }
}

TEST(GpuSchedules, GemmShared) {
  SKIP_WITHOUT_GPU();
  for (DataType t : {Float(32), Float(16)}) {
    run_gemm(gemm_shared, 512, 512, 512, t);
    run_gemm(gemm_shared, 1000, 1000, 1000, t);
    run_gemm(gemm_shared, 333, 77, 129, t);
  }
}

// ldmatrix / mma.sync with register fragments: fp16 inputs against the reference above, bf16
// (aligned and ragged) through check_on_gpu's reference of the definition.
TEST(GpuSchedules, GemmMma) {
  SKIP_WITHOUT_GPU();
  auto mma = [](int64_t M, int64_t N, int64_t K, DataType) { return gemm_mma(M, N, K); };
  run_gemm(mma, 256, 256, 128, Float(16));
  run_gemm(mma, 512, 384, 256, Float(16));
  // Small tiles, a 3-stage pipeline, at a shape the defaults do not divide.
  run_gemm([](int64_t M, int64_t N, int64_t K, DataType) {
    return gemm_mma(M, N, K, {.block_row_warps = 1, .block_col_warps = 2, .warp_row_tiles = 2,
                              .warp_col_tiles = 2, .chunk = 1, .stages = 3});
  }, 96, 192, 80, Float(16));
  for (auto [M, N, K] : {std::array<int64_t, 3>{512, 384, 256}, {1000, 999, 77}}) {
    ScheduledProgram p = gemm_mma(M, N, K, BFloat(16));
    CheckResult r = check_on_gpu(p.schedule, p.args, p.num_inputs);
    EXPECT_TRUE(r.compare.ok) << M << "x" << N << "x" << K << " bfloat16: " << r.str();
  }
}

// Hopper wgmma on interleaved shared tiles (sm_90a); skipped on other GPUs.
TEST(GpuSchedules, GemmWgmma) {
  SKIP_WITHOUT_GPU();
  if (Device::get().arch() != "sm_90")
    GTEST_SKIP() << "wgmma needs a Hopper GPU (sm_90); this one is " << Device::get().arch();
  auto wgmma = [](int64_t M, int64_t N, int64_t K, DataType) { return gemm_wgmma(M, N, K); };
  auto tiled = [](GemmWgmmaTiles t) -> GemmSchedule {
    return [t](int64_t M, int64_t N, int64_t K, DataType) { return gemm_wgmma(M, N, K, t); };
  };
  run_gemm(wgmma, 256, 256, 128, Float(16));
  run_gemm(wgmma, 512, 768, 512, Float(16));
  // Smaller tiles: one warpgroup of 64 x 64, 2 stages, swizzled and not (K step 32); 4
  // warpgroups of 64 x 128.
  run_gemm(tiled({.block_m = 64, .block_n = 64, .block_k = 64, .warpgroups_m = 1, .stages = 2}),
           192, 128, 192, Float(16));
  run_gemm(tiled({.block_m = 64, .block_n = 64, .block_k = 32, .warpgroups_m = 1, .stages = 2,
                  .swizzle = 0}),
           192, 128, 96, Float(16));
  run_gemm(tiled({.block_m = 128, .block_n = 256, .block_k = 64, .warpgroups_m = 2,
                  .warpgroups_n = 2, .stages = 3}),
           256, 512, 256, Float(16));
  // Ragged shapes on padded copies; float32 rows of odd width stored through shared memory
  // (8 and 16 warps), or by the quads' sector exchange where the operand tiles are too small
  // to lend it (64 x 32 blocks).
  run_gemm(wgmma, 300, 301, 77, Float(16));
  run_gemm(tiled({.block_m = 256, .block_n = 128, .block_k = 64, .warpgroups_m = 4, .stages = 3}),
           300, 301, 256, Float(16));
  run_gemm(tiled({.block_m = 64, .block_n = 32, .block_k = 32, .warpgroups_m = 1, .stages = 2,
                  .swizzle = 64}),
           100, 99, 100, Float(16));
  // Ping-pong consumers (two warpgroups taking a persistent block's tiles in turn): 16 tiles
  // over 5 blocks (an odd count for some), and a ragged shape over 3.
  GemmWgmmaTiles pp{.block_m = 128, .block_n = 128, .block_k = 64, .warpgroups_m = 1,
                    .stages = 4, .raster_group = 8, .tma = true, .warp_specialized = true,
                    .persistent = true, .persistent_blocks = 5, .ping_pong = true};
  run_gemm(tiled(pp), 512, 512, 320, Float(16));
  pp.persistent_blocks = 3;
  run_gemm(tiled(pp), 300, 301, 256, Float(16));
  // C stored by TMA through a shared staging tile (TS=1): one tile per block, persistent (3
  // tiles per block), and ragged (N = 300: the last box clipped at C's edge); bfloat16 C.
  GemmWgmmaTiles ts = gemm_wgmma_tiles(512, 768, 512);
  ts.tma_store = true;
  ts.stages = tma_store_stages(ts, 4);
  run_gemm(tiled(ts), 512, 768, 512, Float(16));
  GemmWgmmaTiles tsp{.block_m = 128, .block_n = 128, .block_k = 64, .warpgroups_m = 2,
                     .stages = 3, .raster_group = 2, .tma = true, .warp_specialized = true,
                     .persistent = true, .persistent_blocks = 4, .tma_store = true};
  run_gemm(tiled(tsp), 512, 768, 512, Float(16));
  run_gemm(tiled(tsp), 300, 300, 256, Float(16));
  ScheduledProgram b = gemm_wgmma(512, 768, 512, tsp, Float(16), BFloat(16));
  CheckResult r = check_on_gpu(b.schedule, b.args, b.num_inputs);
  EXPECT_TRUE(r.compare.ok) << "TS=1 bfloat16: " << r.str();
  // The last wave's tiles split into parts of K (LW; flags between blocks): 6 tiles on 4
  // blocks (2 tiles in halves), on 5 (1 tile in 5 parts, uneven); a float16 C (check_on_gpu
  // checks the second launch: the first one's flags must be left lowered).
  GemmWgmmaTiles lw{.block_m = 128, .block_n = 256, .block_k = 64, .warpgroups_m = 2,
                    .stages = 4, .tma = true, .warp_specialized = true, .persistent = true,
                    .persistent_blocks = 4, .split_last_wave = 8};
  for (int blocks : {4, 5}) {
    lw.persistent_blocks = blocks;
    run_gemm(tiled(lw), 256, 768, 576, Float(16));
    ScheduledProgram h = gemm_wgmma(256, 768, 576, lw, Float(16), Float(16));
    r = check_on_gpu(h.schedule, h.args, h.num_inputs);
    EXPECT_TRUE(r.compare.ok) << "LW=8 PB=" << blocks << " float16 C: " << r.str();
  }
}

// Thread-block clusters of 2 with TMA multicast (gemm_wgmma's CL): along M (B's tile shared)
// and along N (A's), with warp roles, rasterized, persistent and not, against float64; the
// default 128 x 256 tiles at 1024^3 in both shapes.
TEST(GpuSchedules, GemmWgmmaClusters) {
  SKIP_WITHOUT_GPU();
  if (Device::get().arch() != "sm_90")
    GTEST_SKIP() << "clusters with wgmma need a Hopper GPU (sm_90); this one is "
                 << Device::get().arch();
  auto clustered = [](int cluster, bool persistent, int blocks) -> GemmSchedule {
    return [=](int64_t M, int64_t N, int64_t K, DataType) {
      GemmWgmmaTiles t{.block_m = 128, .block_n = 128, .block_k = 64, .warpgroups_m = 2,
                       .stages = 4, .raster_group = 8, .tma = true, .warp_specialized = true,
                       .persistent = persistent, .persistent_blocks = blocks,
                       .cluster = cluster};
      return gemm_wgmma(M, N, K, t);
    };
  };
  for (int cluster : {1, 2}) {
    run_gemm(clustered(cluster, false, 132), 256, 256, 320, Float(16));
    run_gemm(clustered(cluster, false, 132), 512, 768, 1024, Float(16));
    run_gemm(clustered(cluster, true, 4), 512, 512, 320, Float(16));
    run_gemm(clustered(cluster, true, 132), 1024, 1024, 1024, Float(16));
    auto big = [cluster](int64_t M, int64_t N, int64_t K, DataType) {
      GemmWgmmaTiles t = gemm_wgmma_tiles(M, N, K);
      t.cluster = cluster;
      return gemm_wgmma(M, N, K, t);
    };
    run_gemm(big, 1024, 1024, 1024, Float(16));
  }
}

// GEMM + bias + GELU fused into the wgmma kernel's store, against float64.
TEST(GpuSchedules, GemmBiasGelu) {
  SKIP_WITHOUT_GPU();
  if (Device::get().arch() != "sm_90")
    GTEST_SKIP() << "wgmma needs a Hopper GPU (sm_90); this one is " << Device::get().arch();
  for (DataType t : {Float(16), BFloat(16)}) {
    ScheduledProgram p = gemm_wgmma_fused(512, 768, 512, gemm_wgmma_tiles(512, 768, 512), t, t,
                                          bias_gelu_epilogue(t));
    CheckResult r = check_on_gpu(p.schedule, p.args, p.num_inputs);
    EXPECT_TRUE(r.compare.ok) << t << ": " << r.str();
  }
}

TEST(GpuSchedules, SecondBuildHitsTheKernelCache) {
  ScheduledProgram p = gemm_shared(1024, 1024, 1024, Float(32));
  LoweredModule lowered = lower(p.schedule, p.args);
  KernelCache::global().clear_memory();
  using clock = std::chrono::steady_clock;
  int64_t calls = nvrtc_invocation_count();
  auto t0 = clock::now();
  Module first = build(lowered, Target::cuda("sm_90"));
  auto t1 = clock::now();
  Module second = build(lowered, Target::cuda("sm_90"));
  auto t2 = clock::now();
  double first_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  double second_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  std::cout << "  first build " << first_ms << " ms, second build " << second_ms << " ms\n";
  EXPECT_LE(nvrtc_invocation_count() - calls, 1);
  EXPECT_EQ(first.compiled().cubin, second.compiled().cubin);
}
