#pragma once

#include "compiler/ir/IR.h"
#include "compiler/support/Remarks.h"

namespace tessel {

/// Replicates the body of each `For` of kind Unrolled with a constant extent, once per
/// iteration with the loop variable replaced by its value (any form in, same form out), as
/// TVM's tir.UnrollLoop. When `auto_max_step` > 0, a serial loop with a constant extent whose
/// body has no loop left and whose extent times the number of statements in its body is at
/// most `auto_max_step` is unrolled too. Unrolled loops whose extent is not constant are kept.
/// Unrolling gives codegen straight-line code with constant indices, which registers (local
/// and fragment arrays) need. `remarks` (when given) hears of every loop unrolled, and of each
/// unroll() whose loop was kept.
Stmt unroll_loops(Stmt s, int auto_max_step = 0, Remarks *remarks = nullptr);

} // namespace tessel
