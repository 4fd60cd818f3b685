// CUDA code generation: expressions, types and literals.
#include "compiler/codegen/CUDAKernelEmitter.h"

#include "compiler/ir/FragmentScope.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

#include <charconv>
#include <cmath>

namespace tessel::codegen {

namespace {

bool is_small_int(DataType t) { return t.is_integer_like() && !t.is_bool() && t.bits() < 32; }
bool is_half_like(DataType t) { return t.is_float16() || t.is_bfloat(); }

// float8 is a storage type: CUDA has no arithmetic on __nv_fp8_e4m3 / __nv_fp8_e5m2.
void check_not_float8(DataType t, const char *op) {
  user_check(!t.is_float8(), "codegen_cuda")
      << "'" << op << "' on " << t << " values: float8 types are for storage and Tensor Core "
      << "operands only; cast them to float32 first (x.astype(Float(32)))";
}

/// Shortest text that reads back as `v` (as float when `single`), always with a '.' or an
/// exponent so that it is a floating-point literal.
std::string shortest_float_text(double v, bool single) {
  char buf[64];
  auto res = single ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v))
                    : std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s;
}

/// The float functions whose float32 versions carry an 'f' suffix (expf, sqrtf, ...).
bool is_float_math(const std::string &name) {
  static const char *const names[] = {
      "exp",  "exp2", "exp10", "expm1", "log",   "log2", "log10", "log1p", "sqrt", "rsqrt",
      "cbrt", "sin",  "cos",   "tan",   "asin",  "acos", "atan",  "atan2", "sinh", "cosh",
      "tanh", "erf",  "erfc",  "floor", "ceil",  "round", "trunc", "fabs", "pow",  "fmod",
      "fmin", "fmax", "hypot", "rint",  "nearbyint"};
  for (const char *n : names)
    if (name == n)
      return true;
  return false;
}

} // namespace

// ---- Types and literals -------------------------------------------------------------------------

std::string CUDAKernelEmitter::type_name(DataType t) {
  internal_check(t.is_scalar()) << "CUDA type of vector type " << t;
  switch (t.code()) {
  case DataType::Int:
    switch (t.bits()) {
    case 8:
      return "signed char";
    case 16:
      return "short";
    case 32:
      return "int";
    case 64:
      return "long long";
    }
    break;
  case DataType::UInt:
    switch (t.bits()) {
    case 1:
      return "bool";
    case 8:
      return "unsigned char";
    case 16:
      return "unsigned short";
    case 32:
      return "unsigned int";
    case 64:
      return "unsigned long long";
    }
    break;
  case DataType::Float:
    switch (t.bits()) {
    case 16:
      needs_.fp16 = true;
      return "half";
    case 32:
      return "float";
    case 64:
      return "double";
    }
    break;
  case DataType::BFloat:
    needs_.bf16 = true;
    return "__nv_bfloat16";
  case DataType::Float8E4M3:
    needs_.fp8 = true;
    return "__nv_fp8_e4m3";
  case DataType::Float8E5M2:
    needs_.fp8 = true;
    return "__nv_fp8_e5m2";
  case DataType::Handle:
    break;
  }
  internal_error << "no CUDA type for " << t;
}

std::string CUDAKernelEmitter::float_literal(DataType t, double v) {
  std::string f32;
  if (std::isnan(v))
    f32 = "__int_as_float(0x7fc00000)";
  else if (std::isinf(v))
    f32 = v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  else
    f32 = shortest_float_text(v, true) + "f";
  if (t.bits() == 64 && t.is_float() && !t.is_bfloat()) {
    if (std::isnan(v))
      return "__longlong_as_double(0x7ff8000000000000LL)";
    if (std::isinf(v))
      return v > 0 ? "__longlong_as_double(0x7ff0000000000000LL)"
                   : "__longlong_as_double(0xfff0000000000000LL)";
    std::string s = shortest_float_text(v, false);
    return v < 0 ? "(" + s + ")" : s;
  }
  type_name(t);
  if (t.is_float8()) // the constructor rounds to nearest even, saturating (__NV_SATFINITE)
    return type_name(t) + "(" + f32 + ")";
  if (t.is_bfloat())
    return "__float2bfloat16_rn(" + f32 + ")";
  if (t.is_float16())
    return "__float2half_rn(" + f32 + ")";
  return v < 0 && std::isfinite(v) ? "(" + f32 + ")" : f32;
}

std::string CUDAKernelEmitter::literal(const Expr &e) {
  if (const auto *f = e.as<FloatImm>())
    return float_literal(f->type, f->value);
  const auto *imm = llvm::cast<IntImm>(e);
  DataType t = imm->type;
  int64_t v = imm->value;
  if (t.is_bool())
    return v ? "true" : "false";
  if (t.is_uint()) {
    std::string s = std::to_string(static_cast<uint64_t>(v));
    if (t.bits() == 64)
      return s + "ULL";
    if (t.bits() == 32)
      return s + "U";
    return "((" + type_name(t) + ")" + s + ")";
  }
  // The most negative value is not a literal in C: write it as an expression.
  std::string s = v == t.min_int() ? std::to_string(v + 1) : std::to_string(v);
  if (t.bits() == 64)
    s += "LL";
  if (v == t.min_int())
    s += t.bits() == 64 ? " - 1LL" : " - 1";
  if (t.bits() < 32)
    return "((" + type_name(t) + ")" + s + ")";
  return v < 0 ? "(" + s + ")" : s;
}

// ---- Expressions --------------------------------------------------------------------------------

std::string CUDAKernelEmitter::print(const Expr &e, int parent_prec, bool is_right) {
  CExpr c = emit_expr(e);
  bool compare_in_compare =
      (parent_prec == PrecRel || parent_prec == PrecEq) && (c.prec == PrecRel || c.prec == PrecEq);
  bool and_in_or = parent_prec == PrecLOr && c.prec == PrecLAnd;
  bool paren = c.prec > parent_prec || (c.prec == parent_prec && is_right && c.prec != PrecAtom) ||
               compare_in_compare || and_in_or;
  return paren ? "(" + c.text + ")" : c.text;
}

CExpr CUDAKernelEmitter::emit_binary(const char *op, int prec, const Expr &a, const Expr &b,
                                     DataType t) {
  check_not_float8(t, op);
  std::string text = print(a, prec, false) + " " + op + " " + print(b, prec, true);
  // C computes small integers in int; cast back so that results wrap as the IR's type does.
  if (is_small_int(t) && prec <= PrecAdd)
    return {"((" + type_name(t) + ")(" + text + "))", PrecAtom};
  return {text, prec};
}

CExpr CUDAKernelEmitter::emit_floor_div_mod(bool is_div, const Expr &a, const Expr &b) {
  DataType t = a.type();
  auto divisor = as_const_int(b);
  // Floor and truncating division agree when the dividend is >= 0 and the divisor > 0.
  if (t.is_uint() || (divisor && *divisor > 0 && is_non_negative(a)))
    return emit_binary(is_div ? "/" : "%", PrecMul, a, b, t);
  needs_.floor_helpers = true;
  std::string text = std::string(is_div ? "tessel_floordiv(" : "tessel_floormod(") + print(a) +
                     ", " + print(b) + ")";
  if (is_small_int(t))
    text = "((" + type_name(t) + ")" + text + ")";
  return {text, PrecAtom};
}

CExpr CUDAKernelEmitter::emit_min_max(bool is_min, const Expr &a, const Expr &b) {
  DataType t = a.type();
  check_not_float8(t, is_min ? "min" : "max");
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "(" + std::string&&.
  std::string text = is_half_like(t) ? (is_min ? "__hmin(" : "__hmax(") : (is_min ? "min(" : "max(");
  text += print(a);
  text += ", ";
  text += print(b);
  text += ")";
  type_name(t);
  if (is_small_int(t))
    text = "((" + type_name(t) + ")" + text + ")";
  return {text, PrecAtom};
}

CExpr CUDAKernelEmitter::emit_cast(DataType to, const Expr &v) {
  DataType from = v.type();
  if (from == to)
    return emit_expr(v);
  // float8 goes through float (exact), the one conversion cuda_fp8.h defines both ways; the
  // constructor from float or double rounds once, to nearest even, saturating to the largest
  // finite value (__NV_SATFINITE).
  if (from.is_float8()) {
    std::string f = "((float)" + print(v, PrecUnary) + ")";
    if (to == Float(32))
      return {f, PrecAtom};
    if (to.is_float8())
      return {type_name(to) + "(" + f + ")", PrecAtom};
    if (is_half_like(to)) {
      type_name(to);
      return {(to.is_bfloat() ? "__float2bfloat16_rn(" : "__float2half_rn(") + f + ")", PrecAtom};
    }
    if (to.is_bool())
      return {"(" + f + " != 0.0f)", PrecAtom};
    return {"((" + type_name(to) + ")" + f + ")", PrecAtom};
  }
  if (to.is_float8()) {
    std::string value = from == Float(64) || from == Float(32) ? print(v)
                        : is_half_like(from) ? print(Cast::make(Float(32), v))
                                             : "(float)" + print(v, PrecUnary);
    return {type_name(to) + "(" + value + ")", PrecAtom};
  }
  auto to_half_like = [&](const std::string &as_float) -> std::string {
    type_name(to);
    return (to.is_bfloat() ? "__float2bfloat16_rn(" : "__float2half_rn(") + as_float + ")";
  };
  if (is_half_like(from)) {
    // Through float: the one conversion cuda_fp16.h / cuda_bf16.h define for every target type.
    type_name(from);
    std::string f = (from.is_bfloat() ? "__bfloat162float(" : "__half2float(") + print(v) + ")";
    if (to == Float(32))
      return {f, PrecAtom};
    if (is_half_like(to))
      return {to_half_like(f), PrecAtom};
    if (to.is_bool())
      return {"(" + f + " != 0.0f)", PrecAtom};
    return {"((" + type_name(to) + ")" + f + ")", PrecAtom};
  }
  if (is_half_like(to))
    return {to_half_like(from == Float(32) ? print(v) : "(float)" + print(v, PrecUnary)),
            PrecAtom};
  if (to.is_bool())
    return {"(" + print(v, PrecEq) + " != 0)", PrecAtom};
  return {"((" + type_name(to) + ")" + print(v, PrecUnary) + ")", PrecAtom};
}

CExpr CUDAKernelEmitter::emit_let(const Let *op) {
  internal_check(op->value.type().is_scalar())
      << "vector Let '" << op->var.name() << "' is not supported by CUDA codegen";
  std::string value = print(op->value);
  std::string t = type_name(op->value.type());
  std::string name = bind_var(op->var.get());
  if (is_non_negative(op->value))
    non_negative_.insert(op->var.get());
  std::string def = "const " + t + " " + name + " = " + value + ";";
  if (conditional_depth_ == 0) {
    hoisted_.push_back(def);
    return emit_expr(op->body);
  }
  // Under a branch that C may skip the definition must stay under it too.
  return {"[&]() { " + def + " return " + print(op->body) + "; }()", PrecAtom};
}

CExpr CUDAKernelEmitter::emit_math_call(const Call *op) {
  DataType t = op->type;
  std::string name = op->name;
  check_not_float8(t, name.c_str());
  bool float_math = is_float_math(name) || name == "abs" || name == "fast_exp2";
  if (t.is_float() && float_math && name == "abs")
    name = "fabs";
  if (name == "fast_exp2") { // float in, float out: the preamble's helper (double: exp2)
    needs_.fast_exp2 |= t != Float(64);
    name = t == Float(64) ? "exp2" : "tessel_fast_exp2";
  }
  std::vector<std::string> args;
  for (const Expr &a : op->args) {
    // Half-precision math goes through float; cuda_fp16's h* functions cover too few.
    if (float_math && is_half_like(a.type())) {
      type_name(a.type());
      args.push_back((a.type().is_bfloat() ? "__bfloat162float(" : "__half2float(") + print(a) +
                     ")");
    } else {
      args.push_back(print(a));
    }
  }
  if (float_math && (t == Float(32) || is_half_like(t)))
    name += "f";
  std::string text = name + "(";
  for (size_t i = 0; i < args.size(); ++i)
    text += (i ? ", " : "") + args[i];
  text += ")";
  if (float_math && is_half_like(t)) {
    type_name(t);
    text = (t.is_bfloat() ? "__float2bfloat16_rn(" : "__float2half_rn(") + text + ")";
  }
  return {text, PrecAtom};
}

CExpr CUDAKernelEmitter::emit_call(const Call *op) {
  if (op->call_kind == Call::PureExtern)
    return emit_math_call(op);
  const std::string &name = op->name;
  if (name == intrinsic::if_then_else) {
    user_check(op->args.size() == 3, "codegen_cuda")
        << "if_then_else takes 3 arguments, got " << op->args.size();
    std::string c = print(op->args[0], PrecLOr);
    ++conditional_depth_;
    std::string t = print(op->args[1]), f = print(op->args[2]);
    --conditional_depth_;
    return {"(" + c + " ? " + t + " : " + f + ")", PrecAtom};
  }
  if (name == intrinsic::bitwise_xor) {
    user_check(op->args.size() == 2 && op->type.is_int() && op->type.is_scalar(), "codegen_cuda")
        << "bitwise_xor takes two scalar integers, got " << Expr(op);
    return {"(" + print(op->args[0], PrecAdd) + " ^ " + print(op->args[1], PrecAdd) + ")",
            PrecAtom};
  }
  if (name == intrinsic::address_of) {
    user_check(op->args.size() == 1, "codegen_cuda") << "address_of takes one buffer load";
    return {address_of(op->args[0]), PrecUnary};
  }
  if (name == intrinsic::access_ptr) {
    user_check(op->args.size() == 5, "codegen_cuda")
        << "access_ptr takes 5 arguments (type, buffer, offset, extent, rw_mask), got "
        << op->args.size();
    const auto *v = op->args[1].as<Variable>();
    user_check(v, "codegen_cuda") << "access_ptr: the buffer argument must be a buffer variable";
    auto scope = scope_of_.find(v);
    user_check(scope == scope_of_.end() || !is_fragment_scope(scope->second), "codegen_cuda")
        << "access_ptr of fragment '" << v->name << "' (" << scope->second
        << "): fragments have no address";
    std::string base = var_text(v);
    if (is_zero(op->args[2]))
      return {base, PrecAtom};
    return {"(" + base + " + " + print(op->args[2], PrecAdd, false) + ")", PrecAtom};
  }
  if (name == intrinsic::mma_lane_id) {
    user_check(op->args.empty(), "codegen_cuda") << "mma_lane_id takes no arguments";
    return mma_lane_id();
  }
  if (name == intrinsic::wgmma_thread_id) {
    user_check(op->args.empty(), "codegen_cuda") << "wgmma_thread_id takes no arguments";
    return wgmma_thread_id();
  }
  if (name == intrinsic::wgmma_reg) {
    check_intrinsic_args(op, 4, "(acc, index, n, r)");
    return {wgmma_register(op), PrecAtom};
  }
  if (name == intrinsic::wgmma_row) {
    check_intrinsic_args(op, 3, "(rows, index, h)");
    return {wgmma_row_ref(op), PrecAtom};
  }
  if (name == intrinsic::shfl_xor) {
    check_intrinsic_args(op, 2, "(value, mask)");
    const DataType t = op->args[0].type();
    user_check(t == Float(32) || t == Int(32), "codegen_cuda")
        << "shfl_xor in kernel '" << f_.name << "' exchanges float32 or int32, not " << t;
    return {"__shfl_xor_sync(0xffffffffu, " + print(op->args[0]) + ", " + print(op->args[1]) +
                ")",
            PrecAtom};
  }
  if (name == intrinsic::syncthreads || name == intrinsic::wmma_fill_fragment ||
      name == intrinsic::wmma_load_matrix_sync || name == intrinsic::wmma_mma_sync ||
      name == intrinsic::wmma_store_matrix_sync || name == intrinsic::cp_async ||
      name == intrinsic::cp_async_commit || name == intrinsic::cp_async_wait ||
      name == intrinsic::mma_fill_fragment || name == intrinsic::mma_ldmatrix ||
      name == intrinsic::mma_sync || name == intrinsic::mma_store_fragment ||
      name == intrinsic::wgmma_fill || name == intrinsic::wgmma_mma ||
      name == intrinsic::wgmma_mma_rs || name == intrinsic::wgmma_acc_to_a ||
      name == intrinsic::wgmma_fence || name == intrinsic::wgmma_commit ||
      name == intrinsic::wgmma_wait || name == intrinsic::wgmma_store ||
      name == intrinsic::wgmma_reg_set || name == intrinsic::wgmma_row_set ||
      name == intrinsic::fence_proxy_async ||
      name == intrinsic::named_barrier_sync || name == intrinsic::named_barrier_arrive ||
      name == intrinsic::setmaxnreg || name == intrinsic::tma_store ||
      name == intrinsic::tma_store_commit || name == intrinsic::tma_store_wait_read ||
      name == intrinsic::tma_store_wait)
    user_error("codegen_cuda") << "intrinsic '" << name << "' in kernel '" << f_.name
                               << "' is used as a value; it has no result and may only be a "
                                  "statement (Evaluate)";
  user_error("codegen_cuda") << "unknown intrinsic '" << name << "' in kernel '" << f_.name
                             << "'; CUDA codegen knows if_then_else, address_of, access_ptr, "
                                "syncthreads, cp_async{,_commit,_wait}, wmma_{fill_fragment, "
                                "load_matrix_sync, mma_sync, store_matrix_sync}, mma_{lane_id, "
                                "fill_fragment, ldmatrix, sync, store_fragment}, wgmma_{thread_id, "
                                "fill, mma, fence, commit, wait, store, reg, reg_set}, fence_proxy_async, "
                                "named_barrier_{sync, arrive} and setmaxnreg";
}

CExpr CUDAKernelEmitter::emit_expr(const Expr &e) {
  internal_check(e.defined()) << "undefined expression in kernel '" << f_.name << "'";
  internal_check(e.type().lanes() == 1 || e.type().is_handle())
      << "vector expression " << e << " outside a vector store in kernel '" << f_.name << "'";
  switch (e->kind()) {
  case IRNodeKind::IntImm:
  case IRNodeKind::FloatImm:
    return {literal(e), PrecAtom};
  case IRNodeKind::Var:
    return {var_text(llvm::cast<Variable>(e.get())), PrecAtom};
#define BINARY(K, OP, PREC)                                                                        \
  case IRNodeKind::K: {                                                                            \
    const auto *op = llvm::cast<K>(e.get());                                                       \
    return emit_binary(OP, PREC, op->a, op->b, op->type);                                          \
  }
    BINARY(Add, "+", PrecAdd)
    BINARY(Sub, "-", PrecAdd)
    BINARY(Mul, "*", PrecMul)
    BINARY(Div, "/", PrecMul)
    BINARY(Mod, "%", PrecMul)
    BINARY(EQ, "==", PrecEq)
    BINARY(NE, "!=", PrecEq)
    BINARY(LT, "<", PrecRel)
    BINARY(LE, "<=", PrecRel)
    BINARY(GT, ">", PrecRel)
    BINARY(GE, ">=", PrecRel)
#undef BINARY
  case IRNodeKind::And:
  case IRNodeKind::Or: {
    bool is_and = e->kind() == IRNodeKind::And;
    const auto *a = is_and ? &llvm::cast<And>(e.get())->a : &llvm::cast<Or>(e.get())->a;
    const auto *b = is_and ? &llvm::cast<And>(e.get())->b : &llvm::cast<Or>(e.get())->b;
    int prec = is_and ? PrecLAnd : PrecLOr;
    std::string lhs = print(*a, prec, false);
    // C skips the right side when the left decides: nothing may be hoisted out of it.
    ++conditional_depth_;
    std::string rhs = print(*b, prec, true);
    --conditional_depth_;
    return {lhs + (is_and ? " && " : " || ") + rhs, prec};
  }
  case IRNodeKind::Not:
    return {"!" + print(llvm::cast<Not>(e.get())->a, PrecUnary), PrecUnary};
  case IRNodeKind::FloorDiv: {
    const auto *op = llvm::cast<FloorDiv>(e.get());
    return emit_floor_div_mod(true, op->a, op->b);
  }
  case IRNodeKind::FloorMod: {
    const auto *op = llvm::cast<FloorMod>(e.get());
    return emit_floor_div_mod(false, op->a, op->b);
  }
  case IRNodeKind::Min: {
    const auto *op = llvm::cast<Min>(e.get());
    return emit_min_max(true, op->a, op->b);
  }
  case IRNodeKind::Max: {
    const auto *op = llvm::cast<Max>(e.get());
    return emit_min_max(false, op->a, op->b);
  }
  case IRNodeKind::Select: {
    const auto *op = llvm::cast<Select>(e.get());
    return {"(" + print(op->condition, PrecLOr) + " ? " + print(op->true_value) + " : " +
                print(op->false_value) + ")",
            PrecAtom};
  }
  case IRNodeKind::Cast: {
    const auto *op = llvm::cast<Cast>(e.get());
    return emit_cast(op->type, op->value);
  }
  case IRNodeKind::Let:
    return emit_let(llvm::cast<Let>(e.get()));
  case IRNodeKind::Call:
    return emit_call(llvm::cast<Call>(e.get()));
  case IRNodeKind::BufferLoad: {
    const auto *op = llvm::cast<BufferLoad>(e.get());
    check_not_fragment(op->buffer, "read");
    internal_check(op->indices.size() == 1)
        << "load of '" << op->buffer.name() << "' with " << op->indices.size()
        << " indices; CUDA codegen takes flat (Form 2) IR";
    return {buffer_name(op->buffer) + "[" + flat_index(op->buffer, op->indices[0]) + "]",
            PrecAtom};
  }
  case IRNodeKind::TensorLoad:
  case IRNodeKind::Reduce:
    internal_error << "kernel '" << f_.name << "': " << e
                   << " reached CUDA codegen; lowering must replace tensor reads and reductions";
  default:
    internal_error << "CUDA codegen: unsupported expression " << e;
  }
}

std::string CUDAKernelEmitter::flat_index(const Buffer &b, const Expr &index) {
  internal_check(index.type().is_scalar()) << "vector index " << index << " of '" << b.name()
                                           << "' outside a vector access";
  const Expr &offset = b->elem_offset;
  if (offset.defined() && !is_zero(offset))
    return print(offset + index);
  return print(index);
}

std::string CUDAKernelEmitter::address_of(const Expr &e) {
  const auto *load = e.as<BufferLoad>();
  user_check(load, "codegen_cuda") << "address_of takes a buffer load, got " << e;
  check_not_fragment(load->buffer, "addressed");
  internal_check(load->indices.size() == 1)
      << "address_of '" << load->buffer.name() << "' with several indices (Form 1 IR)";
  return "&" + buffer_name(load->buffer) + "[" + flat_index(load->buffer, load->indices[0]) + "]";
}

std::optional<int64_t> CUDAKernelEmitter::upper_bound(const Expr &e) const {
  if (!e.type().is_int() || !e.type().is_scalar())
    return std::nullopt;
  auto both = [&](const Expr &a, const Expr &b) -> std::optional<std::pair<int64_t, int64_t>> {
    std::optional<int64_t> x = upper_bound(a), y = upper_bound(b);
    if (!x || !y)
      return std::nullopt;
    return std::make_pair(*x, *y);
  };
  switch (e->kind()) {
  case IRNodeKind::IntImm:
    return llvm::cast<IntImm>(e.get())->value;
  case IRNodeKind::Var: {
    auto it = max_value_.find(llvm::cast<Variable>(e.get()));
    return it == max_value_.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }
  case IRNodeKind::Add: {
    const auto *op = llvm::cast<Add>(e.get());
    if (auto b = both(op->a, op->b))
      return b->first + b->second;
    return std::nullopt;
  }
  case IRNodeKind::Mul: { // of non-negative terms
    const auto *op = llvm::cast<Mul>(e.get());
    if (auto b = both(op->a, op->b); b && is_non_negative(op->a) && is_non_negative(op->b))
      return b->first * b->second;
    return std::nullopt;
  }
  case IRNodeKind::Div:
  case IRNodeKind::FloorDiv: { // a non-negative term by a positive constant
    const Expr &a = e->kind() == IRNodeKind::Div ? llvm::cast<Div>(e.get())->a
                                                  : llvm::cast<FloorDiv>(e.get())->a;
    const Expr &b = e->kind() == IRNodeKind::Div ? llvm::cast<Div>(e.get())->b
                                                  : llvm::cast<FloorDiv>(e.get())->b;
    auto most = upper_bound(a);
    auto c = as_const_int(b);
    if (most && c && *c > 0 && is_non_negative(a))
      return *most / *c;
    return std::nullopt;
  }
  case IRNodeKind::FloorMod: {
    auto c = as_const_int(llvm::cast<FloorMod>(e.get())->b);
    return c && *c > 0 ? std::optional<int64_t>(*c - 1) : std::nullopt;
  }
  default:
    return std::nullopt;
  }
}

bool CUDAKernelEmitter::is_non_negative(const Expr &e) const {
  if (e.type().is_uint() || e.type().is_bool())
    return true;
  auto positive_const = [](const Expr &x) {
    auto c = as_const_int(x);
    return c && *c > 0;
  };
  switch (e->kind()) {
  case IRNodeKind::IntImm:
    return llvm::cast<IntImm>(e.get())->value >= 0;
  case IRNodeKind::Var:
    return non_negative_.count(llvm::cast<Variable>(e.get())) > 0;
  case IRNodeKind::Call:
    return llvm::cast<Call>(e.get())->is_intrinsic(intrinsic::mma_lane_id) ||
           llvm::cast<Call>(e.get())->is_intrinsic(intrinsic::wgmma_thread_id);
  case IRNodeKind::Add: {
    const auto *op = llvm::cast<Add>(e.get());
    return is_non_negative(op->a) && is_non_negative(op->b);
  }
  case IRNodeKind::Mul: {
    const auto *op = llvm::cast<Mul>(e.get());
    return is_non_negative(op->a) && is_non_negative(op->b);
  }
  case IRNodeKind::Sub: { // c - b with b at most c (a reversed index: extent - 1 - i)
    const auto *op = llvm::cast<Sub>(e.get());
    auto c = as_const_int(op->a);
    std::optional<int64_t> most = upper_bound(op->b);
    return c && most && *most <= *c;
  }
  case IRNodeKind::Div: {
    const auto *op = llvm::cast<Div>(e.get());
    return is_non_negative(op->a) && positive_const(op->b);
  }
  case IRNodeKind::Mod: {
    const auto *op = llvm::cast<Mod>(e.get());
    return is_non_negative(op->a) && positive_const(op->b);
  }
  case IRNodeKind::FloorDiv: {
    const auto *op = llvm::cast<FloorDiv>(e.get());
    return is_non_negative(op->a) && positive_const(op->b);
  }
  case IRNodeKind::FloorMod:
    // The remainder of floor division has the sign of the divisor.
    return positive_const(llvm::cast<FloorMod>(e.get())->b);
  case IRNodeKind::Min: {
    const auto *op = llvm::cast<Min>(e.get());
    return is_non_negative(op->a) && is_non_negative(op->b);
  }
  case IRNodeKind::Max: {
    const auto *op = llvm::cast<Max>(e.get());
    return is_non_negative(op->a) || is_non_negative(op->b);
  }
  case IRNodeKind::Select: {
    const auto *op = llvm::cast<Select>(e.get());
    return is_non_negative(op->true_value) && is_non_negative(op->false_value);
  }
  case IRNodeKind::Cast: {
    const auto *op = llvm::cast<Cast>(e.get());
    DataType from = op->value.type();
    return from.is_integer_like() && e.type().is_int() && e.type().bits() >= from.bits() &&
           is_non_negative(op->value);
  }
  default:
    return false;
  }
}

} // namespace tessel::codegen
