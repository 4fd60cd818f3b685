// Integer interval analysis: the closed range [min, max] that an integer expression can take
// when its variables lie in given ranges.
//
// The result is sound under the IR's wrap-around semantics: when the exact range of a node does
// not fit its type (so the value may wrap), the node gets the whole range of its type.
#pragma once

#include "compiler/arith/Analyzer.h"

#include <llvm/ADT/DenseMap.h>

#include <optional>

namespace tessel::arith {

using VarBounds = llvm::DenseMap<const Variable *, IntInterval>;

/// Bounds of an integer or boolean expression (of a vector: of all its lanes). Variables not in
/// `vars` range over their type; non-integer expressions get everything.
IntInterval const_int_bound(const Expr &e, const VarBounds &vars);

/// All values of an integer type (everything for other types).
IntInterval type_range(DataType t);

/// Interval arithmetic, saturating at the infinities.
IntInterval bound_add(IntInterval a, IntInterval b);
IntInterval bound_sub(IntInterval a, IntInterval b);
IntInterval bound_mul(IntInterval a, IntInterval b);
IntInterval bound_union(IntInterval a, IntInterval b);
/// The values of a loop variable running over [min, min + extent) with min and extent in the
/// given bounds; nothing (std::nullopt) if the loop may never run, i.e. extent.max < 1.
std::optional<IntInterval> loop_var_bound(IntInterval min, IntInterval extent);

} // namespace tessel::arith
