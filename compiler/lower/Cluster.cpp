#include "compiler/lower/Cluster.h"

#include "compiler/ir/IROperator.h"
#include "compiler/support/Error.h"

namespace tessel {

namespace {

void check_cluster(const StageNode *s, const DomainMap &dom) {
  const ClusterLaunch &c = *s->cluster;
  const std::string stage = "stage '" + s->op.name() + "'";
  const std::string axis = "'" + c.axis.name() + "'";
  const auto &r = s->rasterization;
  const bool tile_axis = r && (r->rows.same_as(c.axis) || r->cols.same_as(c.axis));
  if (r && r->persistent()) {
    user_check(tile_axis, "cluster")
        << stage << " is persistent on ('" << r->rows.name() << "', '" << r->cols.name()
        << "') but clustered along " << axis
        << ", which is neither; cluster one of the two tile axes";
    user_check(r->blocks >= c.size, "cluster")
        << stage << " is persistent on " << r->blocks << " block(s), fewer than its clusters of "
        << c.size << " along " << axis << "; give at least " << c.size
        << " blocks (the grid is a whole number of clusters)";
  } else {
    const IterVarAttr *a = s->find_attr(c.axis);
    const std::string tag = a && a->bind_thread.defined() ? a->bind_thread.thread_tag() : "";
    user_check(tag.rfind("blockIdx.", 0) == 0, "cluster")
        << stage << " is clustered along axis " << axis << ", which is "
        << (tag.empty() ? std::string("not bound to a thread index") : "bound to " + tag)
        << "; a cluster groups blocks: bind " << axis
        << " to a blockIdx (or make it a tile axis of persistent)";
    user_check(!r || tile_axis, "cluster")
        << stage << " is rasterized on ('" << r->rows.name() << "', '" << r->cols.name()
        << "') but clustered along " << axis
        << ", which is neither; cluster one of the two tile axes";
  }
  const int64_t n = const_extent(dom, c.axis);
  user_check(n % c.size == 0, "cluster")
      << stage << ": its block axis " << axis << " has " << n
      << " tiles, not a multiple of the cluster size " << c.size
      << ": the grid must be whole clusters; choose a tile size that makes it a multiple of "
      << c.size << " (or launch without clusters)";
}

void check_multicast(const StageNode *s) {
  const std::string stage = "stage '" + s->op.name() + "'";
  user_check(s->bulk_copy && !s->im2col, "multicast")
      << stage << " is multicast (Stage::multicast) but "
      << (s->im2col ? std::string("filled by TMA's im2col mode, which multicast does not take")
                    : std::string("not filled by TMA: call bulk_copy() on it too (each block "
                                  "of the cluster copies a share of its boxes to all)"));
  user_check(clustered_stage_of(s) != nullptr, "multicast")
      << stage << " is multicast (Stage::multicast), but no stage it is computed in is launched "
      << "in clusters: call cluster(axis) on the stage whose blocks share the tile";
}

} // namespace

void check_clusters(const ScheduleNode *sch, const DomainMap &dom) {
  for (const auto &st : sch->stages) {
    if (st->cluster)
      check_cluster(st.get(), dom);
    if (st->multicast)
      check_multicast(st.get());
  }
}

const StageNode *clustered_stage_of(const StageNode *s) {
  for (const StageNode *a = s; a;
       a = a->attach_type == AttachType::Scope ? a->attach_stage : nullptr)
    if (a->cluster)
      return a;
  return nullptr;
}

Expr cluster_rank(const StageNode *s) {
  const auto &c = s->cluster;
  if (!c)
    return Expr();
  const auto &r = s->rasterization;
  Var block = r && r->persistent() ? r->block.var() : loop_var_of(s, c->axis);
  return floormod(block, make_const(block.type(), c->size));
}

std::vector<Var> cluster_axis_vars(const StageNode *s) {
  const ClusterLaunch &c = *s->cluster;
  return {c.axis.var(), loop_var_of(s, c.axis), loop_value_of(s, c.axis)};
}

int64_t cluster_size_along(const StageNode *s, const IterVar &leaf) {
  return s->cluster && s->cluster->axis.same_as(leaf) ? s->cluster->size : 1;
}

std::pair<Expr, Expr> tile_of_cluster(const StageNode *s, Expr row_c, Expr col_c,
                                      const Expr &rank) {
  const auto &c = s->cluster;
  if (!c)
    return {row_c, col_c};
  Expr &along = c->axis.same_as(s->rasterization->rows) ? row_c : col_c;
  along = along * make_const(along.type(), c->size) + rank;
  return {row_c, col_c};
}

} // namespace tessel
