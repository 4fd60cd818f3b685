#include "compiler/ir/IRVisitor.h"

#include "compiler/support/Error.h"

namespace tessel {

void IRVisitor::visit_expr(const Expr &e) {
  if (!e.defined())
    return;
  switch (e->kind()) {
#define TESSEL_EXPR_NODE(N)                                                                        \
  case N::static_kind:                                                                             \
    return visit(llvm::cast<N>(e.get()));
#include "compiler/ir/IRNodes.def"
  default:
    internal_error << "visit_expr on a non-expression node";
  }
}

void IRVisitor::visit_stmt(const Stmt &s) {
  if (!s.defined())
    return;
  switch (s->kind()) {
#define TESSEL_STMT_NODE(N)                                                                        \
  case N::static_kind:                                                                             \
    return visit(llvm::cast<N>(s.get()));
#include "compiler/ir/IRNodes.def"
  default:
    internal_error << "visit_stmt on a non-statement node";
  }
}

void IRVisitor::visit(const IntImm *) {}
void IRVisitor::visit(const FloatImm *) {}
void IRVisitor::visit(const StringImm *) {}
void IRVisitor::visit(const Variable *) {}

#define TESSEL_VISIT_BINARY(N)                                                                     \
  void IRVisitor::visit(const N *op) {                                                             \
    visit_expr(op->a);                                                                             \
    visit_expr(op->b);                                                                             \
  }
TESSEL_VISIT_BINARY(Add)
TESSEL_VISIT_BINARY(Sub)
TESSEL_VISIT_BINARY(Mul)
TESSEL_VISIT_BINARY(FloorDiv)
TESSEL_VISIT_BINARY(FloorMod)
TESSEL_VISIT_BINARY(Div)
TESSEL_VISIT_BINARY(Mod)
TESSEL_VISIT_BINARY(Min)
TESSEL_VISIT_BINARY(Max)
TESSEL_VISIT_BINARY(EQ)
TESSEL_VISIT_BINARY(NE)
TESSEL_VISIT_BINARY(LT)
TESSEL_VISIT_BINARY(LE)
TESSEL_VISIT_BINARY(GT)
TESSEL_VISIT_BINARY(GE)
TESSEL_VISIT_BINARY(And)
TESSEL_VISIT_BINARY(Or)
#undef TESSEL_VISIT_BINARY

void IRVisitor::visit(const Not *op) { visit_expr(op->a); }
void IRVisitor::visit(const Select *op) {
  visit_expr(op->condition);
  visit_expr(op->true_value);
  visit_expr(op->false_value);
}
void IRVisitor::visit(const Cast *op) { visit_expr(op->value); }
void IRVisitor::visit(const Let *op) {
  visit_expr(op->var);
  visit_expr(op->value);
  visit_expr(op->body);
}
void IRVisitor::visit(const Call *op) {
  for (const Expr &a : op->args)
    visit_expr(a);
}
void IRVisitor::visit(const BufferLoad *op) {
  for (const Expr &i : op->indices)
    visit_expr(i);
}
void IRVisitor::visit(const TensorLoad *op) {
  for (const Expr &i : op->indices)
    visit_expr(i);
}
void IRVisitor::visit(const Ramp *op) {
  visit_expr(op->base);
  visit_expr(op->stride);
}
void IRVisitor::visit(const Broadcast *op) { visit_expr(op->value); }
void IRVisitor::visit(const Reduce *op) {
  for (const IterVar &iv : op->axis) {
    visit_expr(iv->dom.min);
    visit_expr(iv->dom.extent);
  }
  visit_expr(op->source);
  visit_expr(op->condition);
  if (op->init.defined())
    visit_expr(op->init);
}

void IRVisitor::visit(const LetStmt *op) {
  visit_expr(op->var);
  visit_expr(op->value);
  visit_stmt(op->body);
}
void IRVisitor::visit(const AttrStmt *op) {
  if (const auto *e = std::get_if<Expr>(&op->node))
    visit_expr(*e);
  visit_expr(op->value);
  visit_stmt(op->body);
}
void IRVisitor::visit(const AssertStmt *op) {
  visit_expr(op->condition);
  visit_stmt(op->body);
}
void IRVisitor::visit(const For *op) {
  visit_expr(op->min);
  visit_expr(op->extent);
  visit_stmt(op->body);
}
void IRVisitor::visit(const Allocate *op) {
  for (const Expr &e : op->extents)
    visit_expr(e);
  visit_stmt(op->body);
}
void IRVisitor::visit(const BufferRealize *op) {
  for (const Range &r : op->bounds) {
    visit_expr(r.min);
    visit_expr(r.extent);
  }
  visit_stmt(op->body);
}
void IRVisitor::visit(const BufferStore *op) {
  visit_expr(op->value);
  for (const Expr &i : op->indices)
    visit_expr(i);
}
void IRVisitor::visit(const IfThenElse *op) {
  visit_expr(op->condition);
  visit_stmt(op->then_case);
  visit_stmt(op->else_case);
}
void IRVisitor::visit(const Seq *op) {
  for (const Stmt &s : op->stmts)
    visit_stmt(s);
}
void IRVisitor::visit(const Evaluate *op) { visit_expr(op->value); }

namespace {
class PostOrderVisitor : public IRVisitor {
public:
  explicit PostOrderVisitor(const std::function<void(const IRNode *)> &f) : f_(f) {}
  const std::function<void(const IRNode *)> &f_;

#define TESSEL_EXPR_NODE(N)                                                                        \
  void visit(const N *op) override {                                                               \
    IRVisitor::visit(op);                                                                          \
    f_(op);                                                                                        \
  }
#define TESSEL_STMT_NODE(N) TESSEL_EXPR_NODE(N)
#include "compiler/ir/IRNodes.def"
};
} // namespace

void post_order_visit(const Stmt &s, const std::function<void(const IRNode *)> &f) {
  PostOrderVisitor(f).visit_stmt(s);
}
void post_order_visit(const Expr &e, const std::function<void(const IRNode *)> &f) {
  PostOrderVisitor(f).visit_expr(e);
}

} // namespace tessel
