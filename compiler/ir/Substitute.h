// Replacing variables by expressions, and asking which variables an expression uses.
#pragma once

#include "compiler/ir/IR.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <functional>

namespace tessel {

using VarMap = llvm::DenseMap<const Variable *, Expr>;

/// Replaces each variable in `vmap` by its expression (not recursively).
Expr substitute(const Expr &e, const VarMap &vmap);
Stmt substitute(const Stmt &s, const VarMap &vmap);
Expr substitute(const Expr &e, const Var &v, const Expr &replacement);
Stmt substitute(const Stmt &s, const Var &v, const Expr &replacement);

/// True if `e` (or `s`) refers to any variable for which `pred` holds.
bool uses_var(const Expr &e, const std::function<bool(const Variable *)> &pred);
bool uses_var(const Stmt &s, const std::function<bool(const Variable *)> &pred);
bool uses_var(const Expr &e, const Var &v);
bool uses_var(const Stmt &s, const Var &v);

/// The variables `e` refers to, in first-use order.
std::vector<Var> free_vars(const Expr &e);

} // namespace tessel
