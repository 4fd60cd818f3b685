#include "compiler/ir/Substitute.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IRVisitor.h"

namespace tessel {

namespace {

class Substituter : public IRMutator {
public:
  explicit Substituter(const VarMap &vmap) : vmap_(vmap) {}

  using IRMutator::mutate;

protected:
  Expr visit(const Variable *op) override {
    auto it = vmap_.find(op);
    return it == vmap_.end() ? Expr(op) : it->second;
  }

private:
  const VarMap &vmap_;
};

class VarUseFinder : public IRVisitor {
public:
  explicit VarUseFinder(const std::function<bool(const Variable *)> &pred) : pred_(pred) {}
  bool found = false;

protected:
  void visit(const Variable *op) override { found = found || pred_(op); }
  void visit(const BufferLoad *op) override {
    if (const auto *v = op->buffer->data.as<Variable>())
      found = found || pred_(v);
    IRVisitor::visit(op);
  }
  void visit(const BufferStore *op) override {
    if (const auto *v = op->buffer->data.as<Variable>())
      found = found || pred_(v);
    IRVisitor::visit(op);
  }
  void visit(const For *op) override {
    found = found || pred_(op->loop_var.get());
    IRVisitor::visit(op);
  }

private:
  const std::function<bool(const Variable *)> &pred_;
};

} // namespace

Expr substitute(const Expr &e, const VarMap &vmap) {
  if (vmap.empty())
    return e;
  return Substituter(vmap).mutate(e);
}

Stmt substitute(const Stmt &s, const VarMap &vmap) {
  if (vmap.empty())
    return s;
  return Substituter(vmap).mutate(s);
}

Expr substitute(const Expr &e, const Var &v, const Expr &replacement) {
  VarMap m;
  m[v.get()] = replacement;
  return substitute(e, m);
}

Stmt substitute(const Stmt &s, const Var &v, const Expr &replacement) {
  VarMap m;
  m[v.get()] = replacement;
  return substitute(s, m);
}

bool uses_var(const Expr &e, const std::function<bool(const Variable *)> &pred) {
  VarUseFinder f(pred);
  f.visit_expr(e);
  return f.found;
}

bool uses_var(const Stmt &s, const std::function<bool(const Variable *)> &pred) {
  VarUseFinder f(pred);
  f.visit_stmt(s);
  return f.found;
}

bool uses_var(const Expr &e, const Var &v) {
  return uses_var(e, [&](const Variable *x) { return x == v.get(); });
}

bool uses_var(const Stmt &s, const Var &v) {
  return uses_var(s, [&](const Variable *x) { return x == v.get(); });
}

std::vector<Var> free_vars(const Expr &e) {
  std::vector<Var> out;
  llvm::DenseSet<const Variable *> seen;
  post_order_visit(e, [&](const IRNode *n) {
    if (const auto *v = llvm::dyn_cast<Variable>(n))
      if (seen.insert(v).second)
        out.push_back(Var(v));
  });
  return out;
}

} // namespace tessel
