// The reference evaluator. Each compute body is compiled once into a closure tree (one virtual
// call per node, variables in a flat frame of slots), so an element costs no map lookups. A
// load whose indices are affine in the loop variables and provably inside the tensor (interval
// bounds over the loop domains) becomes one dot product with no per-element check; other loads
// evaluate and check each index. A float sum of two loads over the last reduce axis (every
// contraction, and its magnitude) runs as a strided loop over the operands, with no closure
// call per term: that is most of what every executor test's check costs.
#include "runtime/interp/Reference.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/ir/Substitute.h"
#include "compiler/support/Error.h"
#include "compiler/te/Operation.h"
#include "runtime/Half.h"
#include "runtime/interp/HalfFloat.h"
#include "runtime/interp/Magnitude.h"
#include "runtime/interp/Machine.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/Support/Parallel.h>

#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

namespace tessel {

int64_t HostTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t e : shape)
    n *= e;
  return n;
}

std::vector<double> HostTensor::in_storage(const std::vector<int64_t> &strides) const {
  if (strides.empty())
    return values;
  internal_check(strides.size() == shape.size() && int64_t(values.size()) == num_elements())
      << "in_storage: " << strides.size() << " strides for " << shape.size() << " dimensions";
  std::vector<double> out(size_t(storage_elements(shape, strides)), std::nan(""));
  std::vector<int64_t> at(shape.size(), 0);
  for (double v : values) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      off += at[d] * strides[d];
    out[size_t(off)] = v;
    for (size_t d = shape.size(); d-- > 0;) // the next index, row-major
      if (++at[d] < shape[d])
        break;
      else
        at[d] = 0;
  }
  return out;
}

namespace {

/// A value of any scalar type: floats in `f` (a double), integers and bools in `i` (uint64
/// values by their bits).
union Scalar {
  double f;
  int64_t i;
};
Scalar float_value(double f) { return Scalar{.f = f}; }
Scalar int_value(int64_t i) { return Scalar{.i = i}; }

/// Integers are computed in int64 and brought back into their type after every operation, so
/// they wrap as the generated C does.
int64_t wrap(int64_t v, DataType t) {
  if (t.is_bool())
    return v != 0;
  const int bits = t.bits();
  if (bits >= 64)
    return v;
  uint64_t u = uint64_t(v) & ((uint64_t(1) << bits) - 1);
  if (t.is_uint())
    return int64_t(u);
  uint64_t sign = uint64_t(1) << (bits - 1);
  return int64_t((u ^ sign) - sign); // sign-extends
}

/// Rounds to the float type `t` directly from double (through float would round twice).
double round_to(DataType t, double x) {
  if (t.is_bfloat())
    return interp::round_to_bfloat16(x);
  if (t.is_float8()) // to nearest even, saturating (as the GPU's cvt.rn.satfinite)
    return t.code() == DataType::Float8E4M3 ? round_to_e4m3(x) : round_to_e5m2(x);
  switch (t.bits()) {
  case 16:
    return interp::round_to_half(x);
  case 32:
    return interp::round_to_float(x);
  case 64:
    return x;
  }
  internal_error << "reference: no float type " << t;
}

/// Every value of float type `from` is a value of float type `to`.
bool float_contains(DataType to, DataType from) {
  if (to == from || to.bits() == 64)
    return true;
  // An 8-bit float is a value of each wider float type (e4m3 and e5m2 not of each other).
  if (from.is_float8())
    return !to.is_float8();
  return to.bits() == 32 && !to.is_bfloat() && from.bits() == 16;
}

bool representable(double v, DataType t) {
  if (t.is_float())
    return std::isnan(v) || round_to(t, v) == v;
  if (t.is_bool())
    return v == 0 || v == 1;
  return std::floor(v) == v && v >= double(t.min_int()) && v <= double(t.max_int());
}

Scalar from_double(double v, DataType t) {
  if (t.is_float())
    return float_value(v);
  return int_value(t.is_uint() && v >= 0x1p63 ? int64_t(uint64_t(v)) : int64_t(v));
}

double to_double(Scalar s, DataType t) {
  if (t.is_float())
    return s.f;
  return t.is_uint() ? double(uint64_t(s.i)) : double(s.i);
}

std::string shape_str(llvm::ArrayRef<int64_t> v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i)
    os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}


/// The evaluated values of one tensor.
struct TensorData {
  std::string name;
  DataType dtype;
  std::vector<int64_t> shape, strides;
  std::vector<Scalar> values;
  /// Every float value is exactly a value of dtype (inputs, casts, constants, max/min of those),
  /// so a cast to a wider float type is the identity and can be skipped.
  bool exact = false;

  TensorData(std::string name, DataType dtype, std::vector<int64_t> shape_)
      : name(std::move(name)), dtype(dtype), shape(std::move(shape_)), strides(shape.size()) {
    int64_t n = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      strides[d] = n;
      n *= shape[d];
    }
    values.resize(size_t(n));
  }
};

// ---------------------------------------------------------------------------------------------
// Code: compiled expressions
// ---------------------------------------------------------------------------------------------

class Code {
public:
  virtual ~Code() = default;
  /// `frame` holds the loop and let variables, one slot each.
  virtual Scalar eval(Scalar *frame) const = 0;
};
using CodePtr = std::unique_ptr<const Code>;

/// A node of the closure tree: `f` computes the node from the frame, calling its children.
template <typename F> class Closure final : public Code {
public:
  explicit Closure(F f) : f_(std::move(f)) {}
  Scalar eval(Scalar *frame) const override { return f_(frame); }

private:
  F f_;
};
template <typename F> CodePtr closure(F f) { return std::make_unique<Closure<F>>(std::move(f)); }

// Integer division on int64 or uint64 operands; -1 divisors go through negation, so
// INT64_MIN / -1 wraps instead of trapping.
template <typename T> T trunc_div(T x, T y) {
  if constexpr (std::is_signed_v<T>)
    if (y == -1)
      return T(0 - uint64_t(x));
  return x / y;
}
template <typename T> T trunc_mod(T x, T y) {
  if constexpr (std::is_signed_v<T>)
    if (y == -1)
      return 0;
  return x % y;
}
template <typename T> T floor_div(T x, T y) {
  T q = trunc_div(x, y);
  if constexpr (std::is_signed_v<T>)
    if (y != -1 && x % y != 0 && ((x < 0) != (y < 0)))
      return q - 1;
  return q;
}
template <typename T> T floor_mod(T x, T y) {
  T r = trunc_mod(x, y);
  if constexpr (std::is_signed_v<T>)
    if (r != 0 && ((r < 0) != (y < 0)))
      return r + y;
  return r;
}

/// For the integer-only nodes (Mod, FloorDiv, FloorMod, And, Or).
struct NoFloat {};

/// a OP b: FF on doubles for floats; IF on int64 (uint64 for unsigned types) for integers, the
/// result wrapped to `t`. `div_context` names the tensor for a division-by-zero error.
template <typename FF, typename IF>
CodePtr binary(CodePtr a, CodePtr b, DataType t, FF ff, IF iff, const std::string *div_context) {
  if (t.is_float()) {
    if constexpr (std::is_same_v<FF, NoFloat>)
      internal_error << "reference: an integer-only operation of type " << t;
    else
      return closure([a = std::move(a), b = std::move(b), ff](Scalar *fr) {
        return float_value(ff(a->eval(fr).f, b->eval(fr).f));
      });
  }
  auto make = [&](auto zero) {
    using T = decltype(zero);
    return closure([a = std::move(a), b = std::move(b), t, iff, div_context](Scalar *fr) {
      T x = T(a->eval(fr).i), y = T(b->eval(fr).i);
      if (div_context)
        user_check(y != 0, "reference") << "'" << *div_context << "': integer division by zero";
      return int_value(wrap(int64_t(iff(x, y)), t));
    });
  };
  return t.is_uint() ? make(uint64_t(0)) : make(int64_t(0));
}

/// A load whose indices are evaluated and checked one by one.
CodePtr checked_load(const TensorData *t, std::vector<CodePtr> idx, const std::string *reader) {
  return closure([t, idx = std::move(idx), reader](Scalar *fr) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      int64_t v = idx[d]->eval(fr).i;
      if (v < 0 || v >= t->shape[d]) {
        std::vector<int64_t> at;
        for (const CodePtr &c : idx)
          at.push_back(c->eval(fr).i);
        user_error("reference") << "'" << *reader << "' reads '" << t->name << "' at "
                                << shape_str(at) << ", outside its shape " << shape_str(t->shape);
      }
      off += v * t->strides[d];
    }
    return t->values[size_t(off)];
  });
}

// ---------------------------------------------------------------------------------------------
// Affine index forms
// ---------------------------------------------------------------------------------------------

/// c + sum(coefficient * slot) over loop variables, with the interval [lo, hi] it spans over
/// the loop domains. Only built when no subexpression leaves its type's range, so wrapping
/// arithmetic and exact arithmetic agree.
struct Affine {
  int64_t c = 0;
  llvm::SmallVector<std::pair<int, int64_t>, 8> terms;
  int64_t lo = 0, hi = 0;
};

/// a += k * b, merging terms of the same slot; false on int64 overflow.
bool add_scaled(Affine &a, const Affine &b, int64_t k) {
  int64_t kc;
  if (__builtin_mul_overflow(b.c, k, &kc) || __builtin_add_overflow(a.c, kc, &a.c))
    return false;
  for (auto [slot, coef] : b.terms) {
    int64_t kcoef;
    if (__builtin_mul_overflow(coef, k, &kcoef))
      return false;
    auto it = llvm::find_if(a.terms, [&](const auto &t) { return t.first == slot; });
    if (it == a.terms.end())
      a.terms.push_back({slot, kcoef});
    else if (__builtin_add_overflow(it->second, kcoef, &it->second))
      return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Dot products
// ---------------------------------------------------------------------------------------------

/// e's coefficient of `k` where e is linear in it (free of k, k itself, a sum or difference of
/// linear terms, or a constant times one); nullopt otherwise.
std::optional<int64_t> linear_coefficient(const Expr &e, const Variable *k) {
  if (!uses_var(e, [k](const Variable *v) { return v == k; }))
    return 0;
  if (e.as<Variable>())
    return 1; // k itself
  auto both = [&](const Expr &a, const Expr &b, int64_t sign) -> std::optional<int64_t> {
    auto x = linear_coefficient(a, k), y = linear_coefficient(b, k);
    int64_t r;
    if (!x || !y || __builtin_mul_overflow(*y, sign, &r) || __builtin_add_overflow(*x, r, &r))
      return std::nullopt;
    return r;
  };
  if (const auto *op = e.as<Add>())
    return both(op->a, op->b, 1);
  if (const auto *op = e.as<Sub>())
    return both(op->a, op->b, -1);
  if (const auto *op = e.as<Mul>()) {
    auto scaled = [&](const Expr &x, const Expr &c) -> std::optional<int64_t> {
      auto f = linear_coefficient(x, k);
      auto v = as_const_int(c);
      int64_t r;
      if (!f || !v || __builtin_mul_overflow(*f, *v, &r))
        return std::nullopt;
      return r;
    };
    return as_const_int(op->b) ? scaled(op->a, op->b) : scaled(op->b, op->a);
  }
  if (const auto *op = e.as<Cast>(); op && op->type.is_integer_like() && !op->type.is_bool())
    return linear_coefficient(op->value, k);
  return std::nullopt;
}

/// One operand of a dot product: a float tensor read at indices linear in the reduction's last
/// axis k, so that its elements over k are one strided run.
struct DotOperand {
  const TensorData *t = nullptr;
  std::vector<CodePtr> idx;  ///< the indices, evaluated at both ends of k
  std::vector<int64_t> coef; ///< each index's coefficient of k
  bool absolute = false;     ///< the value's magnitude, max(v, 0 - v)

  /// The run's first offset and its step, where k (the frame's slot `k`) runs over [lo, hi];
  /// false where an end lies outside the tensor or the indices at k = hi are not those at lo
  /// plus coef times (hi - lo) (an index that wrapped), for the caller to evaluate the
  /// elements one by one (which reports a read outside the tensor).
  bool locate(Scalar *fr, int k, int64_t lo, int64_t hi, int64_t &first, int64_t &step) const {
    first = step = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      fr[k].i = lo;
      const int64_t a = idx[d]->eval(fr).i;
      fr[k].i = hi;
      const int64_t b = idx[d]->eval(fr).i, n = t->shape[d];
      int64_t span;
      if (a < 0 || a >= n || b < 0 || b >= n || __builtin_mul_overflow(coef[d], hi - lo, &span) ||
          b - a != span)
        return false;
      first += a * t->strides[d];
      step += coef[d] * t->strides[d];
    }
    return true;
  }
};

/// sum(x * y) over the reduction's last axis: what the closure tree computes, a product in
/// double added in double at each k in order, without a virtual call per node. Contractions
/// (GEMM, convolution's implicit GEMM, attention's two products) and their magnitudes (the
/// sums of |x| |y| the tolerances scale with) spend nearly all of a reference's time there.
struct DotProduct {
  DotOperand x, y;
};

// ---------------------------------------------------------------------------------------------
// Compiling a compute body
// ---------------------------------------------------------------------------------------------

class Evaluator;

class BodyCompiler {
public:
  BodyCompiler(const Evaluator &ev, const std::string *name) : ev_(ev), name_(name) {}

  /// A slot for a loop variable that runs over [lo, hi].
  int bind_loop_var(const Var &v, int64_t lo, int64_t hi) {
    int s = new_slot(v);
    ranges_[s] = {lo, hi};
    return s;
  }
  int num_slots() const { return int(ranges_.size()); }

  CodePtr compile(const Expr &e);
  /// Whether e's float value is always exactly a value of its type.
  bool exact(const Expr &e) const;
  /// The dot product a sum's `source` is over its last axis `k`: two float loads (through
  /// widening casts that change nothing) multiplied, each index linear in k; null otherwise.
  std::unique_ptr<DotProduct> dot_product(const Expr &source, const Var &k);

private:
  int new_slot(const Var &v) {
    int s = num_slots();
    slots_[v.get()] = s;
    ranges_.push_back(std::nullopt);
    return s;
  }
  CodePtr compile_load(const TensorLoad *op);
  CodePtr compile_cast(const Cast *op);
  std::optional<Affine> affine(const Expr &e) const;
  bool finish(Affine &a, DataType t) const;

  const Evaluator &ev_;
  const std::string *name_;
  llvm::DenseMap<const Variable *, int> slots_;
  std::vector<std::optional<std::pair<int64_t, int64_t>>> ranges_;
};

/// Evaluates tensors in dependency order, each once, keeping every one it evaluated.
class Evaluator {
public:
  explicit Evaluator(const std::map<const OperationNode *, const HostTensor *> &inputs)
      : inputs_(inputs) {}

  /// The output's values; with `at`, only those elements (row-major indices) of it, every
  /// other tensor still in full.
  std::vector<double> run(const Tensor &output, const std::vector<int64_t> *at = nullptr) {
    user_check(output.defined(), "reference") << "the output tensor is undefined";
    const std::vector<Operation> order = topological_order({output});
    // The tensors of a fold's step are evaluated by the fold, one step's slice at a time.
    const auto in_step = fold_states_read(order);
    for (const Operation &op : order) {
      if (op.as<FoldStateOpNode>() || (op.as<ComputeOpNode>() && in_step.count(op.get())))
        continue;
      if (const auto *ph = op.as<PlaceholderOpNode>())
        bind(ph, op.output(0), output.name());
      else if (const auto *c = op.as<ComputeOpNode>())
        compute(c, op.output(0), op.get() == output.op().get() ? at : nullptr);
      else if (const auto *f = op.as<FoldOpNode>())
        fold(f, order, in_step);
      else
        internal_error << "reference: unknown operation " << op.name();
    }
    const TensorData &t = data(storage_of(output));
    std::vector<double> out(at ? at->size() : t.values.size());
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = to_double(t.values[at ? size_t((*at)[i]) : i], t.dtype);
    return out;
  }

  /// The operation whose data holds `t`: a fold's output k is its state k.
  static const OperationNode *storage_of(const Tensor &t) {
    if (const auto *f = t.op().as<FoldOpNode>())
      return f->states[size_t(t.value_index())].op().get();
    return t.op().get();
  }

  const TensorData &data(const OperationNode *op) const {
    auto it = tensors_.find(op);
    internal_check(it != tensors_.end()) << "reference: '" << op->name << "' read before evaluated";
    return *it->second;
  }

private:
  void bind(const PlaceholderOpNode *ph, const Tensor &t, const std::string &output) {
    auto it = inputs_.find(ph);
    user_check(it != inputs_.end() && it->second, "reference")
        << "no input given for placeholder '" << ph->name << "', which '" << output << "' reads";
    const HostTensor &in = *it->second;
    auto td = std::make_unique<TensorData>(ph->name, ph->dtype, constant_shape(t));
    user_check(in.dtype == ph->dtype, "reference")
        << "the input for '" << ph->name << "' is " << in.dtype << " but the placeholder is "
        << ph->dtype;
    user_check(in.shape == td->shape && in.values.size() == td->values.size(), "reference")
        << "the input for '" << ph->name << "' has shape " << shape_str(in.shape) << " and "
        << in.values.size() << " values; the placeholder's shape is " << shape_str(td->shape);
    for (size_t i = 0; i < in.values.size(); ++i) {
      // The kernel can only be given values of the dtype: a reference on others checks nothing.
      user_check(representable(in.values[i], in.dtype), "reference")
          << "input '" << ph->name << "' element " << i << " = " << in.values[i]
          << " is not a " << in.dtype << " value; round it to the type (random_tensor does)";
      td->values[i] = from_double(in.values[i], in.dtype);
    }
    td->exact = true;
    tensors_[ph] = std::move(td);
  }

  void compute(const ComputeOpNode *op, const Tensor &t, const std::vector<int64_t> *at) {
    auto td = std::make_unique<TensorData>(op->name, t.dtype(), constant_shape(t));
    BodyCompiler bc(*this, &td->name);
    const size_t rank = op->axis.size();
    for (size_t d = 0; d < rank; ++d)
      bc.bind_loop_var(op->axis[d].var(), 0, td->shape[d] - 1);
    td->exact = bc.exact(op->body);

    ReduceLoop rl;
    CodePtr body, cond, init;
    std::unique_ptr<DotProduct> dot;
    const Reduce *red = op->reduction();
    if (red) {
      rl.combiner = red->combiner;
      rl.type = td->dtype;
      rl.first_slot = int(rank);
      for (const IterVar &iv : red->axis) {
        auto mn = as_const_int(iv.dom().min), ext = as_const_int(iv.dom().extent);
        internal_check(mn && ext && *ext > 0) << "reference: reduce axis " << iv.name();
        bc.bind_loop_var(iv.var(), *mn, *mn + *ext - 1);
        rl.mins.push_back(*mn);
        rl.ends.push_back(*mn + *ext);
      }
      Expr id = Reduce::identity(red->combiner, td->dtype);
      rl.init = td->dtype.is_float() ? float_value(*as_const_float(id)) : int_value(*as_const_int(id));
      if (red->init.defined()) { // the element's own initial value (init=)
        init = bc.compile(red->init);
        rl.init_value = init.get();
      }
      body = bc.compile(red->source);
      if (!is_const_int(red->condition, 1))
        cond = bc.compile(red->condition);
      rl.source = body.get();
      rl.cond = cond.get();
      if (red->combiner == Reduce::Sum && td->dtype.is_float() && !cond)
        dot = bc.dot_product(red->source, red->axis.back().var());
      rl.dot = dot.get();
    } else {
      body = bc.compile(op->body);
    }

    if (at) // only these elements
      for (int64_t flat : *at)
        user_check(flat >= 0 && size_t(flat) < td->values.size(), "reference")
            << "element " << flat << " asked of '" << td->name << "', which has "
            << td->values.size();
    // Elements [begin, end) of the list (`at`) or of the tensor, each computed alone (so the
    // values do not depend on how the elements are split over threads), in a frame of its own.
    TensorData &out = *td;
    auto run = [&](size_t begin, size_t end) {
      std::vector<Scalar> frame(size_t(bc.num_slots()), int_value(0));
      Scalar *fr = frame.data();
      for (size_t n = begin; n < end; ++n) {
        const int64_t flat = at ? (*at)[n] : int64_t(n);
        // The indices of the first element; after it, an odometer (last fastest) where the
        // elements are consecutive.
        if (n == begin || at)
          for (size_t d = 0; d < rank; ++d)
            fr[d].i = flat / out.strides[d] % out.shape[d];
        out.values[size_t(flat)] = red ? reduce(rl, fr) : body->eval(fr);
        if (!at)
          for (size_t d = rank; d-- > 0;) {
            if (++fr[d].i < out.shape[d])
              break;
            fr[d].i = 0;
          }
      }
    };
    int64_t per_element = 1;
    for (size_t k = 0; k < rl.mins.size(); ++k)
      per_element *= rl.ends[k] - rl.mins[k];
    in_parallel(at ? at->size() : out.values.size(), per_element, run);
    tensors_[op] = std::move(td);
  }

  // run(begin, end) over [0, count) in chunks on the machine's threads where the work (count
  // times `per_element` iterations) is worth it; the first exception a chunk throws is
  // rethrown here.
  static void in_parallel(size_t count, int64_t per_element,
                          const std::function<void(size_t, size_t)> &run) {
    constexpr double kSerialWork = 1 << 16;
    const size_t threads = std::max(1u, std::thread::hardware_concurrency());
    if (threads == 1 || double(count) * double(per_element) < kSerialWork || count < 2)
      return run(0, count);
    const size_t chunks = std::min(count, 8 * threads), size = (count + chunks - 1) / chunks;
    std::mutex m;
    std::exception_ptr error;
    llvm::parallelForEachN(0, chunks, [&](size_t c) {
      try {
        run(c * size, std::min(count, (c + 1) * size));
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error)
          error = std::current_exception();
      }
    });
    if (error)
      std::rethrow_exception(error);
  }

  // The states start at their initial values; at each step t the step's tensors (in `order`)
  // are evaluated at their slice t, then every state takes its update at once (from the
  // values before the step) where `where` holds.
  void fold(const FoldOpNode *f, const std::vector<Operation> &order,
            const llvm::DenseMap<const OperationNode *, llvm::DenseSet<const OperationNode *>>
                &in_step) {
    const size_t n = f->states.size();
    std::vector<TensorData *> state(n);
    for (size_t k = 0; k < n; ++k) {
      const Tensor &st = f->states[k];
      auto td = std::make_unique<TensorData>(st.name(), st.dtype(), constant_shape(st));
      const Expr &init = f->init[k]; // a constant of the state's type (fold())
      const double v0 = as_const_float(init) ? *as_const_float(init) : double(*as_const_int(init));
      for (Scalar &v : td->values)
        v = st.dtype().is_float() ? float_value(v0) : int_value(int64_t(v0));
      state[k] = td.get();
      tensors_[st.op().get()] = std::move(td);
    }
    // This fold's step: the tensors that read its states and no other fold's.
    std::vector<const ComputeOpNode *> step;
    for (const Operation &op : order) {
      const auto *c = op.as<ComputeOpNode>();
      auto it = c ? in_step.find(c) : in_step.end();
      if (it != in_step.end() && llvm::all_of(it->second, [&](const OperationNode *st) {
            return f->state_index(st) >= 0;
          }))
        step.push_back(c);
    }
    const int64_t steps = *as_const_int(f->fold_axis->dom.extent);
    const size_t shared = f->axis.size();
    for (int64_t t = 0; t < steps; ++t) {
      for (const ComputeOpNode *c : step) {
        const Tensor out = Operation(c).output(0);
        std::vector<int64_t> shape = constant_shape(out), slice;
        int64_t inner = 1;
        for (size_t d = 1; d < shape.size(); ++d)
          inner *= shape[d];
        for (int64_t e = 0; e < inner; ++e)
          slice.push_back(t * inner + e);
        compute(c, out, &slice);
      }
      std::vector<std::vector<Scalar>> next(n);
      for (size_t k = 0; k < n; ++k) {
        TensorData &td = *state[k];
        BodyCompiler bc(*this, &td.name);
        for (size_t d = 0; d < td.shape.size(); ++d)
          bc.bind_loop_var(d < shared ? f->axis[d].var() : f->extra_axis[k][d - shared].var(), 0,
                           td.shape[d] - 1);
        const int fold_slot = bc.bind_loop_var(f->fold_axis.var(), t, t);
        CodePtr update = bc.compile(f->update[k]);
        CodePtr where = f->where.defined() ? bc.compile(f->where) : nullptr;
        std::vector<Scalar> frame(size_t(bc.num_slots()), int_value(0));
        frame[size_t(fold_slot)].i = t;
        next[k] = td.values;
        for (size_t e = 0; e < td.values.size(); ++e) {
          for (size_t d = 0; d < td.shape.size(); ++d)
            frame[d].i = int64_t(e) / td.strides[d] % td.shape[d];
          if (!where || where->eval(frame.data()).i)
            next[k][e] = update->eval(frame.data());
        }
      }
      for (size_t k = 0; k < n; ++k) // in place: compiled loads hold the values' address
        std::copy(next[k].begin(), next[k].end(), state[k]->values.begin());
    }
  }

  struct ReduceLoop {
    Reduce::Combiner combiner = Reduce::Sum;
    DataType type;
    Scalar init = int_value(0);
    const Code *init_value = nullptr; ///< an initial value per element; null: `init`
    const Code *source = nullptr, *cond = nullptr; ///< cond is null when always true
    const DotProduct *dot = nullptr; ///< a float sum's source as a dot product over the last axis
    int first_slot = 0;                            ///< the reduce axes' slots follow
    std::vector<int64_t> mins, ends;
  };

  template <typename Combine>
  static Scalar reduce_loop(const ReduceLoop &r, Scalar *fr, Combine combine) {
    Scalar acc = r.init_value ? r.init_value->eval(fr) : r.init;
    Scalar *ax = fr + r.first_slot;
    const size_t n = r.mins.size();
    for (size_t k = 0; k < n; ++k)
      ax[k].i = r.mins[k];
    do {
      if (!r.cond || r.cond->eval(fr).i)
        acc = combine(acc, r.source->eval(fr));
    } while (advance(r, ax, n));
    return acc;
  }

  /// The next point of the first `n` reduce axes (`ax`, the last fastest); false, every axis
  /// back at its min, after the last.
  static bool advance(const ReduceLoop &r, Scalar *ax, size_t n) {
    for (size_t k = n; k > 0; --k) {
      if (++ax[k - 1].i < r.ends[k - 1])
        return true;
      ax[k - 1].i = r.mins[k - 1];
    }
    return false;
  }

  /// A float sum whose source is r.dot: the outer axes as reduce_loop walks them, the last one
  /// a strided run of each operand (the closure tree where an operand cannot be located).
  static Scalar dot_loop(const ReduceLoop &r, Scalar *fr) {
    double acc = (r.init_value ? r.init_value->eval(fr) : r.init).f;
    const DotProduct &dot = *r.dot;
    Scalar *ax = fr + r.first_slot;
    const size_t n = r.mins.size(), last = n - 1;
    const int k = r.first_slot + int(last);
    const int64_t lo = r.mins[last], hi = r.ends[last] - 1;
    for (size_t a = 0; a < last; ++a)
      ax[a].i = r.mins[a];
    do {
      int64_t xo, xs, yo, ys;
      if (dot.x.locate(fr, k, lo, hi, xo, xs) && dot.y.locate(fr, k, lo, hi, yo, ys)) {
        const Scalar *x = dot.x.t->values.data() + xo, *y = dot.y.t->values.data() + yo;
        auto run = [&](auto abs_x, auto abs_y) {
          for (int64_t e = 0; e <= hi - lo; ++e) {
            double a = x[e * xs].f, b = y[e * ys].f;
            if constexpr (abs_x)
              a = std::fmax(a, 0.0 - a);
            if constexpr (abs_y)
              b = std::fmax(b, 0.0 - b);
            const double p = a * b;
            acc += p;
          }
        };
        using Yes = std::true_type;
        using No = std::false_type;
        if (dot.x.absolute)
          dot.y.absolute ? run(Yes{}, Yes{}) : run(Yes{}, No{});
        else
          dot.y.absolute ? run(No{}, Yes{}) : run(No{}, No{});
      } else {
        for (fr[k].i = lo; fr[k].i <= hi; ++fr[k].i)
          acc += r.source->eval(fr).f;
      }
    } while (advance(r, ax, last));
    return float_value(acc);
  }

  /// One output element of a reduction. Floats combine in double; integers wrap to the type.
  static Scalar reduce(const ReduceLoop &r, Scalar *fr) {
    const DataType t = r.type;
    const bool fl = t.is_float(), u = t.is_uint();
    switch (r.combiner) {
    case Reduce::Sum:
      if (r.dot)
        return dot_loop(r, fr);
      if (fl)
        return reduce_loop(r, fr, [](Scalar a, Scalar b) { return float_value(a.f + b.f); });
      return reduce_loop(r, fr, [t](Scalar a, Scalar b) {
        return int_value(wrap(int64_t(uint64_t(a.i) + uint64_t(b.i)), t));
      });
    case Reduce::Max:
      if (fl)
        return reduce_loop(r, fr, [](Scalar a, Scalar b) { return float_value(std::fmax(a.f, b.f)); });
      if (u)
        return reduce_loop(r, fr, [](Scalar a, Scalar b) { return uint64_t(a.i) < uint64_t(b.i) ? b : a; });
      return reduce_loop(r, fr, [](Scalar a, Scalar b) { return a.i < b.i ? b : a; });
    case Reduce::Min:
      if (fl)
        return reduce_loop(r, fr, [](Scalar a, Scalar b) { return float_value(std::fmin(a.f, b.f)); });
      if (u)
        return reduce_loop(r, fr, [](Scalar a, Scalar b) { return uint64_t(b.i) < uint64_t(a.i) ? b : a; });
      return reduce_loop(r, fr, [](Scalar a, Scalar b) { return b.i < a.i ? b : a; });
    }
    internal_error << "reference: bad combiner";
  }

  const std::map<const OperationNode *, const HostTensor *> &inputs_;
  llvm::DenseMap<const OperationNode *, std::unique_ptr<TensorData>> tensors_;
};

CodePtr BodyCompiler::compile(const Expr &e) {
  internal_check(e.defined()) << "reference: undefined expression in '" << *name_ << "'";
  const DataType t = e.type();
  user_check(t.is_scalar(), "reference")
      << "'" << *name_ << "': vector expressions (" << t << ") are not expected in a definition";
  auto bin = [&](const auto *op, auto ff, auto iff, bool divides = false) {
    return binary(compile(op->a), compile(op->b), t, ff, iff, divides ? name_ : nullptr);
  };
  // Comparisons: on doubles, int64 or uint64 as the operands' type says.
  auto cmp = [&](const auto *op, auto f) -> CodePtr {
    CodePtr a = compile(op->a), b = compile(op->b);
    const DataType ot = op->a.type();
    if (ot.is_float())
      return closure([a = std::move(a), b = std::move(b), f](Scalar *fr) {
        return int_value(f(a->eval(fr).f, b->eval(fr).f));
      });
    if (ot.is_uint())
      return closure([a = std::move(a), b = std::move(b), f](Scalar *fr) {
        return int_value(f(uint64_t(a->eval(fr).i), uint64_t(b->eval(fr).i)));
      });
    return closure([a = std::move(a), b = std::move(b), f](Scalar *fr) {
      return int_value(f(a->eval(fr).i, b->eval(fr).i));
    });
  };
  auto add = [](auto x, auto y) { return decltype(x)(uint64_t(x) + uint64_t(y)); };
  auto sub = [](auto x, auto y) { return decltype(x)(uint64_t(x) - uint64_t(y)); };
  auto mul = [](auto x, auto y) { return decltype(x)(uint64_t(x) * uint64_t(y)); };
  auto imin = [](auto x, auto y) { return y < x ? y : x; };
  auto imax = [](auto x, auto y) { return x < y ? y : x; };
  // fmin/fmax as CUDA's min/max on floats: a NaN operand loses.
  auto fmin = [](double x, double y) { return std::fmin(x, y); };
  auto fmax = [](double x, double y) { return std::fmax(x, y); };

  switch (e->kind()) {
  case IRNodeKind::IntImm:
    return closure([v = int_value(wrap(e.as<IntImm>()->value, t))](Scalar *) { return v; });
  case IRNodeKind::FloatImm: {
    // A constant of a narrow type is that type's value, wherever it is used.
    Scalar v = float_value(round_to(t, e.as<FloatImm>()->value));
    return closure([v](Scalar *) { return v; });
  }
  case IRNodeKind::Var: {
    const auto *v = e.as<Variable>();
    auto it = slots_.find(v);
    user_check(it != slots_.end(), "reference")
        << "'" << *name_ << "': variable '" << v->name
        << "' is used where nothing binds it (outside its let, or not an axis of the compute)";
    return closure([slot = it->second](Scalar *fr) { return fr[slot]; });
  }
  case IRNodeKind::Add:
    return bin(e.as<Add>(), std::plus<>{}, add);
  case IRNodeKind::Sub:
    return bin(e.as<Sub>(), std::minus<>{}, sub);
  case IRNodeKind::Mul:
    return bin(e.as<Mul>(), std::multiplies<>{}, mul);
  case IRNodeKind::Div:
    return bin(e.as<Div>(), std::divides<>{}, [](auto x, auto y) { return trunc_div(x, y); }, true);
  case IRNodeKind::Mod:
    return bin(e.as<Mod>(), NoFloat{}, [](auto x, auto y) { return trunc_mod(x, y); }, true);
  case IRNodeKind::FloorDiv:
    return bin(e.as<FloorDiv>(), NoFloat{}, [](auto x, auto y) { return floor_div(x, y); }, true);
  case IRNodeKind::FloorMod:
    return bin(e.as<FloorMod>(), NoFloat{}, [](auto x, auto y) { return floor_mod(x, y); }, true);
  case IRNodeKind::Min:
    return bin(e.as<Min>(), fmin, imin);
  case IRNodeKind::Max:
    return bin(e.as<Max>(), fmax, imax);
  // Logic evaluates both operands: a read out of range in either is reported.
  case IRNodeKind::And:
    return bin(e.as<And>(), NoFloat{}, [](auto x, auto y) { return decltype(x)(x && y); });
  case IRNodeKind::Or:
    return bin(e.as<Or>(), NoFloat{}, [](auto x, auto y) { return decltype(x)(x || y); });
  case IRNodeKind::EQ:
    return cmp(e.as<EQ>(), std::equal_to<>{});
  case IRNodeKind::NE:
    return cmp(e.as<NE>(), std::not_equal_to<>{});
  case IRNodeKind::LT:
    return cmp(e.as<LT>(), std::less<>{});
  case IRNodeKind::LE:
    return cmp(e.as<LE>(), std::less_equal<>{});
  case IRNodeKind::GT:
    return cmp(e.as<GT>(), std::greater<>{});
  case IRNodeKind::GE:
    return cmp(e.as<GE>(), std::greater_equal<>{});
  case IRNodeKind::Not:
    return closure([a = compile(e.as<Not>()->a)](Scalar *fr) { return int_value(!a->eval(fr).i); });
  case IRNodeKind::Select: {
    // Both sides are evaluated, as the IR says: a read out of range on either is reported.
    const auto *op = e.as<Select>();
    return closure([c = compile(op->condition), a = compile(op->true_value),
                    b = compile(op->false_value)](Scalar *fr) {
      bool take_a = c->eval(fr).i != 0;
      Scalar x = a->eval(fr), y = b->eval(fr);
      return take_a ? x : y;
    });
  }
  case IRNodeKind::Cast:
    return compile_cast(e.as<Cast>());
  case IRNodeKind::Let: {
    const auto *op = e.as<Let>();
    CodePtr value = compile(op->value);
    // Scoped: a use of the variable outside the let is reported, not read as a stale slot.
    auto outer = slots_.find(op->var.get());
    std::optional<int> shadowed;
    if (outer != slots_.end())
      shadowed = outer->second;
    int slot = new_slot(op->var);
    CodePtr body = compile(op->body);
    if (shadowed)
      slots_[op->var.get()] = *shadowed;
    else
      slots_.erase(op->var.get());
    return closure([slot, value = std::move(value), body = std::move(body)](Scalar *fr) {
      fr[slot] = value->eval(fr);
      return body->eval(fr);
    });
  }
  case IRNodeKind::Call: {
    const auto *op = e.as<Call>();
    if (op->call_kind == Call::PureExtern && op->args.size() == 1 && op->type.is_float()) {
      // Math functions in float64, unrounded: the reference is the exact value's best estimate.
      auto it = interp::unary_math().find(op->name);
      user_check(it != interp::unary_math().end(), "reference")
          << "'" << *name_ << "': the math function '" << op->name
          << "' is not supported by the reference";
      return closure([f = it->second, a = compile(op->args[0])](Scalar *fr) {
        return float_value(f(a->eval(fr).f));
      });
    }
    user_check(op->is_intrinsic(intrinsic::if_then_else), "reference")
        << "'" << *name_ << "': the call '" << op->name << "' is not supported by the reference";
    // Only the chosen side is evaluated: that is what guards padding reads.
    return closure([c = compile(op->args[0]), a = compile(op->args[1]),
                    b = compile(op->args[2])](Scalar *fr) {
      return c->eval(fr).i ? a->eval(fr) : b->eval(fr);
    });
  }
  case IRNodeKind::TensorLoad:
    return compile_load(e.as<TensorLoad>());
  case IRNodeKind::Reduce:
    user_error("reference") << "'" << *name_ << "': a reduction must be the whole body of a compute";
  default:
    // BufferLoad, Ramp, Broadcast, StringImm: lowered IR, not a compute definition.
    user_error("reference") << "'" << *name_ << "': '" << e
                            << "' is lowered IR, not expected in a compute definition";
  }
}

CodePtr BodyCompiler::compile_cast(const Cast *op) {
  const DataType from = op->value.type(), to = op->type;
  user_check(!from.is_handle() && !to.is_handle(), "reference")
      << "'" << *name_ << "': cannot evaluate a cast between " << from << " and " << to;
  CodePtr v = compile(op->value);
  if (to.is_float() && from.is_float()) {
    // Widening a value that is already exactly of its type changes nothing: skip the node.
    if (float_contains(to, from) && exact(op->value))
      return v;
    return closure([v = std::move(v), to](Scalar *fr) { return float_value(round_to(to, v->eval(fr).f)); });
  }
  if (to.is_float())
    return closure([v = std::move(v), from, to](Scalar *fr) {
      return float_value(round_to(to, to_double(v->eval(fr), from)));
    });
  if (!from.is_float())
    return closure([v = std::move(v), to](Scalar *fr) { return int_value(wrap(v->eval(fr).i, to)); });
  // Float to integer truncates towards zero, as C; a value no 64-bit integer holds has no C
  // meaning, so it is an error rather than a guess.
  return closure([v = std::move(v), from, to, name = name_](Scalar *fr) {
    double x = v->eval(fr).f;
    if (to.is_bool())
      return int_value(x != 0);
    double t = std::trunc(x);
    bool u64 = to.is_uint() && to.bits() == 64;
    user_check(t >= (u64 ? 0.0 : -0x1p63) && t < (u64 ? 0x1p64 : 0x1p63), "reference")
        << "'" << *name << "': casting " << x << " from " << from << " to " << to << " is out of range";
    return int_value(wrap(u64 ? int64_t(uint64_t(t)) : int64_t(t), to));
  });
}

CodePtr BodyCompiler::compile_load(const TensorLoad *op) {
  const TensorData &td = ev_.data(Evaluator::storage_of(op->tensor));
  internal_check(op->indices.size() == td.shape.size())
      << "reference: '" << td.name << "' indexed with " << op->indices.size() << " indices";
  // Every index affine and within its dimension over the whole loop domain: one dot product,
  // no checks.
  Affine offset;
  bool proven = true;
  for (size_t d = 0; d < op->indices.size() && proven; ++d) {
    std::optional<Affine> a = affine(op->indices[d]);
    proven = a && a->lo >= 0 && a->hi < td.shape[d] && add_scaled(offset, *a, td.strides[d]);
  }
  if (proven && finish(offset, Int(64)))
    return closure([data = td.values.data(), c = offset.c, terms = std::move(offset.terms)](Scalar *fr) {
      int64_t off = c;
      for (auto [slot, coef] : terms)
        off += coef * fr[slot].i;
      return data[off];
    });
  std::vector<CodePtr> idx;
  for (const Expr &i : op->indices)
    idx.push_back(compile(i));
  return checked_load(&td, std::move(idx), name_);
}

std::unique_ptr<DotProduct> BodyCompiler::dot_product(const Expr &source, const Var &k) {
  const auto *mul = source.as<Mul>();
  if (!mul || !source.type().is_float())
    return nullptr;
  auto operand = [&](Expr e, DotOperand &o) {
    // |v| as the magnitudes' definitions write it.
    if (Expr v = absolute_operand(e); v.defined()) {
      o.absolute = true;
      e = v;
    }
    // A widening cast of an exact value is the value (compile_cast skips it too).
    while (const auto *c = e.as<Cast>()) {
      if (!c->type.is_float() || !c->value.type().is_float() ||
          !float_contains(c->type, c->value.type()) || !exact(c->value))
        return false;
      e = c->value;
    }
    const auto *load = e.as<TensorLoad>();
    if (!load || !load->type.is_float())
      return false;
    o.t = &ev_.data(Evaluator::storage_of(load->tensor));
    for (const Expr &i : load->indices) {
      std::optional<int64_t> c = linear_coefficient(i, k.get());
      if (!c)
        return false;
      o.coef.push_back(*c);
      o.idx.push_back(compile(i));
    }
    return o.idx.size() == o.t->shape.size();
  };
  auto dot = std::make_unique<DotProduct>();
  if (!operand(mul->a, dot->x) || !operand(mul->b, dot->y))
    return nullptr;
  return dot;
}

std::optional<Affine> BodyCompiler::affine(const Expr &e) const {
  const DataType t = e.type();
  if (!t.is_scalar() || !t.is_integer_like() || t.is_bool())
    return std::nullopt;
  Affine r;
  if (const auto *imm = e.as<IntImm>()) {
    r.c = imm->value;
  } else if (const auto *v = e.as<Variable>()) {
    auto it = slots_.find(v);
    if (it == slots_.end() || !ranges_[size_t(it->second)])
      return std::nullopt; // a let variable: no known range
    r.terms.push_back({it->second, 1});
  } else if (const auto *op = e.as<Add>()) {
    auto a = affine(op->a), b = affine(op->b);
    if (!a || !b || !add_scaled(r, *a, 1) || !add_scaled(r, *b, 1))
      return std::nullopt;
  } else if (const auto *op = e.as<Sub>()) {
    auto a = affine(op->a), b = affine(op->b);
    if (!a || !b || !add_scaled(r, *a, 1) || !add_scaled(r, *b, -1))
      return std::nullopt;
  } else if (const auto *op = e.as<Mul>()) {
    auto a = affine(op->a), b = affine(op->b);
    if (!a || !b)
      return std::nullopt;
    if (!a->terms.empty() && !b->terms.empty())
      return std::nullopt;
    bool ok = a->terms.empty() ? add_scaled(r, *b, a->c) : add_scaled(r, *a, b->c);
    if (!ok)
      return std::nullopt;
  } else if (const auto *op = e.as<Cast>()) {
    auto a = affine(op->value);
    if (!a)
      return std::nullopt;
    r = std::move(*a);
  } else {
    return std::nullopt;
  }
  if (!finish(r, t))
    return std::nullopt;
  return r;
}

/// Drops zero terms and sets [lo, hi]; false when a bound leaves int64 or the range of t (the
/// node would wrap, and the affine form would not be its value).
bool BodyCompiler::finish(Affine &a, DataType t) const {
  llvm::erase_if(a.terms, [](const auto &term) { return term.second == 0; });
  a.lo = a.hi = a.c;
  for (auto [slot, coef] : a.terms) {
    auto [vlo, vhi] = *ranges_[size_t(slot)];
    int64_t p, q;
    if (__builtin_mul_overflow(coef, vlo, &p) || __builtin_mul_overflow(coef, vhi, &q) ||
        __builtin_add_overflow(a.lo, std::min(p, q), &a.lo) ||
        __builtin_add_overflow(a.hi, std::max(p, q), &a.hi))
      return false;
  }
  return a.lo >= t.min_int() && a.hi <= t.max_int();
}

bool BodyCompiler::exact(const Expr &e) const {
  if (!e.type().is_float())
    return true;
  if (e.as<FloatImm>() || e.as<Cast>())
    return true; // both are rounded to their type
  if (const auto *l = e.as<TensorLoad>())
    return ev_.data(Evaluator::storage_of(l->tensor)).exact;
  if (const auto *s = e.as<Select>())
    return exact(s->true_value) && exact(s->false_value);
  if (const auto *c = e.as<Call>())
    return c->is_intrinsic(intrinsic::if_then_else) && exact(c->args[1]) && exact(c->args[2]);
  if (const auto *m = e.as<Min>())
    return exact(m->a) && exact(m->b);
  if (const auto *m = e.as<Max>())
    return exact(m->a) && exact(m->b);
  if (const auto *l = e.as<Let>())
    return exact(l->body);
  if (const auto *r = e.as<Reduce>())
    return r->combiner != Reduce::Sum && exact(r->source) &&
           (!r->init.defined() || exact(r->init));
  return false; // arithmetic in double
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Public entry points
// ---------------------------------------------------------------------------------------------

std::vector<double> evaluate_reference(const Tensor &output,
                                       const std::map<const OperationNode *, const HostTensor *> &inputs) {
  for (const auto &[op, value] : inputs)
    user_check(op && llvm::isa<PlaceholderOpNode>(op), "reference")
        << "inputs are given for placeholders only; '" << (op ? op->name : "<null>")
        << "' is computed from its definition";
  return Evaluator(inputs).run(output);
}

namespace {

std::map<const OperationNode *, const HostTensor *> by_op(const std::vector<TensorBinding> &inputs) {
  std::map<const OperationNode *, const HostTensor *> out;
  for (const TensorBinding &b : inputs) {
    user_check(b.tensor.defined(), "reference") << "an input is bound to an undefined tensor";
    user_check(out.emplace(b.tensor.op().get(), b.value).second, "reference")
        << "two inputs are given for '" << b.tensor.name() << "'";
    user_check(llvm::isa<PlaceholderOpNode>(b.tensor.op().get()), "reference")
        << "inputs are given for placeholders only; '" << b.tensor.name()
        << "' is computed from its definition";
  }
  return out;
}

} // namespace

std::vector<double> evaluate_reference(const Tensor &output, const std::vector<TensorBinding> &inputs) {
  return evaluate_reference(output, by_op(inputs));
}

std::vector<double> evaluate_reference_at(const Tensor &output,
                                          const std::vector<TensorBinding> &inputs,
                                          const std::vector<int64_t> &at) {
  return Evaluator(by_op(inputs)).run(output, &at);
}

std::vector<int64_t> constant_shape(const Tensor &t) {
  std::vector<int64_t> shape;
  for (const Expr &e : t.shape()) {
    auto v = as_const_int(e);
    internal_check(v.has_value()) << "reference: tensor '" << t.name() << "' has a symbolic extent";
    shape.push_back(*v);
  }
  return shape;
}

} // namespace tessel
