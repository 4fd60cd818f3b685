// The intrinsic calls the passes insert and look for, as statements; and whether a statement
// contains a node.
#pragma once

#include "compiler/ir/IR.h"
#include "compiler/ir/IRVisitor.h"

#include <functional>
#include <vector>

namespace tessel::passes_detail {

/// Evaluate(name(args...)): a call of a void intrinsic as a statement.
inline Stmt intrinsic_stmt(const char *name, std::vector<Expr> args = {}) {
  return Evaluate::make(Call::make(Void(), name, std::move(args), Call::Intrinsic));
}

/// Whether `s` is such a statement calling intrinsic `name`.
inline bool is_intrinsic_stmt(const Stmt &s, const char *name) {
  const auto *e = s.as<Evaluate>();
  const auto *c = e ? e->value.as<Call>() : nullptr;
  return c && c->is_intrinsic(name);
}

/// Whether some node of `s` satisfies `pred`.
inline bool contains(const Stmt &s, const std::function<bool(const IRNode *)> &pred) {
  bool found = false;
  post_order_visit(s, [&](const IRNode *n) { found = found || pred(n); });
  return found;
}

} // namespace tessel::passes_detail
