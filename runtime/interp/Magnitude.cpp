#include "runtime/interp/Magnitude.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/Substitute.h"
#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"

#include <llvm/ADT/DenseMap.h>

#include <cmath>
#include <numbers>

namespace tessel {

namespace {

const DataType F64 = Float(64);

Expr f64(double v) { return make_const(F64, v); }
Expr value_of(const Expr &e) { return e.type() == F64 ? e : cast(F64, e); }
Expr absolute(const Expr &x) { return max(x, f64(0) - x); }
Expr math(const char *name, Expr x) { return Call::make(F64, name, {std::move(x)}, Call::PureExtern); }

// |f'(x)| for the math functions the reference evaluates, or null.
Expr derivative_magnitude(const std::string &name, const Expr &x) {
  const double ln2 = std::numbers::ln2, ln10 = std::numbers::ln10;
  if (name == "exp")
    return math("exp", x);
  if (name == "exp2")
    return f64(ln2) * math("exp2", x);
  if (name == "exp10")
    return f64(ln10) * math("exp10", x);
  if (name == "log")
    return f64(1) / absolute(x);
  if (name == "log2")
    return f64(1 / ln2) / absolute(x);
  if (name == "log10")
    return f64(1 / ln10) / absolute(x);
  if (name == "sqrt")
    return f64(0.5) * math("rsqrt", x);
  if (name == "rsqrt")
    return f64(0.5) * math("rsqrt", x) / absolute(x);
  if (name == "tanh")
    return f64(1) - math("tanh", x) * math("tanh", x);
  if (name == "sigmoid")
    return math("sigmoid", x) * (f64(1) - math("sigmoid", x));
  if (name == "erf")
    return f64(2 / std::sqrt(std::numbers::pi)) * math("exp", f64(0) - x * x);
  if (name == "sin")
    return absolute(math("cos", x));
  if (name == "cos")
    return absolute(math("sin", x));
  return Expr();
}

class MagnitudeBuilder {
public:
  Tensor of(const Tensor &t) {
    const auto *c = t.op().as<ComputeOpNode>();
    if (!c) // an input: its absolute values
      return compute_from_vars(
          t.shape(),
          [&](const std::vector<Var> &v) {
            return absolute(value_of(TensorLoad::make(t, {v.begin(), v.end()})));
          },
          t.name() + ".magnitude");
    auto it = tensors_.find(c);
    if (it != tensors_.end())
      return it->second;
    Tensor m = compute_from_vars(
        t.shape(),
        [&](const std::vector<Var> &v) {
          VarMap axes;
          for (size_t d = 0; d < v.size(); ++d)
            axes[c->axis[d].var().get()] = v[d];
          const std::string *outer = name_;
          name_ = &c->name;
          Expr m = mag(substitute(c->body, axes));
          name_ = outer;
          return m;
        },
        c->name + ".magnitude");
    tensors_[c] = m;
    return m;
  }

private:
  Expr mag(const Expr &e) {
    if (!e.type().is_float()) // integers and booleans are exact
      return absolute(value_of(e));
    switch (e->kind()) {
    case IRNodeKind::FloatImm:
      return absolute(value_of(e));
    case IRNodeKind::Var: {
      auto it = let_magnitudes_.find(e.as<Variable>());
      user_check(it != let_magnitudes_.end(), "magnitude")
          << "'" << *name_ << "': the float variable '" << e << "' is not bound by a let";
      return it->second;
    }
    case IRNodeKind::Add:
      return mag(e.as<Add>()->a) + mag(e.as<Add>()->b);
    case IRNodeKind::Sub:
      return mag(e.as<Sub>()->a) + mag(e.as<Sub>()->b);
    case IRNodeKind::Mul:
      return mag(e.as<Mul>()->a) * mag(e.as<Mul>()->b);
    case IRNodeKind::Div: {
      const auto *op = e.as<Div>();
      Expr b = absolute(value_of(op->b));
      return (mag(op->a) + absolute(value_of(e)) * mag(op->b)) / b;
    }
    case IRNodeKind::Min:
      return max(mag(e.as<Min>()->a), mag(e.as<Min>()->b));
    case IRNodeKind::Max:
      return max(mag(e.as<Max>()->a), mag(e.as<Max>()->b));
    case IRNodeKind::Select: {
      const auto *op = e.as<Select>();
      return select(op->condition, mag(op->true_value), mag(op->false_value));
    }
    case IRNodeKind::Cast: {
      const auto *op = e.as<Cast>();
      return op->value.type().is_float() ? mag(op->value) : absolute(value_of(e));
    }
    case IRNodeKind::Let: {
      const auto *op = e.as<Let>();
      Var m(op->var.name() + ".magnitude", F64);
      let_magnitudes_[op->var.get()] = m;
      Expr body = mag(op->body);
      let_magnitudes_.erase(op->var.get());
      return Let::make(op->var, op->value, Let::make(m, mag(op->value), body));
    }
    case IRNodeKind::Call: {
      const auto *op = e.as<Call>();
      if (op->is_intrinsic(intrinsic::if_then_else))
        return if_then_else(op->args[0], mag(op->args[1]), mag(op->args[2]));
      Expr d = op->args.size() == 1 ? derivative_magnitude(op->name, value_of(op->args[0]))
                                    : Expr();
      user_check(d.defined(), "magnitude")
          << "'" << *name_ << "': no magnitude rule for the call '" << op->name
          << "'; the result check needs its derivative";
      return absolute(value_of(e)) + d * mag(op->args[0]);
    }
    case IRNodeKind::TensorLoad: {
      const auto *op = e.as<TensorLoad>();
      if (!op->tensor.op().as<ComputeOpNode>())
        return absolute(value_of(e));
      return TensorLoad::make(of(op->tensor), op->indices);
    }
    case IRNodeKind::Reduce: {
      const auto *op = e.as<Reduce>();
      return Reduce::make(op->combiner == Reduce::Sum ? Reduce::Sum : Reduce::Max,
                          mag(op->source), op->axis, op->condition);
    }
    default:
      user_error("magnitude") << "'" << *name_ << "': no magnitude rule for '" << e << "'";
    }
  }

  llvm::DenseMap<const OperationNode *, Tensor> tensors_;
  llvm::DenseMap<const Variable *, Expr> let_magnitudes_;
  const std::string *name_ = nullptr;
};

} // namespace

Tensor magnitude_of(const Tensor &t) { return MagnitudeBuilder().of(t); }

} // namespace tessel
