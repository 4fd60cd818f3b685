// Building the loop nests of a schedule (Form 1 of docs/IR_FORMS.md).
//
// Each computed stage becomes a loop nest over its leaf loops (thread-bound loops become
// thread_extent attributes) around a store of its body; a reduction gets its init nest just
// outside its first reduction loop. Stages are placed from the outputs inwards: a stage computed
// at another is inserted at the top of that loop's body, inside a BufferRealize of its region;
// a root stage goes before everything that reads it. Loops whose iteration space overshoots the
// stage's range (non-divisible splits) get guards.
#pragma once

#include "compiler/lower/Relations.h"
#include "compiler/lower/StageBodies.h"

#include <llvm/ADT/DenseSet.h>

namespace tessel {

/// Buffers of the stages, one per output (a fold has one per state): arguments are global; the
/// others are realized in their scope.
using StageBuffers = llvm::DenseMap<const StageNode *, std::vector<Buffer>>;

Stmt schedule_ops(const ScheduleNode *sch, const StageBodies &bodies, const DomainMap &dom,
                  const StageBuffers &buffers, const llvm::DenseSet<const StageNode *> &args);

} // namespace tessel
