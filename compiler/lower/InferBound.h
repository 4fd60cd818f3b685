// Bound inference: the range of every loop of every stage.
//
// An output covers its whole shape. Any other stage computes, at its attach point, the region
// its consumers read while the loops inside that point run: loops outside it are fixed, except
// thread indices that the stage's storage is shared across (a shared-memory tile serves every
// threadIdx of the block; a global one every block), which are relaxed to their full range.
#pragma once

#include "compiler/lower/Relations.h"
#include "compiler/lower/StageBodies.h"

namespace tessel {

DomainMap infer_bound(const ScheduleNode *sch, const StageBodies &bodies);

/// True if storage in `scope` is shared by the threads of `thread_tag`, so a stage stored there
/// must cover the region of all of them.
bool needs_relax(const std::string &thread_tag, const std::string &scope);

} // namespace tessel
