// Resolving the split / fuse relations of a stage's iteration variables.
#pragma once

#include "compiler/ir/Substitute.h"
#include "compiler/schedule/Schedule.h"

#include <llvm/ADT/DenseMap.h>

namespace tessel {

/// The range of every iteration variable (of every stage being lowered).
using DomainMap = llvm::DenseMap<const IterVarNode *, Range>;

/// Given the ranges of a stage's root variables in `dom`, adds the ranges of the variables that
/// its splits and fuses created. Every range starts at 0 except the roots'.
void pass_down_domain(const StageNode *s, DomainMap &dom);

/// The value of each of the stage's root variables in terms of the values of its leaf loops:
/// `leaf_value` maps each leaf IterVar to the expression of its (0-based) loop index. Roots get
/// their range's min added unless `add_root_min` is false (then the values are offsets).
VarMap pass_up_index(const StageNode *s, const DomainMap &dom,
                     const llvm::DenseMap<const IterVarNode *, Expr> &leaf_value,
                     bool add_root_min = true);

/// The root IterVars of a computed stage: its data axes, then its reduce axes.
std::vector<IterVar> root_iter_vars(const StageNode *s);

/// The variable a leaf loop runs on: the bound thread's variable, or the IterVar's own.
Var loop_var_of(const StageNode *s, const IterVar &leaf);

/// The value the stage's body sees for leaf loop `leaf`: the tile variable (row or col of its
/// Rasterization) for a rasterized loop, the reversed value for a reversed one
/// (Stage::reverse, bound inside the loop), loop_var_of otherwise.
Var loop_value_of(const StageNode *s, const IterVar &leaf);

/// True if leaf `iv` of `s` is derived from a reduction axis.
bool is_reduce_leaf(const StageNode *s, const IterVar &iv);

int64_t const_extent(const DomainMap &dom, const IterVar &iv);

} // namespace tessel
