#pragma once

#include "compiler/ir/IR.h"

namespace tessel {

/// Elementwise stages over a warpgroup's wgmma accumulators and their rows, distributed over
/// the threads by the accumulator's layout (Form 1 in and out, before storage_flatten).
///
/// A stage in scope wgmma.accumulator or wgmma.rows that no intrinsic tensorizes (an
/// elementwise stage: P = exp(S - m), a mask, a fold's update o = o * alpha + P V) is lowered
/// as loops over its 64-row tiles' rows and columns, which every thread of the warpgroup runs.
/// Here a loop whose variable is the row of the fragments it reads or writes (their region's
/// row, offset by a multiple of 64) becomes loops over the thread's rows, row = 64 T + 16 w +
/// l / 4 + 8 h (warp w, lane l of the warpgroup); a loop whose variable is their column becomes
/// loops over the thread's columns, col = 8 q + 2 (l % 4) + e; their loads and stores become
/// the register of that element (wgmma_reg / wgmma_reg_set of the region as one 64 x C tile per
/// 64 rows, wgmma_row / wgmma_row_set), and every other use of the variables takes the
/// element's row and column (a causal mask compares them). The new loops are unrolled (register
/// indices are constants). A row value written inside a loop over the columns is a reduction
/// over them (rows[r] = max / min (rows[r], x) or rows[r] + x, under any condition: a mask):
/// each lane reduces its columns, then after the columns' loop the row's 4 lanes combine theirs
/// by shuffles (the reduction's initial value, its identity, counts 4 times). Anything else is
/// an error, as is a fragment access outside such loops.
Stmt distribute_fragment_loops(Stmt s);

} // namespace tessel
