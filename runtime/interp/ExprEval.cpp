// Expressions: each IR expression node becomes an ExprCode that computes it for all active
// threads of a block. Arithmetic is done in int64 / double and brought back into the IR type
// after every operation (integers wrap, floats round to nearest even), as the GPU computes.
#include "runtime/interp/Machine.h"
#include "runtime/interp/SharedMemoryChecker.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"
#include "runtime/interp/HalfFloat.h"

#include <cmath>
#include <limits>
#include <unordered_map>

namespace tessel::interp {

double round_float(Numeric::Kind k, double x) {
  switch (k) {
  case Numeric::F64:
    return x;
  case Numeric::F32:
    return round_to_float(x);
  case Numeric::F16:
    return round_to_half(x);
  case Numeric::BF16:
    return round_to_bfloat16(x);
  case Numeric::F8E4M3:
    return round_to_e4m3(x);
  case Numeric::F8E5M2:
    return round_to_e5m2(x);
  default:
    internal_error << "round_float of a non-float kind";
  }
}

Numeric Numeric::of(DataType t) {
  Numeric n;
  n.bits = static_cast<uint8_t>(t.bits());
  if (t.is_bfloat())
    n.kind = BF16;
  else if (t.is_float8())
    n.kind = t.code() == DataType::Float8E4M3 ? F8E4M3 : F8E5M2;
  else if (t.is_float())
    n.kind = t.bits() == 64 ? F64 : t.bits() == 32 ? F32 : F16;
  else if (t.is_bool())
    n.kind = Bool;
  else if (t.is_uint())
    n.kind = UInt;
  else
    n.kind = Int; // handles never reach arithmetic
  return n;
}

namespace {

// Calls f with the float kind as a compile-time constant, so the per-element loop inlines the
// rounding instead of switching on it per element.
template <typename F> void with_float_kind(Numeric::Kind k, F &&f) {
  switch (k) {
  case Numeric::F64:
    return f(std::integral_constant<Numeric::Kind, Numeric::F64>{});
  case Numeric::F32:
    return f(std::integral_constant<Numeric::Kind, Numeric::F32>{});
  case Numeric::F16:
    return f(std::integral_constant<Numeric::Kind, Numeric::F16>{});
  case Numeric::BF16:
    return f(std::integral_constant<Numeric::Kind, Numeric::BF16>{});
  case Numeric::F8E4M3:
    return f(std::integral_constant<Numeric::Kind, Numeric::F8E4M3>{});
  case Numeric::F8E5M2:
    return f(std::integral_constant<Numeric::Kind, Numeric::F8E5M2>{});
  default:
    internal_error << "not a float kind";
  }
}

template <Numeric::Kind K> inline double round_as(double x) {
  if constexpr (K == Numeric::F64)
    return x;
  else if constexpr (K == Numeric::F32)
    return round_to_float(x);
  else if constexpr (K == Numeric::F16)
    return round_to_half(x);
  else if constexpr (K == Numeric::BF16)
    return round_to_bfloat16(x);
  else if constexpr (K == Numeric::F8E4M3)
    return round_to_e4m3(x);
  else
    return round_to_e5m2(x);
}

class ConstCode : public ExprCode {
public:
  ConstCode(DataType t, uint32_t n, Val v) : ExprCode(t, n) { std::fill(out.begin(), out.end(), v); }
  const Val *eval(Machine &, const Mask &) override { return out.data(); }
};

class VarCode : public ExprCode {
public:
  VarCode(DataType t, uint32_t n, int slot) : ExprCode(t, n), slot_(slot) {}
  const Val *eval(Machine &M, const Mask &) override { return M.slots[slot_].data(); }

private:
  int slot_;
};

template <typename F> class FloatBinary : public ExprCode {
public:
  FloatBinary(DataType t, uint32_t n, ExprPtr a, ExprPtr b, F f)
      : ExprCode(t, n), a_(std::move(a)), b_(std::move(b)), f_(f), kind_(Numeric::of(t).kind) {}
  const Val *eval(Machine &M, const Mask &m) override {
    const Val *a = a_->eval(M, m), *b = b_->eval(M, m);
    const size_t L = lanes;
    Val *o = out.data();
    with_float_kind(kind_, [&](auto K) {
      m.each([&](uint32_t t) {
        for (size_t i = t * L; i < t * L + L; ++i)
          o[i].f = round_as<decltype(K)::value>(f_(a[i].f, b[i].f));
      });
    });
    return o;
  }

private:
  ExprPtr a_, b_;
  F f_;
  Numeric::Kind kind_;
};

// Integer ops wrap through uint64 so that overflow is defined here as it is on the GPU. In
// an index (`checked`), a signed result of fewer than 64 bits that does not fit its type is an
// error: the operands fit 32 bits, so f_ computes the exact result in int64.
template <typename F, bool DivLike> class IntBinary : public ExprCode {
public:
  IntBinary(Expr src, uint32_t n, ExprPtr a, ExprPtr b, F f, bool checked)
      : ExprCode(src.type(), n), src_(std::move(src)), a_(std::move(a)), b_(std::move(b)), f_(f),
        num_(Numeric::of(src_.type())),
        checked_(checked && num_.kind == Numeric::Int && num_.bits < 64) {}
  const Val *eval(Machine &M, const Mask &m) override {
    const Val *a = a_->eval(M, m), *b = b_->eval(M, m);
    const size_t L = lanes;
    Val *o = out.data();
    m.each([&](uint32_t t) {
      for (size_t i = t * L; i < t * L + L; ++i) {
        if constexpr (DivLike)
          user_check(b[i].i != 0, "interp") << "integer division by zero in '" << src_
                                            << "' by " << M.where(t);
        const int64_t exact = f_(a[i].i, b[i].i);
        o[i].i = num_.wrap(exact);
        user_check(!checked_ || o[i].i == exact, "interp")
            << "index arithmetic overflows " << src_.type() << " in '" << src_ << "' (" << a[i].i
            << ", " << b[i].i << " -> " << exact << ") by " << M.where(t)
            << "; the index needs 64 bits (lowering computes a buffer's indices in int64 when it "
               "has 2^31 elements or more)";
      }
    });
    return o;
  }

private:
  Expr src_;
  ExprPtr a_, b_;
  F f_;
  Numeric num_;
  bool checked_;
};

template <typename F, bool FloatOperands> class Compare : public ExprCode {
public:
  Compare(DataType t, uint32_t n, ExprPtr a, ExprPtr b, F f)
      : ExprCode(t, n), a_(std::move(a)), b_(std::move(b)), f_(f) {}
  const Val *eval(Machine &M, const Mask &m) override {
    const Val *a = a_->eval(M, m), *b = b_->eval(M, m);
    const size_t L = lanes;
    Val *o = out.data();
    m.each([&](uint32_t t) {
      for (size_t i = t * L; i < t * L + L; ++i) {
        if constexpr (FloatOperands)
          o[i].i = f_(a[i].f, b[i].f);
        else
          o[i].i = f_(a[i].i, b[i].i);
      }
    });
    return o;
  }

private:
  ExprPtr a_, b_;
  F f_;
};

template <typename F> class Unary : public ExprCode {
public:
  Unary(DataType t, uint32_t n, ExprPtr a, F f) : ExprCode(t, n), a_(std::move(a)), f_(f) {}
  const Val *eval(Machine &M, const Mask &m) override {
    const Val *a = a_->eval(M, m);
    const size_t L = lanes;
    Val *o = out.data();
    m.each([&](uint32_t t) {
      for (size_t i = t * L; i < t * L + L; ++i)
        o[i] = f_(a[i]);
    });
    return o;
  }

private:
  ExprPtr a_;
  F f_;
};

template <typename F> ExprPtr unary(DataType t, uint32_t n, ExprPtr a, F f) {
  return std::make_unique<Unary<F>>(t, n, std::move(a), f);
}

// Both sides of a Select are evaluated (as its definition says); if_then_else evaluates each
// side only for the threads that take it, so guarded out-of-bounds loads are not reported.
class SelectCode : public ExprCode {
public:
  SelectCode(DataType t, uint32_t n, ExprPtr c, ExprPtr a, ExprPtr b, bool lazy)
      : ExprCode(t, n), c_(std::move(c)), a_(std::move(a)), b_(std::move(b)), lazy_(lazy) {}
  const Val *eval(Machine &M, const Mask &m) override {
    const Val *c = c_->eval(M, m);
    const size_t L = lanes, CL = c_->lanes;
    const Val *a, *b;
    if (lazy_) {
      // A vector condition sends a thread down a side when any of its lanes takes it.
      auto any_lane = [&](uint32_t t, bool v) {
        for (size_t l = 0; l < CL; ++l)
          if ((c[t * CL + l].i != 0) == v)
            return true;
        return false;
      };
      Mask mt = m.filter([&](uint32_t t) { return any_lane(t, true); });
      Mask mf = m.filter([&](uint32_t t) { return any_lane(t, false); });
      a = mt.empty() ? nullptr : a_->eval(M, mt);
      b = mf.empty() ? nullptr : b_->eval(M, mf);
    } else {
      a = a_->eval(M, m);
      b = b_->eval(M, m);
    }
    Val *o = out.data();
    m.each([&](uint32_t t) {
      for (size_t l = 0; l < L; ++l) {
        bool take = c[t * CL + (CL == 1 ? 0 : l)].i != 0;
        o[t * L + l] = take ? a[t * L + l] : b[t * L + l];
      }
    });
    return o;
  }

private:
  ExprPtr c_, a_, b_;
  bool lazy_;
};

// A cast's conversion of one lane, as the GPU does it (applied by a Unary).
class Conversion {
public:
  Conversion(DataType from, DataType to) : from_(Numeric::of(from)), to_(Numeric::of(to)) {
    if (!to_.is_float() && to_.kind != Numeric::Bool) {
      lo_ = static_cast<double>(to.element_of().min_int());
      hi_ = static_cast<double>(to.element_of().max_int());
    }
  }
  Val operator()(Val v) const {
    Val r;
    if (to_.is_float()) {
      double x = from_.is_float() ? v.f : static_cast<double>(v.i);
      r.f = round_float(to_.kind, x);
    } else if (!from_.is_float()) {
      r.i = to_.wrap(v.i);
    } else if (to_.kind == Numeric::Bool) {
      r.i = v.f != 0.0;
    } else {
      // The GPU's float-to-int conversion truncates and saturates; NaN becomes 0.
      double x = std::trunc(v.f);
      r.i = std::isnan(x) ? 0 : x <= lo_ ? int64_t(lo_) : x >= hi_ ? int64_t(hi_) : int64_t(x);
    }
    return r;
  }

private:
  Numeric from_, to_;
  double lo_ = 0, hi_ = 0;
};

class LetCode : public ExprCode {
public:
  LetCode(DataType t, uint32_t n, int slot, ExprPtr value, ExprPtr body)
      : ExprCode(t, n), slot_(slot), value_(std::move(value)), body_(std::move(body)) {}
  const Val *eval(Machine &M, const Mask &m) override {
    const Val *v = value_->eval(M, m);
    std::vector<Val> &s = M.slots[slot_];
    const size_t VL = value_->lanes, L = lanes;
    m.each([&](uint32_t t) { std::copy(v + t * VL, v + t * VL + VL, s.data() + t * VL); });
    // Copied out: the body's result may live in a slot that a later Let rebinds.
    const Val *b = body_->eval(M, m);
    m.each([&](uint32_t t) { std::copy(b + t * L, b + t * L + L, out.data() + t * L); });
    return out.data();
  }

private:
  int slot_;
  ExprPtr value_, body_;
};

class RampCode : public ExprCode {
public:
  RampCode(DataType t, uint32_t n, ExprPtr base, ExprPtr stride)
      : ExprCode(t, n), base_(std::move(base)), stride_(std::move(stride)), num_(Numeric::of(t)) {}
  const Val *eval(Machine &M, const Mask &m) override {
    const Val *b = base_->eval(M, m), *s = stride_->eval(M, m);
    const size_t L = lanes;
    m.each([&](uint32_t t) {
      for (size_t l = 0; l < L; ++l)
        out[t * L + l].i = num_.wrap(int64_t(uint64_t(b[t].i) + uint64_t(s[t].i) * l));
    });
    return out.data();
  }

private:
  ExprPtr base_, stride_;
  Numeric num_;
};

class BroadcastCode : public ExprCode {
public:
  BroadcastCode(DataType t, uint32_t n, ExprPtr v) : ExprCode(t, n), v_(std::move(v)) {}
  const Val *eval(Machine &M, const Mask &m) override {
    const Val *v = v_->eval(M, m);
    const size_t L = lanes;
    m.each([&](uint32_t t) { std::fill(out.data() + t * L, out.data() + t * L + L, v[t]); });
    return out.data();
  }

private:
  ExprPtr v_;
};

/// mma_lane_id(): the thread's lane in its warp (group 32); wgmma_thread_id(): its index in its
/// warpgroup (group 128). Linear thread ids are x + bx (y + by z), as on the GPU.
class LaneIdCode : public ExprCode {
public:
  LaneIdCode(DataType t, uint32_t n, uint32_t group) : ExprCode(t, n), group_(group) {}
  const Val *eval(Machine &, const Mask &m) override {
    m.each([&](uint32_t t) { out[t].i = t % group_; });
    return out.data();
  }

private:
  uint32_t group_;
};

/// shfl_xor(value, mask): lane l's result is lane (l ^ mask)'s value; every lane of the warp must
/// take part (the CUDA is __shfl_xor_sync over the full warp).
class ShuffleXorCode : public ExprCode {
public:
  ShuffleXorCode(DataType t, uint32_t n, ExprPtr v, int64_t mask, Expr src)
      : ExprCode(t, n), v_(std::move(v)), mask_(uint32_t(mask)), src_(std::move(src)) {}
  const Val *eval(Machine &M, const Mask &m) override {
    const Val *v = v_->eval(M, m);
    m.each([&](uint32_t t) {
      const uint32_t from = (t & ~31u) | ((t % 32) ^ mask_);
      user_check(from < m.n_threads && m.contains(from), "interp")
          << src_ << " by thread " << M.where(t) << ": lane " << from % 32
          << " of its warp does not take part (a shuffle needs the whole warp together)";
      out[t] = v[from];
    });
    return out.data();
  }

private:
  ExprPtr v_;
  uint32_t mask_;
  Expr src_;
};

template <MemScope S> class LoadCode : public ExprCode {
public:
  LoadCode(DataType t, uint32_t n, Memory *mem, ExprPtr index)
      : ExprCode(t, n), mem_(mem), index_(std::move(index)) {}
  const Val *eval(Machine &M, const Mask &m) override {
    const Val *idx = index_->eval(M, m);
    const size_t L = lanes;
    Memory &mem = *mem_;
    const int64_t size = mem.size;
    const Val *data = mem.data.data();
    Val *o = out.data();
    m.each([&](uint32_t t) {
      for (size_t l = 0; l < L; ++l) {
        int64_t i = idx[t * L + l].i;
        if (i < 0 || i >= size) [[unlikely]]
          report_out_of_bounds(M, mem, false, i, size, int32_t(t));
        if constexpr (S == MemScope::Local)
          o[t * L + l] = data[t * size + i];
        else {
          if constexpr (S == MemScope::Shared)
            shared_read(M, mem, i, int32_t(t));
          o[t * L + l] = data[i];
        }
      }
    });
    return o;
  }

private:
  Memory *mem_;
  ExprPtr index_;
};

} // namespace

const std::unordered_map<std::string, UnaryMath> &unary_math() {
  static const std::unordered_map<std::string, UnaryMath> table = {
      {"exp", [](double x) { return std::exp(x); }},
      {"exp2", [](double x) { return std::exp2(x); }},
      {"fast_exp2", [](double x) { return std::exp2(x); }},
      {"exp10", [](double x) { return std::pow(10.0, x); }},
      {"log", [](double x) { return std::log(x); }},
      {"log2", [](double x) { return std::log2(x); }},
      {"log10", [](double x) { return std::log10(x); }},
      {"sqrt", [](double x) { return std::sqrt(x); }},
      {"rsqrt", [](double x) { return 1.0 / std::sqrt(x); }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }},
      {"erf", [](double x) { return std::erf(x); }},
      {"sin", [](double x) { return std::sin(x); }},
      {"cos", [](double x) { return std::cos(x); }},
      {"tan", [](double x) { return std::tan(x); }},
      {"fabs", [](double x) { return std::fabs(x); }},
      {"abs", [](double x) { return std::fabs(x); }},
      {"floor", [](double x) { return std::floor(x); }},
      {"ceil", [](double x) { return std::ceil(x); }},
      {"trunc", [](double x) { return std::trunc(x); }},
      {"round", [](double x) { return std::round(x); }},
  };
  return table;
}

namespace {

} // namespace

ExprPtr Compiler::index(const Expr &e) {
  bool outer = in_index_;
  in_index_ = true;
  ExprPtr code = expr(e);
  in_index_ = outer;
  return code;
}

ExprPtr Compiler::expr(const Expr &e) {
  internal_check(e.defined()) << "interp: undefined expression";
  const uint32_t n = M.n_threads;
  const DataType t = e.type();
  auto operands = [&](const auto *op) { return std::pair{expr(op->a), expr(op->b)}; };
  const bool fl = t.is_float();
  auto wrap_add = [](int64_t x, int64_t y) { return int64_t(uint64_t(x) + uint64_t(y)); };
  auto wrap_sub = [](int64_t x, int64_t y) { return int64_t(uint64_t(x) - uint64_t(y)); };
  auto wrap_mul = [](int64_t x, int64_t y) { return int64_t(uint64_t(x) * uint64_t(y)); };
  // -1 divisors go through negation so INT64_MIN / -1 wraps instead of trapping.
  auto trunc_div = [](int64_t x, int64_t y) { return y == -1 ? int64_t(0 - uint64_t(x)) : x / y; };
  auto trunc_mod = [](int64_t x, int64_t y) { return y == -1 ? int64_t(0) : x % y; };
  auto floor_div = [](int64_t x, int64_t y) {
    if (y == -1)
      return int64_t(0 - uint64_t(x));
    int64_t q = x / y;
    return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
  };
  auto floor_mod = [](int64_t x, int64_t y) {
    if (y == -1)
      return int64_t(0);
    int64_t r = x % y;
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
  };
#define TESSEL_FLOAT_OR_INT(NODE, FLOAT_F, INT_F, DIV)                                             \
  if (const auto *op = e.as<NODE>()) {                                                             \
    auto [a, b] = operands(op);                                                                    \
    if (fl) {                                                                                      \
      auto f = FLOAT_F;                                                                            \
      return std::make_unique<FloatBinary<decltype(f)>>(t, n, std::move(a), std::move(b), f);      \
    }                                                                                              \
    auto f = INT_F;                                                                                \
    return std::make_unique<IntBinary<decltype(f), DIV>>(e, n, std::move(a), std::move(b), f,     \
                                                         in_index_);                              \
  }
#define TESSEL_COMPARE(NODE, OP)                                                                   \
  if (const auto *op = e.as<NODE>()) {                                                             \
    auto [a, b] = operands(op);                                                                    \
    if (op->a.type().is_float()) {                                                                 \
      auto f = [](double x, double y) -> int64_t { return x OP y; };                               \
      return std::make_unique<Compare<decltype(f), true>>(t, n, std::move(a), std::move(b), f);    \
    }                                                                                              \
    auto f = [](int64_t x, int64_t y) -> int64_t { return x OP y; };                               \
    return std::make_unique<Compare<decltype(f), false>>(t, n, std::move(a), std::move(b), f);     \
  }

  switch (e->kind()) {
  case IRNodeKind::IntImm: {
    Val v;
    v.i = e.as<IntImm>()->value;
    return std::make_unique<ConstCode>(t, n, v);
  }
  case IRNodeKind::FloatImm: {
    Val v;
    v.f = round_float(Numeric::of(t).kind, e.as<FloatImm>()->value);
    return std::make_unique<ConstCode>(t, n, v);
  }
  case IRNodeKind::Var: {
    auto it = slots_.find(static_cast<const Variable *>(e.get()));
    if (it == slots_.end())
      for (const TensorMap &m : M.tensor_maps)
        user_check(m.param.var.get() != e.get(), "interp")
            << "tensor map '" << m.param.var.name() << "' of kernel '" << M.kernel
            << "' is used outside tma_load; the executor takes a tensor map only as the "
               "first argument of tma_load or tma_load_im2col";
    user_check(it != slots_.end(), "interp")
        << "variable '" << static_cast<const Variable *>(e.get())->name
        << "' is used but not defined in the kernel (only loop, let and thread variables are)";
    return std::make_unique<VarCode>(t, n, it->second);
  }
  case IRNodeKind::Select: {
    const auto *op = e.as<Select>();
    return std::make_unique<SelectCode>(t, n, expr(op->condition), expr(op->true_value),
                                        expr(op->false_value), false);
  }
  case IRNodeKind::Cast: {
    ExprPtr v = expr(e.as<Cast>()->value);
    Conversion convert(v->type, t);
    return unary(t, n, std::move(v), convert);
  }
  case IRNodeKind::Let: {
    const auto *op = e.as<Let>();
    ExprPtr value = expr(op->value);
    int slot = 0;
    ExprPtr body = scoped(op->var, slot, [&] { return expr(op->body); });
    return std::make_unique<LetCode>(t, n, slot, std::move(value), std::move(body));
  }
  case IRNodeKind::Ramp: {
    const auto *op = e.as<Ramp>();
    return std::make_unique<RampCode>(t, n, expr(op->base), expr(op->stride));
  }
  case IRNodeKind::Broadcast:
    return std::make_unique<BroadcastCode>(t, n, expr(e.as<Broadcast>()->value));
  case IRNodeKind::Not:
    return unary(t, n, expr(e.as<Not>()->a), [](Val v) { return Val{v.i == 0}; });
  case IRNodeKind::BufferLoad: {
    const auto *op = e.as<BufferLoad>();
    user_check(op->indices.size() == 1, "interp")
        << "load of '" << op->buffer.name() << "' has " << op->indices.size()
        << " indices: the executor takes flattened IR (run storage_flatten first)";
    Memory *mem = memory_of(op->buffer->data, "load");
    ExprPtr index = this->index(op->indices[0]);
    switch (mem->scope) {
    case MemScope::Global:
      return std::make_unique<LoadCode<MemScope::Global>>(t, n, mem, std::move(index));
    case MemScope::Shared:
      return std::make_unique<LoadCode<MemScope::Shared>>(t, n, mem, std::move(index));
    case MemScope::Local:
      return std::make_unique<LoadCode<MemScope::Local>>(t, n, mem, std::move(index));
    case MemScope::Fragment:
      user_error("interp") << "'" << mem->name
                           << "' is a fragment: its elements can only be accessed through the "
                              "wmma_* / mma_* / wgmma_* intrinsics of its scope, not loaded";
    }
    break;
  }
  case IRNodeKind::Call: {
    const auto *op = e.as<Call>();
    if (op->is_intrinsic(intrinsic::if_then_else)) {
      user_check(op->args.size() == 3, "interp") << "if_then_else takes 3 arguments: " << e;
      return std::make_unique<SelectCode>(t, n, expr(op->args[0]), expr(op->args[1]),
                                          expr(op->args[2]), true);
    }
    if (op->name == "likely" && op->args.size() == 1)
      return expr(op->args[0]);
    if (op->is_intrinsic(intrinsic::mma_lane_id))
      return std::make_unique<LaneIdCode>(t, n, 32);
    if (op->is_intrinsic(intrinsic::wgmma_thread_id))
      return std::make_unique<LaneIdCode>(t, n, 128);
    if (op->is_intrinsic(intrinsic::wgmma_reg))
      return compile_wgmma_reg(*this, op);
    if (op->is_intrinsic(intrinsic::wgmma_row))
      return compile_wgmma_row(*this, op);
    if (op->is_intrinsic(intrinsic::shfl_xor)) {
      auto mask = op->args.size() == 2 ? as_const_int(op->args[1]) : std::nullopt;
      user_check(mask && *mask > 0 && *mask < 32 &&
                     (t == Float(32) || t == Int(32)) && op->args[0].type() == t,
                 "interp")
          << "shfl_xor takes a float32 or int32 value and a constant lane mask 1..31: " << e;
      return std::make_unique<ShuffleXorCode>(t, n, expr(op->args[0]), *mask, e);
    }
    if (op->is_intrinsic(intrinsic::bitwise_xor)) {
      user_check(op->args.size() == 2 && !t.is_float(), "interp")
          << "bitwise_xor takes two integers: " << e;
      auto f = [](int64_t x, int64_t y) { return x ^ y; };
      return std::make_unique<IntBinary<decltype(f), false>>(e, n, expr(op->args[0]),
                                                             expr(op->args[1]), f, false);
    }
    if (op->args.size() == 1 && t.is_float()) {
      auto it = unary_math().find(op->name);
      if (it != unary_math().end()) {
        auto f = it->second;
        Numeric::Kind k = Numeric::of(t).kind;
        return unary(t, n, expr(op->args[0]),
                     [f, k](Val v) { return Val{.f = round_float(k, f(v.f))}; });
      }
    }
    if (op->args.size() == 2 && t.is_float() && (op->name == "pow" || op->name == "powf")) {
      auto f = [](double x, double y) { return std::pow(x, y); };
      return std::make_unique<FloatBinary<decltype(f)>>(t, n, expr(op->args[0]),
                                                        expr(op->args[1]), f);
    }
    user_error("interp") << "cannot execute call '" << op->name << "' in expression " << e
                         << (op->name == intrinsic::address_of
                                 ? ": address_of is only supported as an argument of wmma_* / "
                                   "mma_* / wgmma_* / cp_async"
                                 : "");
  }
  case IRNodeKind::StringImm:
  case IRNodeKind::TensorLoad:
  case IRNodeKind::Reduce:
    user_error("interp") << "'" << e << "' cannot appear in lowered (Form 2) IR; lower it first";
  default:
    break;
  }

  TESSEL_FLOAT_OR_INT(Add, [](double x, double y) { return x + y; }, wrap_add, false)
  TESSEL_FLOAT_OR_INT(Sub, [](double x, double y) { return x - y; }, wrap_sub, false)
  TESSEL_FLOAT_OR_INT(Mul, [](double x, double y) { return x * y; }, wrap_mul, false)
  TESSEL_FLOAT_OR_INT(Div, [](double x, double y) { return x / y; }, trunc_div, true)
  TESSEL_FLOAT_OR_INT(Mod, [](double x, double y) { return std::fmod(x, y); }, trunc_mod, true)
  TESSEL_FLOAT_OR_INT(FloorDiv, [](double x, double y) { return std::floor(x / y); }, floor_div,
                      true)
  TESSEL_FLOAT_OR_INT(FloorMod, [](double x, double y) { return x - std::floor(x / y) * y; },
                      floor_mod, true)
  TESSEL_FLOAT_OR_INT(Min, [](double x, double y) { return std::fmin(x, y); },
                      [](int64_t x, int64_t y) { return std::min(x, y); }, false)
  TESSEL_FLOAT_OR_INT(Max, [](double x, double y) { return std::fmax(x, y); },
                      [](int64_t x, int64_t y) { return std::max(x, y); }, false)
  TESSEL_FLOAT_OR_INT(And, [](double, double) { return 0.0; },
                      [](int64_t x, int64_t y) { return int64_t(x && y); }, false)
  TESSEL_FLOAT_OR_INT(Or, [](double, double) { return 0.0; },
                      [](int64_t x, int64_t y) { return int64_t(x || y); }, false)
  TESSEL_COMPARE(EQ, ==)
  TESSEL_COMPARE(NE, !=)
  TESSEL_COMPARE(LT, <)
  TESSEL_COMPARE(LE, <=)
  TESSEL_COMPARE(GT, >)
  TESSEL_COMPARE(GE, >=)
#undef TESSEL_FLOAT_OR_INT
#undef TESSEL_COMPARE
  user_error("interp") << "cannot execute expression " << e;
}

} // namespace tessel::interp
