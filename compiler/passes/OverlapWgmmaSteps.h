#pragma once

#include "compiler/ir/IR.h"

namespace tessel {

/// Loops marked by Stage::overlap_steps (a "pragma_overlap_steps" attr around the loop) whose
/// body issues two wgmma groups, each followed by its wgmma_wait(0) (insert_wgmma_syncs):
///
///   for (t ...) { P; A; wait(0); X; B; wait(0); Y }
///
/// (A: the first group, the fills and mbarrier waits before it; B: the second group) are
/// rotated so that step t's B runs on the Tensor Cores while step t + 1's X runs on the CUDA
/// cores, FlashAttention-3's overlap inside a warpgroup (A = S = Q K^T, X = the softmax, B =
/// P V):
///
///   A(0); wait(0); Xe(0); Yr(0); Xl(0)
///   for (t ...) { P(t); A(t + 1); B(t); wait(1, A's accumulators); Xe(t + 1); Yr(t + 1);
///                 keep[thread] = rows Xe and Yr wrote; wait(0); Yb(t); Xl(t + 1) }
///   P(last); B(last); wait(0); Yb(last)
///
/// Xl are X's statements that write B's registers (its accumulator's reset, its A operand in
/// registers) or have effects, run once B of the previous step is done; Xe the rest of X. Yr
/// are Y's register updates that neither read nor write B's registers (running row state),
/// run beside X; Yb the rest of Y (reads of B's result, barrier arrivals), after B. P (the
/// statements before A that issue TMA loads: the ring's producer) stays at its step, so a
/// ring slot holds step t's B operands and step t + 1's A operands at once: give the ring 3 or
/// more stages, or the refills come one step later. The store of the row values that Xe and
/// Yr computed to a word of shared memory per thread (`keep`) is there for ptxas, which moves
/// arithmetic past wgmma.wait_group but no memory operation: the rows' work stays before the
/// wait for B. Each statement's reads and writes are checked for the moves; a loop not of this
/// form, or whose statements the moves would reorder wrongly, is a tessel::Error naming the
/// loop. Runs after insert_wgmma_syncs, before order_wgmma_turns and split_warp_roles; any
/// form in, same form out; the attrs are consumed.
Stmt overlap_wgmma_steps(Stmt s);

} // namespace tessel
