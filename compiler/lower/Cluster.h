// Thread-block clusters in lowering (Stage::cluster, Stage::multicast): the checks, the rank of
// a block in its cluster, and the cluster-ordered tile of rasterized and persistent stages.
//
// A stage clustered along its block-tile axis `a` (extent n, a multiple of the size c) keeps
// one block per tile. Bound to a blockIdx, consecutive blocks along that index are one cluster
// (`__cluster_dims__` along it), rank = blockIdx % c, and tile = blockIdx as before. Rasterized
// or persistent, the grouped order walks the n / c clusters along `a` instead of the tiles, and
// the block of rank r takes tile c * (cluster's index along a) + r: the blocks of a cluster
// compute adjacent tiles along `a`, sharing the operand whose tile does not depend on it.
#pragma once

#include "compiler/lower/Relations.h"

namespace tessel {

/// tessel::Error for a cluster or multicast the lowering cannot take: an axis that is neither
/// bound to a blockIdx nor a tile axis of rasterize / persistent, an extent (or persistent
/// grid) the size does not divide, a multicast stage without bulk_copy or outside a cluster.
void check_clusters(const ScheduleNode *sch, const DomainMap &dom);

/// The stage's blocks' rank in their cluster (an expression of the blockIdx the clusters run
/// along), or an undefined Expr when the stage is not clustered.
Expr cluster_rank(const StageNode *s);

/// The clustered stage a stage is computed in (itself included), or null.
const StageNode *clustered_stage_of(const StageNode *s);

/// The variables a multicast tile's origin must not use: those that tell the tiles of a
/// cluster apart (the clustered axis' loop, blockIdx and tile variables).
std::vector<Var> cluster_axis_vars(const StageNode *s);

/// The clusters along the clustered axis of a rasterized or persistent stage `s` (1 when `s` is
/// not clustered or `leaf` is not its clustered axis): how the grouped order counts it.
int64_t cluster_size_along(const StageNode *s, const IterVar &leaf);

/// (row, col) of cluster tile (row_c, col_c) for the block of rank `rank`: the clustered
/// coordinate is c * it + rank, the other unchanged.
std::pair<Expr, Expr> tile_of_cluster(const StageNode *s, Expr row_c, Expr col_c,
                                      const Expr &rank);

} // namespace tessel
