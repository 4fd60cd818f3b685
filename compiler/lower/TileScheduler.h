// The tile scheduler of a persistent stage (Stage::persistent) in lowering: the loop in which
// each block of a fixed grid walks the output tiles.
//
// With T = ny * nx tiles and a grid of G = min(blocks, T) blocks, block b runs
//   for (iteration = 0; iteration < ceil(T / G); ++iteration) {
//     tile = iteration * G + b;
//     if (tile < T) { (row, col) = grouped tile `tile` (Rasterize.h); the tile's work }
//   }
// so the blocks together compute each tile once, in the grouped order, the first G tiles in
// the first iteration (a wave), the next G in the second, and so on.
#pragma once

#include "compiler/lower/Relations.h"

#include <optional>

namespace tessel {

/// The blocks a persistent stage launches: min(blocks, tiles); clustered (Cluster.h), c x
/// min(blocks / c, clusters of tiles) for clusters of c.
int64_t persistent_grid(const StageNode *s, const DomainMap &dom);

/// A reduction loop of a stage computed inside a persistent stage's tiles, split over the last
/// wave (Stage::split_last_wave): the variables its range [begin, end) is bound to in each
/// tile, its steps in a whole tile, and the most parts a tile may take.
struct LastWaveSplit {
  Var begin, end;
  int64_t steps = 0, max_parts = 0;
};

/// The parts each of the last round's tiles is split into (Stage::split_last_wave): `tiles`
/// walked by `grid` blocks, a tile's reduction of `steps` steps, at most `max_parts`; 1 where
/// the rounds are whole or too few blocks are left over for a second part.
int64_t last_wave_parts(int64_t tiles, int64_t grid, int64_t steps, int64_t max_parts);

/// `body` (the nest inside leaf loop `leaf` of persistent stage `s`, its marker included) as
/// the tile scheduler emits it: for the rows leaf, the grid's blockIdx.x binding, the thread
/// bindings found at the top of `body` (hoisted: they are the block's, not the tile's), the
/// tile loop marked attr::tile_loop, the tile's index and its guard; for the cols leaf, the
/// tile's (row, col) bound by LetStmts, no loop. Unchanged for any other leaf. With `split`
/// the last round's tiles are split into parts of it (the range bound per tile, the work
/// marked attr::last_wave where there are parts; see the .cpp).
Stmt persistent_tile_loop(const StageNode *s, const IterVar &leaf, const DomainMap &dom,
                          Stmt body, const std::optional<LastWaveSplit> &split = std::nullopt);

} // namespace tessel
