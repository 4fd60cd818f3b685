#include "compiler/schedule/Schedule.h"

#include "compiler/arith/IndexInterval.h"
#include "compiler/lower/Relations.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Substitute.h"
#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"

#include <algorithm>

namespace tessel {

namespace {

// Replaces reads of the tensors in `from` by reads of `to` at the same indices.
class TensorReplacer : public IRMutator {
public:
  TensorReplacer(std::vector<Tensor> from, Tensor to) : from_(std::move(from)), to_(std::move(to)) {}
  using IRMutator::mutate;

protected:
  Expr visit(const TensorLoad *op) override {
    Expr e = IRMutator::visit(op);
    const auto *load = e.as<TensorLoad>();
    if (std::find(from_.begin(), from_.end(), load->tensor) != from_.end())
      return TensorLoad::make(to_, load->indices);
    return e;
  }

private:
  std::vector<Tensor> from_;
  Tensor to_;
};

// A ComputeOp like `op` with another body (same axes, so the user's axis handles stay valid).
Operation with_body(const ComputeOpNode *op, Expr body) {
  return Operation(new ComputeOpNode(op->name, op->axis, op->reduce_axis, std::move(body)));
}

std::unique_ptr<StageNode> make_stage(const Operation &op, ScheduleNode *sch) {
  auto st = std::make_unique<StageNode>();
  st->op = op;
  st->origin_op = op;
  st->schedule = sch;
  st->all_iter_vars = op_axes(op.get());
  for (const IterVar &iv : op_reduce_axes(op.get()))
    st->all_iter_vars.push_back(iv);
  st->leaf_iter_vars = st->all_iter_vars;
  return st;
}

// The tensors of a fold's step (those reading its states, directly or through others) start
// computed at its fold axis in local memory: one step's slice, at each step.
void attach_fold_steps(ScheduleNode *sch) {
  const auto reads = fold_steps(sch);
  for (const auto &st : sch->stages) {
    auto it = reads.find(st->op.get());
    if (it == reads.end() || !st->op.as<ComputeOpNode>())
      continue;
    StageNode *fold = sch->stage_map.lookup(*it->second.begin());
    st->attach_type = AttachType::Scope;
    st->attach_stage = fold;
    st->attach_ivar = fold->op.as<FoldOpNode>()->fold_axis;
    st->scope = "local";
  }
}

size_t stage_position(const ScheduleNode *sch, const StageNode *s) {
  for (size_t i = 0; i < sch->stages.size(); ++i)
    if (sch->stages[i].get() == s)
      return i;
  internal_error << "stage " << s->op.name() << " is not in its schedule";
}

} // namespace

// ---- Schedule -------------------------------------------------------------------------------

Schedule create_schedule(const std::vector<Tensor> &outputs) {
  user_check(!outputs.empty(), "create_schedule") << "needs at least one output tensor";
  auto sch = std::make_shared<ScheduleNode>();
  sch->outputs = outputs;
  for (const Operation &op : topological_order(outputs)) {
    if (op.as<FoldStateOpNode>()) // a fold's buffer: it maps to the fold's stage below
      continue;
    auto st = make_stage(op, sch.get());
    sch->stage_map[op.get()] = st.get();
    if (const auto *f = op.as<FoldOpNode>())
      for (const Tensor &state : f->states)
        sch->stage_map[state.op().get()] = st.get();
    sch->stages.push_back(std::move(st));
  }
  attach_fold_steps(sch.get());
  for (const Tensor &t : outputs) {
    StageNode *st = sch->stage_map.lookup(t.op().get());
    user_check(st && !t.op().as<FoldStateOpNode>(), "create_schedule")
        << "output '" << t.name() << "' is the running state of a fold; give the fold's result "
        << "(what fold() returned) instead";
    user_check(!st->op.as<FoldOpNode>(), "create_schedule")
        << "output '" << t.name() << "' is a state of fold '" << st->op.name()
        << "'; compute an output from it (O = o / l), and compute the fold at that output's loops";
    user_check(st->op.as<ComputeOpNode>(), "create_schedule")
        << "output '" << t.name() << "' is a placeholder; outputs must be computed tensors";
    st->is_output = true;
  }
  return Schedule(std::move(sch));
}

llvm::DenseMap<const OperationNode *, llvm::DenseSet<const OperationNode *>>
fold_steps(const ScheduleNode *sch) {
  std::vector<Operation> order;
  for (const auto &st : sch->stages)
    order.push_back(st->op);
  return fold_states_read(order);
}

Stage Schedule::operator[](const Operation &op) const {
  internal_check(n_) << "using an empty schedule";
  auto it = n_->stage_map.find(op.get());
  user_check(it != n_->stage_map.end(), "Schedule")
      << "tensor '" << (op.defined() ? op.name() : "?")
      << "' is not part of this schedule (it is not needed by its outputs)";
  return Stage(it->second);
}

Stage Schedule::operator[](const Tensor &t) const { return (*this)[t.op()]; }

Stage Schedule::stage(const std::string &name) const {
  std::string names;
  for (const auto &st : n_->stages) {
    if (st->op.name() == name || st->origin_op.name() == name)
      return Stage(st.get());
    names += (names.empty() ? "" : ", ") + st->op.name();
  }
  user_error("Schedule") << "no stage named '" << name << "'; the stages are: " << names;
}

std::vector<Stage> Schedule::stages() const {
  std::vector<Stage> out;
  for (const auto &st : n_->stages)
    out.emplace_back(st.get());
  return out;
}

Tensor Schedule::cache_read(const Tensor &t, const std::string &scope,
                            const std::vector<Tensor> &readers) {
  Stage src = (*this)[t];
  user_check(!readers.empty(), "cache_read")
      << "cache of '" << t.name() << "' needs at least one reader";
  // The cache reads what t's stage computes now.
  Tensor current = src.op().output(t.value_index());
  std::vector<Expr> shape = t.shape();
  std::vector<std::string> names;
  for (size_t i = 0; i < shape.size(); ++i)
    names.push_back("ax" + std::to_string(i));
  Tensor cache = compute_from_vars(
      shape, [&](const std::vector<Var> &v) { return current(std::vector<Expr>(v.begin(), v.end())); },
      t.name() + "." + scope, names);

  TensorReplacer replace({t, current}, cache);
  for (const Tensor &r : readers) {
    Stage rs = (*this)[r];
    const auto *c = rs.op().as<ComputeOpNode>();
    user_check(c, "cache_read") << "reader '" << r.name() << "' is a placeholder";
    Expr body = replace.mutate(c->body);
    user_check(!body.same_as(c->body), "cache_read")
        << "'" << r.name() << "' does not read '" << t.name() << "'; list only its readers";
    rs.get()->op = with_body(c, body);
    n_->stage_map[rs.get()->op.get()] = rs.get();
  }
  auto st = make_stage(cache.op(), n_.get());
  StageNode *raw = st.get();
  n_->stage_map[cache.op().get()] = raw;
  n_->stages.insert(n_->stages.begin() + stage_position(n_.get(), src.get()) + 1, std::move(st));
  Stage(raw).set_scope(scope);
  return cache;
}

Tensor Schedule::cache_write(const Tensor &t, const std::string &scope) {
  Stage st = (*this)[t];
  Operation old = st.op(); // keeps `c` alive while the stage's op is replaced below
  const auto *c = old.as<ComputeOpNode>();
  user_check(c, "cache_write") << "'" << t.name() << "' is a placeholder; it has nothing to cache";
  // A tensor of a fold's step starts at the fold's axis (create_schedule): so does its cache.
  const StageNode *fold = st.attach_type() == AttachType::Scope ? st.attach_stage() : nullptr;
  const bool at_fold = fold && fold->op.as<FoldOpNode>() &&
                       st.attach_ivar().same_as(fold->op.as<FoldOpNode>()->fold_axis);
  user_check(st.relations().empty() && (st.attach_type() == AttachType::Root || at_fold),
             "cache_write")
      << "stage '" << t.name() << "' is already scheduled; call cache_write before scheduling it";
  // The cache computes the original body over fresh data axes ("n.c") and the same reduce axes,
  // so the user's reduce axes can still be split on the cache stage (the seed splits ic).
  VarMap vmap;
  std::vector<IterVar> axis;
  for (const IterVar &iv : c->axis) {
    Var v(iv.name() + ".c");
    vmap[iv.var().get()] = v;
    axis.push_back(IterVar::make(iv->dom, v, IterVarType::DataPar));
  }
  Expr body = substitute(c->body, vmap);
  Operation cache_op(new ComputeOpNode(t.name() + "." + scope, axis, c->reduce_axis, body));
  Tensor cache = cache_op.output(0);

  std::vector<Expr> idx;
  for (const IterVar &iv : c->axis)
    idx.push_back(iv.var());
  StageNode *sn = st.get();
  sn->op = Operation(new ComputeOpNode(c->name, c->axis, {}, cache(idx)));
  n_->stage_map[sn->op.get()] = sn;
  sn->all_iter_vars = c->axis;
  sn->leaf_iter_vars = c->axis;

  auto cs = make_stage(cache_op, n_.get());
  StageNode *raw = cs.get();
  n_->stage_map[cache_op.get()] = raw;
  n_->stages.insert(n_->stages.begin() + stage_position(n_.get(), sn), std::move(cs));
  Stage(raw).set_scope(scope);
  if (at_fold) {
    raw->attach_type = AttachType::Scope;
    raw->attach_stage = sn->attach_stage;
    raw->attach_ivar = sn->attach_ivar;
  }
  return cache;
}

Tensor Schedule::rfactor(const Tensor &t, const IterVar &axis, int factor_axis) {
  Stage st = (*this)[t];
  Operation old = st.op(); // keeps `c` alive while the stage's op is replaced below
  const auto *c = old.as<ComputeOpNode>();
  const Reduce *red = c ? c->reduction() : nullptr;
  user_check(red, "rfactor") << "'" << t.name() << "' is not a reduction; rfactor factors one";
  StageNode *sn = st.get();
  const std::vector<IterVar> &leaves = sn->leaf_iter_vars;
  user_check(std::any_of(leaves.begin(), leaves.end(),
                         [&](const IterVar &l) { return l.same_as(axis); }) &&
                 axis.iter_type() == IterVarType::CommReduce,
             "rfactor")
      << "'" << axis.name() << "' is not a reduction loop of " << describe(sn)
      << "; factor along one of its reduction loops (split the reduce axis first)";
  user_check(factor_axis >= 0 && factor_axis <= int(c->axis.size()), "rfactor")
      << "stage '" << t.name() << "': factor_axis " << factor_axis << " is not a position among "
      << "its " << c->axis.size() << " axes and one more";
  for (const IterVar &l : leaves)
    if (const IterVarAttr *a = sn->find_attr(l); a && l.iter_type() == IterVarType::CommReduce)
      user_check(!a->bind_thread.defined() && a->for_kind == ForKind::Serial && !a->tensorize,
                 "rfactor")
          << "stage '" << t.name() << "': reduction loop '" << l.name()
          << "' is already bound or annotated; rfactor first, then schedule the new stages";

  // The extents of the loops, and each reduction loop's new variable.
  DomainMap dom;
  for (const IterVar &iv : root_iter_vars(sn))
    dom[iv.get()] = iv->dom;
  pass_down_domain(sn, dom);
  llvm::DenseMap<const IterVarNode *, Expr> leaf_value;
  std::vector<IterVar> rf_reduce;
  VarIntervals ranges;
  Var factored(axis.name() + ".v");
  for (const IterVar &l : leaves) {
    if (l.iter_type() != IterVarType::CommReduce) {
      leaf_value[l.get()] = make_zero(Int(32));
      continue;
    }
    int64_t extent = *as_const_int(dom.lookup(l.get()).extent);
    // The factored loop keeps its split factor where the axis was shorter (a reduction across
    // that many threads stays a power of two; the predicate below drops the overshoot).
    if (l.same_as(axis))
      for (const IterVarRelation &rel : sn->relations)
        if (const auto *sp = std::get_if<SplitRelation>(&rel); sp && sp->inner.same_as(l))
          extent = sp->factor.value_or(extent);
    Var v = l.same_as(axis) ? factored : Var(l.name() + ".r");
    leaf_value[l.get()] = v;
    ranges[v.get()] = IndexInterval::constant(0, extent - 1);
    if (!l.same_as(axis))
      rf_reduce.push_back(IterVar::make(Range(Expr(0), Expr(int(extent))), v,
                                        IterVarType::CommReduce));
  }
  const int64_t factored_extent = ranges.lookup(factored.get()).hi + 1;
  VarMap root = pass_up_index(sn, dom, leaf_value);
  // The reduce roots in terms of the new variables; splits that do not divide overshoot.
  VarMap vmap;
  std::vector<Expr> inside;
  for (const IterVar &r : c->reduce_axis) {
    Expr v = root.lookup(r.var().get());
    vmap[r.var().get()] = v;
    int64_t lo = *as_const_int(r->dom.min), n = *as_const_int(r->dom.extent);
    auto span = eval_interval(v, ranges);
    if (!span || span->has_base() || span->hi >= lo + n)
      inside.push_back(v < make_const(v.type(), lo + n));
  }
  std::vector<IterVar> rf_axis;
  for (const IterVar &iv : c->axis) {
    Var v(iv.name() + ".rf");
    vmap[iv.var().get()] = v;
    rf_axis.push_back(IterVar::make(iv->dom, v, IterVarType::DataPar));
  }
  rf_axis.insert(rf_axis.begin() + factor_axis,
                 IterVar::make(Range(Expr(0), Expr(int(factored_extent))), factored,
                               IterVarType::DataPar));
  Expr cond = substitute(red->condition, vmap);
  if (!inside.empty())
    cond = is_one(cond) ? all(inside) : (cond && all(inside));
  Expr rf_body = Reduce::make(red->combiner, substitute(red->source, vmap), rf_reduce,
                              is_one(cond) ? Expr() : cond);
  Operation rf_op(new ComputeOpNode(t.name() + ".rf", rf_axis, rf_reduce, rf_body));
  Tensor rf = rf_op.output(0);

  // t reduces the partial results over a new axis of the factored loop's extent.
  IterVar k = IterVar::make(Range(Expr(0), Expr(int(factored_extent))), Var(axis.name() + ".k"),
                            IterVarType::CommReduce);
  std::vector<Expr> idx;
  for (const IterVar &iv : c->axis)
    idx.push_back(iv.var());
  idx.insert(idx.begin() + factor_axis, k.var());
  // (The partials start from the identity; their reduction from the initial value, if any.)
  sn->op = Operation(new ComputeOpNode(c->name, c->axis, {k},
                                       Reduce::make(red->combiner, rf(idx), {k}, Expr(),
                                                    red->init)));
  n_->stage_map[sn->op.get()] = sn;
  // The reduction loops and their relations go; the data loops keep their schedule.
  auto derived_from_reduce = [&](const IterVar &iv) {
    return iv.iter_type() == IterVarType::CommReduce;
  };
  std::erase_if(sn->all_iter_vars, derived_from_reduce);
  std::erase_if(sn->leaf_iter_vars, derived_from_reduce);
  std::erase_if(sn->relations, [&](const IterVarRelation &rel) {
    if (const auto *sp = std::get_if<SplitRelation>(&rel))
      return derived_from_reduce(sp->parent);
    return derived_from_reduce(std::get<FuseRelation>(rel).outer);
  });
  sn->all_iter_vars.push_back(k);
  sn->leaf_iter_vars.push_back(k);

  auto rs = make_stage(rf_op, n_.get());
  StageNode *raw = rs.get();
  n_->stage_map[rf_op.get()] = raw;
  n_->stages.insert(n_->stages.begin() + stage_position(n_.get(), sn), std::move(rs));
  return rf;
}

} // namespace tessel
