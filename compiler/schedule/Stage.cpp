// Stage's scheduling primitives: loop transformations (split, fuse, reorder, tile),
// annotations (bind, unroll, tensorize, rasterize, persistent), placement and storage
// (compute_at, scopes, layouts, pipelines, TMA copies, warp roles, clusters). The schedule
// itself (stages, cache_read / cache_write, rfactor) is Schedule.cpp.
#include "compiler/schedule/Schedule.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"

#include <algorithm>

namespace tessel {

namespace {

std::string join_names(const std::vector<IterVar> &ivs) {
  std::string s;
  for (size_t i = 0; i < ivs.size(); ++i) {
    if (i)
      s += ", ";
    s += ivs[i].name();
  }
  return s;
}

// The stage of the schedule that owns `iv`, if any (for error messages).
const StageNode *owner_of(const ScheduleNode *sch, const IterVar &iv) {
  for (const auto &st : sch->stages)
    for (const IterVar &x : st->all_iter_vars)
      if (x.same_as(iv))
        return st.get();
  return nullptr;
}

size_t leaf_index(const StageNode *s, const IterVar &iv) {
  auto it = std::find_if(s->leaf_iter_vars.begin(), s->leaf_iter_vars.end(),
                         [&](const IterVar &x) { return x.same_as(iv); });
  return it - s->leaf_iter_vars.begin();
}

// `iv` must be a current loop of `s`; otherwise say whose axis it is or what became of it.
void check_leaf(const StageNode *s, const IterVar &iv, const char *primitive) {
  user_check(iv.defined(), primitive) << "stage '" << s->op.name() << "': the axis is undefined";
  bool owned = std::any_of(s->all_iter_vars.begin(), s->all_iter_vars.end(),
                           [&](const IterVar &x) { return x.same_as(iv); });
  if (!owned) {
    const StageNode *owner = owner_of(s->schedule, iv);
    user_error(primitive) << "axis '" << iv.name() << "' is not an axis of stage '"
                          << s->op.name() << "'"
                          << (owner ? " (it belongs to stage '" + owner->op.name() + "')" : "")
                          << ". The loops of '" << s->op.name() << "' are: "
                          << join_names(s->leaf_iter_vars);
  }
  user_check(leaf_index(s, iv) < s->leaf_iter_vars.size(), primitive)
      << "axis '" << iv.name() << "' of stage '" << s->op.name()
      << "' was already split or fused away; use the axes that split/fuse returned. Its current "
         "loops are: "
      << join_names(s->leaf_iter_vars);
}

// The axes of a rasterized stage's block order stay its loops: splitting or fusing them would
// change the grid the remap was asked for.
void check_not_rasterized(const StageNode *s, const IterVar &iv, const char *primitive) {
  const auto &r = s->rasterization;
  user_check(!r || (!r->rows.same_as(iv) && !r->cols.same_as(iv)), primitive)
      << "axis '" << iv.name() << "' of stage '" << s->op.name()
      << "' is " << (r && r->persistent() ? "persistent (walked by a tile loop)"
                                             : "rasterized (its block order is remapped)")
      << "; " << primitive << " it before calling " << (r && r->persistent() ? "persistent"
                                                                           : "rasterize");
}

// Split and fuse keep no reversal: reverse the axes they make instead.
void check_not_reversed(const StageNode *s, const IterVar &iv, const char *primitive) {
  const IterVarAttr *a = s->find_attr(iv);
  user_check(!a || !a->reversed.defined(), primitive)
      << "axis '" << iv.name() << "' of stage '" << s->op.name() << "' is reversed; " << primitive
      << " it before calling reverse (rasterize and persistent order the tiles themselves)";
}

IterVar new_iter_var(const std::string &name, IterVarType type) {
  return IterVar::make(Range(), Var(name), type);
}

// True if `consumer` reads, directly or through other stages, what `producer` computes.
bool reads_transitively(const StageNode *consumer, const StageNode *producer) {
  const ScheduleNode *sch = consumer->schedule;
  std::vector<const StageNode *> work{consumer};
  llvm::DenseMap<const StageNode *, bool> seen;
  while (!work.empty()) {
    const StageNode *s = work.back();
    work.pop_back();
    if (seen[s])
      continue;
    seen[s] = true;
    for (const Tensor &t : s->op->input_tensors()) {
      auto it = sch->stage_map.find(t.op().get());
      if (it == sch->stage_map.end())
        continue;
      if (it->second == producer)
        return true;
      work.push_back(it->second);
    }
  }
  return false;
}

} // namespace

// ---- Stage accessors ------------------------------------------------------------------------

const Operation &Stage::op() const { return n_->op; }
const Operation &Stage::origin_op() const { return n_->origin_op; }
const std::string &Stage::name() const { return n_->op.name(); }
const std::vector<IterVar> &Stage::op_axis() const { return op_axes(n_->op.get()); }
IterVar Stage::op_axis(int i) const {
  const auto &ax = op_axis();
  int n = static_cast<int>(ax.size());
  user_check(i >= -n && i < n, "op_axis")
      << "stage '" << name() << "' has " << n << " axes; index " << i << " is out of range";
  return ax[i < 0 ? i + n : i];
}
std::vector<IterVar> Stage::reduce_axis() const { return op_reduce_axes(n_->op.get()); }
void Stage::check_axis_count(size_t n) const {
  user_check(op_axis().size() == n, "axes")
      << "stage '" << name() << "' has " << op_axis().size() << " axes, not " << n;
}
const std::vector<IterVar> &Stage::leaf_iter_vars() const { return n_->leaf_iter_vars; }
const std::vector<IterVarRelation> &Stage::relations() const { return n_->relations; }
AttachType Stage::attach_type() const { return n_->attach_type; }
StageNode *Stage::attach_stage() const { return n_->attach_stage; }
const IterVar &Stage::attach_ivar() const { return n_->attach_ivar; }
const std::string &Stage::scope() const { return n_->scope; }
bool Stage::is_output() const { return n_->is_output; }

// ---- Loop transformations -------------------------------------------------------------------

// A fold's steps run in order, one slice of each tensor of the step at a time.
static void check_not_fold_axis(const StageNode *s, const IterVar &iv, const char *prim) {
  user_check(iv.iter_type() != IterVarType::Ordered, prim)
      << "stage '" << s->op.name() << "': '" << iv.name() << "' is a fold axis, whose steps run "
      << "in order on every thread; it cannot be split, fused or bound (choose the size of a "
         "step in the definition)";
}

static std::pair<IterVar, IterVar> do_split(StageNode *s, const IterVar &parent,
                                            std::optional<int64_t> factor,
                                            std::optional<int64_t> nparts,
                                            TailStrategy tail = TailStrategy::GuardWithIf) {
  const char *prim = factor ? "split" : "split_nparts";
  check_leaf(s, parent, prim);
  check_not_rasterized(s, parent, prim);
  check_not_reversed(s, parent, prim);
  check_not_fold_axis(s, parent, prim);
  int64_t v = factor ? *factor : *nparts;
  user_check(v > 0, prim) << "stage '" << s->op.name() << "', axis '" << parent.name() << "': "
                          << (factor ? "factor" : "nparts") << " must be positive, got " << v;
  user_check(tail == TailStrategy::GuardWithIf || parent.iter_type() != IterVarType::CommReduce,
             prim)
      << "stage '" << s->op.name() << "', axis '" << parent.name()
      << "': a reduction axis cannot shift inwards (the overlap would be summed twice); use "
         "GuardWithIf";
  IterVar outer = new_iter_var(parent.name() + ".outer", parent.iter_type());
  IterVar inner = new_iter_var(parent.name() + ".inner", parent.iter_type());
  s->relations.push_back(SplitRelation{parent, outer, inner, factor, nparts, tail});
  s->all_iter_vars.push_back(outer);
  s->all_iter_vars.push_back(inner);
  size_t pos = leaf_index(s, parent);
  s->leaf_iter_vars.erase(s->leaf_iter_vars.begin() + pos);
  s->leaf_iter_vars.insert(s->leaf_iter_vars.begin() + pos, {outer, inner});
  return {outer, inner};
}

std::pair<IterVar, IterVar> Stage::split(const IterVar &parent, int64_t factor,
                                         TailStrategy tail) {
  return do_split(n_, parent, factor, std::nullopt, tail);
}

std::pair<IterVar, IterVar> Stage::split_nparts(const IterVar &parent, int64_t nparts) {
  return do_split(n_, parent, std::nullopt, nparts);
}

IterVar Stage::fuse(const IterVar &outer, const IterVar &inner) {
  check_leaf(n_, outer, "fuse");
  check_leaf(n_, inner, "fuse");
  check_not_fold_axis(n_, outer, "fuse");
  check_not_fold_axis(n_, inner, "fuse");
  check_not_rasterized(n_, outer, "fuse");
  check_not_rasterized(n_, inner, "fuse");
  check_not_reversed(n_, outer, "fuse");
  check_not_reversed(n_, inner, "fuse");
  size_t po = leaf_index(n_, outer), pi = leaf_index(n_, inner);
  user_check(pi == po + 1, "fuse")
      << "stage '" << name() << "': can only fuse adjacent loops, outer first; '" << outer.name()
      << "' is loop " << po << " and '" << inner.name() << "' is loop " << pi
      << ". Reorder them first.";
  user_check(outer.iter_type() == inner.iter_type(), "fuse")
      << "stage '" << name() << "': cannot fuse reduction axis with data-parallel axis ('"
      << outer.name() << "', '" << inner.name() << "')";
  IterVar fused = new_iter_var(outer.name() + "." + inner.name() + ".fused", outer.iter_type());
  n_->relations.push_back(FuseRelation{outer, inner, fused});
  n_->all_iter_vars.push_back(fused);
  n_->leaf_iter_vars.erase(n_->leaf_iter_vars.begin() + po, n_->leaf_iter_vars.begin() + pi + 1);
  n_->leaf_iter_vars.insert(n_->leaf_iter_vars.begin() + po, fused);
  return fused;
}

IterVar Stage::fuse(const std::vector<IterVar> &axes) {
  user_check(!axes.empty(), "fuse") << "stage '" << name() << "': nothing to fuse";
  IterVar f = axes[0];
  for (size_t i = 1; i < axes.size(); ++i)
    f = fuse(f, axes[i]);
  return f;
}

std::array<IterVar, 4> Stage::tile(const IterVar &x, const IterVar &y, int64_t x_factor,
                                   int64_t y_factor) {
  auto [xo, xi] = split(x, x_factor);
  auto [yo, yi] = split(y, y_factor);
  reorder({xo, yo, xi, yi});
  return {xo, yo, xi, yi};
}

Stage &Stage::reorder(const std::vector<IterVar> &order) {
  std::vector<size_t> positions;
  for (size_t i = 0; i < order.size(); ++i) {
    check_leaf(n_, order[i], "reorder");
    for (size_t j = 0; j < i; ++j)
      user_check(!order[j].same_as(order[i]), "reorder")
          << "stage '" << name() << "': axis '" << order[i].name()
          << "' is listed twice; list each loop once";
    positions.push_back(leaf_index(n_, order[i]));
  }
  std::sort(positions.begin(), positions.end());
  for (size_t i = 0; i < order.size(); ++i)
    n_->leaf_iter_vars[positions[i]] = order[i];
  return *this;
}

// ---- Annotations ----------------------------------------------------------------------------

Stage &Stage::bind(const IterVar &iv, const IterVar &thread) {
  check_leaf(n_, iv, "bind");
  check_not_fold_axis(n_, iv, "bind");
  user_check(thread.defined() && thread.iter_type() == IterVarType::ThreadIndex, "bind")
      << "stage '" << name() << "', axis '" << iv.name()
      << "': bind to a thread axis made with thread_axis(\"threadIdx.x\") and the like";
  user_check(iv.iter_type() != IterVarType::CommReduce || thread.thread_tag() == "threadIdx.x",
             "bind")
      << "stage '" << name() << "': reduction axis '" << iv.name() << "' is bound to "
      << thread.thread_tag() << "; a reduction across threads runs along threadIdx.x (the "
      << "lanes of a warp): bind it to threadIdx.x and the data-parallel axes to the others";
  for (const auto &[node, attr] : n_->iter_var_attrs) {
    if (node == iv.get() || !attr.bind_thread.defined())
      continue;
    user_check(attr.bind_thread.thread_tag() != thread.thread_tag(), "bind")
        << "stage '" << name() << "': thread tag '" << thread.thread_tag()
        << "' is already bound to another axis of this stage; bind each thread index once";
  }
  if (const auto &r = n_->rasterization; r && r->persistent()) {
    bool tile_axis = r->rows.same_as(iv) || r->cols.same_as(iv);
    user_check(!tile_axis && thread.thread_tag() != "blockIdx.x", "bind")
        << "stage '" << name() << "' is persistent on ('" << r->rows.name() << "', '"
        << r->cols.name() << "'), whose tile loop runs on a fixed grid on blockIdx.x; "
        << (tile_axis ? "its tile axes are not bound" : "bind '" + iv.name() + "' elsewhere");
  }
  IterVarAttr &a = n_->attr(iv);
  user_check(a.for_kind == ForKind::Serial, "bind")
      << "stage '" << name() << "', axis '" << iv.name()
      << "' is unrolled or vectorized and cannot also be bound to a thread";
  a.bind_thread = thread;
  return *this;
}

static Stage &set_for_kind(Stage &st, const IterVar &iv, ForKind kind, const char *prim) {
  check_leaf(st.get(), iv, prim);
  IterVarAttr &a = st.get()->attr(iv);
  user_check(!a.bind_thread.defined(), prim)
      << "stage '" << st.name() << "', axis '" << iv.name() << "' is bound to "
      << a.bind_thread.thread_tag() << " and cannot also be " << prim << "d";
  a.for_kind = kind;
  return st;
}

Stage &Stage::unroll(const IterVar &iv) { return set_for_kind(*this, iv, ForKind::Unrolled, "unroll"); }
Stage &Stage::vectorize(const IterVar &iv) {
  user_check(!iv.defined() || iv.iter_type() != IterVarType::CommReduce, "vectorize")
      << "stage '" << name() << "': reduction axis '" << iv.name() << "' cannot be vectorized";
  return set_for_kind(*this, iv, ForKind::Vectorized, "vectorize");
}
Stage &Stage::parallel(const IterVar &iv) { return set_for_kind(*this, iv, ForKind::Parallel, "parallel"); }

Stage &Stage::pragma(const IterVar &iv, const std::string &key, Expr value) {
  check_leaf(n_, iv, "pragma");
  user_check(!key.empty(), "pragma") << "stage '" << name() << "': a pragma needs a key";
  n_->attr(iv).pragmas.emplace_back(key, std::move(value));
  return *this;
}

Stage &Stage::reverse(const IterVar &iv) {
  check_leaf(n_, iv, "reverse");
  if (const auto &r = n_->rasterization)
    user_check(!r->rows.same_as(iv) && !r->cols.same_as(iv), "reverse")
        << "stage '" << name() << "', axis '" << iv.name() << "' is one of the tile axes of "
        << (r->persistent() ? "persistent" : "rasterize") << ", which order them already";
  IterVarAttr &a = n_->attr(iv);
  user_check(!a.reversed.defined(), "reverse")
      << "stage '" << name() << "', axis '" << iv.name() << "' is reversed already";
  a.reversed = Var(iv.name() + ".rev", iv.var().type());
  return *this;
}

Stage &Stage::specialize(const IterVar &iv) {
  check_leaf(n_, iv, "specialize");
  return pragma(iv, "specialize");
}

Stage &Stage::overlap_steps(const IterVar &iv) {
  check_leaf(n_, iv, "overlap_steps");
  return pragma(iv, "overlap_steps");
}

Stage &Stage::split_last_wave(const IterVar &iv, int max_parts) {
  check_leaf(n_, iv, "split_last_wave");
  const auto *fold = op().as<FoldOpNode>();
  user_check(iv.iter_type() == IterVarType::CommReduce || (fold && iv.same_as(fold->fold_axis)),
             "split_last_wave")
      << "stage '" << name() << "', axis '" << iv.name()
      << "' is not a reduction axis; split_last_wave splits the reduction of the last round's "
         "tiles: give the reduction loop that walks the K steps (its TMA ring's loop)";
  user_check(!fold || !fold->merge.empty(), "split_last_wave")
      << "fold '" << name() << "' has no merge of two parts' states; give each state a merge "
         "(FoldState::merge) to split its steps over the last wave";
  const IterVarAttr *a = n_->find_attr(iv);
  user_check(!a || (a->for_kind == ForKind::Serial && !a->bind_thread.defined()),
             "split_last_wave")
      << "stage '" << name() << "', axis '" << iv.name()
      << "' is bound, unrolled or vectorized; split_last_wave needs a plain serial loop";
  user_check(max_parts >= 2, "split_last_wave")
      << "stage '" << name() << "', axis '" << iv.name() << "': max_parts must be at least 2, got "
      << max_parts;
  return pragma(iv, "split_last_wave", Expr(max_parts));
}

Stage &Stage::ping_pong(const IterVar &iv) {
  check_leaf(n_, iv, "ping_pong");
  return pragma(iv, "ping_pong");
}

Stage &Stage::tensorize(const IterVar &iv, std::shared_ptr<const TensorIntrin> intrin) {
  check_leaf(n_, iv, "tensorize");
  user_check(intrin != nullptr, "tensorize") << "stage '" << name() << "': no intrinsic given";
  IterVarAttr &a = n_->attr(iv);
  a.tensorize = intrin.get();
  a.tensorize_holder = std::move(intrin);
  return *this;
}

Stage &Stage::rasterize(const IterVar &rows, const IterVar &cols, int64_t group) {
  check_leaf(n_, rows, "rasterize");
  check_leaf(n_, cols, "rasterize");
  check_not_reversed(n_, rows, "rasterize");
  check_not_reversed(n_, cols, "rasterize");
  user_check(!rows.same_as(cols), "rasterize")
      << "stage '" << name() << "': rows and cols are both '" << rows.name()
      << "'; give the loop bound to blockIdx.y, then the one bound to blockIdx.x";
  for (const IterVar &iv : {rows, cols})
    user_check(iv.iter_type() == IterVarType::DataPar, "rasterize")
        << "stage '" << name() << "', axis '" << iv.name()
        << "' is a reduction axis; rasterize reorders the tiles of two data-parallel axes bound "
           "to blockIdx.y and blockIdx.x";
  user_check(group >= 1, "rasterize")
      << "stage '" << name() << "', axes '" << rows.name() << "', '" << cols.name()
      << "': group must be at least 1 (1 keeps the row-major order), got " << group;
  if (const auto &r = n_->rasterization) {
    bool same = r->rows.same_as(rows) && r->cols.same_as(cols);
    user_error("rasterize") << "stage '" << name() << "' is already rasterized on ('"
                            << r->rows.name() << "', '" << r->cols.name() << "') with group "
                            << r->group << (same ? "" : "; its blocks have one order")
                            << ". Rasterize a stage once";
  }
  // Axes already bound must be bound to the right block index; the rest is checked at lower().
  const char *tags[] = {"blockIdx.y", "blockIdx.x"};
  const IterVar *axes[] = {&rows, &cols};
  for (int i = 0; i < 2; ++i) {
    const IterVarAttr *a = n_->find_attr(*axes[i]);
    user_check(!a || a->for_kind == ForKind::Serial, "rasterize")
        << "stage '" << name() << "', axis '" << axes[i]->name()
        << "' is unrolled, vectorized or parallel; rasterize needs it bound to " << tags[i];
    user_check(!a || !a->bind_thread.defined() || a->bind_thread.thread_tag() == tags[i],
               "rasterize")
        << "stage '" << name() << "', axis '" << axes[i]->name() << "' is bound to "
        << a->bind_thread.thread_tag() << ", but rasterize's " << (i ? "cols" : "rows")
        << " axis must be bound to " << tags[i];
  }
  n_->rasterization = Rasterization{rows, cols, group, Var(rows.name() + ".raster"),
                                    Var(cols.name() + ".raster")};
  return *this;
}

Stage &Stage::persistent(const IterVar &rows, const IterVar &cols, int64_t group,
                         int64_t blocks) {
  check_leaf(n_, rows, "persistent");
  check_leaf(n_, cols, "persistent");
  check_not_reversed(n_, rows, "persistent");
  check_not_reversed(n_, cols, "persistent");
  const std::string axes = "('" + rows.name() + "', '" + cols.name() + "')";
  user_check(!rows.same_as(cols), "persistent")
      << "stage '" << name() << "': rows and cols are both '" << rows.name()
      << "'; give the two block-tile loops, rows first";
  for (const IterVar &iv : {rows, cols}) {
    user_check(iv.iter_type() == IterVarType::DataPar, "persistent")
        << "stage '" << name() << "', axis '" << iv.name()
        << "' is a reduction axis; persistent walks the tiles of two data-parallel axes";
    const IterVarAttr *a = n_->find_attr(iv);
    user_check(!a || (a->for_kind == ForKind::Serial && !a->bind_thread.defined()),
               "persistent")
        << "stage '" << name() << "', axis '" << iv.name() << "' is "
        << (a && a->bind_thread.defined() ? "bound to " + a->bind_thread.thread_tag()
                                          : std::string("unrolled, vectorized or parallel"))
        << "; persistent runs the tiles " << axes
        << " in a loop of a fixed grid on blockIdx.x: leave both axes plain loops";
  }
  user_check(group >= 1, "persistent")
      << "stage '" << name() << "', axes " << axes
      << ": group must be at least 1 (1 keeps the row-major order), got " << group;
  user_check(blocks >= 1, "persistent")
      << "stage '" << name() << "', axes " << axes << ": blocks must be at least 1 (the "
      << "persistent grid, e.g. 132: one block per SM of an H100), got " << blocks;
  if (const auto &r = n_->rasterization)
    user_error("persistent") << "stage '" << name() << "' already has a tile order on ('"
                             << r->rows.name() << "', '" << r->cols.name() << "') ("
                             << (r->persistent() ? "persistent" : "rasterize")
                             << "); give a stage one tile order";
  for (const auto &[node, a] : n_->iter_var_attrs)
    user_check(!a.bind_thread.defined() || a.bind_thread.thread_tag() != "blockIdx.x",
               "persistent")
        << "stage '" << name() << "': an axis is bound to blockIdx.x, which the persistent "
        << "grid of " << axes << " takes; bind it to blockIdx.y or .z, or unbind it";
  Rasterization r{rows, cols, group, Var(rows.name() + ".raster"), Var(cols.name() + ".raster")};
  r.blocks = blocks;
  r.block = thread_axis("blockIdx.x");
  r.iteration = Var(name() + ".tile_iter");
  r.tile = Var(name() + ".tile");
  n_->rasterization = r;
  return *this;
}

// ---- Placement and storage ------------------------------------------------------------------

Stage &Stage::compute_at(Stage parent, const IterVar &scope) {
  StageNode *p = parent.get();
  user_check(p != n_, "compute_at") << "stage '" << name() << "' cannot be computed at itself";
  user_check(!n_->is_output, "compute_at")
      << "stage '" << name() << "' is an output of the schedule; outputs stay at the root";
  user_check(n_->op.as<ComputeOpNode>() || n_->op.as<FoldOpNode>(), "compute_at")
      << "'" << name() << "' is a placeholder (an input); only computed stages can be placed";
  check_leaf(p, scope, "compute_at");
  user_check(reads_transitively(p, n_), "compute_at")
      << "stage '" << p->op.name() << "' does not consume '" << name()
      << "' (directly or through other stages); compute '" << name()
      << "' at a stage that reads it";
  for (StageNode *a = p; a; a = a->attach_type == AttachType::Scope ? a->attach_stage : nullptr)
    user_check(a != n_, "compute_at")
        << "computing '" << name() << "' at '" << p->op.name()
        << "' would make a cycle of attachments: '" << p->op.name() << "' is itself computed at '"
        << name() << "'";
  n_->attach_type = AttachType::Scope;
  n_->attach_stage = p;
  n_->attach_ivar = scope;
  return *this;
}

Stage &Stage::compute_inline() {
  const auto *c = n_->op.as<ComputeOpNode>();
  user_check(!n_->op.as<FoldOpNode>(), "compute_inline")
      << "fold '" << name() << "' carries its states over steps and cannot be inlined";
  user_check(c, "compute_inline") << "'" << name() << "' is a placeholder and cannot be inlined";
  user_check(!c->reduction(), "compute_inline")
      << "stage '" << name() << "' is a reduction and cannot be inlined into its consumers";
  user_check(!n_->is_output, "compute_inline")
      << "stage '" << name() << "' is an output of the schedule and cannot be inlined";
  n_->attach_type = AttachType::Inline;
  n_->attach_stage = nullptr;
  n_->attach_ivar = IterVar();
  return *this;
}

Stage &Stage::compute_root() {
  user_check(n_->op.as<ComputeOpNode>() || n_->op.as<FoldOpNode>(), "compute_root")
      << "'" << name() << "' is a placeholder (an input); only computed stages can be placed";
  n_->attach_type = AttachType::Root;
  n_->attach_stage = nullptr;
  n_->attach_ivar = IterVar();
  return *this;
}

Stage &Stage::set_scope(const std::string &scope) {
  static const char *known[] = {"global",          "shared",       "local",
                                "wmma.matrix_a",   "wmma.matrix_b", "wmma.accumulator",
                                "mma.matrix_a",    "mma.matrix_b",  "mma.accumulator",
                                "wgmma.accumulator", "wgmma.rows", "wgmma.matrix_a"};
  user_check(std::find(std::begin(known), std::end(known), scope) != std::end(known), "set_scope")
      << "stage '" << name() << "': unknown storage scope '" << scope
      << "'; expected global, shared, local, wmma.matrix_a, wmma.matrix_b, wmma.accumulator, "
         "mma.matrix_a, mma.matrix_b, mma.accumulator, wgmma.accumulator, wgmma.rows or "
         "wgmma.matrix_a";
  user_check(!n_->is_output || scope == "global", "set_scope")
      << "stage '" << name() << "' is an output and must stay in global memory";
  n_->scope = scope;
  return *this;
}

Stage &Stage::set_scope(const std::string &scope, const Tensor &output) {
  user_check(n_->op.as<FoldOpNode>(), "set_scope")
      << "stage '" << name() << "' is not a fold: a scope for one of its outputs is for the "
         "states of a fold; set the stage's scope instead";
  user_check(output.op().same_as(n_->op), "set_scope")
      << "'" << output.name() << "' is not an output of fold '" << name() << "'";
  const std::string previous = n_->scope;
  set_scope(scope); // checks the scope
  n_->scope = previous;
  n_->output_scopes.emplace_back(output.value_index(), scope);
  return *this;
}

Stage &Stage::storage_align(const IterVar &axis, int factor, int offset) {
  const auto &ax = op_axis();
  auto it = std::find_if(ax.begin(), ax.end(), [&](const IterVar &x) { return x.same_as(axis); });
  user_check(it != ax.end(), "storage_align")
      << "stage '" << name() << "': '" << (axis.defined() ? axis.name() : "?")
      << "' is not one of the stage's data axes (" << join_names(ax) << ")";
  user_check(factor > 0 && offset >= 0 && offset < factor, "storage_align")
      << "stage '" << name() << "': need factor > 0 and 0 <= offset < factor, got factor "
      << factor << ", offset " << offset;
  user_check(n_->storage_interleave == 0, "storage_align")
      << "stage '" << name() << "' is stored interleaved (storage_interleave); an interleaved "
         "buffer has no padded rows to align: use one of the two";
  n_->storage_aligns.push_back({static_cast<int>(it - ax.begin()), factor, offset});
  return *this;
}

Stage &Stage::storage_interleave(int chunk) {
  user_check(n_->op.as<ComputeOpNode>() && !n_->is_output, "storage_interleave")
      << "stage '" << name() << "': only intermediate computed stages choose their storage "
         "layout; an output or input keeps the row-major layout its caller passes";
  user_check(chunk > 1, "storage_interleave")
      << "stage '" << name() << "': the chunk must be at least 2 elements, got " << chunk;
  user_check(n_->storage_aligns.empty(), "storage_interleave")
      << "stage '" << name() << "' already has storage_align; an interleaved buffer has no "
         "padded rows to align: use one of the two";
  n_->storage_interleave = chunk;
  return *this;
}

Stage &Stage::swizzle(int bytes) {
  user_check(bytes == 32 || bytes == 64 || bytes == 128, "swizzle")
      << "stage '" << name() << "': the swizzled layouts of wgmma and TMA have rows of 32, 64 or "
         "128 bytes, got " << bytes;
  int elem = n_->op->output_dtype(0).bytes();
  user_check(elem > 0 && elem <= 16 && bytes % elem == 0, "swizzle")
      << "stage '" << name() << "' holds " << n_->op->output_dtype(0)
      << ", which a 16-byte unit does not hold a whole number of";
  storage_interleave(bytes / elem);
  n_->storage_swizzle = bytes;
  return *this;
}

Stage &Stage::double_buffer() {
  user_check(n_->op.as<ComputeOpNode>() && !n_->is_output, "double_buffer")
      << "stage '" << name() << "': only intermediate computed stages can be double-buffered";
  return pipeline(2);
}

Stage &Stage::pipeline(int stages, int slack) {
  user_check(n_->op.as<ComputeOpNode>() && !n_->is_output, "pipeline")
      << "stage '" << name() << "': only intermediate computed stages can be pipelined";
  user_check(stages >= 2 && stages <= 8, "pipeline")
      << "stage '" << name() << "': a pipeline needs 2 to 8 stages, got " << stages;
  user_check(slack >= 0 && stages >= 2 + slack, "pipeline")
      << "stage '" << name() << "': a slack of " << slack << " needs " << 2 + slack
      << " stages or more (one filled ahead of the one computed), got " << stages;
  n_->pipeline_stages = stages;
  n_->pipeline_slack = slack;
  return *this;
}

Stage &Stage::bulk_copy() {
  user_check(n_->op.as<ComputeOpNode>(), "bulk_copy")
      << "stage '" << name() << "' is a placeholder; only a computed stage can be copied by "
         "TMA: a shared stage filled from global memory (a cache_read), or a global stage "
         "copied out of a shared one (the output of a cache_write(..., \"shared\"))";
  user_check(!n_->is_output || n_->scope == "global", "bulk_copy")
      << "stage '" << name() << "' is an output in '" << n_->scope
      << "' scope; an output stored by TMA lives in global memory";
  n_->bulk_copy = true;
  return *this;
}

Stage &Stage::stream_loads() {
  const auto *op = n_->op.as<ComputeOpNode>();
  user_check(op, "stream_loads")
      << "stage '" << name() << "' is not a computed stage; stream_loads marks the loads of a "
         "stage that reads global memory (a cache_read copy into registers, say)";
  bool reads_global = false;
  for (const Tensor &t : op->input_tensors()) {
    auto it = n_->schedule->stage_map.find(t.op().get());
    reads_global |= it == n_->schedule->stage_map.end() || it->second->scope == "global";
  }
  user_check(reads_global, "stream_loads")
      << "stage '" << name() << "' reads no tensor in global memory; stream_loads applies to "
         "loads from global memory (call it on the copy that reads the global tensor)";
  n_->stream_loads = true;
  return *this;
}

Stage &Stage::bulk_copy_im2col(const Im2colCopy &conv) {
  user_check(conv.out_height > 0 && conv.out_width > 0 && conv.channels > 0 &&
                 conv.kernel_h > 0 && conv.kernel_w > 0 && conv.pad >= 0,
             "bulk_copy_im2col")
      << "stage '" << name() << "': the output size, channels and kernel must be positive and "
         "the padding non-negative";
  bulk_copy();
  n_->im2col = conv;
  return *this;
}

Stage &Stage::warp_specialize(ConsumerRoles consumers) {
  user_check(n_->op.as<ComputeOpNode>() || n_->op.as<FoldOpNode>(), "warp_specialize")
      << "stage '" << name() << "' is not computed; warp roles split a computed stage's (or a "
         "fold's) loops";
  n_->warp_specialized = true;
  n_->consumer_roles = consumers;
  return *this;
}

Stage &Stage::cluster(const IterVar &axis, int size) {
  check_leaf(n_, axis, "cluster");
  user_check(axis.iter_type() == IterVarType::DataPar, "cluster")
      << "stage '" << name() << "', axis '" << axis.name()
      << "' is a reduction axis; cluster groups the blocks of a data-parallel block-tile axis";
  user_check(size == 2 || size == 4 || size == 8, "cluster")
      << "stage '" << name() << "', axis '" << axis.name() << "': clusters of " << size
      << " blocks; give 2, 4 or 8 (a portable cluster has at most 8 blocks)";
  if (const auto &c = n_->cluster)
    user_error("cluster") << "stage '" << name() << "' is already launched in clusters of "
                          << c->size << " along '" << c->axis.name()
                          << "'; give a stage one cluster shape";
  n_->cluster = ClusterLaunch{axis, size};
  return *this;
}

Stage &Stage::multicast() {
  user_check(n_->op.as<ComputeOpNode>() && !n_->is_output, "multicast")
      << "stage '" << name() << "': only a shared tile filled by TMA (bulk_copy) can be "
         "multicast to the blocks of a cluster";
  n_->multicast = true;
  return *this;
}

Stage &Stage::env_threads(const std::vector<IterVar> &threads) {
  for (const IterVar &t : threads) {
    const std::string &tag = t.thread_tag();
    user_check(tag.rfind("threadIdx.", 0) == 0, "env_threads")
        << "stage '" << name() << "': '" << t.name() << "' is not a threadIdx axis (tag '" << tag
        << "'); env_threads launches threads of the block";
    auto extent = t.dom().defined() ? as_const_int(t.dom().extent) : std::nullopt;
    user_check(extent && *extent > 0, "env_threads")
        << "stage '" << name() << "': thread axis '" << t.name()
        << "' needs a constant extent: make it with thread_axis(Range(0, n), \"" << tag << "\")";
    for (const IterVar &o : n_->env_threads)
      user_check(o.thread_tag() != tag, "env_threads")
          << "stage '" << name() << "' already runs on " << tag;
  }
  n_->env_threads.insert(n_->env_threads.end(), threads.begin(), threads.end());
  return *this;
}

std::string describe(const StageNode *s) {
  return "stage '" + s->op.name() + "' (loops: " + join_names(s->leaf_iter_vars) + ")";
}

} // namespace tessel
