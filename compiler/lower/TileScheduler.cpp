#include "compiler/lower/TileScheduler.h"

#include "compiler/ir/IROperator.h"
#include "compiler/lower/Cluster.h"
#include "compiler/lower/Rasterize.h"
#include "compiler/support/Error.h"

#include <algorithm>

namespace tessel {

namespace {

// The tiles of the grouped order: clusters of tiles when the stage is clustered (Cluster.h).
int64_t tiles_of(const StageNode *s, const DomainMap &dom) {
  const Rasterization &r = *s->rasterization;
  return const_extent(dom, r.rows) / cluster_size_along(s, r.rows) *
         (const_extent(dom, r.cols) / cluster_size_along(s, r.cols));
}

int64_t cluster_size(const StageNode *s) { return s->cluster ? s->cluster->size : 1; }

// `s` without the threadIdx bindings in its chain of attributes and lets (those go to
// `bindings`, outermost first).
Stmt strip_thread_bindings(const Stmt &s, std::vector<const AttrStmt *> &bindings) {
  if (thread_index_bound_by(s)) {
    const auto *a = s.as<AttrStmt>();
    bindings.push_back(a);
    return strip_thread_bindings(a->body, bindings);
  }
  if (const auto *a = s.as<AttrStmt>())
    return AttrStmt::make(a->node, a->key, a->value, strip_thread_bindings(a->body, bindings));
  if (const auto *l = s.as<LetStmt>())
    return LetStmt::make(l->var, l->value, strip_thread_bindings(l->body, bindings));
  return s;
}

} // namespace

int64_t persistent_grid(const StageNode *s, const DomainMap &dom) {
  const int64_t c = cluster_size(s);
  return c * std::min(s->rasterization->blocks / c, tiles_of(s, dom));
}

int64_t last_wave_parts(int64_t tiles, int64_t grid, int64_t steps, int64_t max_parts) {
  const int64_t last = tiles % grid;
  return last == 0 ? 1 : std::max<int64_t>(1, std::min({max_parts, grid / last, steps}));
}

Stmt persistent_tile_loop(const StageNode *s, const IterVar &leaf, const DomainMap &dom,
                          Stmt body, const std::optional<LastWaveSplit> &split) {
  const std::optional<Rasterization> &r = s->rasterization;
  if (!r || !r->persistent())
    return body;
  // Clustered, the tile loop walks clusters of tiles (Cluster.h): the grid's clusters take the
  // cluster tiles in turn, and each block the tile of its rank in the cluster tile.
  int64_t ny = const_extent(dom, r->rows) / cluster_size_along(s, r->rows),
          nx = const_extent(dom, r->cols) / cluster_size_along(s, r->cols);
  DataType t = r->tile.type();
  if (leaf.same_as(r->cols)) {
    Expr row = floordiv(r->tile, make_const(t, nx)), col = floormod(r->tile, make_const(t, nx));
    if (!grouped_order_is_row_major(ny, nx, r->group))
      std::tie(row, col) = grouped_tile(r->tile, ny, nx, r->group);
    std::tie(row, col) = tile_of_cluster(s, row, col, cluster_rank(s));
    return LetStmt::make(r->row, row, LetStmt::make(r->col, col, std::move(body)));
  }
  if (!leaf.same_as(r->rows))
    return body;
  const int64_t c = cluster_size(s);
  const int64_t tiles = ny * nx, grid = persistent_grid(s, dom) / c;
  const int64_t iterations = (tiles + grid - 1) / grid;
  std::vector<const AttrStmt *> bindings;
  body = strip_thread_bindings(body, bindings);
  Expr cluster = c > 1 ? floordiv(r->block.var(), make_const(t, c)) : Expr(r->block.var());
  Expr tile = r->iteration * make_const(t, grid) + cluster;
  // Stage::split_last_wave: the last round's `last` tiles (fewer than the grid) in `parts`
  // parts each, on blocks 0 .. last * parts - 1; block b computes part parts - 1 - b / last of
  // tile b % last among them, so that the first parts (which wait for the others) have the
  // higher blocks. The split loop runs over [begin, end): the part's steps.
  const int64_t rounds = tiles / grid, last = tiles % grid;
  int64_t parts = 1;
  if (split) {
    user_check(c == 1, "split_last_wave")
        << "stage '" << s->op.name() << "' is clustered; split_last_wave splits the tiles of "
        << "unclustered persistent kernels";
    parts = last_wave_parts(tiles, grid, split->steps, split->max_parts);
    const Expr steps = make_const(t, split->steps);
    if (parts == 1) {
      body = LetStmt::make(split->begin, make_const(t, 0),
                           LetStmt::make(split->end, steps, std::move(body)));
    } else {
      Expr tail = r->iteration >= make_const(t, rounds);
      Var part(r->tile->name.substr(0, r->tile->name.rfind('.')) + ".part", t);
      Expr b = r->block.var(), slot = floormod(b, make_const(t, last));
      Expr p = make_const(t, parts);
      body = LetStmt::make(split->end, select(tail, floordiv((part + 1) * steps, p), steps),
                           std::move(body));
      body = LetStmt::make(split->begin, floordiv(part * steps, p), std::move(body));
      body = AttrStmt::make(
          Expr(part), attr::last_wave,
          Call::make(Handle(), "tuple", {p, make_const(t, last), slot, tail}, Call::PureIntrinsic),
          std::move(body));
      body = IfThenElse::make(!tail || b < make_const(t, last * parts), std::move(body));
      body = LetStmt::make(
          part, select(tail, make_const(t, parts - 1) - floordiv(b, make_const(t, last)),
                       make_const(t, 0)),
          std::move(body));
      tile = select(tail, make_const(t, rounds * grid) + slot, tile);
    }
  }
  if (tiles % grid != 0 && parts == 1) // the last iteration of some blocks has no tile
    body = IfThenElse::make(r->tile < make_const(t, tiles), body);
  body = LetStmt::make(r->tile, tile, std::move(body));
  Stmt loop = For::make(r->iteration, 0, int(iterations), ForKind::Serial, std::move(body));
  loop = AttrStmt::make(Expr(r->iteration), attr::tile_loop, Expr(int(tiles)), loop);
  for (auto it = bindings.rbegin(); it != bindings.rend(); ++it)
    loop = AttrStmt::make((*it)->node, (*it)->key, (*it)->value, loop);
  if (c > 1)
    loop = AttrStmt::make(r->block, attr::cluster_extent, Expr(int(c)), loop);
  return AttrStmt::make(r->block, attr::thread_extent, Expr(int(grid * c)), loop);
}

} // namespace tessel
