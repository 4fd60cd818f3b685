#include "compiler/lower/Relations.h"

#include "compiler/ir/IROperator.h"
#include "compiler/schedule/TensorIntrin.h"
#include "compiler/support/Error.h"

namespace tessel {

int64_t const_extent(const DomainMap &dom, const IterVar &iv) {
  auto it = dom.find(iv.get());
  internal_check(it != dom.end()) << "no range for " << iv.name();
  auto v = as_const_int(it->second.extent);
  internal_check(v) << "extent of " << iv.name() << " is not a constant";
  return *v;
}

namespace {

// Whether `s` computes whole blocks past its range and writes only what lies inside: tensorized
// by an intrinsic that stores part of its block (TensorIntrin::partial_output), or a TMA store
// (its boxes clipped at the tensor's edges).
bool writes_partial_blocks(const StageNode *s) {
  if (s->bulk_copy && s->scope == "global")
    return true;
  for (const auto &entry : s->iter_var_attrs)
    if (entry.second.tensorize && entry.second.tensorize->partial_output)
      return true;
  return false;
}

} // namespace

void pass_down_domain(const StageNode *s, DomainMap &dom) {
  const bool partial_blocks = writes_partial_blocks(s);
  for (const IterVarRelation &rel : s->relations) {
    if (const auto *sp = std::get_if<SplitRelation>(&rel)) {
      int64_t e = const_extent(dom, sp->parent);
      int64_t outer, inner;
      user_check(sp->tail != TailStrategy::ShiftInwards || e >= *sp->factor, "split")
          << "stage '" << s->op.name() << "': axis '" << sp->parent.name() << "' has extent " << e
          << ", less than the split factor " << *sp->factor
          << " it shifts inwards by; use a factor of at most " << e << " or GuardWithIf";
      // A factor past the extent is cut to it, except for a reduction across threads: its
      // threads stay a power of two, the ones past the extent adding the identity; and for a
      // guarded split of a stage that writes partial blocks: its one block stays whole (what
      // is computed at it too: a wgmma tile of 64 rows for M = 16), its guard keeping the rest.
      const IterVarAttr *a = s->find_attr(sp->inner);
      bool across_threads = a && a->bind_thread.defined() && is_reduce_leaf(s, sp->inner);
      bool whole_block = partial_blocks && sp->tail == TailStrategy::GuardWithIf;
      if (sp->factor) {
        inner = across_threads || whole_block ? *sp->factor : std::min(*sp->factor, e);
        outer = (e + inner - 1) / inner;
      } else {
        outer = std::min(*sp->nparts, e);
        inner = (e + outer - 1) / outer;
      }
      dom[sp->outer.get()] = Range(0, int(outer));
      dom[sp->inner.get()] = Range(0, int(inner));
    } else {
      const auto &f = std::get<FuseRelation>(rel);
      int64_t e = const_extent(dom, f.outer) * const_extent(dom, f.inner);
      user_check(e <= INT32_MAX, "fuse")
          << "stage '" << s->op.name() << "': fusing '" << f.outer.name() << "' and '"
          << f.inner.name() << "' gives a loop of " << e
          << " iterations, more than a 32-bit loop counter holds; split it";
      dom[f.fused.get()] = Range(0, int(e));
    }
  }
}

VarMap pass_up_index(const StageNode *s, const DomainMap &dom,
                     const llvm::DenseMap<const IterVarNode *, Expr> &leaf_value,
                     bool add_root_min) {
  llvm::DenseMap<const IterVarNode *, Expr> value = leaf_value;
  for (auto it = s->relations.rbegin(); it != s->relations.rend(); ++it) {
    if (const auto *sp = std::get_if<SplitRelation>(&*it)) {
      Expr o = value.lookup(sp->outer.get()), i = value.lookup(sp->inner.get());
      internal_check(o.defined() && i.defined()) << "split of " << sp->parent.name();
      int64_t f = const_extent(dom, sp->inner);
      Expr start = o * make_const(o.type(), f);
      int64_t e = const_extent(dom, sp->parent);
      if (sp->tail == TailStrategy::ShiftInwards && e % f != 0)
        start = min(start, make_const(o.type(), e - f));
      value[sp->parent.get()] = start + i;
    } else {
      const auto &f = std::get<FuseRelation>(*it);
      Expr fused = value.lookup(f.fused.get());
      internal_check(fused.defined()) << "fuse into " << f.fused.name();
      Expr ext = make_const(fused.type(), const_extent(dom, f.inner));
      value[f.outer.get()] = floordiv(fused, ext);
      value[f.inner.get()] = floormod(fused, ext);
    }
  }
  VarMap out;
  for (const IterVar &root : root_iter_vars(s)) {
    Expr v = value.lookup(root.get());
    internal_check(v.defined()) << "no value for root axis " << root.name() << " of "
                                << s->op.name();
    const Expr &min = dom.lookup(root.get()).min;
    out[root.var().get()] = (!add_root_min || is_zero(min)) ? v : min + v;
  }
  return out;
}

std::vector<IterVar> root_iter_vars(const StageNode *s) {
  internal_check(s->op.as<ComputeOpNode>() || s->op.as<FoldOpNode>())
      << "root axes of placeholder " << s->op.name();
  std::vector<IterVar> out = op_axes(s->op.get());
  for (const IterVar &iv : op_reduce_axes(s->op.get()))
    out.push_back(iv);
  return out;
}

Var loop_var_of(const StageNode *s, const IterVar &leaf) {
  if (const IterVarAttr *a = s->find_attr(leaf); a && a->bind_thread.defined())
    return a->bind_thread.var();
  return leaf.var();
}

Var loop_value_of(const StageNode *s, const IterVar &leaf) {
  if (const auto &r = s->rasterization) {
    if (r->rows.same_as(leaf))
      return r->row;
    if (r->cols.same_as(leaf))
      return r->col;
  }
  if (const IterVarAttr *a = s->find_attr(leaf); a && a->reversed.defined())
    return a->reversed;
  return loop_var_of(s, leaf);
}

bool is_reduce_leaf(const StageNode *, const IterVar &iv) {
  // Split and fuse give their results the type of their inputs, so the type tells. A fold's
  // axis accumulates into its states as a reduction's into its output.
  return iv.iter_type() == IterVarType::CommReduce || iv.iter_type() == IterVarType::Ordered;
}

} // namespace tessel
