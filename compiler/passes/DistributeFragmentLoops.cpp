#include "compiler/passes/DistributeFragmentLoops.h"

#include "compiler/arith/Simplify.h"
#include "compiler/ir/IREquality.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/Substitute.h"
#include "compiler/support/Error.h"

#include <functional>
#include <optional>

namespace tessel {

namespace {

constexpr int64_t kRows = 64; // a warpgroup's accumulator tile

bool is_accumulator(const Buffer &b) { return b.scope() == "wgmma.accumulator"; }
bool is_rows(const Buffer &b) { return b.scope() == "wgmma.rows"; }

// `e` as `v + c` with c a constant: c.
std::optional<int64_t> offset_from(const Expr &e, const Var &v) {
  return as_const_int(arith::simplify(e - v));
}

// Where a fragment access lies in its buffer's realized region: the row and column relative to
// the region (the column undefined for rows), the leading dimensions checked to be the
// region's first.
struct Place {
  Expr row, col;
  int64_t columns = 0; ///< the realized columns of an accumulator (0: unknown)
};

class Distributor : public IRMutator {
public:
  Stmt run(const Stmt &s) { return mutate(s); }

protected:
  Stmt visit(const BufferRealize *op) override {
    if (is_accumulator(op->buffer) || is_rows(op->buffer))
      bounds_[op->buffer.get()] = op->bounds;
    return IRMutator::visit(op);
  }

  Stmt visit(const For *op) override {
    if (!op->thread_tag.empty())
      return IRMutator::visit(op);
    // A loop over the fragments' rows (any access whose row is the variable) or, inside one,
    // over an accumulator's columns.
    bool row = false, col = false;
    int64_t columns_read = 0; // of an accumulator whose column the loop's variable is
    post_order_visit(op->body, [&](const IRNode *n) {
      if (auto p = place_of(n)) {
        row = row || offset_from(p->row, op->loop_var).has_value();
        if (p->col.defined() && offset_from(p->col, op->loop_var).has_value()) {
          col = true;
          columns_read = std::max(columns_read, p->columns);
        }
      }
    });
    user_check(!row || rows_.empty(), "distribute_fragment_loops")
        << "loop '" << op->loop_var.name() << "' runs over the rows of a warpgroup's fragments "
        << "inside loop '" << (rows_.empty() ? std::string() : rows_.back().var.name())
        << "', which does too; a stage's loops over its tile's rows are one loop";
    if (!row && !(col && !rows_.empty()))
      return IRMutator::visit(op);
    auto extent = as_const_int(op->extent);
    const int64_t unit = row ? kRows : 8;
    // A loop over the columns whose extent depends on the row (bounds tightened to a causal
    // mask): every column of the tile, those past the extent skipped.
    Expr column_limit;
    if (col && !row && !extent && is_zero(op->min) && columns_read > 0) {
      column_limit = op->extent;
      extent = columns_read;
    }
    user_check(extent && *extent % unit == 0 && is_zero(op->min), "distribute_fragment_loops")
        << "loop '" << op->loop_var.name() << "' over the " << (row ? "rows" : "columns")
        << " of a warpgroup's fragments runs over [" << op->min << ", " << op->min << " + "
        << op->extent << "); its extent must be a constant multiple of " << unit
        << " from 0 (whole 64-row tiles, 8-column groups)";
    // The thread's elements: rows 64 T + 16 w + l / 4 + 8 h, columns 8 q + 2 (l % 4) + e.
    Var outer(op->loop_var.name() + (row ? ".tile" : ".group")), inner(op->loop_var.name() +
                                                                       (row ? ".half" : ".pair"));
    Expr tid = Call::make(Int(32), intrinsic::wgmma_thread_id, {}, Call::PureIntrinsic);
    Expr value = row ? outer * int(kRows) + floordiv(tid, 32) * 16 +
                           floordiv(floormod(tid, 32), 4) + inner * 8
                     : outer * 8 + floormod(tid, 4) * 2 + inner;
    (row ? rows_ : cols_).push_back({op->loop_var, outer, inner});
    const size_t reductions = reductions_.size();
    Stmt body = mutate(op->body);
    (row ? rows_ : cols_).pop_back();
    if (column_limit.defined())
      body = IfThenElse::make(op->loop_var < column_limit, body);
    body = substitute(body, op->loop_var, value);
    body = For::make(inner, 0, Expr(2), ForKind::Unrolled, body);
    body = For::make(outer, 0, Expr(int(*extent / unit)), ForKind::Unrolled, body);
    if (row || !cols_.empty())
      return body;
    // The outermost loop over the columns is done: each lane holds its columns' share of the
    // row values reduced in it; the row's 4 lanes combine theirs (xor 1, then 2).
    std::vector<Stmt> seq = {body};
    for (size_t k = reductions; k < reductions_.size(); ++k) {
      const RowReduction &r = reductions_[k];
      for (int mask : {1, 2}) {
        Expr v = Call::make(Float(32), intrinsic::wgmma_row, {r.data, r.tile, r.half},
                            Call::Intrinsic);
        Expr other = Call::make(Float(32), intrinsic::shfl_xor, {v, Expr(mask)},
                                Call::PureIntrinsic);
        seq.push_back(Evaluate::make(Call::make(Void(), intrinsic::wgmma_row_set,
                                                {r.data, r.tile, r.half, r.combine(v, other)},
                                                Call::Intrinsic)));
      }
    }
    reductions_.resize(reductions);
    return Seq::make(seq);
  }

  Expr visit(const BufferLoad *op) override {
    if (!is_accumulator(op->buffer) && !is_rows(op->buffer))
      return IRMutator::visit(op);
    auto [tile, reg] = element(op->buffer, op->indices, "reads");
    if (is_rows(op->buffer))
      return Call::make(Float(32), intrinsic::wgmma_row, {op->buffer->data, tile, reg},
                        Call::Intrinsic);
    return Call::make(Float(32), intrinsic::wgmma_reg,
                      {op->buffer->data, tile, Expr(int(columns(op->buffer))), reg},
                      Call::Intrinsic);
  }

  Stmt visit(const BufferStore *op) override {
    if (!is_accumulator(op->buffer) && !is_rows(op->buffer))
      return IRMutator::visit(op);
    Expr value = mutate(op->value);
    auto [tile, reg] = element(op->buffer, op->indices, "writes");
    if (is_rows(op->buffer) && !cols_.empty()) {
      // A row's value from its columns: each lane reduces its own (here), then the row's lanes
      // combine theirs after the loop over the columns.
      RowReduction r = reduction_of(op, value);
      r.data = op->buffer->data;
      r.tile = tile;
      r.half = reg;
      // One combination across the quad for each row value, however many updates it has.
      bool seen = false;
      for (const RowReduction &x : reductions_)
        seen = seen || (x.data.same_as(r.data) && structural_equal(x.tile, r.tile) &&
                        structural_equal(x.half, r.half));
      if (!seen)
        reductions_.push_back(r);
    }
    user_check(value.type() == Float(32), "distribute_fragment_loops")
        << "a store to '" << op->buffer.name() << "' of " << value.type()
        << "; wgmma fragments hold float32";
    if (is_rows(op->buffer))
      return Evaluate::make(Call::make(Void(), intrinsic::wgmma_row_set,
                                       {op->buffer->data, tile, reg, value}, Call::Intrinsic));
    return Evaluate::make(
        Call::make(Void(), intrinsic::wgmma_reg_set,
                   {op->buffer->data, tile, Expr(int(columns(op->buffer))), reg, value},
                   Call::Intrinsic));
  }

private:
  struct Loop {
    Var var, outer, inner;
  };
  // A row value reduced over an accumulator's columns (max, min or sum of it and a term).
  struct RowReduction {
    Expr data, tile, half;
    std::function<Expr(const Expr &, const Expr &)> combine;
  };

  // The combiner of `store` (to a rows buffer inside a loop over the columns, its value
  // already rewritten): rows[r] = max / min (rows[r], x) or rows[r] + x.
  RowReduction reduction_of(const BufferStore *store, const Expr &value) const {
    auto reads_own = [&](const Expr &e) {
      const auto *c = e.as<Call>();
      return c && c->is_intrinsic(intrinsic::wgmma_row) && c->args[0].same_as(store->buffer->data);
    };
    RowReduction r;
    if (const auto *m = value.as<Max>(); m && (reads_own(m->a) || reads_own(m->b)))
      r.combine = [](const Expr &a, const Expr &b) { return max(a, b); };
    else if (const auto *m = value.as<Min>(); m && (reads_own(m->a) || reads_own(m->b)))
      r.combine = [](const Expr &a, const Expr &b) { return min(a, b); };
    else if (const auto *a = value.as<Add>(); a && (reads_own(a->a) || reads_own(a->b)))
      r.combine = [](const Expr &x, const Expr &y) { return x + y; };
    user_check(bool(r.combine), "distribute_fragment_loops")
        << "'" << store->buffer.name() << "' (wgmma.rows) is written inside loop '"
        << cols_.back().var.name() << "' over an accumulator's columns, but not as a max, min "
        << "or sum of its own value and a term (a reduction over the columns): " << value;
    return r;
  }

  // The place of a fragment access relative to its realized region, if `n` is one.
  std::optional<Place> place_of(const IRNode *n) const {
    const Buffer *b = nullptr;
    const std::vector<Expr> *idx = nullptr;
    if (const auto *l = llvm::dyn_cast<BufferLoad>(n))
      b = &l->buffer, idx = &l->indices;
    else if (const auto *s = llvm::dyn_cast<BufferStore>(n))
      b = &s->buffer, idx = &s->indices;
    if (!b || (!is_accumulator(*b) && !is_rows(*b)))
      return std::nullopt;
    auto it = bounds_.find(b->get());
    if (it == bounds_.end() || idx->empty())
      return std::nullopt;
    const std::vector<Range> &r = it->second;
    const size_t n_dims = idx->size(), row_dim = n_dims - (is_rows(*b) ? 1 : 2);
    Place p;
    p.row = arith::simplify((*idx)[row_dim] - r[row_dim].min);
    if (is_accumulator(*b)) {
      p.col = arith::simplify(idx->back() - r.back().min);
      p.columns = as_const_int(r.back().extent).value_or(0);
    }
    return p;
  }

  int64_t columns(const Buffer &b) const {
    const std::vector<Range> &r = bounds_.lookup(b.get());
    auto c = as_const_int(r.back().extent);
    user_check(c && *c % 8 == 0 && *c <= 256, "distribute_fragment_loops")
        << "accumulator '" << b.name() << "' is realized with " << r.back().extent
        << " columns; a wgmma accumulator tile has a constant multiple of 8 up to 256";
    return *c;
  }

  // The tile (64 rows of the region) and the register (an accumulator's) or half (rows') of
  // the access at `indices`, whose row and column must be loop variables being distributed.
  std::pair<Expr, Expr> element(const Buffer &b, const std::vector<Expr> &indices,
                                const char *what) {
    auto it = bounds_.find(b.get());
    internal_check(it != bounds_.end()) << "fragment '" << b.name() << "' is not realized";
    const std::vector<Range> &r = it->second;
    const size_t row_dim = indices.size() - (is_rows(b) ? 1 : 2);
    for (size_t d = 0; d < row_dim; ++d)
      user_check(is_zero(arith::simplify(indices[d] - r[d].min)), "distribute_fragment_loops")
          << "an access to '" << b.name() << "' at " << indices[d] << " in dimension " << d
          << "; a warpgroup's fragment is one 64-row tile per 64 rows of its last dimensions";
    const Expr row = arith::simplify(indices[row_dim] - r[row_dim].min);
    const Loop *rl = nullptr;
    std::optional<int64_t> row_offset;
    for (const Loop &l : rows_)
      if ((row_offset = offset_from(row, l.var)))
        rl = &l;
    user_check(rl && *row_offset % kRows == 0, "distribute_fragment_loops")
        << "a statement " << what << " '" << b.name() << "' (" << b.scope() << ") at row " << row
        << " of its region, which is not a loop over the warpgroup's rows (offset by whole 64-row "
           "tiles); compute it in a stage of its own, or tensorize it";
    Expr tile = rl->outer + int(*row_offset / kRows);
    if (is_rows(b))
      return {tile, rl->inner};
    const Expr col = arith::simplify(indices.back() - r.back().min);
    const Loop *cl = nullptr;
    std::optional<int64_t> col_offset;
    for (const Loop &l : cols_)
      if ((col_offset = offset_from(col, l.var)))
        cl = &l;
    user_check(cl && *col_offset % 8 == 0, "distribute_fragment_loops")
        << "a statement " << what << " '" << b.name() << "' at column " << col
        << " of its region, which is not a loop over the accumulator's columns (offset by whole "
           "groups of 8)";
    // Register 4 q + 2 h + e of a 64 x C tile (Intrinsics.h), q counted from the column 0.
    return {tile, (cl->outer + int(*col_offset / 8)) * 4 + rl->inner * 2 + cl->inner};
  }

  llvm::DenseMap<const BufferNode *, std::vector<Range>> bounds_;
  std::vector<Loop> rows_, cols_;
  std::vector<RowReduction> reductions_;
};

} // namespace

Stmt distribute_fragment_loops(Stmt s) { return Distributor().run(s); }

} // namespace tessel
