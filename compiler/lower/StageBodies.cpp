#include "compiler/lower/StageBodies.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Substitute.h"
#include "compiler/support/Error.h"

namespace tessel {

StageNode *stage_of(const ScheduleNode *sch, const Tensor &t) {
  return sch->stage_map.lookup(t.op().get());
}

namespace {

class Inliner : public IRMutator {
public:
  Inliner(const ScheduleNode *sch, const llvm::DenseMap<const StageNode *, Expr> &inlined)
      : sch_(sch), inlined_(inlined) {}
  using IRMutator::mutate;

protected:
  Expr visit(const TensorLoad *op) override {
    Expr e = IRMutator::visit(op);
    const auto *load = e.as<TensorLoad>();
    const StageNode *st = stage_of(sch_, load->tensor);
    if (!st || st->attach_type != AttachType::Inline)
      return e;
    const auto *c = st->op.as<ComputeOpNode>();
    VarMap vmap;
    for (size_t i = 0; i < c->axis.size(); ++i)
      vmap[c->axis[i].var().get()] = load->indices[i];
    return substitute(inlined_.lookup(st), vmap);
  }

private:
  const ScheduleNode *sch_;
  const llvm::DenseMap<const StageNode *, Expr> &inlined_;
};

} // namespace

StageBodies inline_stages(const ScheduleNode *sch) {
  llvm::DenseMap<const StageNode *, Expr> all;
  StageBodies out;
  // Stages are in topological order, so an inline stage's own body is ready before its readers.
  for (const auto &st : sch->stages) {
    const auto *c = st->op.as<ComputeOpNode>();
    const auto *f = st->op.as<FoldOpNode>();
    if (!c && !f)
      continue;
    Expr whole;
    if (f) {
      std::vector<Expr> parts = f->update;
      parts.push_back(f->where.defined() ? f->where : const_true());
      whole = Call::make(Handle(), "tuple", parts, Call::PureIntrinsic);
    }
    Expr body = Inliner(sch, all).mutate(c ? c->body : whole);
    all[st.get()] = body;
    if (st->attach_type == AttachType::Inline)
      continue;
    out.body[st.get()] = body;
    post_order_visit(body, [&](const IRNode *n) {
      const auto *load = llvm::dyn_cast<TensorLoad>(n);
      if (!load)
        return;
      // A fold's running states are its own storage, not a producer's.
      if (load->tensor.op().as<FoldStateOpNode>())
        return;
      StageNode *producer = stage_of(sch, load->tensor);
      internal_check(producer) << "tensor " << load->tensor.name() << " has no stage";
      auto &cons = out.consumers[producer];
      if (std::find(cons.begin(), cons.end(), st.get()) == cons.end())
        cons.push_back(st.get());
    });
  }
  return out;
}

FoldParts fold_parts(const Expr &body) {
  const auto *call = body.as<Call>();
  internal_check(call && call->name == "tuple" && !call->args.empty()) << "not a fold's body";
  return {std::vector<Expr>(call->args.begin(), call->args.end() - 1), call->args.back()};
}

} // namespace tessel
