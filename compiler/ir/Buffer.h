// A buffer: typed storage with a shape, strides, an element offset and a storage scope.
//
// Loads and stores address buffers with one index per dimension until storage flattening
// rewrites them to one flat index. Tensor intrinsics declare buffers with an alignment and an
// offset factor that the region they are bound to must satisfy.
#pragma once

#include "compiler/ir/Expr.h"

#include <string>
#include <vector>

namespace tessel {

class Var;

class BufferNode : public llvm::ThreadSafeRefCountedBase<BufferNode> {
public:
  std::string name;
  /// The handle-typed variable holding the buffer's address; loads print as name[...].
  Expr data;
  DataType dtype;
  std::vector<Expr> shape;
  /// Empty means compact row-major.
  std::vector<Expr> strides;
  /// In elements, from `data`.
  Expr elem_offset;
  /// "global", "shared", "local", "wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator", ...
  std::string scope;
  /// In bytes; 0 means the natural alignment of dtype.
  int data_alignment = 0;
  /// elem_offset is a multiple of this (1 means any).
  int offset_factor = 1;
  /// For a tensor intrinsic's declaration: the Stage::storage_interleave chunk the bound
  /// storage must have (0: row major, possibly padded).
  int interleave = 0;
  /// Likewise the Stage::swizzle bytes (0: not swizzled).
  int swizzle = 0;
};

class Buffer {
public:
  Buffer() = default;
  explicit Buffer(const BufferNode *n) : ptr_(n) {}

  /// Declares a buffer. Strides empty = compact row-major; elem_offset undefined = 0 when
  /// offset_factor is 1, else a fresh variable "<name>_elem_offset".
  static Buffer make(std::string name, DataType dtype, std::vector<Expr> shape,
                     std::string scope = "global", std::vector<Expr> strides = {},
                     Expr elem_offset = Expr(), int data_alignment = 0, int offset_factor = 1);

  const BufferNode *get() const { return ptr_.get(); }
  const BufferNode *operator->() const { return ptr_.get(); }
  bool defined() const { return ptr_ != nullptr; }
  bool same_as(const Buffer &o) const { return ptr_ == o.ptr_; }

  const std::string &name() const { return ptr_->name; }
  DataType dtype() const { return ptr_->dtype; }
  size_t ndim() const { return ptr_->shape.size(); }
  const std::string &scope() const { return ptr_->scope; }

  /// The strides of each dimension in elements, computing compact ones when none were given.
  std::vector<Expr> effective_strides() const;

  /// A copy of this buffer with another name, scope or shape (used by cache stages).
  Buffer with_scope(const std::string &scope) const;
  /// A copy of this declaration that binds only to storage interleaved in chunks of `chunk`.
  Buffer with_interleave(int chunk, int swizzle = 0) const;

  /// Loads `indices` (one per dimension). Throws tessel::Error when the arity is wrong.
  Expr load(const std::vector<Expr> &indices) const;

private:
  llvm::IntrusiveRefCntPtr<const BufferNode> ptr_;
};

/// The elements a tensor of `shape` laid out with `strides` (in elements) spans from its first:
/// 1 + sum of (extent - 1) * stride, or the product of `shape` where `strides` is empty
/// (compact row-major). 0 for an empty shape.
int64_t storage_elements(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides);
/// `strides` where given, else the compact row-major strides of `shape` (in elements).
std::vector<int64_t> strides_or_row_major(const std::vector<int64_t> &shape,
                                          const std::vector<int64_t> &strides = {});

} // namespace tessel
