#include "compiler/lower/ScheduleOps.h"

#include "compiler/arith/IndexInterval.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/lower/Cluster.h"
#include "compiler/lower/Rasterize.h"
#include "compiler/lower/ReduceBounds.h"
#include "compiler/lower/StageBodies.h"
#include "compiler/lower/Tensorize.h"
#include "compiler/lower/ThreadExtents.h"
#include "compiler/lower/TileScheduler.h"
#include "compiler/support/Error.h"

#include <functional>

namespace tessel {

namespace {

constexpr const char *kLoopScope = "loop_scope";

// Turns tensor reads into reads of the buffers that hold them.
class TensorToBuffer : public IRMutator {
public:
  TensorToBuffer(const ScheduleNode *sch, const StageBuffers &buffers)
      : sch_(sch), buffers_(buffers) {}
  using IRMutator::mutate;

protected:
  Expr visit(const TensorLoad *op) override {
    std::vector<Expr> idx;
    mutate_all(op->indices, idx);
    const StageNode *st = stage_of(sch_, op->tensor);
    auto it = buffers_.find(st);
    internal_check(it != buffers_.end()) << "no buffer for " << op->tensor.name();
    // A fold's running state is read from the fold's buffer for that state.
    size_t k = size_t(op->tensor.value_index());
    if (const auto *f = st->op.as<FoldOpNode>(); f && op->tensor.op().as<FoldStateOpNode>())
      k = size_t(f->state_index(op->tensor.op().get()));
    return BufferLoad::make(it->second[k], idx);
  }

private:
  const ScheduleNode *sch_;
  const StageBuffers &buffers_;
};

class StageNestBuilder {
public:
  StageNestBuilder(const ScheduleNode *sch, const StageBodies &bodies, const DomainMap &dom,
                   const StageBuffers &buffers, const BufferLayouts &layouts,
                   const VarIntervals &global_env, const ThreadExtents &threads)
      : sch_(sch), bodies_(bodies), dom_(dom), buffers_(buffers), layouts_(layouts),
        global_env_(global_env), threads_(threads) {}

  Stmt build(const StageNode *s) {
    if (s->op.as<FoldOpNode>())
      return build_fold(s);
    for (size_t t = 0; t < s->leaf_iter_vars.size(); ++t) {
      const IterVarAttr *a = s->find_attr(s->leaf_iter_vars[t]);
      if (a && a->tensorize)
        return build_tensorized(s, t);
      if (a && a->bind_thread.defined() && is_reduce_leaf(s, s->leaf_iter_vars[t]))
        return build_cross_thread(s);
    }
    return build_loops(s);
  }

private:
  // The loops outside the tensorize axis stay; the intrinsic replaces the rest. A reduction
  // with reduction loops outside gets the intrinsic's reset in its init nest and its update in
  // the update nest.
  Stmt build_tensorized(const StageNode *s, size_t t) {
    const std::vector<IterVar> &leaves = s->leaf_iter_vars;
    const Expr &body = bodies_.body.lookup(s);
    llvm::DenseMap<const IterVarNode *, Expr> leaf_value;
    for (size_t i = 0; i < t; ++i)
      leaf_value[leaves[i].get()] = loop_value_of(s, leaves[i]);
    TensorIntrinBodies b =
        tensorize_stage(s, t, bodies_, dom_, leaf_value, buffers_, layouts_, sch_);
    const std::string context = "tensorize of stage '" + s->op.name() + "'";
    size_t k = 0;
    while (k < t && !is_reduce_leaf(s, leaves[k]))
      ++k;
    const std::vector<Expr> thread_guards = threads_.guards(s);
    if (const auto *red = body.as<Reduce>(); red && red->init.defined()) {
      // A reduction from an initial value: the value stored element by element over the data
      // loops from the first reduction loop inward (the intrinsic's block among them), in
      // place of the intrinsic's reset, then the intrinsic's update.
      user_check(b.reset.defined() && b.update.defined(), context)
          << "the reduction starts from an initial value (init=), so the intrinsic must provide "
             "reset and update bodies (the update is kept, the reset replaced by the init)";
      const Expr buffered = TensorToBuffer(sch_, buffers_).mutate(body);
      Stmt init_stores = init_nest(s, k, leaf_value, [&](const VarMap &root) {
        return init_store(s, buffered.as<Reduce>(), root);
      });
      Stmt update_nest = wrap_loops(s, leaves, k, t, guard(b.update, thread_guards), true);
      return wrap_loops(s, leaves, 0, k, Seq::make({init_stores, update_nest}), true);
    }
    if (!body.as<Reduce>() || k == t) {
      Stmt whole = b.body.defined() ? b.body : Seq::make({b.reset, b.update});
      user_check(whole.defined(), context) << "the intrinsic emitted no body";
      return wrap_loops(s, leaves, 0, t, guard(whole, thread_guards), true);
    }
    user_check(b.reset.defined() && b.update.defined(), context)
        << "the reduction is split around the tensorized loops, so the intrinsic must provide "
           "reset and update bodies";
    Stmt update_nest = wrap_loops(s, leaves, k, t, guard(b.update, thread_guards), true);
    // The init nest runs the reset on ".init" copies of the data-parallel loops in [k, t).
    llvm::DenseMap<const IterVarNode *, Expr> init_value = leaf_value;
    std::vector<std::pair<IterVar, IterVar>> init_loops;
    for (size_t i = k; i < t; ++i) {
      if (is_reduce_leaf(s, leaves[i])) {
        init_value[leaves[i].get()] = make_zero(Int(32));
        continue;
      }
      Var v(leaves[i].name() + ".init");
      init_value[leaves[i].get()] = v;
      init_loops.emplace_back(IterVar::make(dom_.lookup(leaves[i].get()), v, IterVarType::DataPar),
                              leaves[i]);
    }
    Stmt init =
        guard(tensorize_stage(s, t, bodies_, dom_, init_value, buffers_, layouts_, sch_).reset,
              thread_guards);
    for (size_t i = init_loops.size(); i-- > 0;)
      init = make_loop(s, init_loops[i].first, init_loops[i].second, init, false);
    return wrap_loops(s, leaves, 0, k, Seq::make({init, update_nest}), true);
  }

  Stmt build_loops(const StageNode *s) {
    const auto *c = s->op.as<ComputeOpNode>();
    const std::vector<IterVar> &leaves = s->leaf_iter_vars;
    const Buffer buf = buffers_.lookup(s).front();
    Expr body = TensorToBuffer(sch_, buffers_).mutate(bodies_.body.lookup(s));

    llvm::DenseMap<const IterVarNode *, Expr> leaf_value;
    for (const IterVar &iv : leaves)
      leaf_value[iv.get()] = loop_value_of(s, iv);
    VarMap root_value = pass_up_index(s, dom_, leaf_value);
    std::vector<Expr> data_idx;
    for (const IterVar &iv : c->axis)
      data_idx.push_back(root_value.lookup(iv.var().get()));

    const Reduce *red = body.as<Reduce>();
    if (!red) {
      Stmt store = BufferStore::make(buf, substitute(body, root_value), data_idx);
      store = guard(store, guards(s, c->axis, leaf_value));
      return wrap_loops(s, leaves, 0, leaves.size(), store, true);
    }

    // The update runs over every loop from the first reduction loop inward; the init over the
    // data-parallel loops among those, on fresh ".init" variables.
    size_t k = 0;
    while (k < leaves.size() && !is_reduce_leaf(s, leaves[k]))
      ++k;
    Expr source = substitute(red->source, root_value);
    Expr cond = substitute(red->condition, root_value);
    Expr update_value = Reduce::combine(red->combiner, BufferLoad::make(buf, data_idx), source);
    Stmt update =
        update_loops(s, k, leaf_value, BufferStore::make(buf, update_value, data_idx), cond);
    Stmt init = init_nest(
        s, k, leaf_value, [&](const VarMap &init_root) { return init_store(s, red, init_root); });
    return wrap_loops(s, leaves, 0, k, Seq::make({init, update}), true);
  }

  // The store that starts reduction `red` (its tensors read as buffers) of stage `s` at the
  // element `root` gives its axes: the initial value there (init=), else the combiner's
  // identity.
  Stmt init_store(const StageNode *s, const Reduce *red, const VarMap &root) {
    const auto *c = s->op.as<ComputeOpNode>();
    std::vector<Expr> idx;
    for (const IterVar &iv : c->axis)
      idx.push_back(root.lookup(iv.var().get()));
    Expr value = red->init.defined() ? substitute(red->init, root)
                                     : Reduce::identity(red->combiner, red->type);
    return BufferStore::make(buffers_.lookup(s).front(), value, idx);
  }

  // The update of a stage that accumulates over its loops from `k` inward: `store` where `cond`
  // (its predicate) holds, guarded as the stage's stores, in those loops (a serial reduction
  // loop bounded by `cond`, ReduceBounds.h).
  Stmt update_loops(const StageNode *s, size_t k,
                    const llvm::DenseMap<const IterVarNode *, Expr> &leaf_value, Stmt store,
                    const Expr &cond) {
    const std::vector<IterVar> &leaves = s->leaf_iter_vars;
    if (!is_one(cond))
      store = IfThenElse::make(cond, store);
    Stmt nest = guard(store, guards(s, root_iter_vars(s), leaf_value));
    for (size_t i = leaves.size(); i-- > k;)
      nest = make_loop(s, leaves[i], leaves[i], nest, true, predicate_bounds(s, i, cond));
    return nest;
  }

  // The initialization of a stage that accumulates over its loops from `k` inward (a
  // reduction, a fold): `store` at the values the stage's root axes take on ".init" copies of
  // the data-parallel loops among those (the reduction loops at 0), guarded as the stage's
  // stores.
  Stmt init_nest(const StageNode *s, size_t k,
                 const llvm::DenseMap<const IterVarNode *, Expr> &leaf_value,
                 const std::function<Stmt(const VarMap &)> &store) {
    const std::vector<IterVar> &leaves = s->leaf_iter_vars;
    llvm::DenseMap<const IterVarNode *, Expr> init_value = leaf_value;
    std::vector<IterVar> init_leaves;
    for (size_t i = k; i < leaves.size(); ++i) {
      if (is_reduce_leaf(s, leaves[i])) {
        init_value[leaves[i].get()] = make_zero(Int(32));
        continue;
      }
      Var v(leaves[i].name() + ".init");
      init_value[leaves[i].get()] = v;
      init_leaves.push_back(IterVar::make(dom_.lookup(leaves[i].get()), v, IterVarType::DataPar));
      init_of_[v.get()] = leaves[i];
    }
    Stmt init = guard(store(pass_up_index(s, dom_, init_value)),
                      guards(s, op_axes(s->op.get()), init_value));
    for (size_t i = init_leaves.size(); i-- > 0;)
      init = make_loop(s, init_leaves[i], init_of_.lookup(init_leaves[i].var().get()), init, false);
    return init;
  }

  // A fold: as a reduction's nest, the loops from its fold axis inward run the step, whose
  // stores (in the fold's store order, each over its state's own axes) follow the tensors of
  // the step computed at the fold axis; the data-parallel loops among those initialize the
  // states first, on ".init" copies. Steps `where` excludes are skipped: the fold loop is
  // bounded by it (ReduceBounds), the stores guarded.
  Stmt build_fold(const StageNode *s) {
    const auto *f = s->op.as<FoldOpNode>();
    const std::vector<IterVar> &leaves = s->leaf_iter_vars;
    const std::vector<Buffer> &bufs = buffers_.lookup(s);
    FoldParts parts = fold_parts(TensorToBuffer(sch_, buffers_).mutate(bodies_.body.lookup(s)));
    for (size_t i = 0; i < leaves.size(); ++i) {
      const IterVarAttr *a = s->find_attr(leaves[i]);
      user_check(!a || !a->tensorize, "tensorize")
          << "fold '" << s->op.name() << "' cannot be tensorized; tensorize the tensors of its "
          << "step (computed at its fold axis) instead";
    }
    llvm::DenseMap<const IterVarNode *, Expr> leaf_value;
    for (const IterVar &iv : leaves)
      leaf_value[iv.get()] = loop_value_of(s, iv);
    VarMap root_value = pass_up_index(s, dom_, leaf_value);
    // State k's store of `value` at the shared axes' values `root`, over the state's own axes
    // (loops on fresh variables, named with `suffix`).
    auto store_state = [&](size_t k, const VarMap &root, const std::string &suffix,
                           const Expr &value) {
      VarMap vmap = root;
      std::vector<Expr> idx;
      for (const IterVar &iv : f->axis)
        idx.push_back(root.lookup(iv.var().get()));
      std::vector<Var> own;
      for (const IterVar &iv : f->extra_axis[k]) {
        own.emplace_back(iv.var().name() + suffix);
        vmap[iv.var().get()] = own.back();
        idx.push_back(own.back());
      }
      Stmt store = BufferStore::make(bufs[k], substitute(value, vmap), idx);
      for (size_t d = own.size(); d-- > 0;)
        store = For::make(own[d], 0, int(*as_const_int(f->extra_axis[k][d]->dom.extent)),
                          ForKind::Serial, store);
      return store;
    };

    size_t k = 0;
    while (k < leaves.size() && !is_reduce_leaf(s, leaves[k]))
      ++k;
    Expr cond = substitute(parts.where, root_value);
    std::vector<Stmt> stores;
    for (int sk : f->store_order)
      stores.push_back(store_state(size_t(sk), root_value, "", parts.update[size_t(sk)]));
    Stmt update = update_loops(s, k, leaf_value, Seq::make(stores), cond);
    // Split over a persistent kernel's last wave: the parts' states are merged after the steps.
    if (const IterVarAttr *a = k < leaves.size() ? s->find_attr(leaves[k]) : nullptr;
        a && split_last_wave_parts(*a)) {
      std::vector<Expr> merge;
      for (int sk : f->store_order) // (merged in the order the updates are stored)
        merge.insert(merge.end(), {bufs[size_t(sk)]->data, f->merge_a[size_t(sk)],
                                   f->merge_b[size_t(sk)], f->merge[size_t(sk)]});
      update = AttrStmt::make(Expr(leaves[k].var()), attr::fold_merge,
                              Call::make(Handle(), "tuple", merge, Call::PureIntrinsic), update);
    }

    Stmt init = init_nest(s, k, leaf_value, [&](const VarMap &init_root) {
      std::vector<Stmt> inits;
      for (size_t sk = 0; sk < bufs.size(); ++sk)
        inits.push_back(store_state(sk, init_root, ".init", f->init[sk]));
      return Seq::make(inits);
    });
    return wrap_loops(s, leaves, 0, k, Seq::make({init, update}), true);
  }

  // A reduction with a reduction loop bound to threadIdx.x: each thread folds its share (the
  // serial reduction loops) into a register, @thread_allreduce combines the registers along
  // threadIdx.x (warp shuffles, then a shared-memory step across warps) into every one of them,
  // and the store takes it: every thread for a 'local' stage (each holds its own copy), the
  // thread with threadIdx.x = 0 otherwise. The collective is reached by every thread: guards
  // stay on the update and the store. The innermost data-parallel loops that
  // batched_leaves_begin admits are batched: each thread folds every one of their outputs into
  // its own register first (init and update loops over them), one @thread_allreduce combines
  // the registers together (fewer shuffles: CodeGenCUDAReduce.cpp), then the stores loop over
  // them.
  Stmt build_cross_thread(const StageNode *s) {
    const auto *c = s->op.as<ComputeOpNode>();
    const auto *red = bodies_.body.lookup(s).as<Reduce>();
    const std::vector<IterVar> &leaves = s->leaf_iter_vars;
    const std::string context = "stage '" + s->op.name() + "'";
    size_t k = 0;
    while (k < leaves.size() && !is_reduce_leaf(s, leaves[k]))
      ++k;
    std::vector<IterVar> serial;
    IterVar bound, thread;
    for (size_t i = k; i < leaves.size(); ++i) {
      user_check(is_reduce_leaf(s, leaves[i]), "cross-thread reduction")
          << context << " binds a reduction loop to a thread, so its data-parallel loops must "
          << "all come before its reduction loops; '" << leaves[i].name()
          << "' comes after one: reorder it outwards";
      const IterVarAttr *a = s->find_attr(leaves[i]);
      if (a && a->bind_thread.defined()) {
        user_check(!bound.defined(), "cross-thread reduction")
            << context << " binds two reduction loops to threads; bind one (fuse them first)";
        bound = leaves[i];
        thread = a->bind_thread;
      } else {
        serial.push_back(leaves[i]);
      }
    }
    const int64_t extent = const_extent(dom_, bound);
    user_check((extent & (extent - 1)) == 0 && extent <= 1024, "cross-thread reduction")
        << context << " reduces '" << bound.name() << "' across " << extent
        << " threads; a reduction across threads takes a power of two up to 1024 (a split "
           "factor larger than its axis is cut to the axis' extent): split by a power of two "
           "at most the extent";
    user_check(threads_.launch(s, thread.thread_tag(), extent) == extent, "cross-thread reduction")
        << context << " reduces '" << bound.name() << "' across " << extent << " threads of "
        << thread.thread_tag() << ", but its kernel launches "
        << threads_.launch(s, thread.thread_tag(), extent)
        << "; every thread of the axis takes part in the reduction, so bind it with the "
           "block's extent";

    const Buffer buf = buffers_.lookup(s).front();
    Expr body = TensorToBuffer(sch_, buffers_).mutate(bodies_.body.lookup(s));
    const auto *tb = body.as<Reduce>();
    llvm::DenseMap<const IterVarNode *, Expr> leaf_value;
    for (const IterVar &iv : leaves)
      leaf_value[iv.get()] = loop_value_of(s, iv);
    VarMap root_value = pass_up_index(s, dom_, leaf_value);
    std::vector<Expr> data_idx;
    for (const IterVar &iv : c->axis)
      data_idx.push_back(root_value.lookup(iv.var().get()));

    // The batched leaves [b, k): a register each of their iterations, acc[slot].
    const size_t b = batched_leaves_begin(s, k, extent);
    Expr slot = Expr(0);
    int64_t count = 1;
    for (size_t i = b; i < k; ++i) {
      const int64_t e = const_extent(dom_, leaves[i]);
      slot = slot * int(e) + leaves[i].var();
      count *= e;
    }
    Buffer acc = Buffer::make(s->op.name() + ".red", buf.dtype(), {Expr(int(count))}, "local");
    Expr acc_slot = BufferLoad::make(acc, {slot});
    Stmt update = BufferStore::make(
        acc, Reduce::combine(red->combiner, acc_slot, substitute(tb->source, root_value)),
        {slot});
    if (Expr cond = substitute(tb->condition, root_value); !is_one(cond))
      update = IfThenElse::make(cond, update);
    std::vector<IterVar> all_roots = c->axis;
    all_roots.insert(all_roots.end(), c->reduce_axis.begin(), c->reduce_axis.end());
    update = guard(update, guards(s, all_roots, leaf_value));
    for (size_t i = serial.size(); i-- > 0;)
      update = make_loop(s, serial[i], serial[i], update, true);

    Stmt init = BufferStore::make(acc, Reduce::identity(red->combiner, buf.dtype()), {slot});
    const char *combiner = red->combiner == Reduce::Sum ? "sum"
                           : red->combiner == Reduce::Max ? "max"
                                                           : "min";
    std::vector<Expr> args = {
        StringImm::make(combiner),
        Call::make(Handle(), intrinsic::address_of, {BufferLoad::make(acc, {Expr(0)})},
                   Call::Intrinsic),
        Expr(int(extent))};
    if (count > 1)
      args.push_back(Expr(int(count)));
    Stmt allreduce =
        Evaluate::make(Call::make(Handle(), intrinsic::thread_allreduce, args, Call::Intrinsic));
    std::vector<Expr> store_guards = guards(s, c->axis, leaf_value);
    if (s->scope != "local")
      store_guards.push_back(thread.var() == make_zero(thread.var().type()));
    // The threads' combined value onto the reduction's initial value (init=), once.
    Expr result = tb->init.defined()
                      ? Reduce::combine(red->combiner, substitute(tb->init, root_value), acc_slot)
                      : acc_slot;
    Stmt store = guard(BufferStore::make(buf, result, data_idx), store_guards);
    if (b == k) {
      Stmt nest = BufferRealize::make(acc, {Range(Expr(0), Expr(1))},
                                      Seq::make({init, update, allreduce, store}));
      nest = make_loop(s, bound, bound, nest, true);
      return wrap_loops(s, leaves, 0, k, nest, true);
    }
    // Init and store on ".init" / ".store" copies of the batched loops, the update on the loops
    // themselves.
    auto copy_loops = [&](Stmt body, const char *suffix) {
      VarMap fresh;
      std::vector<Var> vars;
      for (size_t i = b; i < k; ++i) {
        vars.emplace_back(leaves[i].name() + suffix);
        fresh[leaves[i].var().get()] = vars.back();
      }
      body = substitute(body, fresh);
      for (size_t i = k; i-- > b;)
        body = For::make(vars[i - b], 0, int(const_extent(dom_, leaves[i])), ForKind::Unrolled,
                         body);
      return body;
    };
    update = wrap_loops(s, leaves, b, k, update, true);
    Stmt nest = BufferRealize::make(
        acc, {Range(Expr(0), Expr(int(count)))},
        Seq::make({copy_loops(init, ".init"), update, allreduce, copy_loops(store, ".store")}));
    nest = make_loop(s, bound, bound, nest, true);
    return wrap_loops(s, leaves, 0, b, nest, true);
  }

  // Where the leaves batched by build_cross_thread begin (k: none): the innermost of the
  // stage's data-parallel leaves [0, k), outwards while each is a plain loop (serial or
  // unrolled, no thread, pragma or reversal, no stage computed at it, not a tile of a
  // rasterized stage) of a power-of-two extent, and their iterations together at most the
  // `threads` a warp's shuffles combine (a reduction across more threads is not batched);
  // loops of one iteration alone are not batched.
  size_t batched_leaves_begin(const StageNode *s, size_t k, int64_t threads) {
    if (threads > 32 || s->rasterization)
      return k;
    size_t b = k;
    int64_t count = 1;
    for (; b > 0; --b) {
      const IterVar &iv = s->leaf_iter_vars[b - 1];
      const IterVarAttr *a = s->find_attr(iv);
      if (a && (a->bind_thread.defined() || !a->pragmas.empty() || a->reversed.defined() ||
                a->tensorize || (a->for_kind != ForKind::Serial && a->for_kind != ForKind::Unrolled)))
        break;
      const int64_t e = const_extent(dom_, iv);
      if ((e & (e - 1)) != 0 || count * e > threads)
        break;
      bool attached = false;
      for (const auto &st : sch_->stages)
        attached |= st->attach_stage == s && st->attach_ivar.same_as(iv);
      if (attached)
        break;
      count *= e;
    }
    return count > 1 ? b : k;
  }

  // Conditions that keep a store inside the stage's range and the tensor's shape, and on the
  // threads of the stage's own bindings where its kernel launches more (ThreadExtents).
  std::vector<Expr> guards(const StageNode *s, const std::vector<IterVar> &roots,
                           const llvm::DenseMap<const IterVarNode *, Expr> &leaf_value) {
    VarMap root_value = pass_up_index(s, dom_, leaf_value);
    VarMap root_offset = pass_up_index(s, dom_, leaf_value, /*add_root_min=*/false);
    // Loops of this nest that no other nest has (the ".init" copies) range over their leaf's.
    VarIntervals env = global_env_;
    threads_.narrow(s, env);
    for (const IterVar &iv : s->leaf_iter_vars)
      if (const auto *v = leaf_value.lookup(iv.get()).as<Variable>(); v && !env.count(v))
        env[v] = IndexInterval::constant(0, const_extent(dom_, iv) - 1);
    std::vector<Expr> out = threads_.guards(s);
    const std::vector<IterVar> &axes = op_axes(s->op.get());
    for (size_t r = 0; r < roots.size(); ++r) {
      const IterVar &iv = roots[r];
      const Range &range = dom_.lookup(iv.get());
      Expr value = root_value.lookup(iv.var().get());
      int64_t extent = *as_const_int(range.extent);
      Expr offset = root_offset.lookup(iv.var().get());
      // Overshoot of the leaf loops past the range (a split that does not divide).
      auto off = eval_interval(offset, env);
      if (!off || off->has_base() || off->hi >= extent)
        out.push_back(offset < make_const(offset.type(), extent));
      if (r >= axes.size() || is_zero(range.min))
        continue;
      // A region whose origin moves can reach past the tensor's edge.
      int64_t n = *as_const_int(axes[r]->dom.extent);
      auto lo = eval_interval(range.min, env);
      if (!lo || lo->has_base() || lo->hi + extent > n)
        out.push_back(value < make_const(value.type(), n));
      if (!lo || lo->has_base() || lo->lo < 0)
        out.push_back(value >= make_const(value.type(), 0));
    }
    return out;
  }

  static Stmt guard(Stmt s, const std::vector<Expr> &conds) {
    if (conds.empty())
      return s;
    return IfThenElse::make(all(conds), std::move(s));
  }

  // The bounds the reduction's predicate `cond` gives leaf loop `i` of `s` (ReduceBounds.h):
  // a serial reduction loop's, with the loops inside it and the block's threads ranging over
  // their extents; nothing for any other loop.
  std::optional<std::pair<Expr, Expr>> predicate_bounds(const StageNode *s, size_t i,
                                                        const Expr &cond) {
    const std::vector<IterVar> &leaves = s->leaf_iter_vars;
    const IterVarAttr *a = s->find_attr(leaves[i]);
    if (is_one(cond) || !is_reduce_leaf(s, leaves[i]) ||
        (a && (a->bind_thread.defined() || a->for_kind != ForKind::Serial)))
      return std::nullopt;
    RangedVars ranged;
    Expr c = cond;
    for (size_t q = 0; q < leaves.size(); ++q) {
      const IterVarAttr *b = s->find_attr(leaves[q]);
      const bool thread =
          b && b->bind_thread.defined() && b->bind_thread.thread_tag().rfind("blockIdx", 0) != 0;
      const int64_t extent = const_extent(dom_, leaves[q]);
      if (q > i || thread)
        ranged[loop_value_of(s, leaves[q]).get()] = {0, extent - 1};
      else if (extent == 1) { // a loop of one iteration around it is 0 (a fold's shared axes
        const Var v = loop_value_of(s, leaves[q]); // per thread)
        c = substitute(c, v, make_zero(v.type()));
      }
    }
    // So do the threads of the stages it is computed in (a fold per thread of its output).
    for (const StageNode *x = s; x->attach_type == AttachType::Scope; x = x->attach_stage)
      for (const IterVar &iv : x->attach_stage->leaf_iter_vars)
        if (const IterVarAttr *b = x->attach_stage->find_attr(iv);
            b && b->bind_thread.defined() &&
            b->bind_thread.thread_tag().rfind("threadIdx", 0) == 0)
          ranged[loop_value_of(x->attach_stage, iv).get()] = {0, const_extent(dom_, iv) - 1};
    return reduce_loop_bounds(loop_var_of(s, leaves[i]), const_extent(dom_, leaves[i]), c,
                              ranged);
  }

  // `bounds` (min, extent) replace a serial loop's [0, its extent).
  Stmt make_loop(const StageNode *s, const IterVar &loop_iv, const IterVar &attr_iv, Stmt body,
                 bool with_marker,
                 const std::optional<std::pair<Expr, Expr>> &bounds = std::nullopt) {
    int64_t extent = const_extent(dom_, attr_iv);
    if (with_marker) {
      body = AttrStmt::make(attr_iv, kLoopScope, Expr(0), body);
      // Stages computed at this loop read the tile too, so it is bound outside the marker.
      body = bind_rasterized_tile(s, attr_iv, dom_, body);
      // (The reversed value too, Stage::reverse.)
      body = bind_reversed_value(s, loop_iv, attr_iv, extent, std::move(body));
      // A persistent stage's tile axes are no loops: one tile loop of a fixed grid walks them.
      if (const auto &r = s->rasterization;
          r && r->persistent() && (r->rows.same_as(attr_iv) || r->cols.same_as(attr_iv)))
        return persistent_tile_loop(s, attr_iv, dom_, body, last_wave_split_in(s));
    } else {
      body = bind_reversed_value(s, loop_iv, attr_iv, extent, std::move(body));
    }
    const IterVarAttr *a = s->find_attr(attr_iv);
    // A reduction split over a persistent kernel's last wave runs over its part's range.
    if (a && split_last_wave_parts(*a)) {
      const StageNode *p = persistent_stage_around(s);
      user_check(p, "split_last_wave")
          << "loop '" << attr_iv.name() << "' of stage '" << s->op.name()
          << "' is split over the last wave, but the stage is not computed inside the tiles of "
             "a persistent stage; call persistent() on the stage it is computed at";
      last_wave_split_in(p); // (makes the range's variables; refuses a second split loop)
      auto [begin, end] = split_ranges_.lookup(attr_iv.get());
      Var v = loop_iv.var();
      Stmt loop = For::make(v, begin, end - begin, ForKind::Serial, body);
      for (const auto &[key, value] : a->pragmas) // (its other marks: overlap_steps, ping_pong)
        if (key != "split_last_wave")
          loop = AttrStmt::make(attr_iv, std::string(attr::pragma_prefix) + key, value, loop);
      return AttrStmt::make(Expr(v), attr::last_wave_steps, make_const(v.type(), extent), loop);
    }
    Stmt loop;
    if (a && a->bind_thread.defined() && with_marker) {
      const IterVar &t = a->bind_thread;
      if (t.thread_tag().rfind("vthread", 0) == 0)
        loop = For::make(t.var(), 0, int(extent), ForKind::Unrolled, body);
      else {
        // The clusters of a clustered axis run along its blockIdx (Cluster.h).
        if (const auto &c = s->cluster; c && c->axis.same_as(attr_iv))
          body = AttrStmt::make(t, attr::cluster_extent, Expr(c->size), body);
        loop = AttrStmt::make(t, attr::thread_extent,
                              Expr(int(threads_.launch(s, t.thread_tag(), extent))), body);
      }
    } else {
      ForKind kind = a ? a->for_kind : ForKind::Serial;
      if (kind == ForKind::Vectorized)
        user_check(extent <= 64, "vectorize")
            << "stage '" << s->op.name() << "', axis '" << attr_iv.name() << "' has extent "
            << extent << ", too long to vectorize; split it and vectorize the inner loop";
      loop = bounds ? For::make(loop_iv.var(), bounds->first, bounds->second, kind, body)
                    : For::make(loop_iv.var(), 0, int(extent), kind, body);
    }
    if (a)
      for (const auto &[key, value] : a->pragmas)
        loop = AttrStmt::make(attr_iv, std::string(attr::pragma_prefix) + key, value, loop);
    return loop;
  }

  // `body` inside the loop of leaf `attr_iv` (on `loop_iv`'s variable or its thread), with its
  // value extent - 1 - the loop's bound when the leaf is reversed (Stage::reverse).
  static Stmt bind_reversed_value(const StageNode *s, const IterVar &loop_iv,
                                  const IterVar &attr_iv, int64_t extent, Stmt body) {
    const IterVarAttr *a = s->find_attr(attr_iv);
    if (!a || !a->reversed.defined())
      return body;
    Expr v = a->bind_thread.defined() ? Expr(a->bind_thread.var()) : Expr(loop_iv.var());
    return LetStmt::make(a->reversed, make_const(v.type(), extent - 1) - v, std::move(body));
  }

  // The most parts of Stage::split_last_wave on a leaf, 0 without.
  static int64_t split_last_wave_parts(const IterVarAttr &a) {
    for (const auto &[key, value] : a.pragmas)
      if (key == "split_last_wave")
        return *as_const_int(value);
    return 0;
  }

  // The persistent stage whose tiles `s` is computed in (itself, or a stage it is computed
  // at, at any depth), if any.
  static const StageNode *persistent_stage_around(const StageNode *s) {
    for (const StageNode *x = s;; x = x->attach_stage) {
      if (const auto &r = x->rasterization; r && r->persistent())
        return x;
      if (x->attach_type != AttachType::Scope)
        return nullptr;
    }
  }

  // The loop of a stage computed in persistent stage `p`'s tiles that Stage::split_last_wave
  // splits (one at most), with the variables of its range, made once.
  std::optional<LastWaveSplit> last_wave_split_in(const StageNode *p) {
    std::optional<LastWaveSplit> found;
    for (const auto &st : sch_->stages) {
      if (st->attach_type == AttachType::Inline || persistent_stage_around(st.get()) != p)
        continue;
      for (const IterVar &iv : st->leaf_iter_vars) {
        const IterVarAttr *a = st->find_attr(iv);
        const int64_t parts = a ? split_last_wave_parts(*a) : 0;
        if (!parts)
          continue;
        user_check(!found, "split_last_wave")
            << "two loops computed in the tiles of persistent stage '" << p->op.name()
            << "' are split over the last wave (the second: '" << iv.name() << "' of stage '"
            << st->op.name() << "'); split one";
        auto [it, fresh] = split_ranges_.try_emplace(iv.get());
        if (fresh)
          it->second = {Var(iv.var()->name + ".begin", iv.var().type()),
                        Var(iv.var()->name + ".end", iv.var().type())};
        found = LastWaveSplit{it->second.first, it->second.second, const_extent(dom_, iv), parts};
      }
    }
    return found;
  }

  Stmt wrap_loops(const StageNode *s, const std::vector<IterVar> &leaves, size_t begin,
                  size_t end, Stmt body, bool with_marker) {
    for (size_t i = end; i-- > begin;)
      body = make_loop(s, leaves[i], leaves[i], body, with_marker);
    return body;
  }

  const ScheduleNode *sch_;
  /// The range variables of the loops split over the last wave (last_wave_split_in).
  llvm::DenseMap<const IterVarNode *, std::pair<Var, Var>> split_ranges_;
  const StageBodies &bodies_;
  const DomainMap &dom_;
  const StageBuffers &buffers_;
  const BufferLayouts &layouts_;
  const VarIntervals &global_env_;
  const ThreadExtents &threads_;
  llvm::DenseMap<const Variable *, IterVar> init_of_;
};

// Inserts a producer at the top of the body of the loop marked for `ivar`.
class AttachInjector : public IRMutator {
public:
  AttachInjector(const IterVar &ivar, std::function<Stmt(Stmt)> inject)
      : ivar_(ivar), inject_(std::move(inject)) {}
  bool found = false;
  using IRMutator::mutate;

protected:
  Stmt visit(const AttrStmt *op) override {
    if (op->key == kLoopScope) {
      if (const auto *iv = std::get_if<IterVar>(&op->node); iv && iv->same_as(ivar_)) {
        internal_check(!found) << "two attach points for " << ivar_.name();
        found = true;
        return AttrStmt::make(op->node, op->key, op->value, inject_(op->body));
      }
    }
    return IRMutator::visit(op);
  }

private:
  IterVar ivar_;
  std::function<Stmt(Stmt)> inject_;
};

class MarkerRemover : public IRMutator {
protected:
  Stmt visit(const AttrStmt *op) override {
    if (op->key == kLoopScope)
      return mutate(op->body);
    return IRMutator::visit(op);
  }
};

// A tensor of a fold's step holds one step's slice, computed from the states before the step:
// it must be computed inside the fold, at or in its fold axis.
void check_fold_steps(const ScheduleNode *sch, const StageBodies &bodies) {
  const auto reads = fold_steps(sch);
  for (const auto &st : sch->stages) {
    auto it = reads.find(st->op.get());
    if (it == reads.end() || !bodies.body.count(st.get()) || st->op.as<FoldOpNode>())
      continue;
    const StageNode *fold = stage_of(sch, Operation(*it->second.begin()).output(0));
    const IterVar &axis = fold->op.as<FoldOpNode>()->fold_axis;
    size_t axis_pos = 0;
    while (axis_pos < fold->leaf_iter_vars.size() &&
           !fold->leaf_iter_vars[axis_pos].same_as(axis))
      ++axis_pos;
    bool inside = false;
    for (const StageNode *x = st.get(); x && x->attach_type == AttachType::Scope;
         x = x->attach_stage) {
      if (x->attach_stage != fold)
        continue;
      for (size_t i = axis_pos; i < fold->leaf_iter_vars.size(); ++i)
        inside = inside || fold->leaf_iter_vars[i].same_as(x->attach_ivar);
      break;
    }
    user_check(inside, "compute_at")
        << "stage '" << st->op.name() << "' reads the states of fold '" << fold->op.name()
        << "', so it is computed at each of its steps: compute it at the fold's axis, "
        << "s[" << st->op.name() << "].compute_at(s[" << fold->op.name() << "], " << axis.name()
        << ") (or at a loop inside it)";
  }
}

} // namespace

Stmt schedule_ops(const ScheduleNode *sch, const StageBodies &bodies, const DomainMap &dom,
                  const StageBuffers &buffers, const llvm::DenseSet<const StageNode *> &args) {
  check_fold_steps(sch, bodies);
  // Every loop of every stage over its full range: used to decide which guards are needed.
  VarIntervals global_env;
  for (const auto &st : sch->stages) {
    if (!bodies.body.count(st.get()))
      continue;
    for (const IterVar &iv : st->leaf_iter_vars) {
      // A rasterized loop's tile variable covers the same range as the loop.
      for (const Var &v : {loop_var_of(st.get(), iv), loop_value_of(st.get(), iv)}) {
        IndexInterval r = IndexInterval::constant(0, const_extent(dom, iv) - 1);
        auto it = global_env.find(v.get());
        if (it != global_env.end())
          r.hi = std::max(r.hi, it->second.hi);
        global_env[v.get()] = r;
      }
    }
  }

  // Where each buffer will live in flat storage, for binding tensor intrinsics.
  BufferLayouts layouts;
  for (const auto &st : sch->stages) {
    auto bit = buffers.find(st.get());
    if (bit == buffers.end())
      continue;
    BufferLayout layout;
    std::vector<int64_t> extents;
    std::vector<std::array<int64_t, 3>> aligns;
    if (st->op.as<FoldOpNode>()) // its buffers are read and written by loops, not intrinsics
      continue;
    if (args.count(st.get()) || !st->op.as<ComputeOpNode>()) {
      for (const Expr &e : bit->second.front()->shape) {
        layout.mins.push_back(Expr(0));
        extents.push_back(*as_const_int(e));
      }
    } else {
      for (const IterVar &iv : st->op.as<ComputeOpNode>()->axis) {
        layout.mins.push_back(dom.lookup(iv.get()).min);
        extents.push_back(const_extent(dom, iv));
      }
      for (const StorageAlign &a : st->storage_aligns)
        aligns.push_back({a.dim, a.factor, a.offset});
    }
    if (st->storage_interleave > 0 && !args.count(st.get())) {
      layout.strides = interleaved_strides(st->op.name(), extents, st->storage_interleave,
                                           &layout.chunk_stride);
      layout.interleave = st->storage_interleave;
      layout.swizzle = st->storage_swizzle;
    } else {
      layout.strides = aligned_strides(extents, aligns);
    }
    layouts[st.get()] = std::move(layout);
  }

  ThreadExtents threads(sch, dom);
  StageNestBuilder builder(sch, bodies, dom, buffers, layouts, global_env, threads);
  Stmt body;
  for (auto it = sch->stages.rbegin(); it != sch->stages.rend(); ++it) {
    const StageNode *s = it->get();
    if (!bodies.body.count(s))
      continue;
    Stmt nest = builder.build(s);
    const Buffer buf = buffers.lookup(s).front();
    for (auto t = s->env_threads.rbegin(); t != s->env_threads.rend(); ++t)
      nest = AttrStmt::make(
          *t, attr::thread_extent,
          Expr(int(threads.launch(s, t->thread_tag(), *as_const_int(t->dom().extent)))), nest);
    if (s->stream_loads)
      nest = AttrStmt::make(buf, attr::stream_loads, Expr(1), nest);
    if (s->bulk_copy && s->scope == "global") {
      // A TMA store: the stage's copy out of a shared tile, one box per block (lower_bulk_copy).
      nest = AttrStmt::make(buf, attr::bulk_copy, Expr(0), nest);
    } else if (s->bulk_copy) {
      user_check(s->scope == "shared" && s->pipeline_stages > 1, "bulk_copy")
          << "stage '" << s->op.name() << "' is filled by TMA (bulk_copy), which needs a "
          << "shared-memory stage pipelined over 2 or more stages (its copies complete on the "
          << "ring's barriers); it is in '" << s->scope << "' scope with "
          << s->pipeline_stages << " stage(s): call set_scope(\"shared\") / pipeline(n)";
      Expr what = Expr(0); // a box of the tensor the stage reads; im2col: the conv
      if (const auto &c = s->im2col)
        what = Call::make(Handle(), "tuple",
                          {c->out_height, c->out_width, c->channels, c->kernel_h, c->kernel_w,
                           c->pad, c->stride, c->dilation, c->pad_end < 0 ? c->pad : c->pad_end},
                          Call::PureIntrinsic);
      // A multicast tile: the cluster's size, this block's rank, and what tells the cluster's
      // tiles apart (lower_bulk_copy checks the box origin does not use it).
      if (const StageNode *owner = s->multicast ? clustered_stage_of(s) : nullptr) {
        std::vector<Expr> cluster{Expr(owner->cluster->size), cluster_rank(owner)};
        for (const Var &v : cluster_axis_vars(owner))
          cluster.push_back(v);
        nest = AttrStmt::make(buf, attr::cluster_multicast,
                              Call::make(Handle(), "tuple", cluster, Call::PureIntrinsic), nest);
      }
      nest = AttrStmt::make(buf, attr::bulk_copy, what, nest);
    }
    if (s->pipeline_stages > 1)
      nest = AttrStmt::make(
          buf, attr::pipeline_scope,
          s->pipeline_slack ? Call::make(Handle(), "tuple",
                                         {Expr(s->pipeline_stages), Expr(s->pipeline_slack)},
                                         Call::PureIntrinsic)
                            : Expr(s->pipeline_stages),
          nest);
    if (s->warp_specialized)
      nest = AttrStmt::make(buf, attr::warp_roles,
                            Expr(int(s->consumer_roles == ConsumerRoles::ping_pong)), nest);
    auto pipeline = [&](Stmt consumer) -> Stmt {
      Stmt seq = Seq::make({nest, consumer});
      if (args.count(s))
        return seq;
      std::vector<Range> bounds;
      for (const IterVar &iv : op_axes(s->op.get()))
        bounds.push_back(dom.lookup(iv.get()));
      if (const auto *f = s->op.as<FoldOpNode>()) {
        // One buffer per state: the shared axes' region, and the whole of its own axes.
        const std::vector<Buffer> &bufs = buffers.lookup(s);
        for (size_t k = bufs.size(); k-- > 0;) {
          std::vector<Range> b = bounds;
          for (const IterVar &iv : f->extra_axis[k])
            b.push_back(iv->dom);
          seq = BufferRealize::make(bufs[k], b, seq);
        }
        return seq;
      }
      Stmt realize = BufferRealize::make(buf, bounds, seq);
      if (s->storage_swizzle > 0)
        realize = AttrStmt::make(buf, attr::storage_swizzle, Expr(s->storage_swizzle), realize);
      if (s->storage_interleave > 0)
        realize = AttrStmt::make(buf, attr::storage_interleave, Expr(s->storage_interleave),
                                 realize);
      for (const StorageAlign &a : s->storage_aligns)
        realize = AttrStmt::make(buf, attr::storage_align,
                                 Call::make(Handle(), "tuple", {a.dim, a.factor, a.offset},
                                            Call::PureIntrinsic),
                                 realize);
      return realize;
    };
    if (s->attach_type == AttachType::Scope) {
      AttachInjector inject(s->attach_ivar, pipeline);
      body = inject.mutate(body);
      user_check(inject.found, "compute_at")
          << "stage '" << s->op.name() << "' is computed at loop '" << s->attach_ivar.name()
          << "' of stage '" << s->attach_stage->op.name()
          << "', but that loop does not exist when lowering (is that stage inlined, or the loop "
             "split or tensorized away?)";
    } else {
      body = pipeline(body);
    }
  }
  return MarkerRemover().mutate(body);
}

} // namespace tessel
