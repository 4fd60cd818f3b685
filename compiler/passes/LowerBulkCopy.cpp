#include "compiler/passes/LowerBulkCopy.h"

#include "compiler/arith/Analyzer.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/Substitute.h"
#include "compiler/passes/IntrinsicStmt.h"
#include "compiler/support/Error.h"

#include <llvm/ADT/DenseMap.h>

#include <algorithm>
#include <numeric>
#include <sstream>

namespace tessel {

namespace {

using passes_detail::intrinsic_stmt;

constexpr int64_t kMaxBoxExtent = 256; // cuTensorMapEncodeTiled: boxDim[i] <= 256
constexpr int kMaxRank = 5;

// A user error about the bulk copy of stage `name` (in scope where used).
#define TESSEL_BULK_COPY_ERROR                                                                     \
  user_error("bulk_copy") << "stage '" << name << "' is " << verb_ << " TMA (bulk_copy): "

struct SharedLayout {
  std::vector<Range> bounds; ///< the realized region
  int interleave = 0;        ///< chunk of the last dimension; 0: row major
  int swizzle = 0;
  bool aligned = false; ///< storage_align (padded rows, which a box cannot write)
};

// Why the innermost statement of a bulk copy's nest is not one copy into `dst` from a global
// tensor, and what to do.
std::string not_a_copy(const Stmt &body, const Buffer &dst) {
  std::ostringstream m;
  const auto *store = body.as<BufferStore>();
  if (const auto *a = body.as<AttrStmt>(); a && a->key == attr::thread_extent)
    m << "its copy runs on threads (a loop bound to a thread axis), but one thread issues a TMA "
         "copy of the whole tile: leave the stage's axes unbound";
  else if (body.as<IfThenElse>())
    m << "its copy is guarded by a condition, but a box covers the whole region: split by "
         "factors that divide the extents, or copy a padded tensor";
  else if (store && store->buffer.get() == dst.get())
    m << "it stores " << store->value << ", which is not an element of a global tensor: TMA "
      << "copies elements as they are (or zeros outside the tensor: if_then_else(inside, "
         "G(..), 0)), so compute the value in another stage (or inline it into the reader) and "
         "bulk-copy a plain read";
  else
    m << "its body must be loops around one copy from a global tensor (leave the stage's axes "
         "as they are: no split, fuse, bind or conditions)";
  return m.str();
}

// Why shared index `local` is not written by loops[next] over the dimension's whole extent.
std::string unboxed_index(const Expr &local, const std::vector<const For *> &loops, size_t next) {
  std::ostringstream m;
  m << "is written at index " << local;
  const auto *v = local.as<Variable>();
  auto loop_var = [&](const Variable *x) {
    return std::any_of(loops.begin(), loops.end(),
                       [&](const For *f) { return f->loop_var.get() == x; });
  };
  if (v && loop_var(v))
    m << ", by a loop out of the dimensions' order"
      << (next < loops.size() ? " (the next is " + loops[next]->loop_var.name() + ")" : "")
      << ": the stage's axes were reordered, but a box writes its dimensions in order; leave "
         "them in their order";
  else if (uses_var(local, loop_var))
    m << ", a combination of loops (a split or fused axis), but a box dimension is one loop "
         "over it: leave the stage's axes as they are (no split or fuse)";
  else if (v)
    m << ", not by a loop of the copy (an axis bound to a thread?), but one thread copies the "
         "whole tile: leave the stage's axes unbound";
  else
    m << ", not by a loop of the copy over it; a box copies a region whose every dimension is "
         "a loop or of extent 1";
  return m.str();
}

class BulkCopyLowerer : public IRMutator {
public:
  BulkCopyLowerer(const std::vector<Buffer> &args, std::vector<TensorMapParam> *maps)
      : args_(args), maps_(maps) {}

protected:
  Stmt visit(const AttrStmt *op) override {
    const Buffer *buf = std::get_if<Buffer>(&op->node);
    if (buf && op->key == attr::storage_interleave)
      layouts_[buf->get()].interleave = int(*as_const_int(op->value));
    else if (buf && op->key == attr::storage_swizzle)
      layouts_[buf->get()].swizzle = int(*as_const_int(op->value));
    else if (buf && op->key == attr::storage_align)
      layouts_[buf->get()].aligned = true;
    if (op->key == attr::tile_loop && op->body.as<For>()) { // (one iteration: no loop left)
      ++tile_loops_;
      Stmt r = IRMutator::visit(op);
      --tile_loops_;
      return r;
    }
    if (buf && op->key == attr::bulk_copy && buf->scope() == "global")
      return lower_store(*buf, op);
    if (buf && op->key == attr::bulk_copy) {
      const auto *conv = op->value.as<Call>();
      const auto *multicast = op->body.as<AttrStmt>();
      if (multicast && multicast->key != attr::cluster_multicast)
        multicast = nullptr;
      internal_check(!conv || !multicast) << "multicast of an im2col bulk copy";
      return conv ? lower_im2col(*buf, op, conv->args) : lower(*buf, op, multicast);
    }
    return IRMutator::visit(op);
  }

  Stmt visit(const BufferRealize *op) override {
    layouts_[op->buffer.get()].bounds = op->bounds;
    return IRMutator::visit(op);
  }

private:
  friend class StoreNestLowerer;
  Stmt lower_store(const Buffer &dst, const AttrStmt *op);

  // `multicast`: the stage's cluster_multicast attr (inside op), or null.
  Stmt lower(const Buffer &dst, const AttrStmt *op, const AttrStmt *multicast) {
    const std::string &name = dst.name();
    auto lit = layouts_.find(dst.get());
    internal_check(lit != layouts_.end() && !lit->second.bounds.empty())
        << "bulk_copy of '" << name << "' outside its realize";
    const SharedLayout &layout = lit->second;
    if (layout.aligned)
      TESSEL_BULK_COPY_ERROR
          << "its rows are padded by storage_align, and a TMA box writes dense rows; "
             "drop storage_align (swizzle(128) avoids bank conflicts instead)";

    // The copy nest: loops over the region, one store of a global load.
    std::vector<const For *> loops;
    Stmt body = multicast ? multicast->body : op->body;
    while (const auto *f = body.as<For>()) {
      loops.push_back(f);
      body = f->body;
    }
    const auto *store = body.as<BufferStore>();
    // A read zero outside the tensor (a padded operand computed inline) is what a box reads:
    // TMA fills the elements outside the tensor with zeros.
    auto [inside, value] = zero_filled_read(store ? store->value : Expr());
    const auto *load = value.as<BufferLoad>();
    if (!store || !load || store->buffer.get() != dst.get() || load->buffer.scope() != "global")
      TESSEL_BULK_COPY_ERROR << not_a_copy(body, dst) << "; got\n" << op->body;
    if (inside.defined())
      check_tensor_bounds(name, inside, loops, *load);
    Boxes b = boxes(name, dst, layout, loops, store->indices, load->buffer, load->indices,
                    Expr(load), multicast);
    std::vector<Stmt> copies;
    for (size_t i = 0; i < b.tile_at.size(); ++i) {
      std::vector<Expr> call_args{b.map, b.tile_at[i], Expr(0)};
      if (b.multicast_mask)
        call_args.push_back(Expr(int(b.multicast_mask)));
      call_args.insert(call_args.end(), b.coords[i].begin(), b.coords[i].end());
      copies.push_back(Evaluate::make(
          Call::make(Void(), b.multicast_mask ? intrinsic::tma_load_multicast : intrinsic::tma_load,
                     std::move(call_args), Call::Intrinsic)));
    }
    Stmt issue = Seq::make(std::move(copies));
    if (b.clipped)
      issue = AttrStmt::make(AttrNode(), attr::bulk_copy_clipped, Expr(1), issue);
    return AttrStmt::make(op->node, op->key, Expr(int(b.bytes)), issue);
  }

  // `if_then_else(inside, v, 0)` as (inside, v); any other value as (undefined, value).
  static std::pair<Expr, Expr> zero_filled_read(const Expr &value) {
    const auto *c = value.as<Call>();
    if (!c || !c->is_intrinsic(intrinsic::if_then_else))
      return {Expr(), value};
    auto zero = as_const_float(c->args[2]);
    if (!(zero && *zero == 0) && !is_zero(c->args[2]))
      return {Expr(), value};
    return {c->args[0], c->args[1]};
  }

  // The condition of a zero-filled read of `load` must be the tensor's bounds of its indices
  // (conjuncts `index < extent` or `0 <= index` of one dimension each, or true within the
  // loops): TMA zeros exactly the elements outside the tensor, so a narrower condition would
  // read elements the program zeroes, and a wider one elements outside the tensor.
  void check_tensor_bounds(const std::string &name, const Expr &inside,
                           const std::vector<const For *> &loops, const BufferLoad &load) {
    arith::Analyzer analyzer;
    for (const For *loop : loops)
      analyzer.bind(loop->loop_var, Range(loop->min, loop->extent));
    std::vector<Expr> conjuncts{inside};
    while (!conjuncts.empty()) {
      Expr c = conjuncts.back();
      conjuncts.pop_back();
      if (const auto *a = c.as<And>()) {
        conjuncts.push_back(a->a);
        conjuncts.push_back(a->b);
        continue;
      }
      // As `e < 0`: a < b is a - b < 0, a <= b is a - b - 1 < 0 (integers), > and >= swapped.
      Expr e;
      if (const auto *x = c.as<LT>())
        e = x->a - x->b;
      else if (const auto *x = c.as<LE>())
        e = x->a - x->b - 1;
      else if (const auto *x = c.as<GT>())
        e = x->b - x->a;
      else if (const auto *x = c.as<GE>())
        e = x->b - x->a - 1;
      bool bound = false;
      for (size_t d = 0; e.defined() && e.type().is_int() && !bound && d < load.indices.size();
           ++d) {
        Expr index = cast(e.type(), load.indices[d]), extent = cast(e.type(), load.buffer->shape[d]);
        bound = is_zero(analyzer.simplify(e - (index - extent))) ||
                is_zero(analyzer.simplify(e - (-index - 1)));
      }
      if (!bound && !analyzer.can_prove(c))
        TESSEL_BULK_COPY_ERROR
            << "it reads '" << load.buffer.name() << "' where " << c << " (zero elsewhere), "
            << "which is not a bound of one of its indices " << Expr(&load)
            << " at the edge of '" << load.buffer.name()
            << "'; TMA reads zeros exactly outside the tensor, so guard the read by the "
               "tensor's bounds only (index < extent, 0 <= index), or copy a padded tensor";
    }
  }

  // A box copy between shared tile `dst` (its realized region written, or read, at
  // `shared_idx` by `loops`) and global argument `src` at `global_idx` (`access` in errors):
  // its tensor map and boxes, one per column block of the tile's layout. With `multicast` (a
  // load's cluster_multicast attr) each box is this block's share of the cluster's.
  struct Boxes {
    Var map;
    std::vector<Expr> tile_at;             ///< address_of(dst[..]) where each box starts
    std::vector<std::vector<Expr>> coords; ///< each box's coordinates, innermost first
    int64_t bytes = 0;                     ///< of the whole tile
    int64_t multicast_mask = 0;            ///< the cluster's blocks a share goes to; 0: none
    /// The boxes stop at the tensor's edge short of the tile (see clip_to_tensor): the tile's
    /// other elements are never written by the copy.
    bool clipped = false;
  };
  Boxes boxes(const std::string &name, const Buffer &dst, const SharedLayout &layout,
              const std::vector<const For *> &loops, const std::vector<Expr> &shared_idx,
              const Buffer &src, const std::vector<Expr> &global_idx, const Expr &access,
              const AttrStmt *multicast = nullptr) {
    int arg = -1;
    for (size_t i = 0; i < args_.size(); ++i)
      if (args_[i]->data.get() == src->data.get())
        arg = int(i);
    if (arg < 0)
      TESSEL_BULK_COPY_ERROR << "it reads '" << src.name()
                             << "', which is not an argument of the kernel";
    size_t rank = dst->shape.size(), grank = src->shape.size();
    if (grank > size_t(kMaxRank) || rank > size_t(kMaxRank))
      TESSEL_BULK_COPY_ERROR << "a TMA box has at most " << kMaxRank << " dimensions, but '"
                             << src.name() << "' has " << grank << " and the stage " << rank;

    // Each shared dimension is written by the next loop over its whole extent, or, where the
    // region has extent 1 (a batch index fixed at the attach point, whose loop is gone), by
    // none: a box dimension of size 1. The global dimension each loop reads is found with the
    // indices simplified under the loops' ranges, so that a view's index arithmetic (a conv
    // filter's tap and channel of one K step) reduces to what the tile really reads.
    arith::Analyzer analyzer;
    for (const For *loop : loops)
      analyzer.bind(loop->loop_var, Range(loop->min, loop->extent));
    std::vector<int64_t> extent(rank, 1);
    std::vector<int> gdim(rank, -1);
    std::vector<Expr> base;
    for (const Expr &i : global_idx)
      base.push_back(analyzer.simplify(i));
    size_t next = 0;
    int last_read = -1; // the global dimension the previous loop read
    for (size_t d = 0; d < rank; ++d) {
      auto rext = as_const_int(layout.bounds[d].extent);
      Expr local = arith::simplify(shared_idx[d] - layout.bounds[d].min);
      const For *loop = next < loops.size() ? loops[next] : nullptr;
      if (!loop || local.as<Variable>() != loop->loop_var.get()) {
        if (rext && *rext == 1 && is_zero(local))
          continue;
        TESSEL_BULK_COPY_ERROR << "shared dimension " << d << " (extent " << layout.bounds[d].extent
                               << ") " << unboxed_index(local, loops, next);
      }
      ++next;
      auto e = as_const_int(loop->extent);
      if (!e || !rext || *e != *rext || !is_zero(loop->min))
        TESSEL_BULK_COPY_ERROR << "loop " << loop->loop_var << " writes shared dimension " << d
                               << " over [" << loop->min << ", " << loop->min << " + "
                               << loop->extent << ") of its region's " << layout.bounds[d].extent
                               << " elements; a box covers the whole region (a constant extent, "
                                  "no guard): make the tile divide the tensor or copy a padded one";
      extent[d] = *e;
      for (size_t j = 0; j < grank; ++j) {
        if (!uses_var(base[j], loop->loop_var))
          continue;
        Expr rest = analyzer.simplify(base[j] - loop->loop_var);
        if (gdim[d] >= 0 || uses_var(rest, loop->loop_var))
          TESSEL_BULK_COPY_ERROR << "loop " << loop->loop_var
                                 << " must appear in exactly one index of '" << src.name()
                                 << "', added to it; got " << access;
        gdim[d] = int(j);
        base[j] = rest;
      }
      if (gdim[d] < 0 || gdim[d] <= last_read)
        TESSEL_BULK_COPY_ERROR << "its dimensions must read the dimensions of '" << src.name()
                               << "' in the same order, one each; got " << access;
      last_read = gdim[d];
    }
    if (next != loops.size())
      TESSEL_BULK_COPY_ERROR << "loop " << loops[next]->loop_var
                             << " writes no dimension of its own, but a box copy is one loop per "
                                "dimension: leave the stage's axes as they are (no split or fuse)";
    for (const Expr &b : base)
      for (const For *loop : loops)
        if (uses_var(b, loop->loop_var))
          TESSEL_BULK_COPY_ERROR << "the origin of the box in '" << src.name()
                                 << "' depends on loop " << loop->loop_var;
    if (gdim[rank - 1] >= 0 && gdim[rank - 1] != int(grank) - 1)
      TESSEL_BULK_COPY_ERROR << "its last dimension must read the last (contiguous) dimension of '"
                             << src.name() << "'";

    // Boxes: one per column block of the layout.
    DataType t = dst.dtype();
    int64_t elem = t.bytes();
    int64_t inner = layout.interleave ? layout.interleave : extent[rank - 1];
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < rank; ++d)
      rows *= extent[d];
    if (layout.swizzle && inner * elem != layout.swizzle)
      internal_error << "swizzle " << layout.swizzle << " with chunk " << inner;
    if ((inner * elem) % 16 != 0 || inner > kMaxBoxExtent)
      TESSEL_BULK_COPY_ERROR
          << "a box row must be a multiple of 16 bytes and at most 256 elements; rows of " << inner
          << " x " << elem << " bytes";
    for (size_t d = 0; d + 1 < rank; ++d)
      if (extent[d] > kMaxBoxExtent)
        TESSEL_BULK_COPY_ERROR << "dimension " << d << " has " << extent[d]
                               << " elements, more than a TMA box's 256: use a smaller tile";
    // The argument's shape and strides in elements: compact, or a strided placeholder's.
    std::vector<int64_t> gshape, gstrides;
    for (const Expr &e : src->shape)
      gshape.push_back(*as_const_int(e));
    for (const Expr &e : src->strides)
      gstrides.push_back(*as_const_int(e));
    gstrides = strides_or_row_major(gshape, gstrides);
    if (gstrides[grank - 1] != 1)
      TESSEL_BULK_COPY_ERROR << "TMA reads rows of consecutive elements, but the last dimension "
                             << "of '" << src.name() << "' has stride " << gstrides[grank - 1]
                             << "; copy it without TMA (cp.async), or lay the tensor out with its "
                                "last dimension contiguous";
    for (size_t j = 0; j + 1 < grank; ++j) {
      const int64_t stride = gstrides[j];
      if ((stride * elem) % 16 != 0)
        TESSEL_BULK_COPY_ERROR << "TMA needs the rows of '" << src.name()
                               << "' 16-byte aligned, but dimension " << j << " is "
                               << stride * elem
                               << " bytes apart; pad the tensor's last dimension to a multiple of "
                               << 16 / std::gcd(int64_t(16), elem) << " elements";
    }
    int64_t block_bytes = rows * inner * elem;
    if (block_bytes % (layout.swizzle ? 1024 : 128) != 0)
      TESSEL_BULK_COPY_ERROR << "each box must start " << (layout.swizzle ? 1024 : 128)
                             << "-byte aligned in shared memory; its boxes of " << rows
                             << " rows x " << inner << " elements are " << block_bytes << " bytes";

    // Multicast: each block of the cluster copies its share of the box's outermost dimension
    // (of more than one element) into every block.
    Multicast mc;
    if (multicast)
      mc = multicast_share(name, src, multicast, base, extent, rows * inner * elem,
                           layout.swizzle ? 1024 : 128);
    std::vector<int64_t> box_extent = extent;
    if (mc.size > 1)
      box_extent[mc.dim] /= mc.size;
    const bool clipped = mc.size == 1 && clip_to_tensor(gdim, gshape, base, box_extent);

    // The tensor map: the argument's dimensions innermost first, the box extents of the
    // dimensions the copy reads (1 for the others).
    TensorMapParam map;
    map.arg = arg;
    map.swizzle = layout.swizzle;
    for (size_t j = grank; j-- > 0;) {
      map.dims.push_back(gshape[j]);
      map.strides.push_back(gstrides[j]);
      int64_t box = 1;
      for (size_t d = 0; d < rank; ++d)
        if (gdim[d] == int(j))
          box = d + 1 == rank ? inner : box_extent[d];
      map.box.push_back(box);
    }
    Var map_var = tensor_map(map, src.name());

    Boxes out;
    out.map = map_var;
    for (int64_t c = 0; c < extent[rank - 1]; c += inner) {
      std::vector<Expr> at;
      for (size_t d = 0; d < rank; ++d)
        at.push_back(layout.bounds[d].min + (d + 1 == rank ? make_const(Int(32), c) : Expr(0)));
      std::vector<Expr> origin = base;
      if (mc.size > 1) { // this block's share: rows rank * part ..
        Expr share = mc.rank * make_const(mc.rank.type(), box_extent[mc.dim]);
        at[mc.dim] = at[mc.dim] + cast(at[mc.dim].type(), share);
        origin[gdim[mc.dim]] = origin[gdim[mc.dim]] + cast(origin[gdim[mc.dim]].type(), share);
        out.multicast_mask = (1 << mc.size) - 1; // every block of the cluster
      }
      out.tile_at.push_back(
          Call::make(Handle(), intrinsic::address_of, {BufferLoad::make(dst, at)}, Call::Intrinsic));
      std::vector<Expr> coords;
      for (size_t j = grank; j-- > 0;) {
        Expr coord = j + 1 == grank ? origin[j] + make_const(origin[j].type(), c) : origin[j];
        coords.push_back(arith::simplify(cast(Int(32), coord)));
      }
      out.coords.push_back(std::move(coords));
    }
    out.bytes = elem;
    for (int64_t e : clipped ? box_extent : extent)
      out.bytes *= e;
    out.clipped = clipped;
    return out;
  }

  // Shrinks the boxes' outer dimensions (not the contiguous one) that start at the tensor's
  // first element and reach past its last to the tensor's extent: `box_extent` in place;
  // whether any was. TMA's fill of the elements outside a tensor with zeros is slow (16 rows
  // of A in a 64-row box: 16.1 against 9.1 us at 16x4096x4096 on the H100, bench/RESULTS.md
  // 2026-11-27), and those elements are the same in every fill, so inject_pipeline zeroes
  // the ring once instead. Not in a persistent kernel's tile loop, whose ring is allocated per
  // tile until storage_rewrite (the zeroing could not be hoisted with its barriers).
  bool clip_to_tensor(const std::vector<int> &gdim, const std::vector<int64_t> &gshape,
                      const std::vector<Expr> &base, std::vector<int64_t> &box_extent) const {
    if (tile_loops_ > 0)
      return false;
    bool clipped = false;
    for (size_t d = 0; d + 1 < box_extent.size(); ++d) {
      if (gdim[d] < 0 || gshape[gdim[d]] >= box_extent[d] ||
          !is_zero(arith::simplify(base[gdim[d]])))
        continue;
      box_extent[d] = gshape[gdim[d]];
      clipped = true;
    }
    return clipped;
  }

  // The input tile of an implicit-GEMM convolution, A(m, rk) over x (NHWC): one im2col copy of
  // the tile's rows (output pixels m0 ..) for the filter tap and channels of its columns.
  Stmt lower_im2col(const Buffer &dst, const AttrStmt *op, const std::vector<Expr> &geometry) {
    const std::string &name = dst.name();
    int64_t g[9];
    for (int i = 0; i < 9; ++i)
      g[i] = *as_const_int(geometry.at(i));
    const int64_t P = g[0], Q = g[1], C = g[2], R = g[3], S = g[4], pad = g[5], stride = g[6],
                  dil = g[7], pad_end = g[8];
    const SharedLayout &layout = layouts_[dst.get()];
    const BufferLoad *x = nullptr;
    post_order_visit(op->body, [&](const IRNode *n) {
      if (const auto *l = llvm::dyn_cast<BufferLoad>(n); l && l->buffer.scope() == "global")
        x = l;
    });
    int arg = -1;
    for (size_t i = 0; x && i < args_.size(); ++i)
      if (args_[i]->data.get() == x->buffer->data.get())
        arg = int(i);
    if (arg < 0 || x->buffer->shape.size() != 4 || dst->shape.size() != 2)
      TESSEL_BULK_COPY_ERROR << "an im2col copy fills a 2-D tile from a 4-D NHWC argument; got "
                             << dst->shape.size() << " dimensions from "
                             << (x ? x->buffer.name() : std::string("no global tensor"));
    if (!x->buffer->strides.empty())
      TESSEL_BULK_COPY_ERROR << "an im2col copy reads a compact NHWC tensor, but '"
                             << x->buffer.name() << "' is a strided view; pass it compact";
    std::vector<int64_t> xs;
    for (const Expr &e : x->buffer->shape)
      xs.push_back(*as_const_int(e));
    const int64_t N = xs[0], H = xs[1], W = xs[2];
    // Output pixels along a dimension of n input pixels and k filter taps.
    auto out = [&](int64_t n, int64_t k) {
      return (n + pad + pad_end - (dil * (k - 1) + 1)) / stride + 1;
    };
    if (xs[3] != C || stride < 1 || stride > 8 || dil < 1 || P != out(H, R) || Q != out(W, S))
      TESSEL_BULK_COPY_ERROR << "the convolution (P=" << P << ", Q=" << Q << ", C=" << C << ", "
                             << R << "x" << S << ", pad " << pad << "/" << pad_end << ", stride "
                             << stride << ", dilation " << dil << ") does not match '"
                             << x->buffer.name() << "' (" << N << "x" << H << "x" << W << "x"
                             << xs[3] << "), or its stride is not 1 to 8 (TMA's traversal)";
    auto rows = as_const_int(layout.bounds[0].extent), cols = as_const_int(layout.bounds[1].extent);
    int64_t elem = dst.dtype().bytes();
    if (!layout.swizzle || !rows || !cols || *cols != layout.interleave || *rows > kMaxBoxExtent ||
        C % *cols != 0)
      TESSEL_BULK_COPY_ERROR << "an im2col copy fills one swizzled column block (its K step) of "
                                "at most 256 rows, within one filter tap (C a multiple of it); "
                                "the tile is "
                             << layout.bounds[0].extent << " x " << layout.bounds[1].extent
                             << " with swizzle " << layout.swizzle << " and C = " << C;

    TensorMapParam map;
    map.arg = arg;
    map.swizzle = layout.swizzle;
    map.im2col = true;
    map.dims = {C, W, H, N};
    map.strides = {1, C, W * C, H * W * C};
    map.box = {*cols, *rows};
    // The walk over the first filter tap's pixels: from -pad, a stride apart, to the last one
    // whose dilated filter still ends inside the padding.
    map.lower_corner = {-pad, -pad};
    map.upper_corner = {pad_end - (S - 1) * dil, pad_end - (R - 1) * dil};
    if (stride != 1)
      map.traversal = {1, stride, stride, 1};
    Var map_var = tensor_map(map, x->buffer.name());

    Expr m0 = layout.bounds[0].min, k0 = layout.bounds[1].min;
    Expr tap = floordiv(k0, int(C));
    auto i32 = [](const Expr &e) { return arith::simplify(cast(Int(32), e)); };
    std::vector<Expr> call_args{map_var,
                                Call::make(Handle(), intrinsic::address_of,
                                           {BufferLoad::make(dst, {m0, k0})}, Call::Intrinsic),
                                Expr(0),
                                i32(floormod(k0, int(C))),
                                i32(floormod(m0, int(Q)) * int(stride) - int(pad)),
                                i32(floormod(floordiv(m0, int(Q)), int(P)) * int(stride) -
                                    int(pad)),
                                i32(floordiv(m0, int(P * Q))),
                                i32(floormod(tap, int(S)) * int(dil)),
                                i32(floordiv(tap, int(S)) * int(dil))};
    Stmt copy = Evaluate::make(
        Call::make(Void(), intrinsic::tma_load_im2col, std::move(call_args), Call::Intrinsic));
    return AttrStmt::make(op->node, op->key, Expr(int(*rows * *cols * elem)), copy);
  }

  // How a multicast box is shared in its cluster: `size` blocks, this one's `rank`, each
  // copying extent[dim] / size of the box's dimension `dim`.
  struct Multicast {
    int64_t size = 1;
    Expr rank;
    size_t dim = 0;
  };

  // The share of a multicast stage's box that each block of the cluster copies: checks that
  // the box origin (`base`, per global dimension) does not depend on the clustered axis and
  // that the box (`extent` per shared dimension, `box_bytes` a column block) splits into
  // aligned shares along its outermost dimension.
  Multicast multicast_share(const std::string &name, const Buffer &src, const AttrStmt *attr,
                            const std::vector<Expr> &base, const std::vector<int64_t> &extent,
                            int64_t box_bytes, int64_t align) {
    const auto *t = attr->value.as<Call>();
    internal_check(t && t->args.size() >= 2) << "cluster_multicast without its tuple";
    Multicast mc;
    mc.size = *as_const_int(t->args[0]);
    mc.rank = t->args[1];
    for (size_t i = 2; i < t->args.size(); ++i) {
      const auto *v = t->args[i].as<Variable>();
      for (size_t j = 0; j < base.size(); ++j)
        if (v && uses_var(base[j], [&](const Variable *x) { return x == v; }))
          TESSEL_BULK_COPY_ERROR
              << "it is multicast (Stage::multicast) to the blocks of a cluster, but its tile "
              << "of '" << src.name() << "' depends on the clustered axis ('" << v->name
              << "' in its origin " << base[j] << "): the blocks of a cluster copy different "
              << "tiles of it. Multicast the operand they share (A's tile for a cluster along "
                 "the columns' block axis, B's along the rows')";
    }
    size_t d = 0;
    while (d + 1 < extent.size() && extent[d] == 1)
      ++d;
    const int64_t part_bytes = box_bytes / mc.size;
    if (d + 1 >= extent.size() || extent[d] % mc.size != 0 || part_bytes % align != 0)
      TESSEL_BULK_COPY_ERROR
          << "it is multicast to clusters of " << mc.size << " blocks, each copying 1/" << mc.size
          << " of every box (of its outer dimension" << (d + 1 < extent.size() ? ", " +
             std::to_string(extent[d]) + " rows" : std::string(", which it lacks"))
          << ", " << box_bytes << " bytes a box), but a share must be whole rows starting "
          << align << "-byte aligned in shared memory; use a taller tile or a smaller cluster";
    mc.dim = d;
    return mc;
  }

  // The variable of an equal tensor map made before, or of a new one.
  Var tensor_map(TensorMapParam map, const std::string &tensor) {
    for (const TensorMapParam &m : *maps_)
      if (m.arg == map.arg && m.box == map.box && m.swizzle == map.swizzle &&
          m.im2col == map.im2col && m.lower_corner == map.lower_corner &&
          m.upper_corner == map.upper_corner && m.traversal == map.traversal)
        return m.var;
    int same = 0;
    for (const TensorMapParam &m : *maps_)
      same += m.arg == map.arg;
    map.var = Var(tensor + "_tmap" + (same ? std::to_string(same) : ""), Handle());
    maps_->push_back(map);
    return map.var;
  }

  const std::vector<Buffer> &args_;
  std::vector<TensorMapParam> *maps_;
  llvm::DenseMap<const BufferNode *, SharedLayout> layouts_;
  const char *verb_ = "filled by"; ///< in errors: "filled by" (loads) or "stored by"
  int tile_loops_ = 0;             ///< persistent tile loops around the copy
};

// ---- TMA stores --------------------------------------------------------------------------------

Expr all_of(const std::vector<Expr> &conds) {
  Expr r;
  for (const Expr &c : conds)
    r = r.defined() ? (r && c) : c;
  return r;
}

Stmt leader_only(const Expr &leader, std::vector<Stmt> body) {
  return IfThenElse::make(leader, Seq::make(std::move(body)));
}

/// Whether `s` writes shared buffer `buf` (a store, or an intrinsic given a pointer into it).
bool writes(const Stmt &s, const Buffer &buf) {
  bool found = false;
  post_order_visit(s, [&](const IRNode *n) {
    if (const auto *st = llvm::dyn_cast<BufferStore>(n))
      found |= st->buffer.get() == buf.get();
    if (const auto *c = llvm::dyn_cast<Call>(n); c && c->is_intrinsic(intrinsic::address_of))
      if (const auto *l = c->args[0].as<BufferLoad>())
        found |= l->buffer.get() == buf.get();
  });
  return found;
}

// The store of global stage `dst_` (inside its `attr bulk_copy`, whose loads were lowered
// already): its copy nest, loops and guards around `dst_[..] = S[..]` with S the shared tile,
// becomes the issue of its boxes by one thread, after the threads' proxy fence and barrier; in a
// tile loop, the tile's first write of S waits for the last tile's store to have read it
// (wait_group.read by the issuer, then a barrier), and the tile loop is followed by the
// issuer's wait for its stores. The barriers are syncthreads (split_warp_roles makes them the
// consumers' named barrier).
class StoreNestLowerer : public IRMutator {
public:
  StoreNestLowerer(BulkCopyLowerer &outer, const Buffer &dst, const Buffer &src,
                   const std::vector<std::string> &tags)
      : outer_(outer), dst_(dst), src_(src), tags_(tags) {}

  bool lowered = false;

protected:
  Stmt visit(const AttrStmt *op) override {
    // A tile loop of one iteration (the grid covers the tiles) is gone: the block's one tile.
    const bool tile = op->key == attr::tile_loop && op->body.as<For>();
    if (tile && !hoisting_) {
      // The staging tile's stage binds the block's threads inside the tile; they are the
      // block's, declared around the tile loop (as TileScheduler does for the output's own),
      // so that the wait after the loop has them and warp roles see them around the work.
      std::vector<const AttrStmt *> bindings;
      Stmt loop = strip_thread_bindings(op->body, bindings);
      Stmt out = AttrStmt::make(op->node, op->key, op->value, loop);
      for (auto it = bindings.rbegin(); it != bindings.rend(); ++it)
        out = AttrStmt::make((*it)->node, (*it)->key, (*it)->value, out);
      hoisting_ = true;
      out = mutate(out);
      hoisting_ = false;
      return out;
    }
    const IterVar *thread = thread_index_bound_by(Stmt(op));
    if (thread)
      threads_.push_back({thread->thread_tag(), thread->var()});
    tile_loops_ += tile;
    const bool before = lowered;
    Stmt r = IRMutator::visit(op);
    tile_loops_ -= tile;
    if (tile && lowered && !before) // the stores of the block's last tiles are done
      r = Seq::make({r, leader_only(leader("after the tile loop"),
                                    {intrinsic_stmt(intrinsic::tma_store_wait, {Expr(0)})})});
    if (thread)
      threads_.pop_back();
    return r;
  }

  Stmt visit(const For *op) override {
    StoreNest nest;
    if (!store_nest(Stmt(op), &nest))
      return IRMutator::visit(op);
    return issue(nest);
  }

  Stmt visit(const IfThenElse *op) override {
    StoreNest nest;
    if (!store_nest(Stmt(op), &nest))
      return IRMutator::visit(op);
    return issue(nest);
  }

  // The copy nest right after the staging tile's work, whose thread axes (the stage binds
  // them around its nest; the copy binds none) the issue needs: it goes inside them, last.
  Stmt visit(const Seq *op) override {
    std::vector<Stmt> out;
    for (size_t i = 0; i < op->stmts.size(); ++i) {
      StoreNest nest;
      const Stmt &x = op->stmts[i];
      std::vector<const AttrStmt *> attrs;
      for (const AttrStmt *a = out.empty() ? nullptr : out.back().as<AttrStmt>();
           a && a->key == attr::thread_extent; a = a->body.as<AttrStmt>())
        attrs.push_back(a);
      if (attrs.empty() || !store_nest(x, &nest)) {
        out.push_back(mutate(x));
        continue;
      }
      for (const AttrStmt *a : attrs)
        threads_.push_back({std::get<IterVar>(a->node).thread_tag(), std::get<IterVar>(a->node).var()});
      Stmt inner = Seq::make({attrs.back()->body, issue(nest)});
      threads_.resize(threads_.size() - attrs.size());
      for (auto a = attrs.rbegin(); a != attrs.rend(); ++a)
        inner = AttrStmt::make((*a)->node, (*a)->key, (*a)->value, inner);
      out.back() = inner;
    }
    return Seq::make(std::move(out));
  }

  Stmt visit(const BufferStore *op) override {
    if (op->buffer.get() == dst_.get()) {
      const std::string &name = dst_.name();
      const char *verb_ = "stored by";
      TESSEL_BULK_COPY_ERROR << "its copy out of '" << src_.name()
                             << "' is not loops over the tile around one store (leave the "
                                "stage's axes inside the tile as they are: no split, fuse or "
                                "bind); got "
                             << Stmt(op);
    }
    return IRMutator::visit(op);
  }

  Stmt visit(const BufferRealize *op) override {
    Stmt r = IRMutator::visit(op);
    if (op->buffer.get() != src_.get() || tile_loops_ == 0)
      return r;
    // In a tile loop: before the tile's first write of the staging tile, the last tile's
    // store must have read it (the issuer waits, then everyone meets).
    const auto *realize = r.as<BufferRealize>();
    Stmt body = wait_before_first_write(realize->body);
    return BufferRealize::make(realize->buffer, realize->bounds, body);
  }

private:
  struct StoreNest {
    std::vector<const For *> loops;
    std::vector<Expr> guards;
    const BufferStore *store = nullptr;
  };

  // Whether `s` is loops and guards around one store into dst_ (then filled in).
  bool store_nest(Stmt s, StoreNest *out) const {
    while (true) {
      if (const auto *f = s.as<For>()) {
        out->loops.push_back(f);
        s = f->body;
      } else if (const auto *i = s.as<IfThenElse>(); i && !i->else_case.defined()) {
        out->guards.push_back(i->condition);
        s = i->then_case;
      } else {
        break;
      }
    }
    const auto *st = s.as<BufferStore>();
    if (!st || st->buffer.get() != dst_.get())
      return false;
    out->store = st;
    return true;
  }

  Expr leader(const char *where) const {
    std::vector<Expr> conds;
    for (const std::string &tag : tags_) {
      auto it = std::find_if(threads_.rbegin(), threads_.rend(),
                             [&](const auto &t) { return t.first == tag; });
      const std::string &name = dst_.name();
      const char *verb_ = "stored by";
      if (it == threads_.rend())
        TESSEL_BULK_COPY_ERROR << "one thread issues the store, but " << tag
                               << " is not bound " << where
                               << ": bind the block's threads around the stage (env_threads)";
      conds.push_back(it->second == 0);
    }
    return conds.empty() ? Expr(make_const(Bool(), 1)) : all_of(conds);
  }

  Stmt issue(const StoreNest &nest) {
    const std::string &name = dst_.name();
    const char *verb_ = "stored by";
    const auto *load = nest.store->value.as<BufferLoad>();
    if (!load || load->buffer.get() != src_.get())
      TESSEL_BULK_COPY_ERROR << "it stores " << nest.store->value << ", not an element of '"
                             << src_.name()
                             << "': TMA stores a shared tile as it is, so compute the value in "
                                "the shared stage (cache_write) and copy it plainly";
    internal_check(!lowered) << "two copies of '" << name << "' in one TMA store";
    lowered = true;
    // Guards that keep the copy inside C are what TMA's clipping does: dropped. Others refused.
    arith::Analyzer analyzer;
    for (const For *loop : nest.loops)
      analyzer.bind(loop->loop_var, Range(loop->min, loop->extent));
    for (const Expr &g : nest.guards)
      check_clipped(g, nest, analyzer);
    outer_.verb_ = "stored by";
    auto lit = outer_.layouts_.find(src_.get());
    internal_check(lit != outer_.layouts_.end() && !lit->second.bounds.empty())
        << "TMA store of '" << name << "' outside the realize of '" << src_.name() << "'";
    if (lit->second.aligned)
      TESSEL_BULK_COPY_ERROR << "'" << src_.name()
                             << "' has rows padded by storage_align, and a TMA box reads dense "
                                "rows; drop storage_align";
    BulkCopyLowerer::Boxes b = outer_.boxes(name, src_, lit->second, nest.loops, load->indices,
                                            dst_, nest.store->indices, Expr(nest.store->value));
    outer_.verb_ = "filled by";
    std::vector<Stmt> stores;
    for (size_t i = 0; i < b.tile_at.size(); ++i) {
      std::vector<Expr> call_args{b.map, b.tile_at[i]};
      call_args.insert(call_args.end(), b.coords[i].begin(), b.coords[i].end());
      stores.push_back(intrinsic_stmt(intrinsic::tma_store, std::move(call_args)));
    }
    stores.push_back(intrinsic_stmt(intrinsic::tma_store_commit, {}));
    // Without a tile loop the block's only store is awaited at once (the block ends).
    if (tile_loops_ == 0)
      stores.push_back(intrinsic_stmt(intrinsic::tma_store_wait, {Expr(0)}));
    return Seq::make({intrinsic_stmt(intrinsic::fence_proxy_async, {}),
                      intrinsic_stmt(intrinsic::syncthreads, {}),
                      leader_only(leader("around its copy"), std::move(stores))});
  }

  // A guard `index < extent` of the copy where `index` is the store's index of a dimension
  // whose extent in C is at most `extent`: the box's clipping does the same.
  void check_clipped(const Expr &guard, const StoreNest &nest, arith::Analyzer &analyzer) const {
    if (const auto *a = guard.as<And>()) {
      check_clipped(a->a, nest, analyzer);
      check_clipped(a->b, nest, analyzer);
      return;
    }
    const auto *lt = guard.as<LT>();
    auto bound = lt ? as_const_int(lt->b) : std::nullopt;
    if (bound)
      for (size_t d = 0; d < nest.store->indices.size(); ++d)
        if (is_zero(analyzer.simplify(nest.store->indices[d] - lt->a)) &&
            *bound >= *as_const_int(dst_->shape[d]))
          return;
    const std::string &name = dst_.name();
    const char *verb_ = "stored by";
    TESSEL_BULK_COPY_ERROR << "its copy is guarded by " << guard
                           << ", which is not a bound of one of its indices at the edge of '"
                           << name << "' (the box's clipping); a TMA store writes whole boxes "
                              "clipped at the tensor's edges only";
  }

  // `body` with the issuer's wait_group.read and a barrier before its first statement that
  // writes the staging tile (descending through lists, lets and attributes, not into loops).
  Stmt wait_before_first_write(const Stmt &body) {
    if (const auto *q = body.as<Seq>()) {
      std::vector<Stmt> out(q->stmts.begin(), q->stmts.end());
      for (Stmt &x : out)
        if (writes(x, src_)) {
          x = wait_before_first_write(x);
          return Seq::make(std::move(out));
        }
      return body;
    }
    if (const auto *l = body.as<LetStmt>(); l && writes(l->body, src_))
      return LetStmt::make(l->var, l->value, wait_before_first_write(l->body));
    if (const auto *a = body.as<AttrStmt>(); a && writes(a->body, src_)) {
      const IterVar *thread = thread_index_bound_by(body);
      if (thread)
        threads_.push_back({thread->thread_tag(), thread->var()});
      Stmt inner = wait_before_first_write(a->body);
      if (thread)
        threads_.pop_back();
      return AttrStmt::make(a->node, a->key, a->value, inner);
    }
    if (const auto *r = body.as<BufferRealize>(); r && writes(r->body, src_))
      return BufferRealize::make(r->buffer, r->bounds, wait_before_first_write(r->body));
    return Seq::make({leader_only(leader("where the staging tile is written"),
                                  {intrinsic_stmt(intrinsic::tma_store_wait_read, {Expr(0)})}),
                      intrinsic_stmt(intrinsic::syncthreads, {}), body});
  }

  // `s` (a tile loop's body) without the threadIdx bindings of its first chain of them, found
  // through loops, lets, guards, realizes and the first statement of lists (those go to
  // `bindings`, outermost first).
  static Stmt strip_thread_bindings(const Stmt &s, std::vector<const AttrStmt *> &bindings) {
    if (thread_index_bound_by(s)) {
      const auto *a = s.as<AttrStmt>();
      bindings.push_back(a);
      return strip_thread_bindings(a->body, bindings);
    }
    if (!bindings.empty())
      return s;
    if (const auto *f = s.as<For>())
      return For::make(f->loop_var, f->min, f->extent, f->for_kind,
                       strip_thread_bindings(f->body, bindings), f->thread_tag);
    if (const auto *l = s.as<LetStmt>())
      return LetStmt::make(l->var, l->value, strip_thread_bindings(l->body, bindings));
    if (const auto *i = s.as<IfThenElse>(); i && !i->else_case.defined())
      return IfThenElse::make(i->condition, strip_thread_bindings(i->then_case, bindings));
    if (const auto *r = s.as<BufferRealize>())
      return BufferRealize::make(r->buffer, r->bounds, strip_thread_bindings(r->body, bindings));
    if (const auto *q = s.as<Seq>(); q && !q->stmts.empty()) {
      std::vector<Stmt> stmts(q->stmts.begin(), q->stmts.end());
      stmts[0] = strip_thread_bindings(stmts[0], bindings);
      return Seq::make(std::move(stmts));
    }
    return s;
  }

  BulkCopyLowerer &outer_;
  bool hoisting_ = false;
  const Buffer &dst_, &src_;
  const std::vector<std::string> &tags_; ///< the block's thread axes of more than one thread
  std::vector<std::pair<std::string, Var>> threads_; ///< the thread axes bound around
  int tile_loops_ = 0;
};

Stmt BulkCopyLowerer::lower_store(const Buffer &dst, const AttrStmt *op) {
  const std::string &name = dst.name();
  const char *verb_ = "stored by";
  // The loads inside (the operand tiles) first, which also records the shared layouts.
  Stmt body = mutate(op->body);
  const BufferStore *store = nullptr;
  int stores = 0;
  std::vector<std::string> tags;
  post_order_visit(body, [&](const IRNode *n) {
    if (const auto *st = llvm::dyn_cast<BufferStore>(n); st && st->buffer.get() == dst.get()) {
      store = st;
      ++stores;
    }
    const auto *a = llvm::dyn_cast<AttrStmt>(n);
    const IterVar *iv = a ? thread_index_bound_by(Stmt(a)) : nullptr;
    if (iv && !is_one(a->value) && std::find(tags.begin(), tags.end(), iv->thread_tag()) == tags.end())
      tags.push_back(iv->thread_tag());
  });
  std::sort(tags.begin(), tags.end());
  const auto *load = store ? store->value.as<BufferLoad>() : nullptr;
  if (stores != 1)
    TESSEL_BULK_COPY_ERROR << "a TMA store copies a shared tile to it in one copy nest, but it "
                              "has "
                           << stores << " stores into '" << name << "'";
  if (!load || load->buffer.scope() != "shared")
    TESSEL_BULK_COPY_ERROR << "it stores " << store->value
                           << ", not an element of a shared tile: a TMA store copies a shared "
                              "stage as it is; make one with cache_write(" << name
                           << ", \"shared\") and compute the value there";
  StoreNestLowerer lowerer(*this, dst, load->buffer, tags);
  Stmt out = lowerer.mutate(body);
  internal_check(lowerer.lowered) << "the TMA store of '" << name << "' was not lowered";
  return out;
}

} // namespace

Stmt lower_bulk_copy(Stmt s, const std::vector<Buffer> &args, std::vector<TensorMapParam> *maps) {
  internal_check(maps) << "lower_bulk_copy needs somewhere to put the tensor maps";
  return BulkCopyLowerer(args, maps).mutate(s);
}

} // namespace tessel
