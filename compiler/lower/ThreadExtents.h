// The thread extents of a schedule's kernels.
//
// Stages of one kernel (a root stage and every stage computed at it, transitively) may bind a
// threadIdx axis with different extents: a shared-memory copy whose tile needs fewer threads
// than the block, or a split whose factor exceeds its axis. As TVM does, the kernel launches
// the largest extent; a stage running under a smaller binding of an axis (its own, or the one in
// effect at the loop it is computed at) is guarded to that binding's threads at its innermost
// statements, so that the barriers between stages stay outside every guard.
#pragma once

#include "compiler/arith/IndexInterval.h"
#include "compiler/lower/Relations.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/StringMap.h>

namespace tessel {

class ThreadExtents {
public:
  ThreadExtents(const ScheduleNode *sch, const DomainMap &dom);

  /// The extent `s`'s kernel launches threadIdx axis `tag` with (vthreads, blockIdx: `own`).
  int64_t launch(const StageNode *s, const std::string &tag, int64_t own) const;
  /// Conditions for `s`'s innermost statements: `threadIdx.* < extent` for each binding in
  /// effect there that is smaller than its kernel's.
  std::vector<Expr> guards(const StageNode *s) const;
  /// Narrows the threadIdx variables in effect at `s`'s innermost statements to their
  /// bindings' extents in `env` (the guards hold there).
  void narrow(const StageNode *s, VarIntervals &env) const;

private:
  struct Binding {
    Var var;
    int64_t extent = 0;
  };
  using Bindings = llvm::StringMap<Binding>;

  /// The threadIdx bindings in effect inside `s`'s first `leaves` leaf loops.
  Bindings in_effect(const StageNode *s, size_t leaves) const;
  /// The stage whose kernel `s` runs in: the root of its compute_at chain, or, for a root
  /// stage in shared or local memory, the kernel of a stage that reads it.
  const StageNode *kernel_root(const StageNode *s) const;

  const DomainMap &dom_;
  llvm::DenseMap<const StageNode *, const StageNode *> kernel_of_;
  llvm::DenseMap<const StageNode *, llvm::StringMap<int64_t>> launch_; ///< by kernel root
};

} // namespace tessel
