// gemm_tc: the tuned Tensor Core GEMM (fp16 or bf16 in, fp32 out).
//
// gemm_wmma's schedule (padded shared tiles, warps on threadIdx.y / z) with the shared tiles
// pipelined through cp.async (Stage::pipeline), blocks rasterized for L2 reuse
// (Stage::rasterize), and the tile sizes and the Tensor Core path (WMMA, or ldmatrix + mma.sync as
// in gemm_mma) picked per shape by measurement: `tessel_bench --tune` times every candidate of
// gemm_tc_candidates() on the GPU, checks it against cuBLAS, logs all of them, and the winners
// are kept in GemmTc.cpp's table (gemm_tc_measured(); its comment names the GPU and the run).
//
//   ScheduledProgram p = gemm_tc(4096, 4096, 4096);
#pragma once

#include "schedules/GemmWgmma.h"
#include "schedules/GemmWmma.h"

#include <string>

#include <vector>

namespace tessel {

/// One point of gemm_tc's search: the tiles, and which Tensor Core path runs them.
struct GemmTcConfig {
  GemmWmmaTiles tiles;
  /// ldmatrix + mma.sync on register fragments (gemm_mma) instead of the WMMA API (gemm_wmma).
  bool ptx_mma = false;
};

/// A shape tuned on the GPU and the configuration measured fastest for it.
struct GemmTcMeasured {
  int64_t M, N, K;
  GemmTcConfig config;
};
/// GemmTc.cpp's table of measured winners (its comment says on which GPU and when).
const std::vector<GemmTcMeasured> &gemm_tc_measured();

/// The configuration measured fastest for M x N x K, or, for a shape not measured, that of the
/// nearest measured shape that fits it (falling back to gemm_wmma_tiles with 3 stages).
GemmTcConfig gemm_tc_config(int64_t M, int64_t N, int64_t K);

/// On a Hopper GPU (hopper_gpu()) gemm_wgmma where its tiles fit; otherwise gemm_wmma or
/// gemm_mma with gemm_tc_config(M, N, K). A and B of `in` (float16 or bfloat16); C of `out`:
/// float32, or float16 / bfloat16 (rounded as it is stored; off Hopper on the mma.sync path,
/// with the configuration's tiles).
ScheduledProgram gemm_tc(int64_t M, int64_t N, int64_t K, DataType in = Float(16),
                         DataType out = Float(32));
ScheduledProgram gemm_tc(int64_t M, int64_t N, int64_t K, const GemmTcConfig &config,
                         DataType in = Float(16), DataType out = Float(32));

/// The configurations the tuner tries for M x N x K: both paths, 4 or 8 warps, 32 to 64 rows and
/// columns of fragments per warp, K steps of 32 or 64, 2 to 4 stages, rasterization off or in
/// groups of 8; only those that divide the shape and fit in 227 KiB of shared memory.
std::vector<GemmTcConfig> gemm_tc_candidates(int64_t M, int64_t N, int64_t K);

/// "brw=2 bcw=4 wrt=4 wct=2 chunk=2 stages=3 raster=8": the tiles as the tuner logs them.
std::string to_string(const GemmWmmaTiles &t);
/// "mma brw=2 ...": the path, then the tiles.
std::string to_string(const GemmTcConfig &c);

ScheduleEntry gemm_tc_entry();

} // namespace tessel
