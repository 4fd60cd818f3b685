#pragma once

#include "compiler/ir/IR.h"
#include "compiler/lower/LoweredFunc.h"

#include <vector>

namespace tessel {

/// Turns each Stage::bulk_copy fill (Form 1: the loop nest inside an `attr bulk_copy` that
/// ScheduleOps put around it, `S[m_0 + v_0, ..] = G[b_0 + .., ..]` over the whole realized
/// region of shared buffer S) into tma_load calls of a tensor map over global argument G: one
/// box per column block of S's layout (the swizzle or interleave width; the whole row without
/// either), with coordinates b_j, the attr's value set to the bytes copied, and barrier 0
/// until inject_pipeline builds the ring. Each shared dimension must read one global dimension
/// through its own loop, in the same order, the innermost the innermost; or have extent 1 (its
/// loop gone, as a batch index fixed at the attach point): global dimensions no loop reads are
/// box dimensions of size 1, up to TMA's 5. The tensor maps are
/// appended to `maps` (one per argument, box and swizzle). Anything else is a tessel::Error
/// naming the stage and saying what TMA needs.
Stmt lower_bulk_copy(Stmt s, const std::vector<Buffer> &args, std::vector<TensorMapParam> *maps);

} // namespace tessel
