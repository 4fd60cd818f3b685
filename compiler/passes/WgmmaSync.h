#pragma once

#include "compiler/ir/IR.h"

namespace tessel {

/// Adds the ordering that asynchronous wgmma needs to a kernel that uses wgmma_mma (Form 2 in,
/// Form 2 out; kernels without wgmma_mma are returned unchanged):
///  - every maximal run of statements that issue only wgmma_mma (calls, unrolled or not, in
///    loops or lists) becomes `wgmma_fence(); run; wgmma_commit(); wgmma_wait(0);`: the fence
///    orders the accumulator writes before it (the reset's fill, earlier runs), and the wait
///    lets nothing after the run read the accumulators or overwrite the shared operands before
///    the Tensor Cores are done with them;
///  - every syncthreads is preceded by fence_proxy_async, so that shared memory written by the
///    threads (stores, cp.async) before the barrier is visible to wgmma's reads after it.
/// Runs after insert_thread_syncs, which places the barriers.
Stmt insert_wgmma_syncs(Stmt s);

} // namespace tessel
