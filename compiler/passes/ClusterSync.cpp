#include "compiler/passes/ClusterSync.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/passes/IntrinsicStmt.h"

namespace tessel {

namespace {

using passes_detail::contains;
using passes_detail::intrinsic_stmt;
using passes_detail::is_intrinsic_stmt;

bool is_clustered(const Stmt &s) {
  return contains(s, [](const IRNode *n) {
    const auto *a = llvm::dyn_cast<AttrStmt>(n);
    return a && a->key == attr::cluster_extent;
  });
}

bool inits_barriers(const Stmt &s) {
  return contains(s, [](const IRNode *n) {
    const auto *c = llvm::dyn_cast<Call>(n);
    return c && c->is_intrinsic(intrinsic::fence_barrier_init);
  });
}

// A cluster_sync after every syncthreads that follows a barrier initialization in the same
// statement list, outside the roles' branches (which not every thread runs).
class AfterInit : public IRMutator {
protected:
  Stmt visit(const AttrStmt *op) override {
    if (op->key == attr::warp_specialize)
      return Stmt(op);
    return IRMutator::visit(op);
  }
  Stmt visit(const Seq *op) override {
    Stmt s = IRMutator::visit(op);
    const auto *q = s.as<Seq>();
    std::vector<Stmt> out;
    bool initialized = false;
    for (const Stmt &x : q->stmts) {
      out.push_back(x);
      initialized |= inits_barriers(x);
      if (initialized && is_intrinsic_stmt(x, intrinsic::syncthreads)) {
        out.push_back(intrinsic_stmt(intrinsic::cluster_sync));
        initialized = false;
      }
    }
    return Seq::make(std::move(out));
  }
};

// `s` with a cluster_sync at the end of the work inside its attributes (thread bindings),
// lets and allocations.
Stmt at_exit(const Stmt &s) {
  if (const auto *a = s.as<AttrStmt>())
    return AttrStmt::make(a->node, a->key, a->value, at_exit(a->body));
  if (const auto *l = s.as<LetStmt>())
    return LetStmt::make(l->var, l->value, at_exit(l->body));
  if (const auto *a = s.as<Allocate>())
    return Allocate::make(a->buffer_var, a->dtype, a->extents, a->scope, at_exit(a->body));
  return Seq::make({s, intrinsic_stmt(intrinsic::cluster_sync)});
}

} // namespace

Stmt insert_cluster_syncs(Stmt s) {
  // The root's statements are the module's kernels (split_host_device): each on its own.
  if (const auto *q = s.as<Seq>()) {
    std::vector<Stmt> kernels;
    for (const Stmt &x : q->stmts)
      kernels.push_back(insert_cluster_syncs(x));
    return Seq::make(std::move(kernels));
  }
  if (!is_clustered(s))
    return s;
  return at_exit(AfterInit().mutate(s));
}

} // namespace tessel
