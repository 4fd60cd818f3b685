#include "compiler/te/Compute.h"

#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Substitute.h"
#include "compiler/support/Error.h"

#include <llvm/ADT/DenseSet.h>

#include <cstdint>

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

Expr sum(Expr source, std::vector<IterVar> axis, Expr where) {
  return Reduce::make(Reduce::Sum, std::move(source), std::move(axis), std::move(where));
}
Expr max(Expr source, std::vector<IterVar> axis, Expr where) {
  return Reduce::make(Reduce::Max, std::move(source), std::move(axis), std::move(where));
}
Expr min(Expr source, std::vector<IterVar> axis, Expr where) {
  return Reduce::make(Reduce::Min, std::move(source), std::move(axis), std::move(where));
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

} // namespace tessel
