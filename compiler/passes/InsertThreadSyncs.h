#pragma once

#include "compiler/ir/IR.h"

namespace tessel {

/// Inserts `syncthreads` barriers (Evaluate of the intrinsic call) into kernels where shared
/// memory written by some threads is later read or overwritten by others (Form 2 in, Form 2
/// out). It is conservative, per buffer and ignoring indices: walking each statement list in
/// order, a barrier goes before the first statement (or whole loop / branch, so barriers sit
/// as far out as possible) that reads a shared buffer written since the last barrier, or
/// writes one read since then; and at the end of a loop body when the body's first accesses
/// conflict so with its last ones (the next iteration's load would overwrite a tile still
/// being read). Two writes are not ordered (as in TVM). Barriers never go inside branches or
/// loops whose condition or bounds depend on threadIdx or on loaded values: such a statement
/// is one unit, with barriers around it, since a barrier that not all threads of a block
/// reach is undefined behaviour.
Stmt insert_thread_syncs(Stmt s);

} // namespace tessel
