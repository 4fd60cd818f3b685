// CUDA code generation: PTX warp-level matrix instructions on per-thread register fragments.
//
// An Allocate in an mma.* scope becomes a register array of whole tiles, one row per tile:
// `unsigned A[n][4]` (m16k16 fp16 tiles of matrix_a: 8 halves per thread in 4 registers),
// `unsigned B[n][2]` (k16n8 tiles of matrix_b) and `float C[n][4]` (m16n8 fp32 accumulator
// tiles). The intrinsics become inline PTX (ldmatrix, mma.sync) and plain register code (fill,
// store). Fragment indices must be constants, so the arrays stay in registers: a register
// array indexed at run time is spilled to local memory. The operands hold float16 or bfloat16
// (mma.sync's .f16 or .bf16 form, both operands the same).
#include "compiler/codegen/CUDAKernelEmitter.h"

#include "compiler/ir/FragmentScope.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

namespace tessel::codegen {

namespace {

struct MmaTile {
  DataType dtype;    ///< float16 for the operands, which may hold bfloat16 instead
  int elements;      ///< of a tile, over the whole warp
  int registers;     ///< per thread: 32-bit registers (halves in pairs) or floats
  const char *type;  ///< of one register
};

const MmaTile *mma_tile(const std::string &scope) {
  static const MmaTile a{Float(16), 16 * 16, 4, "unsigned"}, b{Float(16), 16 * 8, 2, "unsigned"},
      acc{Float(32), 16 * 8, 4, "float"};
  if (scope == "mma.matrix_a")
    return &a;
  if (scope == "mma.matrix_b")
    return &b;
  if (scope == "mma.accumulator")
    return &acc;
  return nullptr;
}

} // namespace

std::string CUDAKernelEmitter::mma_fragment_decl(const Allocate *op) {
  const std::string &name = op->buffer_var.name();
  const MmaTile *tile = mma_tile(op->scope);
  user_check(tile, "codegen_cuda")
      << "allocation '" << name << "' has unknown mma scope '" << op->scope
      << "'; expected mma.matrix_a, mma.matrix_b or mma.accumulator";
  const bool operand = tile->dtype == Float(16);
  user_check(op->dtype == tile->dtype || (operand && op->dtype == BFloat(16)), "codegen_cuda")
      << "mma fragment '" << name << "' (" << op->scope << ") has element type " << op->dtype
      << " but mma.sync.m16n8k16 takes "
      << (operand ? "float16 or bfloat16" : tile->dtype.str()) << " there";
  int64_t size = op->constant_size();
  user_check(size % tile->elements == 0, "codegen_cuda")
      << "mma fragment '" << name << "' (" << op->scope << ") holds " << size
      << " elements, which is not a whole number of its " << tile->elements << "-element tiles";
  std::string text = bind_var(op->buffer_var.get());
  scope_of_[op->buffer_var.get()] = op->scope;
  mma_dtype_[op->buffer_var.get()] = op->dtype;
  return std::string(tile->type) + " " + text + "[" + std::to_string(size / tile->elements) +
         "][" + std::to_string(tile->registers) + "];";
}

CExpr CUDAKernelEmitter::mma_lane_id() {
  const LaunchConfig &l = f_.launch;
  if (l.block[0] == 32)
    return {"((int)threadIdx.x)", PrecAtom};
  if (l.block[0] % 32 == 0)
    return {"((int)threadIdx.x & 31)", PrecAtom};
  return {"((int)(threadIdx.x + " + std::to_string(l.block[0]) + " * (threadIdx.y + " +
              std::to_string(l.block[1]) + " * threadIdx.z)) & 31)",
          PrecAtom};
}

std::string CUDAKernelEmitter::mma_register(const Expr &frag, const Expr &index, int reg,
                                            const char *intrin, const char *expected_scope) {
  const auto *v = frag.as<Variable>();
  auto scope = v ? scope_of_.find(v) : scope_of_.end();
  user_check(scope != scope_of_.end() && is_mma_scope(scope->second), "codegen_cuda")
      << intrin << " in kernel '" << f_.name << "': " << frag
      << " is not an mma fragment (an allocation in scope mma.matrix_a, mma.matrix_b or "
         "mma.accumulator)";
  user_check(scope->second == expected_scope, "codegen_cuda")
      << intrin << " in kernel '" << f_.name << "' expects an " << expected_scope
      << " fragment, but '" << v->name << "' is " << scope->second;
  auto i = as_const_int(index);
  user_check(i.has_value(), "codegen_cuda")
      << intrin << " in kernel '" << f_.name << "': the tile index " << index << " of fragment '"
      << v->name << "' is not a constant. Register arrays indexed at run time live in local "
      << "memory; unroll the loops around the intrinsic (Stage::unroll)";
  const MmaTile *tile = mma_tile(scope->second);
  int64_t flat = *i * tile->registers + reg;
  return var_text(v) + "[" + std::to_string(flat / tile->registers) + "][" +
         std::to_string(flat % tile->registers) + "]";
}

CUDAKernelEmitter::AccumulatorStore CUDAKernelEmitter::accumulator_store(const Expr &ptr,
                                                                        const char *intrin) {
  const auto *call = ptr.as<Call>();
  const auto *load = call && call->is_intrinsic(intrinsic::address_of)
                         ? call->args[0].as<BufferLoad>()
                         : nullptr;
  const DataType t = load ? load->buffer.dtype() : DataType();
  user_check(load && (t == Float(32) || t == Float(16) || t == BFloat(16)), "codegen_cuda")
      << intrin << " in kernel '" << f_.name
      << "': the pointer must be address_of(buffer[index]) of a float32, float16 or bfloat16 "
         "buffer, got " << ptr;
  type_name(t); // the preamble's fp16 / bf16 headers
  if (t == Float(32))
    return {t, "float2", "make_float2"};
  if (t == Float(16))
    return {t, "__half2", "__floats2half2_rn"};
  return {t, "__nv_bfloat162", "__floats2bfloat162_rn"};
}

std::string CUDAKernelEmitter::AccumulatorStore::one(const std::string &v) const {
  if (type == Float(32))
    return v;
  std::string rounded = type == Float(16) ? "__float2half_rn(" : "__float2bfloat16_rn(";
  return rounded + v + ")";
}

bool CUDAKernelEmitter::emit_mma(const Call *op) {
  if (op->call_kind == Call::PureExtern || op->name.rfind("mma_", 0) != 0 ||
      op->name == intrinsic::mma_lane_id)
    return false;
  const std::vector<Expr> &a = op->args;
  const char *name = op->name.c_str();
  auto expect_args = [&](size_t n, const char *signature) { check_intrinsic_args(op, n, signature); };
  auto constant = [&](const Expr &e, const char *what) {
    auto v = as_const_int(e);
    user_check(v.has_value(), "codegen_cuda")
        << name << " in kernel '" << f_.name << "': " << what << " must be a constant, got " << e;
    return *v;
  };
  // Operand lists of inline PTX: `"=r"(A[0][0]), "=r"(A[0][1])`.
  auto operands = [](const char *constraint, const std::vector<std::string> &regs) {
    std::string s;
    for (const std::string &r : regs)
      s += std::string(s.empty() ? "" : ", ") + "\"" + constraint + "\"(" + r + ")";
    return s;
  };
  auto registers = [&](const Expr &frag, const Expr &index, int first, int count,
                       const char *scope) {
    std::vector<std::string> r;
    for (int i = 0; i < count; ++i)
      r.push_back(mma_register(frag, index, first + i, name, scope));
    return r;
  };
  // "{%4, %5, %6, %7}" for `count` operands from `first`.
  auto placeholders = [](int first, int count) {
    std::string s = "{";
    for (int i = 0; i < count; ++i)
      s += (i ? ", %" : "%") + std::to_string(first + i);
    return s + "}";
  };

  if (op->name == intrinsic::mma_fill_fragment) {
    expect_args(3, "(frag, index, value)");
    std::string value = print(a[2]);
    for (const std::string &r : registers(a[0], a[1], 0, 4, "mma.accumulator"))
      line(r + " = " + value + ";");
    return true;
  }
  if (op->name == intrinsic::mma_ldmatrix) {
    expect_args(5, "(frag, index, num, trans, ptr)");
    int64_t num = constant(a[2], "num"), trans = constant(a[3], "trans");
    user_check(num == 1 || num == 2 || num == 4, "codegen_cuda")
        << name << ": ldmatrix loads 1, 2 or 4 matrices, not " << num;
    const auto *v = a[0].as<Variable>();
    auto scope = v ? scope_of_.find(v) : scope_of_.end();
    const char *frag_scope =
        scope != scope_of_.end() && scope->second == "mma.matrix_b" ? "mma.matrix_b" : "mma.matrix_a";
    std::vector<std::string> dst = registers(a[0], a[1], 0, int(num), frag_scope);
    const auto *ptr = a[4].as<Call>();
    const auto *load = ptr && ptr->is_intrinsic(intrinsic::address_of) ? ptr->args[0].as<BufferLoad>() : nullptr;
    auto mem = load ? scope_of_.find(data_var(load->buffer)) : scope_of_.end();
    user_check(mem != scope_of_.end() && mem->second == "shared", "codegen_cuda")
        << name << " in kernel '" << f_.name
        << "': the pointer must be address_of(buffer[index]) of a shared buffer, got " << a[4];
    std::string ptx = "ldmatrix.sync.aligned.m8n8.x" + std::to_string(num) +
                      (trans ? ".trans" : "") + ".shared.b16 " + placeholders(0, int(num)) +
                      ", [%" + std::to_string(num) + "];\\n";
    line("asm volatile(\"" + ptx + "\"");
    line("    : " + operands("=r", dst));
    line("    : \"r\"((unsigned)__cvta_generic_to_shared(" + print(a[4]) + ")));");
    return true;
  }
  if (op->name == intrinsic::mma_sync) {
    expect_args(8, "(d, d_index, a, a_index, b, b_index, c, c_index)");
    std::vector<std::string> d = registers(a[0], a[1], 0, 4, "mma.accumulator");
    std::vector<std::string> x = registers(a[2], a[3], 0, 4, "mma.matrix_a");
    std::vector<std::string> y = registers(a[4], a[5], 0, 2, "mma.matrix_b");
    std::vector<std::string> c = registers(a[6], a[7], 0, 4, "mma.accumulator");
    // Accumulating in place (d is c) ties the operands: "+f".
    bool in_place = d == c;
    DataType ta = mma_dtype_.lookup(a[2].as<Variable>());
    DataType tb = mma_dtype_.lookup(a[4].as<Variable>());
    user_check(ta == tb, "codegen_cuda")
        << name << " in kernel '" << f_.name << "': A holds " << ta << " and B " << tb
        << "; mma.sync multiplies operands of one type (float16 or bfloat16)";
    const char *in = ta == BFloat(16) ? "bf16" : "f16";
    std::string ptx = std::string("mma.sync.aligned.m16n8k16.row.col.f32.") + in + "." + in +
                      ".f32 " + placeholders(0, 4) +
                      ", " + placeholders(4, 4) + ", " + placeholders(8, 2) + ", " +
                      placeholders(in_place ? 0 : 10, 4) + ";\\n";
    line("asm volatile(\"" + ptx + "\"");
    line("    : " + operands(in_place ? "+f" : "=f", d));
    line("    : " + operands("r", x) + ", " + operands("r", y) +
         (in_place ? "" : ", " + operands("f", c)) + ");");
    return true;
  }
  if (op->name == intrinsic::mma_store_fragment) {
    expect_args(5, "(frag, index, ptr, stride, lanes)");
    std::vector<std::string> r = registers(a[0], a[1], 0, 4, "mma.accumulator");
    int64_t stride = constant(a[3], "stride"), lanes = constant(a[4], "lanes");
    user_check(lanes == 1 || lanes == 2, "codegen_cuda")
        << name << ": lanes must be 1 or 2, got " << lanes;
    // Each value rounded to the buffer's type where it is narrower.
    const AccumulatorStore out = accumulator_store(a[2], name);
    std::string p = print(a[2]);
    auto at = [&](int64_t offset) {
      return offset == 0 ? p : "(" + p + " + " + std::to_string(offset) + ")";
    };
    for (int row = 0; row < 2; ++row) {
      int64_t offset = row * 8 * stride;
      if (lanes == 2) {
        line("*(" + out.pair_type + "*)" + at(offset) + " = " + out.pair + "(" + r[2 * row] +
             ", " + r[2 * row + 1] + ");");
      } else {
        for (int e = 0; e < 2; ++e) {
          std::string store = "*"; // built in steps: GCC 12 misreads "*" + std::string here
          store += at(offset + e) + " = " + out.one(r[2 * row + e]) + ";";
          line(store);
        }
      }
    }
    return true;
  }
  return false; // an unknown mma_* name: reported as an unknown intrinsic
}

} // namespace tessel::codegen
