// Thread-block rasterization (Stage::rasterize) in lowering: the grouped ordering as expressions,
// the checks that a rasterized stage's loops allow it, and the LetStmts that bind the tile a
// block computes.
//
// With ny x nx blocks and groups of G rows, the block at linear position L = by * nx + bx
// (launch order) computes
//   first_row = (L / (G * nx)) * G,  rows = min(ny - first_row, G),  r = L % (G * nx)
//   row = first_row + r % rows,      col = r / rows
// so consecutive blocks walk down the G rows of their group before moving one column right.
// Each group of rows * nx blocks covers its rows exactly once, so this is a bijection on the
// grid for any ny, nx and G (the last group has ny % G rows when G does not divide ny).
#pragma once

#include "compiler/lower/Relations.h"

#include <utility>

namespace tessel {

/// True if groups of `group` rows leave the order of an ny x nx grid row-major (group 1, one
/// row or one column), so that block (by, bx) computes tile (by, bx).
bool grouped_order_is_row_major(int64_t ny, int64_t nx, int64_t group);

/// The tile (row, col) that the block at linear launch position `block` (by * nx + bx) of an
/// ny x nx grid computes in the grouped ordering of `group` rows.
std::pair<Expr, Expr> grouped_tile(const Expr &block, int64_t ny, int64_t nx, int64_t group);

/// tessel::Error, naming the stage and axis, if a rasterized stage is inlined, if its rows / cols
/// are not its loops bound to blockIdx.y / blockIdx.x, if a reduction loop or a tensorized loop
/// encloses them, or if a stage is computed at a loop between the two, where the tile is not
/// known yet.
void check_rasterizations(const ScheduleNode *sch);

/// `body` under LetStmts that bind the tile of rasterized stage `s` (its Rasterization's row and
/// col, after the block's launch position "<stage>.block") when `leaf` is the inner of its two
/// rasterized loops; `body` unchanged otherwise.
Stmt bind_rasterized_tile(const StageNode *s, const IterVar &leaf, const DomainMap &dom,
                          Stmt body);

} // namespace tessel
