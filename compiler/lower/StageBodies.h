// The bodies of a schedule's stages as lowering sees them: inline stages substituted into their
// consumers, and each tensor mapped to the stage that computes it.
#pragma once

#include "compiler/schedule/Schedule.h"

#include <llvm/ADT/DenseMap.h>

namespace tessel {

struct StageBodies {
  /// The body of every computed, non-inline stage, with inline stages substituted. A fold's is
  /// the call tuple(update_0, .., update_n-1, where) (fold_parts splits it).
  llvm::DenseMap<const StageNode *, Expr> body;
  /// The stages (non-inline, computed) that read each stage, in schedule order.
  llvm::DenseMap<const StageNode *, std::vector<StageNode *>> consumers;
};

/// The stage computing tensor `t` in `sch`, or null if the tensor is not in the schedule.
StageNode *stage_of(const ScheduleNode *sch, const Tensor &t);

StageBodies inline_stages(const ScheduleNode *sch);

/// A fold's body (StageBodies::body) as its updates, one per state, and its condition (true
/// where the fold has none).
struct FoldParts {
  std::vector<Expr> update;
  Expr where;
};
FoldParts fold_parts(const Expr &body);

} // namespace tessel
