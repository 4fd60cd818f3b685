#include "compiler/lower/InferBound.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/arith/IndexInterval.h"
#include "compiler/support/Error.h"

namespace tessel {

bool needs_relax(const std::string &tag, const std::string &scope) {
  if (scope == "global")
    return true;
  if (scope == "shared")
    return tag.rfind("threadIdx", 0) == 0 || tag.rfind("vthread", 0) == 0;
  return false;
}

namespace {

size_t leaf_position(const StageNode *s, const IterVar &iv) {
  for (size_t i = 0; i < s->leaf_iter_vars.size(); ++i)
    if (s->leaf_iter_vars[i].same_as(iv))
      return i;
  internal_error << iv.name() << " is not a loop of " << s->op.name();
}

// What each loop variable ranges over while `consumer` reads `producer`, seen from the
// producer's attach point (see the file comment of InferBound.h).
VarIntervals consumer_env(const StageNode *producer, const StageNode *consumer,
                          const DomainMap &dom) {
  const StageNode *P = producer->attach_type == AttachType::Scope ? producer->attach_stage : nullptr;
  VarIntervals env;
  bool inside = true, reached = P == nullptr;
  // A global stage computed in another stage's kernel covers its block's share, for all of the
  // block's threads (lower(): computed once a block), as shared memory does.
  const std::string &relax_scope =
      producer->scope == "global" && P ? std::string("shared") : producer->scope;
  for (const StageNode *x = consumer; x;
       x = x->attach_type == AttachType::Scope ? x->attach_stage : nullptr) {
    size_t p_index = x == P ? leaf_position(x, producer->attach_ivar) : 0;
    for (size_t i = 0; i < x->leaf_iter_vars.size(); ++i) {
      const IterVar &iv = x->leaf_iter_vars[i];
      bool in = x == P ? i > p_index : inside;
      const IterVarAttr *a = x->find_attr(iv);
      bool bound = a && a->bind_thread.defined();
      // A loop on threadIdx inside the attach point of a 'local' producer (or of a warp's or
      // a warpgroup's fragments) is one index for each thread (warp, warpgroup), which
      // computes its own copy: the producer covers that index, not the range.
      const bool own_copy = producer->scope == "local" ||
                            producer->scope.rfind("wmma.", 0) == 0 ||
                            producer->scope.rfind("mma.", 0) == 0 ||
                            producer->scope.rfind("wgmma.", 0) == 0;
      if (in && bound && own_copy && a->bind_thread.thread_tag().rfind("threadIdx", 0) == 0)
        in = false;
      if (in || (bound && needs_relax(a->bind_thread.thread_tag(), relax_scope)))
        env[loop_value_of(x, iv).get()] = IndexInterval::constant(0, const_extent(dom, iv) - 1);
    }
    if (x == P) {
      inside = false;
      reached = true;
    }
    // The consumer (or a stage it sits in) must be inside P's attach loop.
    if (P && x->attach_type == AttachType::Scope && x->attach_stage == P) {
      size_t q = leaf_position(P, x->attach_ivar), p = leaf_position(P, producer->attach_ivar);
      user_check(q >= p, "compute_at")
          << "stage '" << producer->op.name() << "' is computed at '" << P->op.name() << "' loop '"
          << producer->attach_ivar.name() << "', but its consumer '" << consumer->op.name()
          << "' is computed at '" << P->op.name() << "' loop '" << x->attach_ivar.name()
          << "', outside of it. Compute '" << producer->op.name() << "' at an outer loop.";
    }
  }
  user_check(reached, "compute_at")
      << "stage '" << producer->op.name() << "' is computed at '" << P->op.name()
      << "', but its consumer '" << consumer->op.name() << "' is not computed inside '"
      << P->op.name() << "'; compute '" << producer->op.name()
      << "' at a stage whose loops enclose all its consumers";
  return env;
}

// Whether `consumer` is `root` or computed inside its loops.
bool inside_kernel_of(const StageNode *consumer, const StageNode *root) {
  for (const StageNode *x = consumer; x;
       x = x->attach_type == AttachType::Scope ? x->attach_stage : nullptr)
    if (x == root)
      return true;
  return false;
}

// The region of `producer`'s output that `consumer` reads, per dimension.
std::vector<std::optional<IndexInterval>> consumer_region(const StageNode *producer,
                                                          const StageNode *consumer,
                                                          const Expr &body,
                                                          const DomainMap &dom,
                                                          const ScheduleNode *sch) {
  VarIntervals env = consumer_env(producer, consumer, dom);
  llvm::DenseMap<const IterVarNode *, Expr> leaf_value;
  for (const IterVar &iv : consumer->leaf_iter_vars)
    leaf_value[iv.get()] = loop_value_of(consumer, iv);
  VarMap root_value = pass_up_index(consumer, dom, leaf_value);
  // A fold's own axes (of its states beyond the shared ones) run whole in its stores.
  if (const auto *f = consumer->op.as<FoldOpNode>())
    for (const auto &extra : f->extra_axis)
      for (const IterVar &iv : extra)
        env[iv.var().get()] = IndexInterval::constant(0, *as_const_int(iv->dom.extent) - 1);
  // Root variables stand for their values; loop variables keep their intervals from env.
  size_t ndim = op_axes(producer->op.get()).size();
  std::vector<std::optional<IndexInterval>> region(ndim);
  std::vector<bool> seen(ndim, false);
  post_order_visit(body, [&](const IRNode *n) {
    const auto *load = llvm::dyn_cast<TensorLoad>(n);
    if (!load || stage_of(sch, load->tensor) != producer)
      return;
    for (size_t d = 0; d < ndim; ++d) {
      std::optional<IndexInterval> iv =
          eval_interval(substitute(load->indices[d], root_value), env);
      if (!seen[d]) {
        region[d] = iv;
        seen[d] = true;
      } else if (region[d] && iv) {
        region[d] = union_interval(*region[d], *iv);
      } else {
        region[d] = std::nullopt;
      }
    }
  });
  return region;
}

} // namespace

DomainMap infer_bound(const ScheduleNode *sch, const StageBodies &bodies) {
  DomainMap dom;
  for (auto it = sch->stages.rbegin(); it != sch->stages.rend(); ++it) {
    const StageNode *s = it->get();
    if (!(s->op.as<ComputeOpNode>() || s->op.as<FoldOpNode>()) ||
        s->attach_type == AttachType::Inline)
      continue;
    // A fold's region is that of its shared axes (its states' own axes are whole).
    const std::vector<IterVar> &axes = op_axes(s->op.get());
    std::vector<Expr> shape;
    for (const IterVar &iv : axes)
      shape.push_back(iv->dom.extent);
    std::vector<std::optional<IndexInterval>> region(shape.size());
    // Outputs, and workspaces (global stages at the root: a kernel of their own writes them
    // whole, LoweredModule), cover their shape.
    if (s->is_output || (s->scope == "global" && s->attach_type == AttachType::Root)) {
      for (size_t d = 0; d < shape.size(); ++d)
        region[d] = IndexInterval::constant(0, *as_const_int(shape[d]) - 1);
    } else {
      auto cit = bodies.consumers.find(s);
      user_check(cit != bodies.consumers.end() && !cit->second.empty(), "lower")
          << "stage '" << s->op.name() << "' is computed but nothing reads it";
      bool first = true;
      for (const StageNode *consumer : cit->second) {
        // A global stage computed in another stage's kernel (once a block, lower()) writes
        // what that kernel reads; its readers in later kernels read what every block wrote.
        if (s->scope == "global" && !inside_kernel_of(consumer, s->attach_stage))
          continue;
        auto r = consumer_region(s, consumer, bodies.body.lookup(consumer), dom, sch);
        for (size_t d = 0; d < shape.size(); ++d) {
          if (first)
            region[d] = r[d];
          else if (region[d] && r[d])
            region[d] = union_interval(*region[d], *r[d]);
          else
            region[d] = std::nullopt;
        }
        first = false;
      }
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t n = *as_const_int(shape[d]);
      IndexInterval iv = region[d].value_or(IndexInterval::constant(0, n - 1));
      if (!iv.has_base()) {
        iv.lo = std::max<int64_t>(iv.lo, 0);
        iv.hi = std::min<int64_t>(iv.hi, n - 1);
        internal_check(iv.lo <= iv.hi) << "empty region of " << s->op.name() << " dim " << d;
      } else if (iv.extent() > n) {
        iv.hi = iv.lo + n - 1;
      }
      dom[axes[d].get()] = Range(iv.min_expr(), Expr(static_cast<int>(iv.extent())));
    }
    for (const IterVar &r : op_reduce_axes(s->op.get()))
      dom[r.get()] = r->dom;
    pass_down_domain(s, dom);
  }
  return dom;
}

} // namespace tessel
