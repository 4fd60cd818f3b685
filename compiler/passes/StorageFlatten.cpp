#include "compiler/passes/StorageFlatten.h"

#include "compiler/arith/IndexInterval.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/passes/FlatBuffer.h"
#include "compiler/support/Error.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/SmallVector.h>

namespace tessel {

namespace {

struct StorageAlign {
  int64_t dim, factor, offset;
};

/// How a multi-dimensional buffer maps onto its flat storage.
struct FlatLayout {
  Buffer flat;
  std::vector<Expr> mins;    ///< the realized region's origin (zeros for arguments)
  std::vector<Expr> strides; ///< in elements
  Expr elem_offset;          ///< added to every flat index
  /// Stage::storage_interleave: the last dimension in chunks of `chunk` elements, chunk_stride
  /// apart (strides.back() is then 1, within a chunk). chunk 0: plain strides.
  int64_t chunk = 0;
  Expr chunk_stride;
  /// Stage::swizzle: elements per 16-byte unit (0: not swizzled). In each row of a chunk (U =
  /// chunk / unit units: 2, 4 or 8) the units are permuted: unit u of row r is stored at
  /// u ^ ((r / (8 / U)) % U), the Swizzle<log2 U, 4, 3> pattern on byte addresses.
  int64_t swizzle_unit = 0;
  /// 2^31 elements or more: indices are computed in int64 (widen_index).
  bool wide = false;
};

// Whether a buffer of these (constant) extents holds `threshold` elements or more.
bool holds_at_least(const std::vector<Expr> &extents, int64_t threshold) {
  int64_t n = 1;
  for (const Expr &e : extents) {
    auto v = as_const_int(e);
    if (!v)
      return false;
    if (__builtin_mul_overflow(n, *v, &n))
      return true;
  }
  return n >= threshold;
}

// The int32 index `e` computed in int64 from its leaves: constants widened, arithmetic redone
// in int64, anything else (variables, loads, calls) cast where it is read. Casting only the
// result would keep the overflow inside it.
Expr widen_index(const Expr &e) {
  if (!e.type().is_int() || e.type().bits() >= 64)
    return e;
  if (auto v = as_const_int(e))
    return make_const(Int(64, e.type().lanes()), *v);
#define TESSEL_WIDEN(NODE, OP)                                                                    \
  if (const auto *op = e.as<NODE>())                                                             \
    return OP(widen_index(op->a), widen_index(op->b));
  TESSEL_WIDEN(Add, operator+)
  TESSEL_WIDEN(Sub, operator-)
  TESSEL_WIDEN(Mul, operator*)
  TESSEL_WIDEN(Div, truncdiv)
  TESSEL_WIDEN(Mod, truncmod)
  TESSEL_WIDEN(FloorDiv, floordiv)
  TESSEL_WIDEN(FloorMod, floormod)
  TESSEL_WIDEN(Min, min)
  TESSEL_WIDEN(Max, max)
#undef TESSEL_WIDEN
  if (const auto *op = e.as<Select>())
    return select(op->condition, widen_index(op->true_value), widen_index(op->false_value));
  if (const auto *op = e.as<Ramp>())
    return Ramp::make(widen_index(op->base), widen_index(op->stride), op->lanes);
  if (const auto *op = e.as<Broadcast>())
    return Broadcast::make(widen_index(op->value), op->lanes);
  return cast(Int(64, e.type().lanes()), e);
}

// `a + b`, `a - b`, `a * b` that skip the identity cases, so flat indices stay readable
// before the simplifier runs (the placeholder returns its input unchanged).
Expr add(const Expr &a, const Expr &b) {
  if (!a.defined() || is_zero(a))
    return b;
  return is_zero(b) ? a : a + b;
}
Expr sub(const Expr &a, const Expr &b) { return is_zero(b) ? a : a - b; }
Expr mul(const Expr &a, const Expr &b) {
  if (is_one(b))
    return a;
  return is_one(a) ? b : a * b;
}

// The smallest stride >= `stride` with stride % factor == offset (TVM's storage_align rule).
Expr pad_stride(const Expr &stride, const StorageAlign &a) {
  Expr factor = make_const(stride.type(), a.factor), offset = make_const(stride.type(), a.offset);
  if (auto s = as_const_int(stride)) {
    int64_t pad = ((a.factor + a.offset - *s % a.factor) % a.factor + a.factor) % a.factor;
    return make_const(stride.type(), *s + pad);
  }
  return stride + floormod(factor + offset - floormod(stride, factor), factor);
}

StorageAlign parse_storage_align(const AttrStmt *op, const Buffer &buf) {
  const auto *tuple = op->value.as<Call>();
  user_check(tuple && tuple->name == "tuple" && tuple->args.size() == 3, "storage_align")
      << "attr on buffer '" << buf.name() << "' must be tuple(dim, factor, offset), got "
      << op->value;
  auto dim = as_const_int(tuple->args[0]), factor = as_const_int(tuple->args[1]),
       offset = as_const_int(tuple->args[2]);
  user_check(dim && factor && offset, "storage_align")
      << "dim, factor and offset of buffer '" << buf.name() << "' must be constants, got "
      << op->value;
  user_check(*dim >= 0 && *dim < int64_t(buf.ndim()), "storage_align")
      << "buffer '" << buf.name() << "' has " << buf.ndim() << " dimensions; dim " << *dim
      << " does not exist";
  user_check(*factor > 0 && *offset >= 0 && *offset < *factor, "storage_align")
      << "buffer '" << buf.name() << "': need factor > 0 and 0 <= offset < factor, got factor "
      << *factor << ", offset " << *offset;
  return {*dim, *factor, *offset};
}

class StorageFlattener : public IRMutator {
public:
  using IRMutator::mutate;

  explicit StorageFlattener(int64_t wide_index_elements)
      : wide_index_elements_(wide_index_elements) {}

  Buffer add_argument(const Buffer &b) {
    user_check(b.defined(), "storage_flatten") << "an argument buffer is undefined";
    FlatLayout layout;
    Expr size;
    if (!b->strides.empty()) {
      // A strided argument (a placeholder's view): the elements its strides span.
      std::vector<int64_t> shape, strides;
      for (size_t d = 0; d < b->shape.size(); ++d) {
        auto e = as_const_int(b->shape[d]);
        auto st = as_const_int(b->strides[d]);
        internal_check(e && st) << "argument '" << b.name() << "' has a stride or extent that "
                                << "is not a constant";
        shape.push_back(*e);
        strides.push_back(*st);
      }
      const int64_t n = storage_elements(shape, strides);
      layout.wide = n >= wide_index_elements_;
      const DataType t = layout.wide ? Int(64) : Int(32);
      size = make_const(t, n);
      for (int64_t st : strides)
        layout.strides.push_back(make_const(t, st));
    } else {
      layout.wide = holds_at_least(b->shape, wide_index_elements_);
      const DataType size_type = layout.wide ? Int(64) : Int(32);
      size = make_const(size_type, 1);
      for (const Expr &e : b->shape)
        size = mul(size, e.astype(size_type));
      layout.strides = b.effective_strides();
    }
    layout.flat = passes_detail::make_flat_buffer(b.name(), b->data, b.dtype(), size, b.scope());
    for (const Expr &e : b->shape)
      layout.mins.push_back(make_zero(e.type()));
    if (layout.wide && b->strides.empty()) { // compact: recomputed where int32 cannot hold them
      Expr acc = make_const(Int(64), 1);
      for (size_t d = b->shape.size(); d-- > 0;) {
        layout.strides[d] = acc;
        acc = mul(acc, b->shape[d].astype(Int(64)));
      }
    }
    layout.elem_offset = b->elem_offset;
    Buffer flat = layout.flat;
    layouts_[b.get()] = std::move(layout);
    args_.insert(b.get());
    return flat;
  }

protected:
  Stmt visit(const AttrStmt *op) override {
    const Buffer *buf = std::get_if<Buffer>(&op->node);
    if (op->key == "storage_align") {
      internal_check(buf) << "storage_align attr without a buffer node";
      aligns_[buf->get()].push_back(parse_storage_align(op, *buf));
      Stmt body = mutate(op->body);
      aligns_.erase(buf->get());
      return body;
    }
    if (op->key == attr::storage_interleave) {
      internal_check(buf) << "storage_interleave attr without a buffer node";
      auto chunk = as_const_int(op->value);
      internal_check(chunk && *chunk > 1) << "storage_interleave of " << buf->name()
                                          << " must be a constant chunk, got " << op->value;
      interleave_[buf->get()] = *chunk;
      Stmt body = mutate(op->body);
      interleave_.erase(buf->get());
      return body;
    }
    if (op->key == attr::storage_swizzle) {
      internal_check(buf) << "storage_swizzle attr without a buffer node";
      auto bytes = as_const_int(op->value);
      internal_check(bytes && (*bytes == 32 || *bytes == 64 || *bytes == 128))
          << "storage_swizzle of " << buf->name() << ": " << op->value;
      swizzled_.insert(buf->get());
      Stmt body = mutate(op->body);
      swizzled_.erase(buf->get());
      return body;
    }
    if (buf) {
      auto it = layouts_.find(buf->get());
      if (it != layouts_.end()) {
        // Retarget to the flat storage: the allocation's var for double buffering (as the
        // Allocate names it), the flat buffer otherwise.
        AttrNode node = op->key == attr::pipeline_scope || op->key == attr::bulk_copy
                            ? AttrNode(it->second.flat->data)
                                                             : AttrNode(it->second.flat);
        return AttrStmt::make(std::move(node), op->key, mutate(op->value), mutate(op->body));
      }
    }
    return IRMutator::visit(op);
  }

  Stmt visit(const BufferRealize *op) override {
    const Buffer &buf = op->buffer;
    // An argument's storage comes from the caller: it keeps its argument layout.
    if (args_.count(buf.get()))
      return mutate(op->body);
    const auto *data = buf->data.as<Variable>();
    internal_check(data) << "buffer " << buf.name() << " has no data variable";
    internal_check(!layouts_.count(buf.get())) << "buffer " << buf.name() << " realized twice";

    size_t n = op->bounds.size();
    DataType t = n ? op->bounds.back().extent.type() : Int(32);
    std::vector<Expr> strides(n);
    Expr stride = make_one(t);
    FlatLayout layout;
    auto interleave_it = interleave_.find(buf.get());
    if (interleave_it != interleave_.end()) {
      // [rows...][last] stored as [last / chunk][rows...][chunk].
      int64_t chunk = interleave_it->second;
      auto last = n ? as_const_int(op->bounds.back().extent) : std::nullopt;
      user_check(last && *last % chunk == 0, "storage_interleave")
          << "buffer '" << buf.name() << "' is stored in chunks of " << chunk
          << " elements of its last dimension, whose extent "
          << (n ? op->bounds.back().extent : Expr(0)) << " is not a constant multiple of "
          << chunk << "; make the tile's last extent a multiple of " << chunk;
      strides[n - 1] = make_one(t);
      stride = make_const(t, chunk);
      for (size_t d = n - 1; d-- > 0;) {
        strides[d] = stride;
        stride = mul(stride, op->bounds[d].extent.astype(t));
      }
      layout.chunk = chunk;
      layout.chunk_stride = stride;
      if (swizzled_.count(buf.get())) {
        layout.swizzle_unit = 16 / buf.dtype().bytes();
        internal_check(chunk % layout.swizzle_unit == 0 && chunk / layout.swizzle_unit <= 8)
            << "a swizzled buffer has chunks of 32 to 128 bytes; " << buf.name() << " has "
            << chunk << " elements";
      }
      stride = mul(stride, make_const(t, *last / chunk));
    } else {
      auto align_it = aligns_.find(buf.get());
      for (size_t d = n; d-- > 0;) {
        if (align_it != aligns_.end())
          for (const StorageAlign &a : align_it->second)
            if (a.dim == int64_t(d))
              stride = pad_stride(stride, a);
        strides[d] = stride;
        stride = mul(stride, op->bounds[d].extent.astype(t));
      }
    }

    layout.flat = passes_detail::make_flat_buffer(buf.name(), buf->data, buf.dtype(), stride,
                                                  buf.scope());
    for (const Range &r : op->bounds)
      layout.mins.push_back(r.min);
    layout.strides = std::move(strides);
    layout.elem_offset = make_zero(t);
    layouts_[buf.get()] = std::move(layout);
    Stmt body = mutate(op->body);
    layouts_.erase(buf.get());
    return Allocate::make(Var(data), buf.dtype(), {stride}, buf.scope(), std::move(body));
  }

  Expr visit(const BufferLoad *op) override {
    std::vector<Expr> idx;
    mutate_all(op->indices, idx);
    const FlatLayout &l = layout_of(op->buffer);
    return BufferLoad::make(l.flat, {flatten_index(l, idx, op->buffer)});
  }

  Stmt visit(const BufferStore *op) override {
    std::vector<Expr> idx;
    mutate_all(op->indices, idx);
    Expr value = mutate(op->value);
    const FlatLayout &l = layout_of(op->buffer);
    return BufferStore::make(l.flat, std::move(value), {flatten_index(l, idx, op->buffer)});
  }

private:
  const FlatLayout &layout_of(const Buffer &b) {
    auto it = layouts_.find(b.get());
    user_check(it != layouts_.end(), "storage_flatten")
        << "buffer '" << b.name() << "' is accessed but is neither a function argument nor "
        << "realized around the access; pass its tensor in the argument list of lower()";
    return it->second;
  }

  // sum((i_d - min_d) * stride_d) + elem_offset, in the widest index type. One dimension may
  // be indexed by a Ramp (a vector access); the result is then a Ramp too.
  static Expr flatten_index(const FlatLayout &l, const std::vector<Expr> &idx, const Buffer &b) {
    user_check(idx.size() == l.strides.size(), "storage_flatten")
        << "buffer '" << b.name() << "' has " << l.strides.size() << " dimensions but is accessed"
        << " with " << idx.size() << " indices";
    DataType t = l.wide ? Int(64) : Int(32);
    for (const Expr &i : idx)
      if (i.type().bits() > t.bits())
        t = i.type().element_of();
    Expr flat, ramp_stride;
    int lanes = 1;
    size_t ramp_dim = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      Expr i = idx[d], stride = l.strides[d].astype(t), min = l.mins[d].astype(t);
      if (const auto *r = i.as<Ramp>()) {
        user_check(lanes == 1, "storage_flatten")
            << "buffer '" << b.name() << "' is accessed with vectors in two dimensions";
        lanes = r->lanes;
        ramp_dim = d;
        ramp_stride = mul(r->stride.astype(t), stride);
        i = r->base;
      } else {
        user_check(i.type().is_scalar(), "storage_flatten")
            << "index " << i << " of buffer '" << b.name() << "' is a vector but not a ramp";
      }
      Expr rel = sub((l.wide ? widen_index(i) : i).astype(t), min);
      if (l.chunk && d + 1 == idx.size()) {
        // Interleaved: whole chunks, then the place in the chunk. A vector must stay in one
        // chunk: unit stride, starting at a multiple of its width, which divides the chunk.
        Expr c = make_const(t, l.chunk);
        bool vector = lanes > 1 && ramp_dim == d;
        user_check(!vector || (is_one(ramp_stride) && l.chunk % lanes == 0 &&
                               divide_exact(rel, lanes).has_value()),
                   "storage_flatten")
            << "buffer '" << b.name() << "' is stored in chunks of " << l.chunk
            << " elements and accessed with a " << lanes
            << "-lane vector that may cross a chunk; vectorize by a divisor of the chunk, "
               "starting at a multiple of the vector width";
        Expr within = floormod(rel, c);
        if (l.swizzle_unit) {
          // The row of the chunk: what the outer dimensions contributed, in chunk-wide rows.
          Expr u = make_const(t, l.swizzle_unit);
          user_check(!vector || l.swizzle_unit % lanes == 0, "storage_flatten")
              << "buffer '" << b.name() << "' is swizzled in 16-byte units and accessed with a "
              << lanes << "-lane vector that may cross one; vectorize by a divisor of "
              << l.swizzle_unit;
          int64_t units = l.chunk / l.swizzle_unit;
          Expr row = flat.defined() ? floormod(floordiv(flat, make_const(t, l.chunk * (8 / units))),
                                               make_const(t, units))
                                    : make_zero(t);
          Expr unit = Call::make(t, intrinsic::bitwise_xor, {floordiv(within, u), row},
                                 Call::PureIntrinsic);
          within = add(mul(unit, u), floormod(within, u));
        }
        flat = add(flat, add(mul(floordiv(rel, c), l.chunk_stride.astype(t)), within));
        continue;
      }
      flat = add(flat, mul(rel, stride));
    }
    flat = add(flat, l.elem_offset.astype(t));
    if (!flat.defined())
      flat = make_zero(t);
    return lanes > 1 ? Ramp::make(flat, ramp_stride, lanes) : flat;
  }

  llvm::DenseMap<const BufferNode *, FlatLayout> layouts_;
  llvm::DenseMap<const BufferNode *, llvm::SmallVector<StorageAlign, 2>> aligns_;
  llvm::DenseMap<const BufferNode *, int64_t> interleave_;
  llvm::DenseSet<const BufferNode *> swizzled_;
  llvm::DenseSet<const BufferNode *> args_;
  int64_t wide_index_elements_;
};

} // namespace

Stmt storage_flatten(Stmt s, const std::vector<Buffer> &args, std::vector<Buffer> *flat_args,
                     int64_t wide_index_elements) {
  StorageFlattener flattener(wide_index_elements);
  for (const Buffer &b : args) {
    Buffer flat = flattener.add_argument(b);
    if (flat_args)
      flat_args->push_back(flat);
  }
  return flattener.mutate(s);
}

} // namespace tessel
