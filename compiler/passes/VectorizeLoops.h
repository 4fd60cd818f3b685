#pragma once

#include "compiler/ir/IR.h"
#include "compiler/support/Remarks.h"

namespace tessel {

/// Turns each `For` of kind Vectorized with a constant extent into vector code (Form 2 in,
/// Form 2 out): the loop variable becomes Ramp(min, 1, extent), scalars that meet vectors are
/// Broadcast, and loads and stores take a Ramp index. Only bodies that are straight-line dense
/// accesses are vectorized: a body with a loop, an intrinsic call, a branch or a store that
/// depends on the variable in another way, a strided or gathered access, or a buffer written
/// and accessed at different indices (which could make one lane see another's write) keeps
/// its loop, as a serial loop. The fallback is never wrong, only slower; `remarks` (when given)
/// hears of every vectorized loop, applied or not, and why not.
Stmt vectorize_loops(Stmt s, Remarks *remarks = nullptr);

} // namespace tessel
