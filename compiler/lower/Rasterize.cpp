#include "compiler/lower/Rasterize.h"

#include "compiler/lower/Cluster.h"

#include "compiler/ir/IROperator.h"
#include "compiler/support/Error.h"

#include <algorithm>

namespace tessel {

bool grouped_order_is_row_major(int64_t ny, int64_t nx, int64_t group) {
  return std::min(group, ny) == 1 || nx == 1;
}

std::pair<Expr, Expr> grouped_tile(const Expr &block, int64_t ny, int64_t nx, int64_t group) {
  internal_check(ny > 0 && nx > 0 && group > 0) << "grouped_tile of " << ny << "x" << nx
                                                 << " blocks in groups of " << group;
  group = std::min(group, ny);
  DataType t = block.type();
  auto c = [&](int64_t v) { return make_const(t, v); };
  Expr first_row = floordiv(block, c(group * nx)) * c(group);
  Expr in_group = floormod(block, c(group * nx));
  // Only the last group can be short, and only when group does not divide ny.
  Expr rows = ny % group == 0 ? c(group) : min(c(ny) - first_row, c(group));
  return {first_row + floormod(in_group, rows), floordiv(in_group, rows)};
}

namespace {

size_t position(const StageNode *s, const IterVar &iv) {
  const auto &leaves = s->leaf_iter_vars;
  auto it = std::find_if(leaves.begin(), leaves.end(),
                         [&](const IterVar &x) { return x.same_as(iv); });
  internal_check(it != leaves.end())
      << "rasterized axis " << iv.name() << " of " << s->op.name() << " is not a loop";
  return it - leaves.begin();
}

void check_one(const ScheduleNode *sch, const StageNode *s, const Rasterization &r) {
  const std::string stage = "stage '" + s->op.name() + "'";
  const char *prim = r.persistent() ? "persistent" : "rasterize";
  const std::string axes = "('" + r.rows.name() + "', '" + r.cols.name() + "')";
  user_check(s->attach_type != AttachType::Inline, prim)
      << stage << " is rasterized on " << axes
      << " but computed inline, so it has no loops; rasterize a stage that keeps its loops";
  const char *tags[] = {"blockIdx.y", "blockIdx.x"};
  const IterVar *ivs[] = {&r.rows, &r.cols};
  for (int i = 0; i < 2 && !r.persistent(); ++i) {
    const IterVarAttr *a = s->find_attr(*ivs[i]);
    std::string bound = a && a->bind_thread.defined() ? a->bind_thread.thread_tag() : "";
    user_check(bound == tags[i], prim)
        << stage << " is rasterized on " << axes << ", but axis '" << ivs[i]->name() << "' is "
        << (bound.empty() ? "not bound to a thread index" : "bound to " + bound)
        << "; rasterize remaps the block grid, so bind '" << ivs[i]->name() << "' to "
        << tags[i] << " (s[" << s->op.name() << "].bind(" << ivs[i]->name()
        << ", thread_axis(\"" << tags[i] << "\")))";
  }
  size_t pr = position(s, r.rows), pc = position(s, r.cols);
  size_t outer = std::min(pr, pc), inner = std::max(pr, pc);
  // The tile loop replaces both loops at once: nothing can sit between them.
  user_check(!r.persistent() || pc == pr + 1, "persistent")
      << stage << " is persistent on " << axes << ", but '" << r.rows.name()
      << "' is not the loop just outside '" << r.cols.name()
      << "'; reorder them so that the two tile loops are adjacent, rows first";
  for (size_t i = 0; i <= inner; ++i) {
    const IterVar &iv = s->leaf_iter_vars[i];
    user_check(!is_reduce_leaf(s, iv), prim)
        << stage << ": reduction loop '" << iv.name() << "' encloses the rasterized loops "
        << axes << "; reorder the block loops outside the reduction";
    const IterVarAttr *a = s->find_attr(iv);
    user_check(!a || !a->tensorize, prim)
        << stage << " is tensorized at loop '" << iv.name() << "', which encloses the "
        << "rasterized loops " << axes << "; tensorize at a loop inside them";
  }
  // The tile depends on both block indices, so it is bound inside the inner of the two loops;
  // a stage computed at a loop before that would have its region depend on it too early.
  for (const auto &st : sch->stages) {
    if (st->attach_type != AttachType::Scope || st->attach_stage != s)
      continue;
    size_t at = position(s, st->attach_ivar);
    user_check(at < outer || at >= inner, prim)
        << "stage '" << st->op.name() << "' is computed at loop '" << st->attach_ivar.name()
        << "' of " << stage << ", between its rasterized loops " << axes
        << ", where the block's tile is not known yet; compute it at '"
        << s->leaf_iter_vars[inner].name() << "' or a loop inside it";
  }
}

} // namespace

void check_rasterizations(const ScheduleNode *sch) {
  for (const auto &st : sch->stages)
    if (st->rasterization)
      check_one(sch, st.get(), *st->rasterization);
}

Stmt bind_rasterized_tile(const StageNode *s, const IterVar &leaf, const DomainMap &dom,
                          Stmt body) {
  const std::optional<Rasterization> &r = s->rasterization;
  if (!r || r->persistent()) // a persistent stage's tile is bound by its tile loop
    return body;
  size_t pr = position(s, r->rows), pc = position(s, r->cols);
  if (!s->leaf_iter_vars[std::max(pr, pc)].same_as(leaf))
    return body;
  Expr by = loop_var_of(s, r->rows), bx = loop_var_of(s, r->cols);
  // Clustered: the grouped order walks the clusters (Cluster.h), each block of a cluster taking
  // the tile of its rank.
  const int64_t cy = cluster_size_along(s, r->rows), cx = cluster_size_along(s, r->cols);
  int64_t ny = const_extent(dom, r->rows) / cy, nx = const_extent(dom, r->cols) / cx;
  if (cy > 1)
    by = floordiv(by, make_const(by.type(), cy));
  if (cx > 1)
    bx = floordiv(bx, make_const(bx.type(), cx));
  const Expr rank = cluster_rank(s);
  if (grouped_order_is_row_major(ny, nx, r->group)) {
    auto [row, col] = tile_of_cluster(s, by, bx, rank);
    return LetStmt::make(r->row, row, LetStmt::make(r->col, col, std::move(body)));
  }
  Var block(s->op.name() + ".block");
  auto [row_c, col_c] = grouped_tile(block, ny, nx, r->group);
  auto [row, col] = tile_of_cluster(s, row_c, col_c, rank);
  body = LetStmt::make(r->row, row, LetStmt::make(r->col, col, std::move(body)));
  return LetStmt::make(block, by * make_const(by.type(), nx) + bx, body);
}

} // namespace tessel
