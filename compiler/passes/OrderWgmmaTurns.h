#pragma once

#include "compiler/ir/IR.h"

namespace tessel {

/// Loops marked by Stage::ping_pong (a "pragma_ping_pong" attr around the loop), in a block of
/// two warpgroups on threadIdx.y, issue their wgmma groups (wgmma_fence .. wgmma_commit) in
/// turns, FlashAttention-3's ping-pong: warpgroup 0's k-th group of the loop, then warpgroup
/// 1's k-th, then warpgroup 0's (k + 1)-th, ... Warpgroup g waits for its turn on named barrier
/// 5 + g before a group and gives the other its turn after the group's commit:
///
///   if (threadIdx.y == 1) named_barrier_arrive(5, 256)          // warpgroup 0 goes first
///   for (t ...) { ... named_barrier_sync(5 + threadIdx.y, 256)
///                     wgmma_fence() ... wgmma_commit()
///                     named_barrier_arrive(6 - threadIdx.y, 256) ... }
///   if (threadIdx.y == 0) named_barrier_sync(5, 256)            // warpgroup 1's last turn
///
/// so that while one warpgroup waits for its GEMMs' results and works on them (a softmax), the
/// other's GEMMs keep the Tensor Cores busy. Groups issued together under one fence (fence, A,
/// commit, B, commit: overlap_wgmma_steps' loop) are one turn. Every group of the loop must be issued by both
/// warpgroups (none under a condition on threadIdx.y; a tessel::Error otherwise). Runs after
/// insert_wgmma_syncs; any form in, same form out; the attrs are consumed.
Stmt order_wgmma_turns(Stmt s);

} // namespace tessel
