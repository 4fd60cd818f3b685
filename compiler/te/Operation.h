// The operations of the tensor-expression DSL: placeholders (inputs) and computes.
#pragma once

#include "compiler/ir/IR.h"

#include <string>
#include <vector>

namespace tessel {

/// An input tensor with a fixed shape and type.
class PlaceholderOpNode : public OperationNode {
public:
  PlaceholderOpNode(std::string name, std::vector<Expr> shape, DataType dtype,
                    std::vector<int64_t> strides = {})
      : OperationNode(OperationKind::Placeholder, std::move(name)), shape(std::move(shape)),
        dtype(dtype), strides(std::move(strides)) {}

  const std::vector<Expr> shape;
  const DataType dtype;
  /// In elements, one per dimension; empty: compact row-major.
  const std::vector<int64_t> strides;

  int num_outputs() const override { return 1; }
  DataType output_dtype(int) const override { return dtype; }
  std::vector<Expr> output_shape(int) const override { return shape; }
  std::vector<int64_t> output_strides(int) const override { return strides; }
  std::vector<Tensor> input_tensors() const override { return {}; }

  static bool classof(const OperationNode *n) { return n->kind() == OperationKind::Placeholder; }
};

/// out[axis...] = body, where body may be a reduction (sum/max/min) over reduce_axis.
class ComputeOpNode : public OperationNode {
public:
  ComputeOpNode(std::string name, std::vector<IterVar> axis, std::vector<IterVar> reduce_axis,
                Expr body)
      : OperationNode(OperationKind::Compute, std::move(name)), axis(std::move(axis)),
        reduce_axis(std::move(reduce_axis)), body(std::move(body)) {}

  /// One data-parallel IterVar per output dimension, with domain [0, extent).
  const std::vector<IterVar> axis;
  /// The reduction axes when body is a Reduce; empty otherwise.
  const std::vector<IterVar> reduce_axis;
  const Expr body;

  int num_outputs() const override { return 1; }
  DataType output_dtype(int) const override { return body.type(); }
  std::vector<Expr> output_shape(int) const override;
  std::vector<Tensor> input_tensors() const override;

  /// The Reduce node of the body, or null when this is not a reduction.
  const Reduce *reduction() const { return body.as<Reduce>(); }

  static bool classof(const OperationNode *n) { return n->kind() == OperationKind::Compute; }
};

/// The tensors read by `e`, in first-use order, without duplicates.
std::vector<Tensor> tensors_read(const Expr &e);

/// All operations that `outputs` depend on (inputs first, outputs last), each once.
std::vector<Operation> topological_order(const std::vector<Tensor> &outputs);

/// "placeholder A[16, 16] float16" or "compute C[i: 16, j: 16] float32 = ...".
std::string to_string(const Operation &op);
std::string to_string(const Tensor &t);
std::ostream &operator<<(std::ostream &os, const Tensor &t);

} // namespace tessel
