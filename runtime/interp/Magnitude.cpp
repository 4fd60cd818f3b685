#include "runtime/interp/Magnitude.h"

#include "compiler/ir/IREquality.h"
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
  if (name == "exp2" || name == "fast_exp2")
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
    if (const auto *f = t.op().as<FoldOpNode>())
      return fold_magnitude(f)[size_t(t.value_index())];
    if (t.op().as<FoldStateOpNode>()) {
      auto it = state_magnitudes_.find(t.op().get());
      internal_check(it != state_magnitudes_.end()) << "magnitude: state " << t.name();
      return it->second;
    }
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
  // The magnitude of a fold's states: a fold of its states and their magnitudes together (the
  // magnitudes' updates read the states' values, in exp(m - m_new) and the like), its outputs
  // after the states' own. An infinite initial value (a running max's -inf) is exact and gone
  // after the first step: its magnitude starts at 0.
  std::vector<Tensor> fold_magnitude(const FoldOpNode *f) {
    auto it = folds_.find(f);
    if (it != folds_.end())
      return it->second;
    const size_t n = f->states.size();
    std::vector<Tensor> mags;
    for (const Tensor &st : f->states) {
      mags.push_back(fold_state(st.shape(), F64, st.name() + ".magnitude"));
      state_magnitudes_[st.op().get()] = mags.back();
    }
    std::vector<Expr> mag_update;
    for (size_t k = 0; k < n; ++k) {
      const std::string *outer = name_;
      name_ = &f->states[k].name();
      mag_update.push_back(mag(f->update[k]));
      name_ = outer;
    }
    // The definitions above are over f's index variables; fold() gives its own.
    // f's index variables (its shared axes, then `extra`) in order, as fold() gives them.
    auto over = [&](const Expr &e, const std::vector<IterVar> &extra) {
      return [=](const std::vector<Var> &v) {
        VarMap vmap;
        for (size_t d = 0; d < f->axis.size(); ++d)
          vmap[f->axis[d].var().get()] = v[d];
        for (size_t d = 0; d < extra.size(); ++d)
          vmap[extra[d].var().get()] = v[f->axis.size() + d];
        return substitute(e, vmap);
      };
    };
    std::vector<FoldState> states;
    for (size_t k = 0; k < n; ++k)
      states.push_back({f->states[k], f->init[k], over(f->update[k], f->extra_axis[k])});
    for (size_t k = 0; k < n; ++k) {
      const double v0 = as_const_float(f->init[k]) ? *as_const_float(f->init[k])
                                                   : double(*as_const_int(f->init[k]));
      states.push_back({mags[k], f64(std::isinf(v0) ? 0.0 : std::fabs(v0)),
                        over(mag_update[k], f->extra_axis[k])});
    }
    std::function<Expr(const std::vector<Var> &)> where;
    if (f->where.defined())
      where = over(f->where, {});
    std::vector<Tensor> all = fold(f->fold_axis, std::move(states), f->name + ".magnitude", where);
    std::vector<Tensor> out(all.begin() + long(n), all.end());
    folds_[f] = out;
    return out;
  }

  Expr mag(const Expr &e) {
    if (!e.type().is_float()) // integers and booleans are exact
      return absolute(value_of(e));
    switch (e->kind()) {
    case IRNodeKind::FloatImm: // an infinity (a mask's -inf) is exact and propagates no error
      return std::isinf(e.as<FloatImm>()->value) ? f64(0) : absolute(value_of(e));
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
      if (!op->tensor.op().as<ComputeOpNode>() && !op->tensor.op().as<FoldOpNode>() &&
          !op->tensor.op().as<FoldStateOpNode>())
        return absolute(value_of(e));
      return TensorLoad::make(of(op->tensor), op->indices);
    }
    case IRNodeKind::Reduce: {
      const auto *op = e.as<Reduce>();
      // An initial value counts as one more term.
      return Reduce::make(op->combiner == Reduce::Sum ? Reduce::Sum : Reduce::Max,
                          mag(op->source), op->axis, op->condition,
                          op->init.defined() ? mag(op->init) : Expr());
    }
    default:
      user_error("magnitude") << "'" << *name_ << "': no magnitude rule for '" << e << "'";
    }
  }

  llvm::DenseMap<const OperationNode *, Tensor> tensors_;
  llvm::DenseMap<const OperationNode *, std::vector<Tensor>> folds_;
  llvm::DenseMap<const OperationNode *, Tensor> state_magnitudes_;
  llvm::DenseMap<const Variable *, Expr> let_magnitudes_;
  const std::string *name_ = nullptr;
};

} // namespace

Tensor magnitude_of(const Tensor &t) { return MagnitudeBuilder().of(t); }

Expr absolute_operand(const Expr &e) {
  const auto *m = e.as<Max>();
  const auto *neg = m ? m->b.as<Sub>() : nullptr;
  std::optional<double> zero = neg ? as_const_float(neg->a) : std::nullopt;
  return zero && *zero == 0 && structural_equal(m->a, neg->b) ? m->a : Expr();
}

} // namespace tessel
