#include "schedules/GemmTiling.h"

#include "compiler/support/Error.h"

#include <algorithm>

namespace tessel {

GemmOutputLoops tile_gemm_output(Stage sc, const GemmThreadAxes &axes, int block_m, int block_n,
                                 int groups_m, int groups_n, int tile_m, int tile_n,
                                 int64_t raster_group, TailStrategy n_tail, TailStrategy m_tail,
                                 int64_t persistent_blocks) {
  // Blocks that do not divide M or N shift the last one inwards (every block is whole) or
  // stay in place (stores of the part inside). A leading axis (split-K's partial sums) is the
  // grid's z.
  const std::vector<IterVar> &all = sc.op_axis();
  internal_check(all.size() == 2 || all.size() == 3)
      << "tile_gemm_output takes a 2-D output or a 3-D one with a leading axis";
  IterVar i = all[all.size() - 2], j = all.back();
  auto [bi, i1] = sc.split(i, block_m, m_tail);
  auto [bj, j1] = sc.split(j, block_n, n_tail);
  auto [wi, i2] = sc.split_nparts(i1, groups_m);
  auto [wj, j2] = sc.split_nparts(j1, groups_n);
  auto [fi, ii] = sc.split(i2, tile_m);
  auto [fj, jj] = sc.split(j2, tile_n);
  sc.reorder({bi, bj, wi, wj, fi, fj, ii, jj});
  if (persistent_blocks == 0) {
    sc.bind(bi, axes.block_y);
    sc.bind(bj, axes.block_x);
  }
  sc.bind(wi, axes.thread_y);
  sc.bind(wj, axes.thread_z);
  if (all.size() == 3)
    sc.bind(all[0], thread_axis("blockIdx.z"));
  if (persistent_blocks != 0)
    sc.persistent(bi, bj, std::max<int64_t>(1, raster_group), persistent_blocks);
  else if (raster_group != 0)
    sc.rasterize(bi, bj, raster_group);
  return {wj, fi, fj, ii, bi, bj};
}

StagedGemmOutput tile_gemm_output_staged(Schedule &s, const Tensor &C, const GemmThreadAxes &axes,
                                         int block_m, int block_n, int groups_m, int groups_n,
                                         int tile_m, int tile_n, int64_t raster_group,
                                         TailStrategy n_tail, TailStrategy m_tail,
                                         int64_t persistent_blocks) {
  Stage sc = s[C];
  internal_check(sc.op_axis().size() == 2) << "tile_gemm_output_staged takes a 2-D output";
  Tensor staged = s.cache_write(C, "shared");
  auto [i, j] = sc.axes<2>();
  auto [bi, i1] = sc.split(i, block_m, m_tail);
  auto [bj, j1] = sc.split(j, block_n, n_tail);
  sc.reorder({bi, bj, i1, j1});
  if (persistent_blocks != 0) {
    sc.persistent(bi, bj, std::max<int64_t>(1, raster_group), persistent_blocks);
  } else {
    sc.bind(bi, axes.block_y);
    sc.bind(bj, axes.block_x);
    if (raster_group != 0)
      sc.rasterize(bi, bj, raster_group);
  }
  sc.bulk_copy(); // the block's tile: one TMA store (boxes clipped at C's edges)

  // The staging tile: the block's region, cut as tile_gemm_output cuts C inside a block.
  Stage ss = s[staged];
  ss.compute_at(sc, bj);
  auto [si, sj] = ss.axes<2>();
  auto [wi, i2] = ss.split_nparts(si, groups_m);
  auto [wj, j2] = ss.split_nparts(sj, groups_n);
  auto [fi, ii] = ss.split(i2, tile_m);
  auto [fj, jj] = ss.split(j2, tile_n);
  ss.reorder({wi, wj, fi, fj, ii, jj});
  ss.bind(wi, axes.thread_y);
  ss.bind(wj, axes.thread_z);
  return {staged, {wj, fi, fj, ii, bi, bj}};
}

std::pair<IterVar, IterVar> split_gemm_reduction(Stage sf, int block_k, int64_t k_period) {
  if (k_period == 0)
    return sf.split(sf.reduce_axis()[0], block_k);
  internal_check(k_period % block_k == 0)
      << "K period " << k_period << " is not a multiple of the K step " << block_k;
  auto [run, in_run] = sf.split(sf.reduce_axis()[0], k_period);
  auto [step, k_in_step] = sf.split(in_run, block_k);
  return {sf.fuse(run, step), k_in_step};
}

} // namespace tessel
