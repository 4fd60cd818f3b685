#include "compiler/lower/TileScheduler.h"

#include "compiler/ir/IROperator.h"
#include "compiler/lower/Rasterize.h"
#include "compiler/support/Error.h"

#include <algorithm>

namespace tessel {

namespace {

int64_t tiles_of(const Rasterization &r, const DomainMap &dom) {
  return const_extent(dom, r.rows) * const_extent(dom, r.cols);
}

bool binds_thread_index(const Stmt &s) {
  const auto *a = s.as<AttrStmt>();
  const IterVar *iv = a ? std::get_if<IterVar>(&a->node) : nullptr;
  return a && a->key == attr::thread_extent && iv && iv->thread_tag().rfind("threadIdx.", 0) == 0;
}

// `s` without the threadIdx bindings in its chain of attributes and lets (those go to
// `bindings`, outermost first).
Stmt strip_thread_bindings(const Stmt &s, std::vector<const AttrStmt *> &bindings) {
  if (binds_thread_index(s)) {
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

int64_t persistent_grid(const Rasterization &r, const DomainMap &dom) {
  return std::min(r.blocks, tiles_of(r, dom));
}

Stmt persistent_tile_loop(const StageNode *s, const IterVar &leaf, const DomainMap &dom,
                          Stmt body) {
  const std::optional<Rasterization> &r = s->rasterization;
  if (!r || !r->persistent())
    return body;
  int64_t ny = const_extent(dom, r->rows), nx = const_extent(dom, r->cols);
  DataType t = r->tile.type();
  if (leaf.same_as(r->cols)) {
    Expr row = floordiv(r->tile, make_const(t, nx)), col = floormod(r->tile, make_const(t, nx));
    if (!grouped_order_is_row_major(ny, nx, r->group))
      std::tie(row, col) = grouped_tile(r->tile, ny, nx, r->group);
    return LetStmt::make(r->row, row, LetStmt::make(r->col, col, std::move(body)));
  }
  if (!leaf.same_as(r->rows))
    return body;
  const int64_t tiles = ny * nx, grid = persistent_grid(*r, dom);
  const int64_t iterations = (tiles + grid - 1) / grid;
  std::vector<const AttrStmt *> bindings;
  body = strip_thread_bindings(body, bindings);
  if (tiles % grid != 0) // the last iteration of some blocks has no tile
    body = IfThenElse::make(r->tile < make_const(t, tiles), body);
  body = LetStmt::make(
      r->tile, r->iteration * make_const(t, grid) + r->block.var(), std::move(body));
  Stmt loop = For::make(r->iteration, 0, int(iterations), ForKind::Serial, std::move(body));
  loop = AttrStmt::make(Expr(r->iteration), attr::tile_loop, Expr(int(tiles)), loop);
  for (auto it = bindings.rbegin(); it != bindings.rend(); ++it)
    loop = AttrStmt::make((*it)->node, (*it)->key, (*it)->value, loop);
  return AttrStmt::make(r->block, attr::thread_extent, Expr(int(grid)), loop);
}

} // namespace tessel
