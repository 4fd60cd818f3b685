// Operations and the tensors they produce, as the IR sees them.
//
// The IR refers to a tensor (in TensorLoad) through its operation, which is opaque here: the
// concrete operations (placeholder, compute, ...) are defined by the DSL in compiler/te.
#pragma once

#include "compiler/ir/Expr.h"
#include "compiler/ir/IterVar.h"

#include <string>
#include <vector>

namespace tessel {

class Tensor;

enum class OperationKind : uint8_t { Placeholder, Compute, FoldState, Fold };

class OperationNode : public llvm::ThreadSafeRefCountedBase<OperationNode> {
public:
  OperationNode(OperationKind kind, std::string name) : name(std::move(name)), kind_(kind) {}
  virtual ~OperationNode() = default;
  OperationNode(const OperationNode &) = delete;
  OperationNode &operator=(const OperationNode &) = delete;

  const std::string name;
  OperationKind kind() const { return kind_; }

  virtual int num_outputs() const = 0;
  virtual DataType output_dtype(int i) const = 0;
  virtual std::vector<Expr> output_shape(int i) const = 0;
  /// The name of output i: the operation's, but for one of several outputs (a fold's states).
  virtual const std::string &output_name(int) const { return name; }
  /// The strides in elements of output i's storage as an argument in global memory, one per
  /// dimension; empty: compact row-major (every computed tensor, and most placeholders).
  virtual std::vector<int64_t> output_strides(int) const { return {}; }
  /// The tensors this operation reads, in first-use order, without duplicates.
  virtual std::vector<Tensor> input_tensors() const = 0;

private:
  const OperationKind kind_;
};

class Operation {
public:
  Operation() = default;
  explicit Operation(const OperationNode *n) : ptr_(n) {}

  const OperationNode *get() const { return ptr_.get(); }
  const OperationNode *operator->() const { return ptr_.get(); }
  bool defined() const { return ptr_ != nullptr; }
  bool same_as(const Operation &o) const { return ptr_ == o.ptr_; }
  bool operator==(const Operation &o) const { return ptr_ == o.ptr_; }
  bool operator!=(const Operation &o) const { return ptr_ != o.ptr_; }
  const std::string &name() const { return ptr_->name; }

  Tensor output(int i) const;

  template <typename T> const T *as() const {
    return ptr_ ? llvm::dyn_cast<T>(ptr_.get()) : nullptr;
  }

private:
  llvm::IntrusiveRefCntPtr<const OperationNode> ptr_;
};

/// Output `value_index` of an operation. Index it with operator() to read it in a compute body.
class Tensor {
public:
  Tensor() = default;
  Tensor(Operation op, int value_index) : op_(std::move(op)), value_index_(value_index) {}

  bool defined() const { return op_.defined(); }
  const Operation &op() const { return op_; }
  int value_index() const { return value_index_; }
  const std::string &name() const { return op_->output_name(value_index_); }
  DataType dtype() const { return op_->output_dtype(value_index_); }
  std::vector<Expr> shape() const { return op_->output_shape(value_index_); }
  /// Its strides in elements as an argument in global memory; empty: compact row-major.
  std::vector<int64_t> strides() const { return op_->output_strides(value_index_); }
  size_t ndim() const { return shape().size(); }

  bool operator==(const Tensor &o) const {
    return op_ == o.op_ && value_index_ == o.value_index_;
  }
  bool operator!=(const Tensor &o) const { return !(*this == o); }

  /// Reads the tensor at `indices`: one integer index per dimension, else a tessel::Error
  /// naming the tensor, its rank and the number of indices given.
  Expr operator()(std::vector<Expr> indices) const;
  template <typename... Args> Expr operator()(Args &&...indices) const {
    return (*this)(std::vector<Expr>{Expr(std::forward<Args>(indices))...});
  }

private:
  Operation op_;
  int value_index_ = 0;
};

} // namespace tessel
