#include "compiler/te/Operation.h"

#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"

#include <llvm/ADT/DenseSet.h>
#include <llvm/Support/raw_ostream.h>

#include <functional>

namespace tessel {

std::vector<Expr> ComputeOpNode::output_shape(int) const {
  std::vector<Expr> shape;
  for (const IterVar &iv : axis)
    shape.push_back(iv->dom.extent);
  return shape;
}

std::vector<Tensor> tensors_read(const Expr &e) {
  std::vector<Tensor> out;
  post_order_visit(e, [&](const IRNode *n) {
    if (const auto *load = llvm::dyn_cast<TensorLoad>(n))
      if (std::find(out.begin(), out.end(), load->tensor) == out.end())
        out.push_back(load->tensor);
  });
  return out;
}

std::vector<Tensor> ComputeOpNode::input_tensors() const { return tensors_read(body); }

std::vector<Tensor> FoldOpNode::input_tensors() const {
  std::vector<Expr> all = update;
  if (where.defined())
    all.push_back(where);
  std::vector<Tensor> out;
  for (const Expr &e : all)
    for (const Tensor &t : tensors_read(e))
      if (std::find(out.begin(), out.end(), t) == out.end())
        out.push_back(t);
  return out;
}

int FoldOpNode::state_index(const OperationNode *state) const {
  for (size_t k = 0; k < states.size(); ++k)
    if (states[k].op().get() == state)
      return int(k);
  return -1;
}

llvm::DenseMap<const OperationNode *, llvm::DenseSet<const OperationNode *>>
fold_states_read(const std::vector<Operation> &order) {
  llvm::DenseMap<const OperationNode *, llvm::DenseSet<const OperationNode *>> reads;
  for (const Operation &op : order) {
    if (!op.as<ComputeOpNode>() && !op.as<FoldOpNode>())
      continue;
    llvm::DenseSet<const OperationNode *> states;
    for (const Tensor &in : op->input_tensors()) {
      if (in.op().as<FoldStateOpNode>())
        states.insert(in.op().get());
      else if (auto it = reads.find(in.op().get()); it != reads.end())
        states.insert(it->second.begin(), it->second.end());
    }
    if (const auto *f = op.as<FoldOpNode>()) // its own states are its storage
      for (const Tensor &st : f->states)
        states.erase(st.op().get());
    if (!states.empty())
      reads[op.get()] = std::move(states);
  }
  return reads;
}

const std::vector<IterVar> &op_axes(const OperationNode *op) {
  static const std::vector<IterVar> none;
  if (const auto *c = llvm::dyn_cast<ComputeOpNode>(op))
    return c->axis;
  if (const auto *f = llvm::dyn_cast<FoldOpNode>(op))
    return f->axis;
  return none;
}

std::vector<IterVar> op_reduce_axes(const OperationNode *op) {
  if (const auto *c = llvm::dyn_cast<ComputeOpNode>(op))
    return c->reduce_axis;
  if (const auto *f = llvm::dyn_cast<FoldOpNode>(op))
    return {f->fold_axis};
  return {};
}

std::vector<Operation> topological_order(const std::vector<Tensor> &outputs) {
  std::vector<Operation> order;
  llvm::DenseSet<const OperationNode *> visited;
  std::function<void(const Operation &)> visit = [&](const Operation &op) {
    if (!visited.insert(op.get()).second)
      return;
    for (const Tensor &t : op->input_tensors())
      visit(t.op());
    order.push_back(op);
  };
  for (const Tensor &t : outputs)
    visit(t.op());
  return order;
}

std::string to_string(const Operation &op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  IRPrinter p(os);
  auto print_shape = [&](const std::vector<Expr> &shape) {
    os << "[";
    for (size_t i = 0; i < shape.size(); ++i) {
      if (i)
        os << ", ";
      p.print(shape[i]);
    }
    os << "]";
  };
  if (const auto *ph = op.as<PlaceholderOpNode>()) {
    os << "placeholder " << ph->name;
    print_shape(ph->shape);
    os << " " << ph->dtype;
    if (!ph->strides.empty()) {
      os << " strides [";
      for (size_t i = 0; i < ph->strides.size(); ++i)
        os << (i ? ", " : "") << ph->strides[i];
      os << "]";
    }
  } else if (const auto *c = op.as<ComputeOpNode>()) {
    os << "compute " << c->name << "[";
    for (size_t i = 0; i < c->axis.size(); ++i) {
      if (i)
        os << ", ";
      os << p.name_of(c->axis[i].var().get()) << ": ";
      p.print(c->axis[i]->dom.extent);
    }
    os << "] " << c->body.type() << " = ";
    p.print(c->body);
  } else if (const auto *st = op.as<FoldStateOpNode>()) {
    os << "fold_state " << st->name;
    print_shape(st->shape);
    os << " " << st->dtype;
  } else if (const auto *f = op.as<FoldOpNode>()) {
    os << "fold " << f->name << " over " << p.name_of(f->fold_axis.var().get()) << ": ";
    p.print(f->fold_axis->dom.extent);
    if (f->where.defined()) {
      os << " where ";
      p.print(f->where);
    }
    for (size_t k = 0; k < f->states.size(); ++k) {
      os << "\n  " << f->states[k].name() << "[";
      std::vector<IterVar> ax = f->axis;
      ax.insert(ax.end(), f->extra_axis[k].begin(), f->extra_axis[k].end());
      for (size_t i = 0; i < ax.size(); ++i)
        os << (i ? ", " : "") << p.name_of(ax[i].var().get());
      os << "] = ";
      p.print(f->init[k]);
      os << " then ";
      p.print(f->update[k]);
    }
  }
  return os.str();
}

std::string to_string(const Tensor &t) { return to_string(t.op()); }
std::ostream &operator<<(std::ostream &os, const Tensor &t) { return os << to_string(t); }

} // namespace tessel
