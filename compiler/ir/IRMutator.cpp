#include "compiler/ir/IRMutator.h"

#include "compiler/support/Error.h"

namespace tessel {

Expr IRMutator::mutate(const Expr &e) {
  if (!e.defined())
    return e;
  switch (e->kind()) {
#define TESSEL_EXPR_NODE(N)                                                                        \
  case N::static_kind:                                                                             \
    return visit(llvm::cast<N>(e.get()));
#include "compiler/ir/IRNodes.def"
  default:
    internal_error << "mutate(Expr) on a non-expression node";
  }
}

Stmt IRMutator::mutate(const Stmt &s) {
  if (!s.defined())
    return s;
  switch (s->kind()) {
#define TESSEL_STMT_NODE(N)                                                                        \
  case N::static_kind:                                                                             \
    return visit(llvm::cast<N>(s.get()));
#include "compiler/ir/IRNodes.def"
  default:
    internal_error << "mutate(Stmt) on a non-statement node";
  }
}

bool IRMutator::mutate_all(const std::vector<Expr> &in, std::vector<Expr> &out) {
  bool changed = false;
  out.clear();
  out.reserve(in.size());
  for (const Expr &e : in) {
    out.push_back(mutate(e));
    changed |= !out.back().same_as(e);
  }
  return changed;
}

Expr IRMutator::visit(const IntImm *op) { return op; }
Expr IRMutator::visit(const FloatImm *op) { return op; }
Expr IRMutator::visit(const StringImm *op) { return op; }
Expr IRMutator::visit(const Variable *op) { return op; }

#define TESSEL_MUTATE_BINARY(N)                                                                    \
  Expr IRMutator::visit(const N *op) {                                                             \
    Expr a = mutate(op->a), b = mutate(op->b);                                                     \
    if (a.same_as(op->a) && b.same_as(op->b))                                                      \
      return op;                                                                                   \
    return N::make(std::move(a), std::move(b));                                                    \
  }
TESSEL_MUTATE_BINARY(Add)
TESSEL_MUTATE_BINARY(Sub)
TESSEL_MUTATE_BINARY(Mul)
TESSEL_MUTATE_BINARY(FloorDiv)
TESSEL_MUTATE_BINARY(FloorMod)
TESSEL_MUTATE_BINARY(Div)
TESSEL_MUTATE_BINARY(Mod)
TESSEL_MUTATE_BINARY(Min)
TESSEL_MUTATE_BINARY(Max)
TESSEL_MUTATE_BINARY(EQ)
TESSEL_MUTATE_BINARY(NE)
TESSEL_MUTATE_BINARY(LT)
TESSEL_MUTATE_BINARY(LE)
TESSEL_MUTATE_BINARY(GT)
TESSEL_MUTATE_BINARY(GE)
TESSEL_MUTATE_BINARY(And)
TESSEL_MUTATE_BINARY(Or)
#undef TESSEL_MUTATE_BINARY

Expr IRMutator::visit(const Not *op) {
  Expr a = mutate(op->a);
  return a.same_as(op->a) ? Expr(op) : Not::make(std::move(a));
}

Expr IRMutator::visit(const Select *op) {
  Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
  if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value))
    return op;
  return Select::make(std::move(c), std::move(t), std::move(f));
}

Expr IRMutator::visit(const Cast *op) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? Expr(op) : Cast::make(op->type, std::move(v));
}

Expr IRMutator::visit(const Let *op) {
  Expr v = mutate(op->value), b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body))
    return op;
  return Let::make(op->var, std::move(v), std::move(b));
}

Expr IRMutator::visit(const Call *op) {
  std::vector<Expr> args;
  if (!mutate_all(op->args, args))
    return op;
  return Call::make(op->type, op->name, std::move(args), op->call_kind);
}

Expr IRMutator::visit(const BufferLoad *op) {
  std::vector<Expr> idx;
  if (!mutate_all(op->indices, idx))
    return op;
  return BufferLoad::make(op->buffer, std::move(idx));
}

Expr IRMutator::visit(const TensorLoad *op) {
  std::vector<Expr> idx;
  if (!mutate_all(op->indices, idx))
    return op;
  return TensorLoad::make(op->tensor, std::move(idx));
}

Expr IRMutator::visit(const Ramp *op) {
  Expr base = mutate(op->base), stride = mutate(op->stride);
  if (base.same_as(op->base) && stride.same_as(op->stride))
    return op;
  return Ramp::make(std::move(base), std::move(stride), op->lanes);
}

Expr IRMutator::visit(const Broadcast *op) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? Expr(op) : Broadcast::make(std::move(v), op->lanes);
}

Expr IRMutator::visit(const Reduce *op) {
  Expr src = mutate(op->source), cond = mutate(op->condition);
  Expr init = op->init.defined() ? mutate(op->init) : Expr();
  if (src.same_as(op->source) && cond.same_as(op->condition) && init.same_as(op->init))
    return op;
  return Reduce::make(op->combiner, std::move(src), op->axis, std::move(cond), std::move(init));
}

Stmt IRMutator::visit(const LetStmt *op) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body))
    return op;
  return LetStmt::make(op->var, std::move(v), std::move(b));
}

Stmt IRMutator::visit(const AttrStmt *op) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body))
    return op;
  return AttrStmt::make(op->node, op->key, std::move(v), std::move(b));
}

Stmt IRMutator::visit(const AssertStmt *op) {
  Expr c = mutate(op->condition);
  Stmt b = mutate(op->body);
  if (c.same_as(op->condition) && b.same_as(op->body))
    return op;
  return AssertStmt::make(std::move(c), op->message, std::move(b));
}

Stmt IRMutator::visit(const For *op) {
  Expr min = mutate(op->min), extent = mutate(op->extent);
  Stmt body = mutate(op->body);
  if (min.same_as(op->min) && extent.same_as(op->extent) && body.same_as(op->body))
    return op;
  return For::make(op->loop_var, std::move(min), std::move(extent), op->for_kind, std::move(body),
                   op->thread_tag);
}

Stmt IRMutator::visit(const Allocate *op) {
  std::vector<Expr> extents;
  bool changed = mutate_all(op->extents, extents);
  Stmt body = mutate(op->body);
  if (!changed && body.same_as(op->body))
    return op;
  return Allocate::make(op->buffer_var, op->dtype, std::move(extents), op->scope, std::move(body));
}

Stmt IRMutator::visit(const BufferRealize *op) {
  bool changed = false;
  std::vector<Range> bounds;
  for (const Range &r : op->bounds) {
    Range m(mutate(r.min), mutate(r.extent));
    changed |= !m.min.same_as(r.min) || !m.extent.same_as(r.extent);
    bounds.push_back(std::move(m));
  }
  Stmt body = mutate(op->body);
  if (!changed && body.same_as(op->body))
    return op;
  return BufferRealize::make(op->buffer, std::move(bounds), std::move(body));
}

Stmt IRMutator::visit(const BufferStore *op) {
  Expr v = mutate(op->value);
  std::vector<Expr> idx;
  bool changed = mutate_all(op->indices, idx);
  if (!changed && v.same_as(op->value))
    return op;
  return BufferStore::make(op->buffer, std::move(v), std::move(idx));
}

Stmt IRMutator::visit(const IfThenElse *op) {
  Expr c = mutate(op->condition);
  Stmt t = mutate(op->then_case), e = mutate(op->else_case);
  if (c.same_as(op->condition) && t.same_as(op->then_case) && e.same_as(op->else_case))
    return op;
  if (!t.defined() && !e.defined())
    return Stmt();
  if (!t.defined())
    return IfThenElse::make(Not::make(std::move(c)), std::move(e));
  return IfThenElse::make(std::move(c), std::move(t), std::move(e));
}

Stmt IRMutator::visit(const Seq *op) {
  bool changed = false;
  std::vector<Stmt> stmts;
  stmts.reserve(op->stmts.size());
  for (const Stmt &s : op->stmts) {
    stmts.push_back(mutate(s));
    changed |= !stmts.back().same_as(s);
  }
  if (!changed)
    return op;
  return Seq::make(std::move(stmts));
}

Stmt IRMutator::visit(const Evaluate *op) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? Stmt(op) : Evaluate::make(std::move(v));
}

} // namespace tessel
