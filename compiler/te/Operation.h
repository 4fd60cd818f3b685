// The operations of the tensor-expression DSL: placeholders (inputs) and computes.
#pragma once

#include "compiler/ir/IR.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

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

/// The running value of one state of a fold (fold_state): read by the fold's updates and by the
/// tensors of its step, it holds the state's value before the step being computed. It has no
/// stage of its own: lowering reads it from the fold's buffer for that state.
class FoldStateOpNode : public OperationNode {
public:
  FoldStateOpNode(std::string name, std::vector<Expr> shape, DataType dtype)
      : OperationNode(OperationKind::FoldState, std::move(name)), shape(std::move(shape)),
        dtype(dtype) {}

  const std::vector<Expr> shape;
  const DataType dtype;

  int num_outputs() const override { return 1; }
  DataType output_dtype(int) const override { return dtype; }
  std::vector<Expr> output_shape(int) const override { return shape; }
  std::vector<Tensor> input_tensors() const override { return {}; }

  static bool classof(const OperationNode *n) { return n->kind() == OperationKind::FoldState; }
};

/// A fold (fold()): states of different shapes carried in order over the steps of `fold_axis`,
/// each step replacing every state by its update at once (the updates read the values before
/// the step). Output k is the final value of state k. The states share their leading axes
/// `axis` (the shape of the state of lowest rank); state k's further axes are `extra_axis[k]`.
/// Its stage's loops are `axis` and `fold_axis` (an Ordered axis, run in order); a state's
/// further axes are loops of its store.
class FoldOpNode : public OperationNode {
public:
  FoldOpNode(std::string name, std::vector<IterVar> axis, IterVar fold_axis, Expr where,
             std::vector<Tensor> states, std::vector<std::vector<IterVar>> extra_axis,
             std::vector<Expr> init, std::vector<Expr> update, std::vector<int> store_order,
             std::vector<Var> merge_a = {}, std::vector<Var> merge_b = {},
             std::vector<Expr> merge = {})
      : OperationNode(OperationKind::Fold, std::move(name)), axis(std::move(axis)),
        fold_axis(std::move(fold_axis)), where(std::move(where)), states(std::move(states)),
        extra_axis(std::move(extra_axis)), init(std::move(init)), update(std::move(update)),
        store_order(std::move(store_order)), merge_a(std::move(merge_a)),
        merge_b(std::move(merge_b)), merge(std::move(merge)) {}

  const std::vector<IterVar> axis;
  const IterVar fold_axis;
  /// Which steps run, over `axis` and `fold_axis` (true when undefined): causal attention's
  /// key blocks.
  const Expr where;
  const std::vector<Tensor> states; ///< FoldStateOpNode tensors
  const std::vector<std::vector<IterVar>> extra_axis;
  const std::vector<Expr> init;   ///< per state, over its axes
  const std::vector<Expr> update; ///< per state, over its axes (and fold_axis)
  /// The order the updates are stored in: a state read by another's update after it.
  const std::vector<int> store_order;
  /// The merge of two parts' final states (FoldState::merge), per state, over one scalar Var a
  /// state and part (merge_a[k]: state k of the earlier part, merge_b[k]: of the later); empty
  /// when a state has none.
  const std::vector<Var> merge_a, merge_b;
  const std::vector<Expr> merge;

  int num_outputs() const override { return int(states.size()); }
  DataType output_dtype(int i) const override { return states[size_t(i)].dtype(); }
  std::vector<Expr> output_shape(int i) const override { return states[size_t(i)].shape(); }
  const std::string &output_name(int i) const override { return states[size_t(i)].name(); }
  std::vector<Tensor> input_tensors() const override;

  /// The index of `state` among the states, or -1.
  int state_index(const OperationNode *state) const;

  static bool classof(const OperationNode *n) { return n->kind() == OperationKind::Fold; }
};

/// The data-parallel axes of a computed operation (a compute's, a fold's shared axes); empty
/// for inputs.
const std::vector<IterVar> &op_axes(const OperationNode *op);
/// Its reduction or fold axes; empty for inputs.
std::vector<IterVar> op_reduce_axes(const OperationNode *op);

/// For each computation of `order` (a topological order) that reads a fold's running states,
/// directly or through the computations it reads (the tensors of a fold's step): those states.
llvm::DenseMap<const OperationNode *, llvm::DenseSet<const OperationNode *>>
fold_states_read(const std::vector<Operation> &order);

/// The tensors read by `e`, in first-use order, without duplicates.
std::vector<Tensor> tensors_read(const Expr &e);

/// All operations that `outputs` depend on (inputs first, outputs last), each once.
std::vector<Operation> topological_order(const std::vector<Tensor> &outputs);

/// "placeholder A[16, 16] float16" or "compute C[i: 16, j: 16] float32 = ...".
std::string to_string(const Operation &op);
std::string to_string(const Tensor &t);
std::ostream &operator<<(std::ostream &os, const Tensor &t);

} // namespace tessel
