// CUDA code generation: stores, and vector (Ramp / Broadcast) values.
//
// CUDA has no arithmetic on float4 or on 8 halves, so a vector store is emitted as:
//   - one vector copy `*(uint4*)(B + i) = *(const uint4*)(A + j);` when the value is itself an
//     aligned vector load;
//   - otherwise each aligned vector load of the value is read once into an aligned local array,
//     the lanes are computed one per line, and written with one vector store when the target is
//     an aligned Ramp, or one scalar store per lane when it is not.
// A Ramp(base, 1, lanes) access is one vector instruction only when it moves 4, 8 or 16 bytes
// and `base` is provably a multiple of `lanes` (so the address is aligned); otherwise it falls
// back to scalar accesses, which are always correct.
#include "compiler/codegen/CUDAKernelEmitter.h"

#include "compiler/ir/FragmentScope.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

#include <numeric>

namespace tessel::codegen {

namespace {

/// A number that `e` is always a multiple of (0 when `e` is 0). Sound, not complete.
int64_t known_multiple(const Expr &e) {
  switch (e->kind()) {
  case IRNodeKind::IntImm: {
    int64_t v = llvm::cast<IntImm>(e.get())->value;
    return v < 0 ? -v : v;
  }
  case IRNodeKind::Add: {
    const auto *op = llvm::cast<Add>(e.get());
    return std::gcd(known_multiple(op->a), known_multiple(op->b));
  }
  case IRNodeKind::Sub: {
    const auto *op = llvm::cast<Sub>(e.get());
    return std::gcd(known_multiple(op->a), known_multiple(op->b));
  }
  case IRNodeKind::Mul: {
    const auto *op = llvm::cast<Mul>(e.get());
    int64_t a = known_multiple(op->a), b = known_multiple(op->b);
    if (a == 0 || b == 0)
      return 0;
    // Any divisor of the product is sound; stay far from overflow.
    return (a < (1 << 20) && b < (1 << 20)) ? a * b : std::max(a, b);
  }
  case IRNodeKind::FloorMod: {
    const auto *op = llvm::cast<FloorMod>(e.get());
    auto c = as_const_int(op->b);
    return c ? std::gcd(known_multiple(op->a), *c < 0 ? -*c : *c) : 1;
  }
  case IRNodeKind::Mod: {
    const auto *op = llvm::cast<Mod>(e.get());
    auto c = as_const_int(op->b);
    return c ? std::gcd(known_multiple(op->a), *c < 0 ? -*c : *c) : 1;
  }
  case IRNodeKind::Cast: {
    const auto *op = llvm::cast<Cast>(e.get());
    return op->value.type().is_integer_like() ? known_multiple(op->value) : 1;
  }
  default:
    return 1;
  }
}

/// The vector loads of a value that are evaluated unconditionally (not under a branch of
/// if_then_else, nor on the right of && / ||), so that reading them up front is safe.
class UnconditionalLoads : public IRVisitor {
public:
  std::vector<const BufferLoad *> loads;

protected:
  using IRVisitor::visit;
  void visit(const BufferLoad *op) override {
    if (op->type.is_vector())
      loads.push_back(op);
    IRVisitor::visit(op);
  }
  void visit(const Call *op) override {
    if (op->is_intrinsic(intrinsic::if_then_else) && !op->args.empty())
      return visit_expr(op->args[0]);
    IRVisitor::visit(op);
  }
  void visit(const And *op) override { visit_expr(op->a); }
  void visit(const Or *op) override { visit_expr(op->a); }
};

} // namespace

void CUDAKernelEmitter::check_not_fragment(const Buffer &b, const char *what) const {
  auto it = scope_of_.find(data_var(b));
  const std::string &scope = it != scope_of_.end() ? it->second : b.scope();
  user_check(!is_fragment_scope(scope), "codegen_cuda")
      << "buffer '" << b.name() << "' in kernel '" << f_.name << "' is a fragment (scope "
      << scope << ") but is " << what << " element by element; fragments can only be used "
      << "through the " << (is_mma_scope(scope) ? "mma_*" : "wmma_*")
      << " intrinsics (tensorize the stage that uses it)";
}

std::string CUDAKernelEmitter::vector_type(DataType t) const {
  DataType e = t.element_of();
  int bytes = e.bits() / 8 * t.lanes();
  if (bytes == 4)
    return e == Float(32) ? "float" : e == Int(32) ? "int" : "unsigned int";
  std::string suffix = bytes == 8 ? "2" : "4";
  if (e == Float(32))
    return "float" + suffix;
  if (e == Int(32))
    return "int" + suffix;
  return "uint" + suffix;
}

bool CUDAKernelEmitter::is_vector_access(const Buffer &b, const Expr &index) const {
  const auto *ramp = index.as<Ramp>();
  DataType e = b.dtype();
  if (!ramp || !is_one(ramp->stride) || !e.is_scalar() || e.is_bool() || e.is_handle())
    return false;
  int bytes = e.bits() / 8 * ramp->lanes;
  if (bytes != 4 && bytes != 8 && bytes != 16)
    return false;
  Expr base = ramp->base;
  if (b->elem_offset.defined() && !is_zero(b->elem_offset))
    base = b->elem_offset + base;
  return known_multiple(base) % ramp->lanes == 0;
}

std::string CUDAKernelEmitter::vector_ref(const Buffer &b, const Expr &index, bool is_const) {
  const auto *ramp = index.as<Ramp>();
  internal_check(ramp) << "vector access without a Ramp index";
  std::string type = vector_type(b.dtype().with_lanes(ramp->lanes));
  Expr base = ramp->base;
  if (b->elem_offset.defined() && !is_zero(b->elem_offset))
    base = b->elem_offset + base;
  // Integer offsets reassociate with pointer arithmetic, so the base needs no parentheses.
  std::string addr = buffer_name(b);
  if (!is_zero(base))
    addr += " + " + print(base, PrecAdd, false);
  // A read-only global buffer read inside a Stage::stream_loads stage: not allocated in L1.
  if (is_const && stream_loads_ > 0 && b.scope() == "global" && !written_.count(data_var(b))) {
    needs_.stream_loads = true;
    return "tessel_ld_stream<" + type + ">(" + addr + ")";
  }
  return "*(" + std::string(is_const ? "const " : "") + type + "*)" +
         (is_zero(base) ? addr : "(" + addr + ")");
}

void CUDAKernelEmitter::hoist_vector_loads(const Expr &value) {
  UnconditionalLoads finder;
  finder.visit_expr(value);
  for (const BufferLoad *load : finder.loads) {
    if (vector_temps_.count(load) || load->indices.size() != 1 ||
        !is_vector_access(load->buffer, load->indices[0]))
      continue;
    check_not_fragment(load->buffer, "read");
    int lanes = load->type.lanes();
    std::string ref = vector_ref(load->buffer, load->indices[0], true);
    Buffer tmp = Buffer::make(buffer_name(load->buffer) + "_vec", load->buffer.dtype(),
                              {make_const(Int(32), lanes)}, "local");
    const Variable *v = data_var(tmp);
    std::string name = bind_var(v);
    scope_of_[v] = "local";
    hoisted_.push_back("alignas(16) " + type_name(tmp.dtype()) + " " + name + "[" +
                       std::to_string(lanes) + "];");
    hoisted_.push_back("*(" + vector_type(load->type) + "*)" + name + " = " + ref + ";");
    vector_temps_[load] = tmp;
  }
}

Expr CUDAKernelEmitter::lane_of(const Expr &e, int lane) {
  if (e.type().is_scalar())
    return e;
  switch (e->kind()) {
  case IRNodeKind::Ramp: {
    const auto *op = llvm::cast<Ramp>(e.get());
    if (lane == 0)
      return op->base;
    if (auto s = as_const_int(op->stride)) {
      // Fold into a constant term of the base: i * 4 + 3, not i * 4 + 1 + 2.
      const auto *add = op->base.as<Add>();
      if (auto c = add ? as_const_int(add->b) : std::nullopt)
        return add->a + make_const(op->base.type(), *c + *s * lane);
      return op->base + make_const(op->base.type(), *s * lane);
    }
    return op->base + op->stride * make_const(op->base.type(), lane);
  }
  case IRNodeKind::Broadcast:
    return llvm::cast<Broadcast>(e.get())->value;
  case IRNodeKind::BufferLoad: {
    const auto *op = llvm::cast<BufferLoad>(e.get());
    auto it = vector_temps_.find(op);
    if (it != vector_temps_.end())
      return BufferLoad::make(it->second, {make_const(Int(32), lane)});
    internal_check(op->indices.size() == 1) << "vector load with several indices";
    return BufferLoad::make(op->buffer, {lane_of(op->indices[0], lane)});
  }
#define LANEWISE(K)                                                                                \
  case IRNodeKind::K: {                                                                            \
    const auto *op = llvm::cast<K>(e.get());                                                       \
    return K::make(lane_of(op->a, lane), lane_of(op->b, lane));                                    \
  }
    LANEWISE(Add)
    LANEWISE(Sub)
    LANEWISE(Mul)
    LANEWISE(Div)
    LANEWISE(Mod)
    LANEWISE(FloorDiv)
    LANEWISE(FloorMod)
    LANEWISE(Min)
    LANEWISE(Max)
    LANEWISE(EQ)
    LANEWISE(NE)
    LANEWISE(LT)
    LANEWISE(LE)
    LANEWISE(GT)
    LANEWISE(GE)
    LANEWISE(And)
    LANEWISE(Or)
#undef LANEWISE
  case IRNodeKind::Not:
    return Not::make(lane_of(llvm::cast<Not>(e.get())->a, lane));
  case IRNodeKind::Select: {
    const auto *op = llvm::cast<Select>(e.get());
    return Select::make(lane_of(op->condition, lane), lane_of(op->true_value, lane),
                        lane_of(op->false_value, lane));
  }
  case IRNodeKind::Cast: {
    const auto *op = llvm::cast<Cast>(e.get());
    return Cast::make(op->type.element_of(), lane_of(op->value, lane));
  }
  case IRNodeKind::Call: {
    const auto *op = llvm::cast<Call>(e.get());
    std::vector<Expr> args;
    for (const Expr &a : op->args)
      args.push_back(lane_of(a, lane));
    return Call::make(op->type.element_of(), op->name, std::move(args), op->call_kind);
  }
  case IRNodeKind::Let: {
    const auto *op = llvm::cast<Let>(e.get());
    internal_check(op->value.type().is_scalar())
        << "vector Let '" << op->var.name() << "' is not supported by CUDA codegen";
    return Let::make(op->var, op->value, lane_of(op->body, lane));
  }
  default:
    internal_error << "CUDA codegen cannot split the vector expression " << e << " into lanes";
  }
}

void CUDAKernelEmitter::emit_store(const BufferStore *op) {
  const Buffer &b = op->buffer;
  check_not_fragment(b, "written");
  internal_check(op->indices.size() == 1)
      << "store to '" << b.name() << "' with " << op->indices.size()
      << " indices; CUDA codegen takes flat (Form 2) IR";
  const Expr &index = op->indices[0];
  if (op->value.type().is_vector()) {
    internal_check(index.type().lanes() == op->value.type().lanes())
        << "store to '" << b.name() << "': index and value have different lanes";
    return emit_vector_store(op, index);
  }
  std::string target = buffer_name(b) + "[" + flat_index(b, index) + "]";
  line(target + " = " + print(op->value) + ";");
}

void CUDAKernelEmitter::emit_vector_store(const BufferStore *op, const Expr &index) {
  const Buffer &b = op->buffer;
  int lanes = op->value.type().lanes();
  bool vector_target = is_vector_access(b, index);
  const auto *src = op->value.as<BufferLoad>();
  if (vector_target && src && src->indices.size() == 1 && src->buffer.dtype() == b.dtype() &&
      is_vector_access(src->buffer, src->indices[0])) {
    check_not_fragment(src->buffer, "read");
    std::string rhs = vector_ref(src->buffer, src->indices[0], true);
    line(vector_ref(b, index, false) + " = " + rhs + ";");
    return;
  }
  hoist_vector_loads(op->value);
  if (vector_target) {
    Buffer tmp = Buffer::make(buffer_name(b) + "_vec", b.dtype(), {make_const(Int(32), lanes)},
                              "local");
    std::string name = bind_var(data_var(tmp));
    scope_of_[data_var(tmp)] = "local";
    line("alignas(16) " + type_name(b.dtype()) + " " + name + "[" + std::to_string(lanes) + "];");
    for (int i = 0; i < lanes; ++i)
      line(name + "[" + std::to_string(i) + "] = " + print(lane_of(op->value, i)) + ";");
    std::string target = vector_ref(b, index, false);
    line(target + " = *(" + vector_type(op->value.type()) + "*)" + name + ";");
  } else {
    for (int i = 0; i < lanes; ++i) {
      std::string target = buffer_name(b) + "[" + flat_index(b, lane_of(index, i)) + "]";
      line(target + " = " + print(lane_of(op->value, i)) + ";");
    }
  }
  vector_temps_.clear();
}

} // namespace tessel::codegen
