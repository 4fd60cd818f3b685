#include "compiler/ir/Buffer.h"

#include "compiler/ir/IR.h"
#include "compiler/ir/IROperator.h"
#include "compiler/support/Error.h"

namespace tessel {

Buffer Buffer::make(std::string name, DataType dtype, std::vector<Expr> shape, std::string scope,
                    std::vector<Expr> strides, Expr elem_offset, int data_alignment,
                    int offset_factor) {
  user_check(!name.empty(), "Buffer") << "a buffer needs a name";
  user_check(strides.empty() || strides.size() == shape.size(), "Buffer")
      << "buffer '" << name << "' has " << shape.size() << " dimensions but " << strides.size()
      << " strides";
  user_check(offset_factor >= 1, "Buffer")
      << "buffer '" << name << "': offset_factor must be at least 1, got " << offset_factor;
  user_check(data_alignment >= 0, "Buffer")
      << "buffer '" << name << "': data_alignment must not be negative";
  for (const Expr &e : shape)
    user_check(e.defined() && e.type().is_integer_like() && !e.type().is_bool(), "Buffer")
        << "buffer '" << name << "': extents must be integers";
  auto *n = new BufferNode;
  n->data = Var(name, Handle());
  n->name = std::move(name);
  n->dtype = dtype;
  n->shape = std::move(shape);
  n->strides = std::move(strides);
  if (!elem_offset.defined())
    elem_offset = offset_factor == 1 ? Expr(0) : Expr(Var(n->name + "_elem_offset"));
  n->elem_offset = std::move(elem_offset);
  n->scope = std::move(scope);
  n->data_alignment = data_alignment;
  n->offset_factor = offset_factor;
  return Buffer(n);
}

int64_t storage_elements(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides) {
  int64_t n = 1;
  for (int64_t e : shape)
    n *= e;
  if (strides.empty() || n == 0)
    return n;
  int64_t last = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    last += (shape[d] - 1) * strides[d];
  return last + 1;
}

std::vector<int64_t> strides_or_row_major(const std::vector<int64_t> &shape,
                                          const std::vector<int64_t> &strides) {
  if (!strides.empty())
    return strides;
  std::vector<int64_t> out(shape.size());
  int64_t n = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    out[d] = n;
    n *= shape[d];
  }
  return out;
}

std::vector<Expr> Buffer::effective_strides() const {
  if (!ptr_->strides.empty())
    return ptr_->strides;
  std::vector<Expr> strides(ndim());
  Expr acc = make_const(ndim() ? ptr_->shape.back().type() : Int(32), 1);
  for (size_t i = ndim(); i-- > 0;) {
    strides[i] = acc;
    acc = acc * ptr_->shape[i];
  }
  return strides;
}

Buffer Buffer::with_scope(const std::string &scope) const {
  return make(name(), dtype(), ptr_->shape, scope, ptr_->strides, ptr_->elem_offset,
              ptr_->data_alignment, ptr_->offset_factor);
}

Buffer Buffer::with_interleave(int chunk, int swizzle) const {
  auto *n = new BufferNode;
  n->name = ptr_->name;
  n->data = ptr_->data;
  n->dtype = ptr_->dtype;
  n->shape = ptr_->shape;
  n->strides = ptr_->strides;
  n->elem_offset = ptr_->elem_offset;
  n->scope = ptr_->scope;
  n->data_alignment = ptr_->data_alignment;
  n->offset_factor = ptr_->offset_factor;
  n->interleave = chunk;
  n->swizzle = swizzle;
  return Buffer(n);
}

Expr Buffer::load(const std::vector<Expr> &indices) const {
  return BufferLoad::make(*this, indices);
}

} // namespace tessel
