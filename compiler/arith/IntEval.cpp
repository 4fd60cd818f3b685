#include "compiler/arith/IntEval.h"

#include "compiler/ir/Intrinsics.h"

namespace tessel::arith {

int64_t wrap_to_type(DataType t, int64_t v) {
  if (t.is_bool())
    return v != 0;
  if (t.bits() >= 64)
    return v;
  // Same rule as IntImm::make: keep the low bits, then reinterpret as signed for int types.
  uint64_t m = uint64_t(1) << t.bits();
  uint64_t low = uint64_t(v) & (m - 1);
  if (t.is_int() && low >= m / 2)
    return int64_t(low) - int64_t(m);
  return int64_t(low);
}

bool fits_type(DataType t, __int128 v) {
  if (t.is_uint() && t.bits() == 64)
    return v >= 0 && v <= __int128(UINT64_MAX);
  return v >= t.min_int() && v <= t.max_int();
}

int64_t floordiv_int(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t floormod_int(int64_t a, int64_t b) { return a - floordiv_int(a, b) * b; }

bool binary_operands(const Expr &e, Expr *a, Expr *b) {
  switch (e->kind()) {
#define TESSEL_OPERANDS(N)                                                                         \
  case IRNodeKind::N: {                                                                            \
    const auto *op = llvm::cast<N>(e.get());                                                       \
    *a = op->a;                                                                                    \
    *b = op->b;                                                                                    \
    return true;                                                                                   \
  }
    TESSEL_OPERANDS(Add)
    TESSEL_OPERANDS(Sub)
    TESSEL_OPERANDS(Mul)
    TESSEL_OPERANDS(FloorDiv)
    TESSEL_OPERANDS(FloorMod)
    TESSEL_OPERANDS(Div)
    TESSEL_OPERANDS(Mod)
    TESSEL_OPERANDS(Min)
    TESSEL_OPERANDS(Max)
    TESSEL_OPERANDS(EQ)
    TESSEL_OPERANDS(NE)
    TESSEL_OPERANDS(LT)
    TESSEL_OPERANDS(LE)
    TESSEL_OPERANDS(GT)
    TESSEL_OPERANDS(GE)
    TESSEL_OPERANDS(And)
    TESSEL_OPERANDS(Or)
#undef TESSEL_OPERANDS
  default:
    return false;
  }
}

namespace {

class Evaluator {
public:
  Evaluator(const VarValues &vars, bool *overflowed) : vars_(vars), overflowed_(overflowed) {}

  std::optional<int64_t> eval(const Expr &e) {
    if (!e.type().is_scalar() || !e.type().is_integer_like())
      return std::nullopt;
    if (const auto *imm = e.as<IntImm>())
      return imm->value;
    if (const auto *v = e.as<Variable>()) {
      if (auto it = lets_.find(v); it != lets_.end())
        return it->second;
      if (auto it = vars_.find(v); it != vars_.end())
        return it->second;
      return std::nullopt;
    }
    if (e->kind() >= IRNodeKind::FirstBinary && e->kind() <= IRNodeKind::LastBinary)
      return binary(e);
    if (e->kind() >= IRNodeKind::FirstCompare && e->kind() <= IRNodeKind::LastCompare)
      return compare(e);
    if (const auto *op = e.as<And>())
      return logic(op->a, op->b, true);
    if (const auto *op = e.as<Or>())
      return logic(op->a, op->b, false);
    if (const auto *op = e.as<Not>()) {
      auto a = eval(op->a);
      return a ? std::optional<int64_t>(!*a) : std::nullopt;
    }
    if (const auto *op = e.as<Select>())
      return choose(op->condition, op->true_value, op->false_value);
    if (const auto *op = e.as<Call>(); op && op->is_intrinsic(intrinsic::if_then_else))
      return choose(op->args[0], op->args[1], op->args[2]);
    if (const auto *op = e.as<Cast>()) {
      auto v = eval(op->value);
      return v ? std::optional<int64_t>(wrap(e.type(), *v)) : std::nullopt;
    }
    if (const auto *op = e.as<Let>()) {
      auto v = eval(op->value);
      if (!v)
        return std::nullopt;
      auto old = lets_.find(op->var.get()) != lets_.end()
                     ? std::optional<int64_t>(lets_[op->var.get()])
                     : std::nullopt;
      lets_[op->var.get()] = *v;
      auto r = eval(op->body);
      if (old)
        lets_[op->var.get()] = *old;
      else
        lets_.erase(op->var.get());
      return r;
    }
    return std::nullopt;
  }

private:
  int64_t wrap(DataType t, __int128 v) {
    if (!fits_type(t, v) && overflowed_)
      *overflowed_ = true;
    return wrap_to_type(t, int64_t(uint64_t(v)));
  }

  std::optional<int64_t> binary(const Expr &e) {
    Expr ea, eb;
    binary_operands(e, &ea, &eb);
    auto a = eval(ea), b = eval(eb);
    if (!a || !b)
      return std::nullopt;
    __int128 x = *a, y = *b;
    DataType t = e.type();
    // Unsigned 64-bit values above INT64_MAX are stored negative; reinterpret them.
    if (t.is_uint() && t.bits() == 64) {
      x = __int128(uint64_t(*a));
      y = __int128(uint64_t(*b));
    }
    switch (e->kind()) {
    case IRNodeKind::Add:
      return wrap(t, x + y);
    case IRNodeKind::Sub:
      return wrap(t, x - y);
    case IRNodeKind::Mul:
      if (t.is_uint() && t.bits() == 64) {
        // Two uint64 values can overflow even 128 bits signed; keep the low 64 bits.
        unsigned __int128 p = (unsigned __int128)x * (unsigned __int128)y;
        if ((p >> 64) != 0 && overflowed_)
          *overflowed_ = true;
        return int64_t(uint64_t(p));
      }
      return wrap(t, x * y); // two int64 values: the product fits in 128 bits
    case IRNodeKind::Min:
      return wrap(t, std::min(x, y));
    case IRNodeKind::Max:
      return wrap(t, std::max(x, y));
    default:
      break;
    }
    if (y == 0)
      return std::nullopt;
    __int128 q = x / y, r = x % y; // truncating
    switch (e->kind()) {
    case IRNodeKind::Div:
      return wrap(t, q);
    case IRNodeKind::Mod:
      return wrap(t, r);
    case IRNodeKind::FloorDiv:
      return wrap(t, (r != 0 && ((r < 0) != (y < 0))) ? q - 1 : q);
    case IRNodeKind::FloorMod:
      return wrap(t, (r != 0 && ((r < 0) != (y < 0))) ? r + y : r);
    default:
      return std::nullopt;
    }
  }

  std::optional<int64_t> compare(const Expr &e) {
    Expr ea, eb;
    binary_operands(e, &ea, &eb);
    if (!ea.type().is_integer_like())
      return std::nullopt;
    auto a = eval(ea), b = eval(eb);
    if (!a || !b)
      return std::nullopt;
    __int128 x = *a, y = *b;
    if (ea.type().is_uint() && ea.type().bits() == 64) {
      x = __int128(uint64_t(*a));
      y = __int128(uint64_t(*b));
    }
    switch (e->kind()) {
    case IRNodeKind::EQ:
      return x == y;
    case IRNodeKind::NE:
      return x != y;
    case IRNodeKind::LT:
      return x < y;
    case IRNodeKind::LE:
      return x <= y;
    case IRNodeKind::GT:
      return x > y;
    case IRNodeKind::GE:
      return x >= y;
    default:
      return std::nullopt;
    }
  }

  std::optional<int64_t> logic(const Expr &a, const Expr &b, bool is_and) {
    auto x = eval(a), y = eval(b);
    if (!x || !y)
      return std::nullopt;
    return is_and ? (*x && *y) : (*x || *y);
  }

  // Only the chosen side is evaluated, as if_then_else guarantees (a Select's other side has no
  // effects, so skipping it changes nothing but a division by zero that is undefined anyway).
  std::optional<int64_t> choose(const Expr &c, const Expr &t, const Expr &f) {
    auto v = eval(c);
    if (!v)
      return std::nullopt;
    return *v ? eval(t) : eval(f);
  }

  const VarValues &vars_;
  bool *overflowed_;
  llvm::DenseMap<const Variable *, int64_t> lets_;
};

} // namespace

std::optional<int64_t> eval_int(const Expr &e, const VarValues &vars, bool *overflowed) {
  return Evaluator(vars, overflowed).eval(e);
}

} // namespace tessel::arith
