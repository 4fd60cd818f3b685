// Small helpers shared by the passes that rewrite flat (Form 2) buffer accesses.
#pragma once

#include "compiler/ir/IR.h"
#include "compiler/ir/IROperator.h"

namespace tessel::passes_detail {

/// A one-dimensional compact buffer over the storage `data` (the buffer var of an Allocate or
/// an argument's data var): what Form 2 loads and stores address.
inline Buffer make_flat_buffer(const std::string &name, Expr data, DataType dtype, Expr size,
                               const std::string &scope) {
  auto *n = new BufferNode;
  n->name = name;
  n->data = std::move(data);
  n->dtype = dtype;
  n->shape = {std::move(size)};
  n->elem_offset = make_zero(n->shape[0].type());
  n->scope = scope;
  return Buffer(n);
}

/// `index + offset` for a scalar offset, keeping a Ramp index a Ramp (codegen recognises dense
/// vector accesses by their Ramp index).
inline Expr offset_index(const Expr &index, Expr offset) {
  if (is_zero(offset))
    return index;
  offset = offset.astype(index.type().element_of());
  if (const auto *r = index.as<Ramp>())
    return Ramp::make(offset + r->base, r->stride, r->lanes);
  if (index.type().is_vector())
    return Broadcast::make(offset, index.type().lanes()) + index;
  return offset + index;
}

} // namespace tessel::passes_detail
