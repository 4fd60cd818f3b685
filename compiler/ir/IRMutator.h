// A rewriting walk over IR. Override visit(const Node *) to return a replacement; the base
// versions rebuild a node from its mutated children and return the very same node when no
// child changed, so unchanged subtrees stay shared.
#pragma once

#include "compiler/ir/IR.h"

namespace tessel {

class IRMutator {
public:
  virtual ~IRMutator() = default;

  /// Dispatches on the node's kind. Undefined handles are returned as they are.
  virtual Expr mutate(const Expr &e);
  virtual Stmt mutate(const Stmt &s);

protected:
#define TESSEL_EXPR_NODE(N) virtual Expr visit(const N *op);
#define TESSEL_STMT_NODE(N) virtual Stmt visit(const N *op);
#include "compiler/ir/IRNodes.def"

  /// Mutates each element; returns true if any changed.
  bool mutate_all(const std::vector<Expr> &in, std::vector<Expr> &out);
};

} // namespace tessel
