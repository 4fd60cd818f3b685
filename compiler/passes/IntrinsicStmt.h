// The intrinsic calls the passes insert and look for, as statements.
#pragma once

#include "compiler/ir/IR.h"

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

} // namespace tessel::passes_detail
