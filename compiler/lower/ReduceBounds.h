// A reduction's `where` predicate as loop bounds: the iterations of a serial reduction loop in
// which the predicate fails everywhere are not run (causal and banded reductions skip whole
// blocks instead of testing every element).
//
//   C[i] = sum(A[i, j], j, where j <= i), j split by 16:
//     for (j.outer, 0, 4) { for (j.inner, 0, 16) { if (j.outer * 16 + j.inner <= i) ... } }
//   becomes
//     for (j.outer, 0, min(floordiv(i, 16) + 1, 4)) { ... the same body, the test kept ... }
//
// The test stays for the boundary block. Bounds come from the predicate's conjuncts that are
// linear comparisons in the loop's variable, and a linear comparison without it (a query past
// its sequence's end, `i < len(b)`) makes the loop run only where it can hold (else not at
// all); the variables of the loops inside it, and the block's threads, range over their
// extents (so the trip count is the same for every thread of a block: a barrier inside the
// loop stays safe), terms of those alone (floordiv(threadIdx.x, 8) of threads fused from two
// axes) over the values interval analysis gives them.
#pragma once

#include "compiler/ir/IR.h"

#include <llvm/ADT/DenseMap.h>

#include <optional>
#include <utility>

namespace tessel {

/// Variables that take every value in [lo, hi] while the loop runs: inner loops, threads.
using RangedVars = llvm::DenseMap<const Variable *, std::pair<int64_t, int64_t>>;

/// [min, min + extent) for loop variable `x`, which runs over [0, `extent`), narrowed to the
/// iterations in which `cond` can hold for some value of the `ranged` variables; nothing where
/// no conjunct of `cond` bounds `x` (not linear in it, or a bound that would depend on a thread
/// index not among `ranged`).
std::optional<std::pair<Expr, Expr>> reduce_loop_bounds(const Var &x, int64_t extent,
                                                        const Expr &cond,
                                                        const RangedVars &ranged);

} // namespace tessel
