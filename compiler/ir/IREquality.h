// Structural equality and hashing of IR.
//
// Two trees are equal when they have the same shape, node kinds, types and constants. Variables
// compare by identity, unless `map_free_vars` is set: then a variable of `a` not bound inside `a`
// may stand for a variable of `b` of the same type, consistently (as tensorize needs to compare
// a stage body with an intrinsic's pattern).
#pragma once

#include "compiler/ir/IR.h"

#include <llvm/ADT/DenseMap.h>

#include <cstddef>

namespace tessel {

bool structural_equal(const Expr &a, const Expr &b, bool map_free_vars = false);
bool structural_equal(const Stmt &a, const Stmt &b, bool map_free_vars = false);

/// Equal trees hash equally. Variables hash by identity (by type only when map_free_vars).
size_t structural_hash(const Expr &e, bool map_free_vars = false);
size_t structural_hash(const Stmt &s, bool map_free_vars = false);

/// Keys for hash maps of expressions compared structurally.
struct ExprStructuralHash {
  size_t operator()(const Expr &e) const { return structural_hash(e); }
};
struct ExprStructuralEqual {
  bool operator()(const Expr &a, const Expr &b) const { return structural_equal(a, b); }
};

} // namespace tessel
