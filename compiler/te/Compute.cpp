#include "compiler/te/Compute.h"

#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Substitute.h"
#include "compiler/support/Error.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/STLExtras.h>

#include <cstdint>
#include <optional>

namespace tessel {

namespace {

// Extents of tensors are positive integer constants: tessel specializes kernels to shapes. They
// come back as int32 constants, the type of every index (a shape written with int64_t values would
// otherwise print as 1024i64 and mix types in index arithmetic).
std::vector<Expr> checked_shape(const std::vector<Expr> &shape, const std::string &what,
                                const std::string &name) {
  std::vector<Expr> result;
  user_check(!shape.empty(), what) << "tensor '" << name << "' needs at least one dimension";
  for (size_t d = 0; d < shape.size(); ++d) {
    const Expr &e = shape[d];
    user_check(e.defined() && e.type().is_integer_like() && !e.type().is_bool(), what)
        << "tensor '" << name << "': extent of dimension " << d << " must be an integer";
    auto v = as_const_int(e);
    user_check(v.has_value(), what) << "tensor '" << name << "': extent of dimension " << d
                                    << " must be a constant, got " << e;
    user_check(*v > 0, what) << "tensor '" << name << "': extent of dimension " << d
                             << " must be positive, got " << *v;
    user_check(*v <= INT32_MAX, what)
        << "tensor '" << name << "': extent of dimension " << d << " is " << *v
        << "; each index is a 32-bit integer, so an extent must be at most " << INT32_MAX
        << " (a tensor past 2^31 elements is fine: lowering computes its flat indices in 64 bits)";
    result.push_back(Expr(int(*v)));
  }
  return result;
}

void check_name(const std::string &name, const char *what) {
  user_check(!name.empty(), what) << "a tensor needs a name";
}

// A reduction is the whole body of a compute, as in TVM: nested reductions have no loop nest.
void check_reduction_placement(const Expr &body, const std::string &name) {
  const Reduce *top = body.as<Reduce>();
  post_order_visit(body, [&](const IRNode *n) {
    if (const auto *r = llvm::dyn_cast<Reduce>(n))
      user_check(r == top, "compute")
          << "tensor '" << name << "': a reduction (" << Reduce::name(r->combiner)
          << ") must be the whole body of the compute, not part of an expression; compute it "
             "as its own tensor and use that tensor here";
  });
}

// Every variable in a body is an index of the tensor, an axis of its reduction or bound by a
// Let; anything else (typically a reduce axis used without sum/max/min) has no loop to run in.
void check_free_vars(const Expr &body, const std::vector<Var> &indices, const std::string &name) {
  llvm::DenseSet<const Variable *> allowed;
  for (const Var &v : indices)
    allowed.insert(v.get());
  if (const auto *r = body.as<Reduce>())
    for (const IterVar &iv : r->axis)
      allowed.insert(iv.var().get());
  post_order_visit(body, [&](const IRNode *n) {
    if (const auto *let = llvm::dyn_cast<Let>(n))
      allowed.insert(let->var.get());
  });
  for (const Var &v : free_vars(body))
    user_check(allowed.count(v.get()), "compute")
        << "tensor '" << name << "': the body uses '" << v.name()
        << "', which is neither an index of '" << name
        << "' nor an axis of its reduction. If it is a reduce axis, wrap the body in "
           "sum/max/min(..., {" << v.name() << "})";
}

} // namespace

Tensor placeholder(std::vector<Expr> shape, DataType dtype, std::string name) {
  check_name(name, "placeholder");
  std::vector<Expr> extents = checked_shape(shape, "placeholder", name);
  user_check(!dtype.is_void() && dtype.is_scalar(), "placeholder")
      << "tensor '" << name << "': element type must be a scalar type, got " << dtype;
  return Operation(new PlaceholderOpNode(std::move(name), std::move(extents), dtype)).output(0);
}

Tensor placeholder(std::vector<Expr> shape, DataType dtype, std::string name,
                   std::vector<int64_t> strides) {
  Tensor t = placeholder(std::move(shape), dtype, name);
  user_check(strides.size() == t.ndim(), "placeholder")
      << "tensor '" << name << "' has " << t.ndim() << " dimensions but " << strides.size()
      << " strides; give one stride (in elements) per dimension, or none for a compact tensor";
  for (size_t d = 0; d < strides.size(); ++d)
    user_check(strides[d] >= 1, "placeholder")
        << "tensor '" << name << "': stride " << strides[d] << " of dimension " << d
        << " must be at least 1 element (a broadcast dimension of stride 0 is an index "
           "expression: read the tensor at a fixed index instead)";
  const auto *ph = t.op().as<PlaceholderOpNode>();
  return Operation(new PlaceholderOpNode(name, ph->shape, dtype, std::move(strides))).output(0);
}

IterVar reduce_axis(std::array<Expr, 2> begin_end, std::string name) {
  user_check(!name.empty(), "reduce_axis") << "a reduce axis needs a name";
  auto begin = as_const_int(begin_end[0]), end = as_const_int(begin_end[1]);
  user_check(begin && end, "reduce_axis")
      << "axis '" << name << "': bounds must be integer constants {begin, end}";
  user_check(*end > *begin, "reduce_axis")
      << "axis '" << name << "': the range [" << *begin << ", " << *end
      << ") is empty; write {begin, end} with end > begin";
  return IterVar::make(Range(Expr(int(*begin)), Expr(int(*end - *begin))), Var(name),
                       IterVarType::CommReduce);
}

Expr sum(Expr source, std::vector<IterVar> axis, Expr where, Expr init) {
  return Reduce::make(Reduce::Sum, std::move(source), std::move(axis), std::move(where),
                      std::move(init));
}
Expr max(Expr source, std::vector<IterVar> axis, Expr where, Expr init) {
  return Reduce::make(Reduce::Max, std::move(source), std::move(axis), std::move(where),
                      std::move(init));
}
Expr min(Expr source, std::vector<IterVar> axis, Expr where, Expr init) {
  return Reduce::make(Reduce::Min, std::move(source), std::move(axis), std::move(where),
                      std::move(init));
}

Tensor compute_from_vars(std::vector<Expr> shape,
                         const std::function<Expr(const std::vector<Var> &)> &body_fn,
                         std::string name, std::vector<std::string> axis_names) {
  check_name(name, "compute");
  std::vector<Expr> extents = checked_shape(shape, "compute", name);
  user_check(shape.size() <= 8, "compute")
      << "tensor '" << name << "' has " << shape.size() << " dimensions; at most 8 are supported";
  user_check(axis_names.empty() || axis_names.size() == shape.size(), "compute")
      << "tensor '" << name << "': " << axis_names.size() << " axis names for "
      << shape.size() << " dimensions";
  std::vector<Var> vars;
  std::vector<IterVar> axis;
  for (size_t d = 0; d < shape.size(); ++d) {
    std::string vname = axis_names.empty() ? "i" : axis_names[d];
    if (axis_names.empty())
      vname += std::to_string(d);
    Var v(vname);
    vars.push_back(v);
    axis.push_back(IterVar::make(Range(Expr(0), extents[d]), v, IterVarType::DataPar));
  }
  Expr body = body_fn(vars);
  user_check(body.defined(), "compute") << "tensor '" << name << "': the body is undefined";
  user_check(body.type().is_scalar() && !body.type().is_handle(), "compute")
      << "tensor '" << name << "': the body must be a scalar value, got " << body.type();
  check_reduction_placement(body, name);
  check_free_vars(body, vars, name);
  std::vector<IterVar> reduce_axis;
  if (const auto *r = body.as<Reduce>())
    reduce_axis = r->axis;
  return Operation(new ComputeOpNode(std::move(name), std::move(axis), std::move(reduce_axis),
                                     std::move(body)))
      .output(0);
}

IterVar fold_axis(std::array<Expr, 2> begin_end, std::string name) {
  IterVar r = reduce_axis(begin_end, name);
  return IterVar::make(r->dom, r.var(), IterVarType::Ordered);
}

Tensor fold_state(std::vector<Expr> shape, DataType dtype, std::string name) {
  check_name(name, "fold_state");
  std::vector<Expr> extents = checked_shape(shape, "fold_state", name);
  user_check(!dtype.is_void() && dtype.is_scalar(), "fold_state")
      << "state '" << name << "': element type must be a scalar type, got " << dtype;
  return Operation(new FoldStateOpNode(std::move(name), std::move(extents), dtype)).output(0);
}

namespace {

// The order to store a fold's states in place: each after every state whose update reads it
// (reads[a][b]: a's update reads b).
std::vector<int> store_order(const std::vector<std::vector<bool>> &reads,
                             const std::vector<Tensor> &states, const std::string &context) {
  const size_t n = states.size();
  std::vector<int> order;
  std::vector<bool> done(n, false);
  while (order.size() < n) {
    bool progressed = false;
    for (size_t b = 0; b < n; ++b) {
      bool ready = !done[b];
      for (size_t a = 0; a < n && ready; ++a)
        ready = a == b || done[a] || !reads[a][b];
      if (ready) {
        order.push_back(int(b));
        done[b] = progressed = true;
      }
    }
    if (!progressed) {
      std::string names;
      for (size_t b = 0; b < n; ++b)
        if (!done[b])
          names += (names.empty() ? "'" : ", '") + states[b].name() + "'";
      user_error("fold") << context << ": the updates of states " << names
                         << " read each other's values before the step, so no order of "
                            "stores keeps them; compute one's new value as a tensor of the step "
                            "and read that instead";
    }
  }
  return order;
}

} // namespace

std::vector<Tensor> fold(const IterVar &axis, std::vector<FoldState> states, std::string name,
                         std::function<Expr(const std::vector<Var> &)> where_fn) {
  check_name(name, "fold");
  const std::string context = "fold '" + name + "'";
  user_check(axis.defined() && axis.iter_type() == IterVarType::Ordered, "fold")
      << context << ": the axis must be made with fold_axis({begin, end}, name)";
  user_check(!states.empty(), "fold") << context << " needs at least one state";
  llvm::DenseSet<const OperationNode *> state_ops;
  size_t rank = SIZE_MAX;
  const Tensor *lowest = nullptr;
  for (const FoldState &s : states) {
    user_check(s.state.defined() && s.state.op().as<FoldStateOpNode>(), "fold")
        << context << ": '" << (s.state.defined() ? s.state.name() : std::string("?"))
        << "' is not a state; make the states with fold_state(shape, dtype, name)";
    user_check(state_ops.insert(s.state.op().get()).second, "fold")
        << context << ": state '" << s.state.name() << "' is listed twice";
    user_check(s.update != nullptr, "fold")
        << context << ": state '" << s.state.name() << "' has no update";
    if (s.state.ndim() < rank) {
      rank = s.state.ndim();
      lowest = &s.state;
    }
  }
  // The shared axes: those of the state of lowest rank, which every state starts with.
  std::vector<Expr> shared = lowest->shape();
  for (const FoldState &s : states)
    for (size_t d = 0; d < rank; ++d)
      user_check(*as_const_int(s.state.shape()[d]) == *as_const_int(shared[d]), "fold")
          << context << ": states '" << lowest->name() << "' and '" << s.state.name()
          << "' differ in dimension " << d << " (" << shared[d] << " and " << s.state.shape()[d]
          << "); the states share their leading axes, those of the state of lowest rank";
  std::vector<Var> vars;
  std::vector<IterVar> shared_axis;
  for (size_t d = 0; d < rank; ++d) {
    vars.emplace_back("i" + std::to_string(d));
    shared_axis.push_back(
        IterVar::make(Range(Expr(0), shared[d]), vars.back(), IterVarType::DataPar));
  }

  std::vector<Tensor> tensors;
  std::vector<std::vector<IterVar>> extra_axis;
  std::vector<Expr> init, update;
  for (const FoldState &s : states) {
    tensors.push_back(s.state);
    const std::string sname = "state '" + s.state.name() + "' of " + context;
    std::vector<Var> own = vars;
    std::vector<IterVar> extra;
    std::vector<Expr> shape = s.state.shape();
    for (size_t d = rank; d < shape.size(); ++d) {
      own.emplace_back("i" + std::to_string(d));
      extra.push_back(IterVar::make(Range(Expr(0), shape[d]), own.back(), IterVarType::DataPar));
    }
    extra_axis.push_back(extra);
    std::optional<double> v0;
    if (s.init.defined())
      v0 = as_const_float(s.init) ? as_const_float(s.init)
           : as_const_int(s.init) ? std::optional<double>(double(*as_const_int(s.init)))
                                  : std::nullopt;
    user_check(v0.has_value(), "fold")
        << sname << ": the initial value must be a number (a constant), got "
        << (s.init.defined() ? s.init : Expr(0));
    init.push_back(make_const(s.state.dtype(), *v0));
    Expr u = s.update(own);
    user_check(u.defined() && u.type().is_scalar() && !u.type().is_handle(), "fold")
        << sname << ": the update must be a scalar value";
    post_order_visit(u, [&](const IRNode *n) {
      user_check(!llvm::isa<Reduce>(n), "fold")
          << sname << ": the update contains a reduction; compute it as a tensor of the step "
             "(with the fold's steps as its first axis) and read that tensor here";
    });
    llvm::DenseSet<const Variable *> allowed;
    for (const Var &v : own)
      allowed.insert(v.get());
    allowed.insert(axis.var().get());
    post_order_visit(u, [&](const IRNode *n) {
      if (const auto *let = llvm::dyn_cast<Let>(n))
        allowed.insert(let->var.get());
    });
    for (const Var &v : free_vars(u))
      user_check(allowed.count(v.get()), "fold")
          << sname << ": the update uses '" << v.name()
          << "', which is neither an index of the state nor the fold's axis '" << axis.var().name()
          << "'";
    update.push_back(u.type() == s.state.dtype() ? u : cast(s.state.dtype(), u));
  }

  // How the updates read the states: each at its own indices (stored in place, so a read of
  // another element would see it before or after its update depending on the loop order).
  const size_t n = states.size();
  std::vector<std::vector<bool>> reads(n, std::vector<bool>(n, false));
  for (size_t a = 0; a < n; ++a) {
    post_order_visit(update[a], [&](const IRNode *node) {
      const auto *load = llvm::dyn_cast<TensorLoad>(node);
      if (!load || !state_ops.count(load->tensor.op().get()))
        return;
      size_t b = 0;
      while (tensors[b] != load->tensor)
        ++b;
      reads[a][b] = true;
      const size_t want = a == b ? load->indices.size() : rank;
      user_check(a == b || load->indices.size() == rank, "fold")
          << "state '" << tensors[a].name() << "' of " << context << ": its update reads state '"
          << tensors[b].name() << "', which has axes of its own; a state with axes beyond the "
          << "shared ones is read only by its own update (read a tensor of the step instead)";
      for (size_t d = 0; d < want; ++d) {
        const auto *v = load->indices[d].as<Variable>();
        const Var expect = d < rank ? vars[d] : extra_axis[a][d - rank].var();
        user_check(v && v == expect.get(), "fold")
            << "state '" << tensors[a].name() << "' of " << context << ": its update reads state '"
            << tensors[b].name() << "' at index " << load->indices[d] << " in dimension " << d
            << "; a state is read at the update's own indices (" << expect.name()
            << "): the states are stored in place";
      }
    });
  }
  std::vector<int> order = store_order(reads, tensors, context);

  Expr where;
  if (where_fn) {
    where = where_fn(vars);
    user_check(where.defined() && where.type().is_bool(), "fold")
        << context << ": `where` must be a boolean condition";
    llvm::DenseSet<const Variable *> allowed;
    for (const Var &v : vars)
      allowed.insert(v.get());
    allowed.insert(axis.var().get());
    for (const Var &v : free_vars(where))
      user_check(allowed.count(v.get()), "fold")
          << context << ": `where` uses '" << v.name()
          << "', which is neither a shared axis nor the fold's axis";
    // A tensor it reads (a sequence's length from offsets) is read at the shared axes only:
    // the same for every step, so that the skipped steps are a bound of the loop.
    post_order_visit(where, [&](const IRNode *n) {
      const auto *load = llvm::dyn_cast<TensorLoad>(n);
      if (!load)
        return;
      for (const Expr &index : load->indices)
        user_check(!uses_var(index, [&](const Variable *v) { return v == axis.var().get(); }),
                   "fold")
            << context << ": `where` reads '" << load->tensor.name() << "' at " << index
            << ", which depends on the fold's axis '" << axis.var().name()
            << "'; read tensors at the shared axes only";
    });
  }

  // The tensors of the step: those reading a state hold one slice per step.
  const int64_t steps = *as_const_int(axis->dom.extent);
  std::vector<Tensor> read;
  for (const Expr &u : update)
    for (const Tensor &t : tensors_read(u))
      read.push_back(t);
  for (const auto &[op, states] : fold_states_read(topological_order(read))) {
    if (llvm::none_of(states, [&](const OperationNode *st) { return state_ops.count(st); }))
      continue;
    const Tensor t = Operation(op).output(0);
    user_check(!llvm::isa<FoldOpNode>(op), "fold")
        << context << " reads fold '" << op->name << "', which reads its states";
    user_check(*as_const_int(t.shape()[0]) == steps, "fold")
        << context << ": tensor '" << t.name() << "' reads a state, so it is a tensor of the "
        << "step: its first axis must be the fold's steps (extent " << steps << "), not "
        << t.shape()[0];
  }

  // The merge of two parts' states, where every state has one: over a scalar Var a state and
  // part.
  std::vector<Var> merge_a, merge_b;
  std::vector<Expr> merge;
  if (llvm::all_of(states, [](const FoldState &st) { return st.merge != nullptr; })) {
    std::vector<Expr> a, b;
    for (const FoldState &st : states) {
      merge_a.emplace_back(st.state.name() + ".a", st.state.dtype());
      merge_b.emplace_back(st.state.name() + ".b", st.state.dtype());
      a.push_back(merge_a.back());
      b.push_back(merge_b.back());
    }
    llvm::DenseSet<const Variable *> allowed;
    for (size_t k = 0; k < n; ++k) {
      allowed.insert(merge_a[k].get());
      allowed.insert(merge_b[k].get());
    }
    for (size_t k = 0; k < n; ++k) {
      const FoldState &st = states[k];
      const std::string sname = "state '" + st.state.name() + "' of " + context;
      Expr e = st.merge(a, b);
      user_check(e.defined() && e.type().is_scalar() && !e.type().is_handle(), "fold")
          << sname << ": the merge must be a scalar value";
      const std::vector<Var> used = free_vars(e);
      user_check(tensors_read(e).empty() &&
                     llvm::all_of(used, [&](const Var &v) { return allowed.count(v.get()); }),
                 "fold")
          << sname << ": the merge reads only the two parts' states (its arguments a and b)";
      for (const Var &v : used)
        for (size_t j = 0; j < n; ++j)
          user_check(j == k || extra_axis[j].empty() ||
                         (!v.same_as(merge_a[j]) && !v.same_as(merge_b[j])),
                     "fold")
              << sname << ": its merge reads state '" << tensors[j].name()
              << "', which has axes of its own; a merge reads, besides its own state, states of "
                 "the shared axes only";
      merge.push_back(e.type() == st.state.dtype() ? e : cast(st.state.dtype(), e));
    }
  } else {
    user_check(llvm::none_of(states, [](const FoldState &st) { return st.merge != nullptr; }),
               "fold")
        << context << ": some states have a merge and some do not; give every state one, or none";
  }

  Operation op(new FoldOpNode(std::move(name), std::move(shared_axis), axis, where,
                              std::move(tensors), std::move(extra_axis), std::move(init),
                              std::move(update), std::move(order), std::move(merge_a),
                              std::move(merge_b), std::move(merge)));
  std::vector<Tensor> out;
  for (size_t k = 0; k < n; ++k)
    out.push_back(op.output(int(k)));
  return out;
}

} // namespace tessel
