// The loop structure the Tensor Core GEMM schedules share (schedule_wmma_gemm on warps,
// schedule_wgmma_gemm on warpgroups): the output stage cut into block tiles, thread groups and
// per-group tiles, and the accumulator's reduction cut into shared-memory K steps.
#pragma once

#include "compiler/schedule/Schedule.h"

#include <utility>

namespace tessel {

/// The thread axes a schedule binds, made once so that every stage binds the same variables (the
/// IR then names one threadIdx.y, not threadIdx.y and threadIdx.y_1).
struct GemmThreadAxes {
  IterVar block_x = thread_axis("blockIdx.x"), block_y = thread_axis("blockIdx.y");
  IterVar thread_x = thread_axis("threadIdx.x"), thread_y = thread_axis("threadIdx.y");
  IterVar thread_z = thread_axis("threadIdx.z");
};

/// The loops of the output stage after tile_gemm_output.
struct GemmOutputLoops {
  IterVar group_j; ///< the group along N (threadIdx.z): where the accumulator is computed
  IterVar tile_i, tile_j; ///< the group's tiles (to unroll where registers are indexed by them)
  IterVar inner_i;        ///< the rows of one tile (where the store is tensorized)
  IterVar block_i, block_j; ///< the block-tile loops (along M, along N)
};

/// Cuts C (M x N) into block_m x block_n blocks (blockIdx.y / x, rasterized in groups of
/// `raster_group` rows when nonzero; where block_m or block_n does not divide M or N, the last
/// block shifts inwards to end at the edge, overlapping its neighbour: TailStrategy::ShiftInwards;
/// or, with `m_tail` / `n_tail` GuardWithIf, it stays in place and stores only the rows /
/// columns inside, through an intrinsic that can: TensorIntrin::partial_output),
/// each into groups_m x groups_n thread groups (threadIdx.y /
/// z; a group is a warp or a warpgroup, its own threads on threadIdx.x), each group's part into
/// tile_m x tile_n tiles. With `persistent_blocks` nonzero the block tiles are not bound to
/// the grid: that many blocks walk them (Stage::persistent, in the grouped order of
/// raster_group rows, 1 when 0).
GemmOutputLoops tile_gemm_output(Stage sc, const GemmThreadAxes &axes, int block_m, int block_n,
                                 int groups_m, int groups_n, int tile_m, int tile_n,
                                 int64_t raster_group,
                                 TailStrategy n_tail = TailStrategy::ShiftInwards,
                                 TailStrategy m_tail = TailStrategy::ShiftInwards,
                                 int64_t persistent_blocks = 0);

/// tile_gemm_output for an output stored by TMA through shared memory: `C` (a 2-D output,
/// unscheduled) is cut into blocks only (bound, rasterized or persistent as tile_gemm_output
/// does), and its block's copy from `staged` = cache_write(C, "shared"), which is computed at
/// the block, is marked bulk_copy: one TMA store of the block's tile. `staged` is cut into the
/// groups and tiles as tile_gemm_output cuts C, and the returned loops are its (compute the
/// accumulator at group_j, tensorize the store into shared memory at inner_i).
struct StagedGemmOutput {
  Tensor staged;        ///< the shared staging tile of one block
  GemmOutputLoops loops; ///< its loops; block_i and block_j are C's (the staged stage's block)
};
StagedGemmOutput tile_gemm_output_staged(Schedule &s, const Tensor &C, const GemmThreadAxes &axes,
                                         int block_m, int block_n, int groups_m, int groups_n,
                                         int tile_m, int tile_n, int64_t raster_group,
                                         TailStrategy n_tail = TailStrategy::ShiftInwards,
                                         TailStrategy m_tail = TailStrategy::ShiftInwards,
                                         int64_t persistent_blocks = 0);

/// Splits the accumulator's one reduction axis into steps of block_k (the first loop) and the
/// rest (the second). With a nonzero period (a multiple of block_k), the steps are counted
/// within each run of `k_period`, (run, step) fused into one loop: the index of a step is then
/// run * period + step * block_k, whose floormod by the period the simplifier sees (conv's
/// channels within one filter tap).
std::pair<IterVar, IterVar> split_gemm_reduction(Stage sf, int block_k, int64_t k_period);

} // namespace tessel
