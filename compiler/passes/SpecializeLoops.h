#pragma once

#include "compiler/ir/IR.h"

namespace tessel {

/// Loops marked by Stage::specialize (a "pragma_specialize" attr around the loop) run a copy of
/// their body without the conditions that hold for every thread of the iterations where a
/// uniform predicate holds (Halide's loop partitioning, as an unswitched branch):
///
///   for (t ...) { body }  ->  for (t ...) { if (P(t)) body[conditions P implies := true]
///                                           else body }
///
/// A condition of the body (of an if, a select or an if_then_else; each conjunct of an &&) is
/// dropped when it is a comparison that a sum a t + U + W >= 0 decides, a != 0 a constant, U
/// uniform across the block (blockIdx, the loops around t) and W bounded below over the
/// threads and the loops inside t (threadIdx, wgmma_thread_id(), mma_lane_id(), loops whose
/// range interval analysis bounds); a min or max on either side is split into the comparisons
/// that together imply it (x < min(a, b): x < a and x < b; x < max(a, b): x < a). P is the
/// conjunction of a t + U + min W >= 0 over the dropped conditions, one term per (a, U) once
/// each is divided by the gcd of a and U's coefficients (t * 64 and t * 128 against one block's
/// rows give one bound). P is uniform, so every thread takes the same branch (barriers inside
/// stay matched). A causal mask evaluated on every key block becomes a branch taken on the
/// diagonal blocks only.
///
/// A dropped condition whose predicate holds on every iteration of the loop's range (at its
/// first t when a > 0, at its last when a < 0, by the linear forms of U and the range's bounds)
/// is dropped from both copies and makes no branch (a causal fold's row guard inside its
/// triangular loop). A loop also marked by Stage::overlap_steps keeps one body, since
/// overlap_wgmma_steps cuts it at its wgmma groups: each run of statements holding a dropped
/// condition (looking through allocations, lets and attrs; statements of one kind between two
/// of the run join it) is unswitched on the predicate of its own conditions, and an if whose
/// own condition alone holds them stays as it is. Any form in, same form out; the specialize
/// attrs are consumed (overlap_steps' are left to its pass).
Stmt specialize_loops(Stmt s);

} // namespace tessel
