// A read-only walk over IR. Override visit(const Node *) for the nodes of interest and call the
// base version to keep walking into children.
#pragma once

#include "compiler/ir/IR.h"

#include <functional>

namespace tessel {

class IRVisitor {
public:
  virtual ~IRVisitor() = default;

  /// Dispatches on the node's kind. Undefined handles are ignored.
  void visit_expr(const Expr &e);
  void visit_stmt(const Stmt &s);

protected:
#define TESSEL_EXPR_NODE(N) virtual void visit(const N *op);
#define TESSEL_STMT_NODE(N) virtual void visit(const N *op);
#include "compiler/ir/IRNodes.def"
};

/// Calls `f` on every expression and statement node below (and including) the root, children
/// before parents.
void post_order_visit(const Stmt &s, const std::function<void(const IRNode *)> &f);
void post_order_visit(const Expr &e, const std::function<void(const IRNode *)> &f);

} // namespace tessel
