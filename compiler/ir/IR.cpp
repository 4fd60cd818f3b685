#include "compiler/ir/IR.h"

#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/support/Error.h"

#include <cmath>

namespace tessel {

namespace {

template <typename T, typename... Args> Expr make_expr(Args &&...args) {
  return Expr(new T(std::forward<Args>(args)...));
}
template <typename T, typename... Args> Stmt make_stmt(Args &&...args) {
  return Stmt(new T(std::forward<Args>(args)...));
}

void check_defined(const Expr &e, const char *node, const char *what) {
  internal_check(e.defined()) << node << ": " << what << " is undefined";
}

// Operands of arithmetic must agree exactly; a mismatch is a user mistake in the DSL.
void check_same_type(const char *op, const Expr &a, const Expr &b) {
  check_defined(a, op, "left operand");
  check_defined(b, op, "right operand");
  user_check(a.type() == b.type(), op)
      << "operands have different types: " << a.type() << " (" << a << ") and " << b.type()
      << " (" << b << "). Cast one of them first, e.g. (" << a << ").astype(" << b.type()
      << ") or cast(" << b.type() << ", ...).";
}

void check_numeric(const char *op, const Expr &a) {
  user_check(!a.type().is_handle() && !a.type().is_bool(), op)
      << "expected a numeric operand, got " << a.type() << " (" << a << ")";
}

void check_bool(const char *op, const Expr &a) {
  check_defined(a, op, "operand");
  user_check(a.type().is_bool(), op)
      << "expected a boolean operand, got " << a.type() << " (" << a << ")";
}

void check_int_index(const char *what, const std::string &name, const Expr &e) {
  user_check(e.defined() && e.type().element_of().is_integer_like() && !e.type().is_bool(), what)
      << "index of '" << name << "' must be an integer, got "
      << (e.defined() ? e.type().str() : "nothing") << (e.defined() ? " (" : "")
      << (e.defined() ? to_string(e) : "") << (e.defined() ? ")" : "");
}

template <typename Node> Expr make_arith(const char *op, Expr a, Expr b) {
  check_same_type(op, a, b);
  check_numeric(op, a);
  return make_expr<Node>(std::move(a), std::move(b));
}

template <typename Node> Expr make_compare(const char *op, Expr a, Expr b) {
  check_same_type(op, a, b);
  user_check(!a.type().is_handle() || op == std::string("EQ") || op == std::string("NE"), op)
      << "cannot order handles";
  return make_expr<Node>(std::move(a), std::move(b));
}

template <typename Node> Expr make_int_div(const char *op, Expr a, Expr b) {
  check_same_type(op, a, b);
  user_check(a.type().is_integer_like() && !a.type().is_bool(), op)
      << "expected integer operands, got " << a.type() << " (" << a << ")";
  return make_expr<Node>(std::move(a), std::move(b));
}

} // namespace

// ---- Expressions --------------------------------------------------------------------------

Expr IntImm::make(DataType t, int64_t value) {
  internal_check(t.is_scalar() && t.is_integer_like()) << "IntImm of type " << t;
  if (t.is_bool())
    value = value != 0;
  else if (t.bits() < 64) {
    // Wrap to the type's width, as the hardware would.
    int64_t m = int64_t(1) << t.bits();
    value = ((value % m) + m) % m;
    if (t.is_int() && value > t.max_int())
      value -= m;
  }
  return make_expr<IntImm>(t, value);
}

Expr FloatImm::make(DataType t, double value) {
  internal_check(t.is_scalar() && t.is_float()) << "FloatImm of type " << t;
  if (t.bits() == 32)
    value = static_cast<float>(value);
  return make_expr<FloatImm>(t, value);
}

Expr StringImm::make(std::string value) { return make_expr<StringImm>(std::move(value)); }

Var::Var(const std::string &name, DataType t) : Expr(new Variable(t, name)) {
  user_check(!name.empty(), "Var") << "a variable needs a name";
}

Var Var::copy_with_suffix(const std::string &suffix) const {
  return Var(name() + suffix, type());
}

Expr::Expr(int value) : Expr(IntImm::make(Int(32), value)) {}
Expr::Expr(int64_t value) : Expr(IntImm::make(Int(64), value)) {}
Expr::Expr(double value) : Expr(FloatImm::make(Float(32), value)) {}
Expr::Expr(float value) : Expr(FloatImm::make(Float(32), value)) {}

Expr Add::make(Expr a, Expr b) { return make_arith<Add>("Add", std::move(a), std::move(b)); }
Expr Sub::make(Expr a, Expr b) { return make_arith<Sub>("Sub", std::move(a), std::move(b)); }
Expr Mul::make(Expr a, Expr b) { return make_arith<Mul>("Mul", std::move(a), std::move(b)); }
Expr Div::make(Expr a, Expr b) { return make_arith<Div>("Div", std::move(a), std::move(b)); }
Expr Mod::make(Expr a, Expr b) { return make_int_div<Mod>("Mod", std::move(a), std::move(b)); }
Expr FloorDiv::make(Expr a, Expr b) {
  return make_int_div<FloorDiv>("FloorDiv", std::move(a), std::move(b));
}
Expr FloorMod::make(Expr a, Expr b) {
  return make_int_div<FloorMod>("FloorMod", std::move(a), std::move(b));
}
Expr Min::make(Expr a, Expr b) { return make_arith<Min>("Min", std::move(a), std::move(b)); }
Expr Max::make(Expr a, Expr b) { return make_arith<Max>("Max", std::move(a), std::move(b)); }

Expr EQ::make(Expr a, Expr b) { return make_compare<EQ>("EQ", std::move(a), std::move(b)); }
Expr NE::make(Expr a, Expr b) { return make_compare<NE>("NE", std::move(a), std::move(b)); }
Expr LT::make(Expr a, Expr b) { return make_compare<LT>("LT", std::move(a), std::move(b)); }
Expr LE::make(Expr a, Expr b) { return make_compare<LE>("LE", std::move(a), std::move(b)); }
Expr GT::make(Expr a, Expr b) { return make_compare<GT>("GT", std::move(a), std::move(b)); }
Expr GE::make(Expr a, Expr b) { return make_compare<GE>("GE", std::move(a), std::move(b)); }

Expr And::make(Expr a, Expr b) {
  check_bool("And", a);
  check_bool("And", b);
  check_same_type("And", a, b);
  return make_expr<And>(std::move(a), std::move(b));
}

Expr Or::make(Expr a, Expr b) {
  check_bool("Or", a);
  check_bool("Or", b);
  check_same_type("Or", a, b);
  return make_expr<Or>(std::move(a), std::move(b));
}

Expr Not::make(Expr a) {
  check_bool("Not", a);
  return make_expr<Not>(std::move(a));
}

Expr Select::make(Expr condition, Expr true_value, Expr false_value) {
  check_bool("Select", condition);
  check_same_type("Select", true_value, false_value);
  user_check(condition.type().lanes() == 1 ||
                 condition.type().lanes() == true_value.type().lanes(),
             "Select")
      << "condition has " << condition.type().lanes() << " lanes but the values have "
      << true_value.type().lanes();
  return make_expr<Select>(std::move(condition), std::move(true_value), std::move(false_value));
}

Expr Cast::make(DataType t, Expr value) {
  check_defined(value, "Cast", "value");
  user_check(t.lanes() == value.type().lanes(), "Cast")
      << "cannot cast " << value.type() << " to " << t << ": lane counts differ";
  return make_expr<Cast>(t, std::move(value));
}

Expr Let::make(Var var, Expr value, Expr body) {
  check_defined(value, "Let", "value");
  check_defined(body, "Let", "body");
  internal_check(var.type() == value.type())
      << "Let: variable " << var.name() << " has type " << var.type() << " but value has type "
      << value.type();
  return make_expr<Let>(std::move(var), std::move(value), std::move(body));
}

Expr Call::make(DataType t, std::string name, std::vector<Expr> args, CallKind kind) {
  internal_check(!name.empty()) << "Call without a name";
  for (const Expr &a : args)
    internal_check(a.defined()) << "Call " << name << " has an undefined argument";
  return make_expr<Call>(t, std::move(name), std::move(args), kind);
}

Expr BufferLoad::make(Buffer buffer, std::vector<Expr> indices) {
  internal_check(buffer.defined()) << "BufferLoad of an undefined buffer";
  user_check(indices.size() == buffer.ndim() || indices.size() == 1, "BufferLoad")
      << "buffer '" << buffer.name() << "' has " << buffer.ndim() << " dimensions but "
      << indices.size() << " indices were given";
  int lanes = 1;
  for (const Expr &i : indices) {
    check_int_index("BufferLoad", buffer.name(), i);
    lanes = std::max(lanes, i.type().lanes());
  }
  return make_expr<BufferLoad>(buffer.dtype().with_lanes(lanes * buffer.dtype().lanes()),
                               std::move(buffer), std::move(indices));
}

Expr TensorLoad::make(Tensor tensor, std::vector<Expr> indices) {
  internal_check(tensor.defined()) << "TensorLoad of an undefined tensor";
  size_t ndim = tensor.ndim();
  std::string hint = tensor.name() + "(";
  for (size_t d = 0; d < ndim; ++d)
    hint += (d ? ", i" : "i") + std::to_string(d);
  hint += ")";
  user_check(indices.size() == ndim, "tensor indexing")
      << "tensor '" << tensor.name() << "' has " << ndim << " dimension" << (ndim == 1 ? "" : "s")
      << " but was indexed with " << indices.size() << (indices.size() == 1 ? " index" : " indices")
      << "; write " << hint;
  for (const Expr &i : indices) {
    check_int_index("tensor indexing", tensor.name(), i);
    user_check(i.type().is_scalar(), "tensor indexing")
        << "index of '" << tensor.name() << "' must be a scalar";
  }
  DataType t = tensor.dtype();
  return make_expr<TensorLoad>(t, std::move(tensor), std::move(indices));
}

Expr Ramp::make(Expr base, Expr stride, int lanes) {
  check_defined(base, "Ramp", "base");
  internal_check(base.type().is_scalar() && base.type().is_integer_like())
      << "Ramp base must be a scalar integer, got " << base.type();
  internal_check(stride.defined() && stride.type() == base.type()) << "Ramp stride type";
  internal_check(lanes > 1) << "Ramp of " << lanes << " lanes";
  return make_expr<Ramp>(std::move(base), std::move(stride), lanes);
}

Expr Broadcast::make(Expr value, int lanes) {
  check_defined(value, "Broadcast", "value");
  internal_check(value.type().is_scalar()) << "Broadcast of a vector";
  internal_check(lanes > 1) << "Broadcast to " << lanes << " lanes";
  return make_expr<Broadcast>(std::move(value), lanes);
}

Expr Reduce::make(Combiner combiner, Expr source, std::vector<IterVar> axis, Expr condition,
                  Expr init) {
  check_defined(source, "Reduce", "source");
  user_check(!axis.empty(), Reduce::name(combiner))
      << "a reduction needs at least one reduce axis, e.g. reduce_axis({0, K}, \"k\")";
  for (const IterVar &iv : axis) {
    internal_check(iv.defined()) << "undefined reduce axis";
    user_check(iv.iter_type() == IterVarType::CommReduce, Reduce::name(combiner))
        << "axis '" << iv.name() << "' is not a reduce axis; create it with reduce_axis(...)";
  }
  if (!condition.defined())
    condition = IntImm::make(Bool(), 1);
  check_bool("Reduce", condition);
  user_check(!init.defined() || init.type() == source.type(), Reduce::name(combiner))
      << "the initial value is " << init.type() << " but the reduction's source is "
      << source.type() << "; cast it";
  if (init.defined())
    post_order_visit(init, [&](const IRNode *n) {
      for (const IterVar &iv : axis)
        user_check(n != iv.var().get(), Reduce::name(combiner))
            << "the initial value reads the reduce axis '" << iv.name()
            << "'; it is one value per output element: write it in the output's indices";
    });
  return make_expr<Reduce>(combiner, std::move(source), std::move(axis), std::move(condition),
                           std::move(init));
}

Expr Reduce::identity(Combiner c, DataType t) {
  DataType s = t.element_of();
  Expr v;
  if (c == Sum) {
    v = s.is_float() ? FloatImm::make(s, 0.0) : IntImm::make(s, 0);
  } else {
    bool lowest = c == Max;
    if (s.is_float())
      v = FloatImm::make(s, lowest ? -INFINITY : INFINITY);
    else
      v = IntImm::make(s, lowest ? s.min_int() : s.max_int());
  }
  return t.lanes() > 1 ? Broadcast::make(v, t.lanes()) : v;
}

Expr Reduce::combine(Combiner c, Expr a, Expr b) {
  switch (c) {
  case Sum:
    return Add::make(std::move(a), std::move(b));
  case Max:
    return Max::make(std::move(a), std::move(b));
  case Min:
    return Min::make(std::move(a), std::move(b));
  }
  internal_error << "bad combiner";
}

const char *Reduce::name(Combiner c) {
  switch (c) {
  case Sum:
    return "sum";
  case Max:
    return "max";
  case Min:
    return "min";
  }
  return "?";
}

// ---- Statements ---------------------------------------------------------------------------

Stmt LetStmt::make(Var var, Expr value, Stmt body) {
  check_defined(value, "LetStmt", "value");
  internal_check(body.defined()) << "LetStmt without body";
  internal_check(var.type() == value.type())
      << "LetStmt: " << var.name() << " is " << var.type() << ", value is " << value.type();
  return make_stmt<LetStmt>(std::move(var), std::move(value), std::move(body));
}

Stmt AttrStmt::make(AttrNode node, std::string key, Expr value, Stmt body) {
  internal_check(body.defined()) << "AttrStmt " << key << " without body";
  return make_stmt<AttrStmt>(std::move(node), std::move(key), std::move(value), std::move(body));
}

Stmt AssertStmt::make(Expr condition, std::string message, Stmt body) {
  check_bool("AssertStmt", condition);
  internal_check(body.defined()) << "AssertStmt without body";
  return make_stmt<AssertStmt>(std::move(condition), std::move(message), std::move(body));
}

const IterVar *thread_index_bound_by(const Stmt &s) {
  const auto *a = s.as<AttrStmt>();
  const IterVar *iv = a && a->key == attr::thread_extent ? std::get_if<IterVar>(&a->node) : nullptr;
  return iv && iv->is_thread_index() ? iv : nullptr;
}

const char *to_string(ForKind k) {
  switch (k) {
  case ForKind::Serial:
    return "serial";
  case ForKind::Parallel:
    return "parallel";
  case ForKind::Vectorized:
    return "vectorized";
  case ForKind::Unrolled:
    return "unrolled";
  case ForKind::ThreadBinding:
    return "thread_binding";
  }
  return "?";
}

Stmt For::make(Var loop_var, Expr min, Expr extent, ForKind kind, Stmt body,
               std::string thread_tag) {
  check_defined(min, "For", "min");
  check_defined(extent, "For", "extent");
  internal_check(body.defined()) << "For " << loop_var.name() << " without body";
  internal_check(min.type().is_integer_like() && extent.type().is_integer_like() &&
                 min.type().is_scalar() && extent.type().is_scalar())
      << "For " << loop_var.name() << ": min and extent must be scalar integers";
  internal_check(min.type() == loop_var.type() && extent.type() == loop_var.type())
      << "For " << loop_var.name() << ": loop variable is " << loop_var.type() << ", min is "
      << min.type() << ", extent is " << extent.type();
  internal_check((kind == ForKind::ThreadBinding) == !thread_tag.empty())
      << "For " << loop_var.name() << ": a thread tag goes with ThreadBinding loops only";
  return make_stmt<For>(std::move(loop_var), std::move(min), std::move(extent), kind,
                        std::move(thread_tag), std::move(body));
}

Stmt Allocate::make(Var buffer_var, DataType dtype, std::vector<Expr> extents, std::string scope,
                    Stmt body) {
  internal_check(body.defined()) << "Allocate " << buffer_var.name() << " without body";
  for (const Expr &e : extents)
    internal_check(e.defined() && e.type().is_integer_like())
        << "Allocate " << buffer_var.name() << ": extents must be integers";
  return make_stmt<Allocate>(std::move(buffer_var), dtype, std::move(extents), std::move(scope),
                             std::move(body));
}

int64_t Allocate::constant_size() const {
  int64_t size = 1;
  for (const Expr &e : extents) {
    const auto *imm = e.as<IntImm>();
    if (!imm)
      return -1;
    size *= imm->value;
  }
  return size;
}

Stmt BufferRealize::make(Buffer buffer, std::vector<Range> bounds, Stmt body) {
  internal_check(buffer.defined() && body.defined()) << "BufferRealize";
  internal_check(bounds.size() == buffer.ndim())
      << "BufferRealize of " << buffer.name() << ": " << bounds.size() << " bounds for "
      << buffer.ndim() << " dimensions";
  return make_stmt<BufferRealize>(std::move(buffer), std::move(bounds), std::move(body));
}

Stmt BufferStore::make(Buffer buffer, Expr value, std::vector<Expr> indices) {
  internal_check(buffer.defined()) << "BufferStore to an undefined buffer";
  check_defined(value, "BufferStore", "value");
  user_check(indices.size() == buffer.ndim() || indices.size() == 1, "BufferStore")
      << "buffer '" << buffer.name() << "' has " << buffer.ndim() << " dimensions but "
      << indices.size() << " indices were given";
  int lanes = 1;
  for (const Expr &i : indices) {
    check_int_index("BufferStore", buffer.name(), i);
    lanes = std::max(lanes, i.type().lanes());
  }
  user_check(value.type() == buffer.dtype().with_lanes(lanes * buffer.dtype().lanes()),
             "BufferStore")
      << "storing " << value.type() << " into buffer '" << buffer.name() << "' of "
      << buffer.dtype() << (lanes > 1 ? " (vector of " + std::to_string(lanes) + ")" : "");
  return make_stmt<BufferStore>(std::move(buffer), std::move(value), std::move(indices));
}

Stmt IfThenElse::make(Expr condition, Stmt then_case, Stmt else_case) {
  check_bool("IfThenElse", condition);
  internal_check(then_case.defined()) << "IfThenElse without then";
  return make_stmt<IfThenElse>(std::move(condition), std::move(then_case), std::move(else_case));
}

Stmt Seq::make(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (Stmt &s : stmts) {
    if (!s.defined())
      continue;
    if (const auto *seq = s.as<Seq>())
      flat.insert(flat.end(), seq->stmts.begin(), seq->stmts.end());
    else
      flat.push_back(std::move(s));
  }
  if (flat.empty())
    return Stmt();
  if (flat.size() == 1)
    return flat[0];
  return make_stmt<Seq>(std::move(flat));
}

Stmt Evaluate::make(Expr value) {
  check_defined(value, "Evaluate", "value");
  return make_stmt<Evaluate>(std::move(value));
}

} // namespace tessel
