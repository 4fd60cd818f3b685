#pragma once

#include "compiler/ir/IR.h"

namespace tessel {

/// Removes statements that do nothing (any form in, same form out): loops with a constant
/// extent <= 0 or an empty body, Evaluates without side effects (constants, pure
/// expressions), stores of a location's own value (x[i] = x[i]), branches with a constant
/// condition or empty branches, and attrs, lets and allocations around nothing. Seqs shrink
/// accordingly. If nothing is left, the result is Evaluate(0), so callers always get a
/// statement. Later passes and codegen then see only code that runs.
Stmt remove_no_op(Stmt s);

} // namespace tessel
