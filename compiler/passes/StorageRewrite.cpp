#include "compiler/passes/StorageRewrite.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Substitute.h"

#include <llvm/ADT/DenseMap.h>

namespace tessel {

namespace {

bool is_thread_extent(const Stmt &s) {
  const auto *a = s.as<AttrStmt>();
  return a && a->key == attr::thread_extent;
}

bool on_chip(const Allocate *op) { return op->scope != "global" && op->constant_size() >= 0; }

// Whether a var is used outside / inside the kernels (thread_extent subtrees) of a statement,
// and in how many of them.
class KernelUseFinder : public IRVisitor {
public:
  explicit KernelUseFinder(const Variable *var) : var_(var) {}
  bool inside = false, outside = false;
  int kernels = 0;

protected:
  void visit(const AttrStmt *op) override {
    if (depth_ == 0 && op->key == attr::thread_extent) {
      bool before = inside;
      inside = false;
      ++depth_;
      IRVisitor::visit(op);
      --depth_;
      kernels += inside;
      inside = inside || before;
      return;
    }
    IRVisitor::visit(op);
  }
  void visit(const Variable *op) override { note(op); }
  void visit(const BufferLoad *op) override {
    note(op->buffer->data.get());
    IRVisitor::visit(op);
  }
  void visit(const BufferStore *op) override {
    note(op->buffer->data.get());
    IRVisitor::visit(op);
  }

private:
  void note(const ExprNode *v) {
    if (v == var_)
      (depth_ ? inside : outside) = true;
  }
  const Variable *var_;
  int depth_ = 0;
};

class AllocationHoister : public IRMutator {
protected:
  Stmt visit(const AttrStmt *op) override {
    if (in_kernel_ || op->key != attr::thread_extent)
      return IRMutator::visit(op);
    // A kernel: peel its leading thread_extent attrs, hoist the body's allocations, then wrap
    // them just inside the attrs.
    std::vector<Stmt> chain; // the attrs themselves, held: some are the mutated body's
    Stmt body = peel(Stmt(op), chain);
    in_kernel_ = true;
    hoisted_.clear();
    index_.clear();
    for (const Allocate *a : pending_)
      if (uses_var(body, a->buffer_var))
        hoist(a);
    body = peel(mutate(body), chain);
    in_kernel_ = false;
    for (size_t k = hoisted_.size(); k-- > 0;) {
      const Hoisted &h = hoisted_[k];
      body = Allocate::make(h.alloc->buffer_var, h.alloc->dtype, {h.size}, h.alloc->scope, body);
    }
    for (size_t k = chain.size(); k-- > 0;) {
      const auto *a = chain[k].as<AttrStmt>();
      body = AttrStmt::make(a->node, a->key, a->value, body);
    }
    return body;
  }

  Stmt visit(const Allocate *op) override {
    if (!uses_var(op->body, op->buffer_var))
      return mutate(op->body); // never used
    if (in_kernel_ && on_chip(op) && hoist(op))
      return mutate(op->body);
    if (!in_kernel_ && on_chip(op)) {
      KernelUseFinder f(op->buffer_var.get());
      f.visit_stmt(op->body);
      // Used by two thread_extent subtrees: both are one kernel's (shared memory does not
      // outlive a kernel), so the allocation stays around them, one buffer for both.
      if (f.inside && !f.outside && f.kernels == 1) {
        pending_.push_back(op);
        Stmt body = mutate(op->body);
        pending_.pop_back();
        return body;
      }
    }
    return IRMutator::visit(op);
  }

private:
  struct Hoisted {
    const Allocate *alloc;
    Expr size;
  };

  // Held, not pointed to: a peeled attr of a temporary body (the mutated one) would otherwise
  // be freed under the chain (a heap-use-after-free ASan found).
  static Stmt peel(Stmt s, std::vector<Stmt> &chain) {
    while (is_thread_extent(s)) {
      chain.push_back(s);
      s = s.as<AttrStmt>()->body;
    }
    return s;
  }

  // Records an allocation to declare at the kernel top; false if it clashes with an earlier
  // one of the same var (another dtype or scope), which then stays where it is.
  bool hoist(const Allocate *op) {
    auto [it, fresh] = index_.try_emplace(op->buffer_var.get(), hoisted_.size());
    if (fresh) {
      Expr size = op->extents.size() == 1 ? op->extents[0]
                                          : make_const(Int(32), op->constant_size());
      hoisted_.push_back({op, size});
      return true;
    }
    Hoisted &h = hoisted_[it->second];
    if (h.alloc->dtype != op->dtype || h.alloc->scope != op->scope)
      return false;
    if (op->constant_size() > *as_const_int(h.size))
      h.size = make_const(h.size.type(), op->constant_size());
    return true;
  }

  bool in_kernel_ = false;
  std::vector<Hoisted> hoisted_;
  llvm::DenseMap<const Variable *, size_t> index_;
  std::vector<const Allocate *> pending_; ///< on-chip allocations outside kernels, moving in
};

} // namespace

Stmt storage_rewrite(Stmt s) { return AllocationHoister().mutate(s); }

} // namespace tessel
