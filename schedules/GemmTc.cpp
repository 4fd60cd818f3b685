#include "schedules/GemmTc.h"

#include "schedules/GemmMma.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace tessel {

namespace {

// Winners of `tessel_bench --tune`: for each shape tuned, the fastest candidate whose output
// matched cuBLAS's. The table does not know the GPU (gemm_tc has no target to key on): these were
// measured on an NVIDIA H100 80GB HBM3 (sm_90; driver 580.159.04, CUDA 13.0) on 2026-11-23 by
// `tessel_bench --tune` built from commit e47e2e3 (the tune step of bench/gpu_session.sh). Best
// of 216 candidates each: 4096^3 0.3933 ms (349.5 TFLOP/s, 0.485 x cuBLAS), 8192^3 3.2393 ms
// (339.4 TFLOP/s, 0.490 x cuBLAS). Another GPU wants its own run.
const std::vector<GemmTcMeasured> &tuned() {
  // "mma brw=2 bcw=4 wrt=4 wct=4 chunk=4 stages=4 raster=8": 128 x 256 blocks of 2 x 4 warps,
  // K step 64, 4 stages, ldmatrix + mma.sync, blocks rasterized in groups of 8 rows.
  static const GemmTcConfig mma_128x256x64{
      .tiles = {.block_row_warps = 2, .block_col_warps = 4, .warp_row_tiles = 4,
                .warp_col_tiles = 4, .chunk = 4, .stages = 4, .raster_group = 8},
      .ptx_mma = true};
  static const std::vector<GemmTcMeasured> table = {
      {4096, 4096, 4096, mma_128x256x64},
      {8192, 8192, 8192, mma_128x256x64},
  };
  return table;
}

bool fits(const GemmWmmaTiles &t, int64_t M, int64_t N, int64_t K) {
  return M % t.block_m() == 0 && N % t.block_n() == 0 && K % t.block_k() == 0 &&
         gemm_wmma_shared_bytes(t) <= 227 * 1024;
}

} // namespace

const std::vector<GemmTcMeasured> &gemm_tc_measured() { return tuned(); }

std::string to_string(const GemmWmmaTiles &t) {
  return "brw=" + std::to_string(t.block_row_warps) + " bcw=" + std::to_string(t.block_col_warps) +
         " wrt=" + std::to_string(t.warp_row_tiles) + " wct=" + std::to_string(t.warp_col_tiles) +
         " chunk=" + std::to_string(t.chunk) + " stages=" + std::to_string(t.stages) +
         " raster=" + std::to_string(t.raster_group);
}

std::string to_string(const GemmTcConfig &c) {
  return std::string(c.ptx_mma ? "mma " : "wmma ") + to_string(c.tiles);
}

std::vector<GemmTcConfig> gemm_tc_candidates(int64_t M, int64_t N, int64_t K) {
  std::vector<GemmTcConfig> out;
  for (bool ptx_mma : {false, true})
    for (auto [brw, bcw] : {std::pair{2, 4}, {4, 2}, {2, 2}})
      for (auto [wrt, wct] : {std::pair{4, 2}, {2, 4}, {4, 4}})
        for (int chunk : {2, 4})
          for (int stages : {2, 3, 4})
            for (int raster : {0, 8}) {
              GemmWmmaTiles t{.block_row_warps = brw, .block_col_warps = bcw,
                              .warp_row_tiles = wrt, .warp_col_tiles = wct, .chunk = chunk,
                              .stages = stages};
              t.raster_group = raster;
              if (fits(t, M, N, K))
                out.push_back({t, ptx_mma});
            }
  return out;
}

GemmTcConfig gemm_tc_config(int64_t M, int64_t N, int64_t K) {
  const GemmTcMeasured *best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const GemmTcMeasured &t : tuned()) {
    if (!fits(t.config.tiles, M, N, K))
      continue;
    double d = std::abs(std::log2(double(M) / t.M)) + std::abs(std::log2(double(N) / t.N)) +
               std::abs(std::log2(double(K) / t.K));
    if (d < best_distance) {
      best_distance = d;
      best = &t;
    }
  }
  if (best)
    return best->config;
  GemmTcConfig c{gemm_wmma_tiles(M, N, K)};
  if (K / c.tiles.block_k() > 1)
    c.tiles.stages = 3;
  return c;
}

ScheduledProgram gemm_tc(int64_t M, int64_t N, int64_t K, const GemmTcConfig &config) {
  return config.ptx_mma ? gemm_mma(M, N, K, config.tiles) : gemm_wmma(M, N, K, config.tiles);
}

ScheduledProgram gemm_tc(int64_t M, int64_t N, int64_t K) {
  // On a Hopper GPU the wgmma path, which measured 0.90-0.99x cuBLAS (1.29x at 1024^3) where the
  // best mma.sync configuration measured 0.49x (bench/RESULTS.md), wherever its tiles fit (any
  // M and K and N from 32: it pads what its copies and blocks cannot take).
  if (hopper_gpu() && N >= 32)
    return gemm_wgmma(M, N, K);
  return gemm_tc(M, N, K, gemm_tc_config(M, N, K));
}

ScheduleEntry gemm_tc_entry() {
  ScheduleEntry e;
  e.name = "gemm_tc";
  e.description = "tuned Tensor Core GEMM, fp16 in, fp32 out: gemm_wmma with cp.async-pipelined "
                  "shared tiles, rasterized blocks and tiles measured per shape";
  e.default_shape = {{"M", 4096}, {"N", 4096}, {"K", 4096}};
  e.dtypes = {Float(16)};
  e.build = [](const ShapeParams &p, DataType) { return gemm_tc(p.at("M"), p.at("N"), p.at("K")); };
  return e;
}

} // namespace tessel
