#include "compiler/passes/WgmmaSync.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/passes/IntrinsicStmt.h"
#include "compiler/support/Error.h"

namespace tessel {

namespace {

using passes_detail::intrinsic_stmt;
using passes_detail::is_intrinsic_stmt;

// A statement that does nothing but issue wgmma_mma.
bool issues_only_wgmma(const Stmt &s) {
  if (is_intrinsic_stmt(s, intrinsic::wgmma_mma) || is_intrinsic_stmt(s, intrinsic::wgmma_mma_rs))
    return true;
  if (const auto *q = s.as<Seq>()) {
    for (const Stmt &x : q->stmts)
      if (!issues_only_wgmma(x))
        return false;
    return !q->stmts.empty();
  }
  if (const auto *f = s.as<For>())
    return issues_only_wgmma(f->body);
  if (const auto *a = s.as<AttrStmt>())
    return issues_only_wgmma(a->body);
  if (const auto *l = s.as<LetStmt>())
    return issues_only_wgmma(l->body);
  return false;
}

class UsesWgmma : public IRVisitor {
public:
  bool found = false;

protected:
  void visit(const Call *op) override {
    found |= op->is_intrinsic(intrinsic::wgmma_mma) || op->is_intrinsic(intrinsic::wgmma_mma_rs);
    IRVisitor::visit(op);
  }
};

class WgmmaSyncs : public IRMutator {
public:
  Stmt mutate(const Stmt &s) override {
    if (s.defined() && issues_only_wgmma(s))
      return bracket({s});
    return IRMutator::mutate(s);
  }

protected:
  Stmt bracket(std::vector<Stmt> run) const {
    run.insert(run.begin(), intrinsic_stmt(intrinsic::wgmma_fence));
    run.push_back(intrinsic_stmt(intrinsic::wgmma_commit));
    run.push_back(intrinsic_stmt(intrinsic::wgmma_wait, {Expr(in_flight_)}));
    return Seq::make(std::move(run));
  }

  // A pipelined loop whose fills stay behind its reads: its runs may stay in flight; all of
  // them have landed after it.
  Stmt visit(const AttrStmt *op) override {
    if (op->key != attr::pipeline_async_reads)
      return IRMutator::visit(op);
    auto lag = as_const_int(op->value);
    internal_check(lag && *lag >= 0 && *lag <= 7) << "pipeline_async_reads " << op->value;
    int outer = in_flight_;
    in_flight_ = int(*lag);
    Stmt loop = mutate(op->body);
    in_flight_ = outer;
    return Seq::make({loop, intrinsic_stmt(intrinsic::wgmma_wait, {Expr(in_flight_)})});
  }

  Stmt visit(const Seq *op) override {
    std::vector<Stmt> out, run;
    auto flush = [&] {
      if (!run.empty())
        out.push_back(bracket(std::move(run)));
      run.clear();
    };
    for (const Stmt &x : op->stmts) {
      if (issues_only_wgmma(x)) {
        run.push_back(x);
        continue;
      }
      flush();
      // A barrier already fenced (a TMA store's protocol) needs no second fence.
      if (is_intrinsic_stmt(x, intrinsic::syncthreads) && !out.empty() &&
          is_intrinsic_stmt(out.back(), intrinsic::fence_proxy_async)) {
        out.push_back(x);
        continue;
      }
      out.push_back(mutate(x));
    }
    flush();
    return Seq::make(std::move(out));
  }

  Stmt visit(const Evaluate *op) override {
    Stmt self(op);
    if (is_intrinsic_stmt(self, intrinsic::syncthreads))
      return Seq::make({intrinsic_stmt(intrinsic::fence_proxy_async), self});
    return self;
  }

private:
  int in_flight_ = 0; ///< groups a run may leave in flight
};

} // namespace

Stmt insert_wgmma_syncs(Stmt s) {
  UsesWgmma uses;
  uses.visit_stmt(s);
  if (!uses.found)
    return s;
  return WgmmaSyncs().mutate(s);
}

} // namespace tessel
