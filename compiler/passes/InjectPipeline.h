#pragma once

#include "compiler/ir/IR.h"
#include "compiler/support/Remarks.h"

namespace tessel {

/// Software-pipelines the buffers marked by `pipeline_scope` attrs (Form 2 in, Form 2 out; see
/// docs/IR_FORMS.md: the attr wraps the statement that fills the buffer, inside the loop to
/// pipeline, and its value is the number of stages N). For a loop `for i in [min, min + extent)`
/// whose body fills the marked buffers and then computes on them, the result is
///
///     fill stage s for iteration min + s, for s in [0, N - 1); commit      (the prologue)
///     for i:
///       wait until the fill of iteration i is complete; syncthreads
///       if (i + N - 1 < min + extent) fill stage (i + N - 1) % N for iteration i + N - 1
///       commit
///       compute, reading stage (i - min) % N
///
/// When the compute issues wgmma (whose reads of the stage complete asynchronously), reads no
/// accumulator register in the loop (wgmma_reg, which must wait for all of them) and N >= 3,
/// the fills run one iteration further behind (N - 2 iterations ahead, cp_async_wait(N - 3)) so
/// that one iteration's wgmma may stay in flight across the next barrier; the loop is then
/// wrapped in a `pipeline_async_reads` attr (value 1) for insert_wgmma_syncs.
///
/// Each buffer's allocation grows N times and moves outside the loop if it was inside. Copies
/// from global to shared memory in the fills become cp_async (to_async_copies), with one
/// commit group per iteration and cp_async_wait(N - 2) before the barrier; without them the
/// commit and wait are omitted. The one barrier per iteration both publishes the tile of
/// iteration i and ends every read of the stage the next fill overwrites; the steady-state fill
/// is wrapped in a `pipeline_fill` attr so that insert_thread_syncs adds no barrier of its own
/// between the fill and the compute (they touch different stages). Buffers filled in the same
/// loop are pipelined together, with the largest N among them.
///
/// The results are the same as without the pass. Where that would not hold (the fill reads
/// storage written in the loop, writes other storage, uses variables bound inside the loop; the
/// buffer is used before the fill or outside the loop; the loop runs under control flow that
/// depends on threadIdx, where a barrier would hang) the attr is dropped and the buffer stays
/// single; `remarks` (when given) hears why, and of each buffer pipelined, with or without
/// cp.async.
Stmt inject_pipeline(Stmt s, Remarks *remarks = nullptr);

} // namespace tessel
