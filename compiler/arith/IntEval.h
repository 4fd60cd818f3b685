// The integer semantics of the IR, in one place: wrapping a value to a type's width, floor
// division, and a direct evaluator of scalar integer and boolean expressions.
//
// The simplifier folds constants with these functions, and its randomized tests check it against
// eval_int, so both agree on what an integer expression means by construction.
#pragma once

#include "compiler/ir/IR.h"

#include <llvm/ADT/DenseMap.h>

#include <cstdint>
#include <optional>

namespace tessel::arith {

/// `v` wrapped to the width of the scalar integer type `t`, as IntImm::make stores it (bool: v !=
/// 0).
int64_t wrap_to_type(DataType t, int64_t v);
/// True if `v` is a value of `t` (no wrapping needed).
bool fits_type(DataType t, __int128 v);

/// Division rounding towards negative infinity, and its remainder (sign of the divisor). b != 0.
int64_t floordiv_int(int64_t a, int64_t b);
int64_t floormod_int(int64_t a, int64_t b);

/// The operands of a binary arithmetic, min/max, comparison or logic node; false for others.
bool binary_operands(const Expr &e, Expr *a, Expr *b);

using VarValues = llvm::DenseMap<const Variable *, int64_t>;

/// The value of a scalar integer or boolean expression built from constants, the variables in
/// `vars`, arithmetic (with wrap-around at the type's width), comparisons, logic, Select,
/// if_then_else, integer Casts and Let. Nothing for anything else, for a variable not in `vars`
/// and for a division by zero. `*overflowed` (if given) is set when some intermediate result
/// had to be wrapped, i.e. the expression overflowed its type.
std::optional<int64_t> eval_int(const Expr &e, const VarValues &vars, bool *overflowed = nullptr);

} // namespace tessel::arith
