#include "compiler/passes/RemoveNoOp.h"

#include "compiler/ir/IREquality.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRVisitor.h"

namespace tessel {

namespace {

bool has_side_effects(const Expr &e) {
  bool effects = false;
  post_order_visit(e, [&](const IRNode *n) {
    if (const auto *c = llvm::dyn_cast<Call>(n))
      effects |= c->call_kind == Call::Intrinsic;
  });
  return effects;
}

// Undefined statements stand for "nothing" while rewriting; node factories need defined
// bodies, so every compound statement is rebuilt here rather than by the base mutator.
class NoOpRemover : public IRMutator {
protected:
  Stmt visit(const For *op) override {
    auto extent = as_const_int(op->extent);
    if (extent && *extent <= 0)
      return Stmt();
    Stmt body = mutate(op->body);
    if (!body.defined())
      return body;
    if (body.same_as(op->body))
      return op;
    return For::make(op->loop_var, op->min, op->extent, op->for_kind, body, op->thread_tag);
  }

  Stmt visit(const IfThenElse *op) override {
    if (auto c = as_const_int(op->condition))
      return mutate(*c ? op->then_case : op->else_case);
    Stmt then_case = mutate(op->then_case), else_case = mutate(op->else_case);
    if (!then_case.defined() && !else_case.defined())
      return Stmt();
    if (then_case.same_as(op->then_case) && else_case.same_as(op->else_case))
      return op;
    if (!then_case.defined())
      return IfThenElse::make(Not::make(op->condition), else_case);
    return IfThenElse::make(op->condition, then_case, else_case);
  }

  Stmt visit(const AttrStmt *op) override {
    Stmt body = mutate(op->body);
    if (!body.defined() || body.same_as(op->body))
      return body.defined() ? Stmt(op) : body;
    return AttrStmt::make(op->node, op->key, op->value, body);
  }

  Stmt visit(const LetStmt *op) override {
    Stmt body = mutate(op->body);
    if (!body.defined() || body.same_as(op->body))
      return body.defined() ? Stmt(op) : body;
    return LetStmt::make(op->var, op->value, body);
  }

  Stmt visit(const Allocate *op) override {
    Stmt body = mutate(op->body);
    if (!body.defined() || body.same_as(op->body))
      return body.defined() ? Stmt(op) : body;
    return Allocate::make(op->buffer_var, op->dtype, op->extents, op->scope, body);
  }

  Stmt visit(const BufferRealize *op) override {
    Stmt body = mutate(op->body);
    if (!body.defined() || body.same_as(op->body))
      return body.defined() ? Stmt(op) : body;
    return BufferRealize::make(op->buffer, op->bounds, body);
  }

  // An assertion still checks its condition: it keeps an empty body.
  Stmt visit(const AssertStmt *op) override {
    Stmt body = mutate(op->body);
    if (body.same_as(op->body))
      return op;
    return AssertStmt::make(op->condition, op->message,
                            body.defined() ? body : Evaluate::make(0));
  }

  Stmt visit(const Seq *op) override {
    std::vector<Stmt> stmts;
    bool changed = false;
    for (const Stmt &s : op->stmts) {
      stmts.push_back(mutate(s));
      changed |= !stmts.back().same_as(s);
    }
    return changed ? Seq::make(std::move(stmts)) : Stmt(op);
  }

  Stmt visit(const Evaluate *op) override {
    return has_side_effects(op->value) ? Stmt(op) : Stmt();
  }

  Stmt visit(const BufferStore *op) override {
    const auto *load = op->value.as<BufferLoad>();
    if (!load || !load->buffer->data.same_as(op->buffer->data) ||
        load->indices.size() != op->indices.size())
      return op;
    for (size_t d = 0; d < op->indices.size(); ++d)
      if (!structural_equal(load->indices[d], op->indices[d]))
        return op;
    return Stmt();
  }
};

} // namespace

Stmt remove_no_op(Stmt s) {
  Stmt out = NoOpRemover().mutate(s);
  return out.defined() ? out : Evaluate::make(0);
}

} // namespace tessel
