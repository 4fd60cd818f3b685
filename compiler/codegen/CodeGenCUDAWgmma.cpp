// CUDA code generation: Hopper warpgroup matrix multiply (wgmma.mma_async, sm_90a) as inline PTX.
//
// A wgmma.accumulator allocation of S floats is the warpgroup's: each thread declares
// `float acc[S / 128]`, tile `index` of an m64nN accumulator being acc[index * N / 2 ..]; a
// wgmma.rows allocation of R floats (a value per row of the accumulator layout) `float rows[R /
// 32]`, rows[2 index + h] being row 16 w + l / 4 + 8 h of tile `index`. The
// shared operands are passed as 64-bit matrix descriptors built by tessel_wgmma_desc from a
// generic pointer and the byte offsets between core matrices. Every register index is a
// constant (the loops around the intrinsics are unrolled), so the arrays stay in registers.
//
// wgmma runs asynchronously to the thread, but the compiler only sees an asm statement that
// reads and writes the accumulator registers when it is issued. After wgmma_wait, and before
// wgmma_fence, every accumulator register is passed through an empty asm statement that claims
// to modify it: the compiler may then neither move its uses before the wait nor sink the
// writes of the fill past the fence.
#include "compiler/codegen/CUDAKernelEmitter.h"

#include "compiler/ir/FragmentScope.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

#include <algorithm>

#include <optional>

namespace tessel::codegen {

std::string CUDAKernelEmitter::wgmma_accumulator_decl(const Allocate *op) {
  const std::string &name = op->buffer_var.name();
  user_check(op->scope == "wgmma.accumulator", "codegen_cuda")
      << "allocation '" << name << "' has unknown wgmma scope '" << op->scope
      << "'; expected wgmma.accumulator or wgmma.rows";
  user_check(op->dtype == Float(32), "codegen_cuda")
      << "wgmma accumulator '" << name << "' has element type " << op->dtype
      << " but wgmma.mma_async.f32.f16.f16 accumulates in float32";
  int64_t size = op->constant_size();
  user_check(size % 128 == 0, "codegen_cuda")
      << "wgmma accumulator '" << name << "' holds " << size
      << " elements, which the 128 threads of a warpgroup cannot share evenly";
  std::string text = bind_var(op->buffer_var.get());
  scope_of_[op->buffer_var.get()] = op->scope;
  wgmma_registers_.push_back({text, size / 128, "+f"});
  return "float " + text + "[" + std::to_string(size / 128) + "];";
}

std::string CUDAKernelEmitter::wgmma_a_decl(const Allocate *op) {
  const std::string &name = op->buffer_var.name();
  user_check(op->dtype == Float(16) || op->dtype == BFloat(16) || op->dtype.is_float8(),
             "codegen_cuda")
      << "wgmma A operand '" << name << "' has element type " << op->dtype
      << "; A from registers is float16, bfloat16 or float8";
  // 64 x k tiles of 4 registers a thread: k 16 of 16-bit values, 32 of 8-bit ones.
  const int64_t size = op->constant_size(), bytes = op->dtype.bytes();
  user_check(size * bytes % 2048 == 0, "codegen_cuda")
      << "wgmma A operand '" << name << "' holds " << size
      << " elements, not whole 64 x " << 32 / bytes << " tiles of a warpgroup";
  std::string text = bind_var(op->buffer_var.get());
  scope_of_[op->buffer_var.get()] = op->scope;
  wgmma_a_dtype_[op->buffer_var.get()] = op->dtype;
  const int64_t regs = size * bytes / 512;
  wgmma_registers_.push_back({text, regs, "+r"});
  return "unsigned " + text + "[" + std::to_string(regs) + "];";
}

std::pair<std::string, int64_t> CUDAKernelEmitter::wgmma_a_tile(const Expr &a, const Expr &index,
                                                                int64_t k, const char *intrin) {
  const auto *v = a.as<Variable>();
  auto scope = v ? scope_of_.find(v) : scope_of_.end();
  user_check(scope != scope_of_.end() && scope->second == "wgmma.matrix_a", "codegen_cuda")
      << intrin << " in kernel '" << f_.name << "': " << a
      << " is not a wgmma A operand (an allocation in scope wgmma.matrix_a)";
  auto i = as_const_int(index);
  user_check(i.has_value(), "codegen_cuda")
      << intrin << " in kernel '" << f_.name << "': the A tile index " << index
      << " is not a constant; unroll the loops around the intrinsic (Stage::unroll)";
  // A thread's share of a 64 x k tile: k / 2 values, 4 to a register of 8-bit ones, 2 of 16-bit.
  return {var_text(v), *i * k * wgmma_a_dtype_.lookup(v).bytes() / 8};
}

std::string CUDAKernelEmitter::wgmma_rows_decl(const Allocate *op) {
  const std::string &name = op->buffer_var.name();
  user_check(op->dtype == Float(32), "codegen_cuda")
      << "wgmma rows '" << name << "' have element type " << op->dtype
      << "; the rows of a wgmma accumulator are float32";
  const int64_t size = op->constant_size();
  user_check(size % 64 == 0, "codegen_cuda")
      << "wgmma rows '" << name << "' hold " << size
      << " elements, not whole 64-row tiles of a warpgroup";
  std::string text = bind_var(op->buffer_var.get());
  scope_of_[op->buffer_var.get()] = op->scope;
  return "float " + text + "[" + std::to_string(size / 32) + "];";
}

std::string CUDAKernelEmitter::wgmma_row_ref(const Call *op) {
  const std::vector<Expr> &a = op->args;
  const auto *v = a[0].as<Variable>();
  auto scope = v ? scope_of_.find(v) : scope_of_.end();
  user_check(scope != scope_of_.end() && scope->second == "wgmma.rows", "codegen_cuda")
      << op->name << " in kernel '" << f_.name << "': " << a[0]
      << " is not a warpgroup's rows (an allocation in scope wgmma.rows)";
  auto index = as_const_int(a[1]);
  user_check(index.has_value(), "codegen_cuda")
      << op->name << " in kernel '" << f_.name << "': the tile index " << a[1]
      << " is not a constant; unroll the loops around the intrinsic (Stage::unroll)";
  if (auto h = as_const_int(a[2]))
    user_check(*h == 0 || *h == 1, "codegen_cuda")
        << op->name << " in kernel '" << f_.name << "': h is 0 or 1 (a thread's two rows of a "
        << "tile), got " << *h;
  return var_text(v) + "[" + std::to_string(*index * 2) + " + " + print(a[2]) + "]";
}

CExpr CUDAKernelEmitter::wgmma_thread_id() {
  const LaunchConfig &l = f_.launch;
  user_check((l.block[0] * l.block[1] * l.block[2]) % 128 == 0, "codegen_cuda")
      << "kernel '" << f_.name << "' uses wgmma with " << l.block[0] * l.block[1] * l.block[2]
      << " threads a block; wgmma needs whole warpgroups (a multiple of 128 threads)";
  if (l.block[0] == 128)
    return {"((int)threadIdx.x)", PrecAtom};
  if (l.block[0] % 128 == 0)
    return {"((int)threadIdx.x & 127)", PrecAtom};
  return {"((int)(threadIdx.x + " + std::to_string(l.block[0]) + " * (threadIdx.y + " +
              std::to_string(l.block[1]) + " * threadIdx.z)) & 127)",
          PrecAtom};
}

// Keeps the compiler from moving accumulator reads or writes across an asynchronous boundary.
void CUDAKernelEmitter::wgmma_fence_registers(const std::vector<std::string> &only) {
  for (const WgmmaRegisters &r : wgmma_registers_) {
    if (!only.empty() && std::find(only.begin(), only.end(), r.name) == only.end())
      continue;
    line("#pragma unroll");
    line("for (int r = 0; r < " + std::to_string(r.count) + "; ++r) asm volatile(\"\" : \"" +
         r.constraint + "\"(" + r.name + "[r]) :: \"memory\");");
  }
}

std::string CUDAKernelEmitter::wgmma_register(const Call *op) {
  const char *name = op->name.c_str();
  const std::vector<Expr> &a = op->args;
  const auto *v = a[0].as<Variable>();
  auto scope = v ? scope_of_.find(v) : scope_of_.end();
  user_check(scope != scope_of_.end() && scope->second == "wgmma.accumulator", "codegen_cuda")
      << name << " in kernel '" << f_.name << "': " << a[0]
      << " is not a wgmma accumulator (an allocation in scope wgmma.accumulator)";
  auto index = as_const_int(a[1]), cols = as_const_int(a[2]);
  user_check(index && cols && *cols >= 8 && *cols <= 256 && *cols % 8 == 0, "codegen_cuda")
      << name << " in kernel '" << f_.name << "': the tile index and n must be constants (n a "
      << "multiple of 8 up to 256), got " << a[1] << " and " << a[2];
  if (auto r = as_const_int(a[3]))
    user_check(*r >= 0 && *r < *cols / 2, "codegen_cuda")
        << name << " in kernel '" << f_.name << "': register " << *r << " of a 64 x " << *cols
        << " tile; a thread holds " << *cols / 2;
  // r may be a loop variable: the loops around are unrolled, so nvcc sees a constant.
  return var_text(v) + "[" + std::to_string(*index * *cols / 2) + " + " + print(a[3]) + "]";
}

bool CUDAKernelEmitter::emit_wgmma(const Call *op) {
  const std::string &n = op->name;
  if (op->call_kind == Call::PureExtern ||
      (n.rfind("wgmma_", 0) != 0 && n != intrinsic::fence_proxy_async) ||
      n == intrinsic::wgmma_thread_id || n == intrinsic::wgmma_reg || n == intrinsic::wgmma_row)
    return false;
  if (n == intrinsic::wgmma_row_set) {
    check_intrinsic_args(op, 4, "(rows, index, h, value)");
    line(wgmma_row_ref(op) + " = " + print(op->args[3]) + ";");
    return true;
  }
  if (n == intrinsic::wgmma_reg_set) {
    check_intrinsic_args(op, 5, "(acc, index, n, r, value)");
    line(wgmma_register(op) + " = " + print(op->args[4]) + ";");
    return true;
  }
  const std::vector<Expr> &a = op->args;
  const char *name = n.c_str();
  auto constant = [&](const Expr &e, const char *what) {
    auto v = as_const_int(e);
    user_check(v.has_value(), "codegen_cuda")
        << name << " in kernel '" << f_.name << "': " << what << " must be a constant, got " << e;
    return *v;
  };
  // The first register of tile `index` of accumulator `frag` (N = n columns), checked.
  auto tile_base = [&](const Expr &frag, const Expr &index, int64_t cols) {
    const auto *v = frag.as<Variable>();
    auto scope = v ? scope_of_.find(v) : scope_of_.end();
    user_check(scope != scope_of_.end() && scope->second == "wgmma.accumulator", "codegen_cuda")
        << name << " in kernel '" << f_.name << "': " << frag
        << " is not a wgmma accumulator (an allocation in scope wgmma.accumulator)";
    auto i = as_const_int(index);
    user_check(i.has_value(), "codegen_cuda")
        << name << " in kernel '" << f_.name << "': the tile index " << index << " of '"
        << v->name << "' is not a constant. Register arrays indexed at run time live in local "
        << "memory; unroll the loops around the intrinsic (Stage::unroll)";
    user_check(cols >= 8 && cols <= 256 && cols % 8 == 0, "codegen_cuda")
        << name << ": n=" << cols << " is not a wgmma shape (a multiple of 8 from 8 to 256)";
    return std::make_pair(var_text(v), *i * cols / 2);
  };
  auto no_args = [&] { check_intrinsic_args(op, 0, "()"); };
  needs_.wgmma = true;

  if (n == intrinsic::fence_proxy_async) {
    no_args();
    line("asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\");");
    return true;
  }
  // The register arrays a fence or wait names from argument `first` on (none: all of them).
  auto register_arrays = [&](size_t first) {
    std::vector<std::string> names;
    for (size_t i = first; i < a.size(); ++i) {
      const auto *v = a[i].as<Variable>();
      user_check(v, "codegen_cuda") << name << ": argument " << i << " is not a register array";
      names.push_back(var_text(v));
    }
    return names;
  };
  if (n == intrinsic::wgmma_fence) {
    wgmma_fence_registers(register_arrays(0)); // those of the groups that follow
    line("asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");");
    return true;
  }
  if (n == intrinsic::wgmma_commit) {
    no_args();
    line("asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");");
    return true;
  }
  if (n == intrinsic::wgmma_wait) {
    user_check(!a.empty(), "codegen_cuda") << name << " takes (n[, register arrays...])";
    int64_t pending = constant(a[0], "n");
    user_check(pending >= 0 && pending <= 7, "codegen_cuda")
        << name << ": wgmma.wait_group takes 0..7 pending groups, got " << pending;
    line("asm volatile(\"wgmma.wait_group.sync.aligned " + std::to_string(pending) +
         ";\\n\" ::: \"memory\");");
    wgmma_fence_registers(register_arrays(1)); // those the wait lands
    return true;
  }
  if (n == intrinsic::wgmma_fill) {
    check_intrinsic_args(op, 4, "(acc, index, n, value)");
    int64_t cols = constant(a[2], "n");
    auto [acc, base] = tile_base(a[0], a[1], cols);
    line("#pragma unroll");
    line("for (int r = 0; r < " + std::to_string(cols / 2) + "; ++r) " + acc + "[" +
         std::to_string(base) + " + r] = " + print(a[3]) + ";");
    return true;
  }
  if (n == intrinsic::wgmma_acc_to_a) {
    check_intrinsic_args(op, 5, "(a, a_index, acc, index, n)");
    int64_t cols = constant(a[4], "n");
    auto [acc, base] = tile_base(a[2], a[3], cols);
    auto [regs, first] = wgmma_a_tile(a[0], a[1], cols, name);
    const DataType ta = wgmma_a_dtype_.lookup(a[0].as<Variable>());
    if (ta.is_float8()) {
      // Register 4 s + 2 h + j of the A tile (its k32 slice s, columns 16 h.., row l / 4 + 8 j)
      // packs the accumulator's registers 16 s + 8 h + 2 j + {0, 1, 4, 5}: the columns the
      // thread holds, in that order (wgmma_fp8_a_column).
      needs_.pack_fp8 = true;
      const char *pack = ta.code() == DataType::Float8E4M3 ? "tessel_pack_e4m3x4"
                                                           : "tessel_pack_e5m2x4";
      const std::string c =
          std::to_string(base) + " + 16 * (r / 4) + 8 * (r / 2 % 2) + 2 * (r % 2)";
      line("#pragma unroll");
      line("for (int r = 0; r < " + std::to_string(cols / 8) + "; ++r) " + regs + "[" +
           std::to_string(first) + " + r] = " + pack + "(" + acc + "[" + c + "], " + acc + "[" +
           c + " + 1], " + acc + "[" + c + " + 4], " + acc + "[" + c + " + 5]);");
      return true;
    }
    needs_.pack_halves = true;
    const char *pack = ta == BFloat(16) ? "tessel_pack_bf16x2" : "tessel_pack_f16x2";
    line("#pragma unroll");
    line("for (int r = 0; r < " + std::to_string(cols / 4) + "; ++r) " + regs + "[" +
         std::to_string(first) + " + r] = " + pack + "(" + acc + "[" + std::to_string(base) +
         " + 2 * r], " + acc + "[" + std::to_string(base) + " + 2 * r + 1]);");
    return true;
  }
  if (n == intrinsic::wgmma_mma || n == intrinsic::wgmma_mma_rs) {
    // wgmma_mma_rs: A from registers (4 of them), the other arguments one place earlier.
    const bool rs = n == intrinsic::wgmma_mma_rs;
    if (rs)
      check_intrinsic_args(op, 10,
                           "(acc, index, n, a, a_index, b_ptr, b_lbo, b_sbo, trans_b, swizzle)");
    else
      check_intrinsic_args(
          op, 11, "(acc, index, n, a_ptr, a_lbo, a_sbo, b_ptr, b_lbo, b_sbo, trans_b, swizzle)");
    const int b_at = rs ? 5 : 6;
    int64_t cols = constant(a[2], "n");
    auto [acc, base] = tile_base(a[0], a[1], cols);
    // The operands' types: both float16, both bfloat16, or two float8 types (any pair).
    auto operand_type = [&](const Expr &p) {
      const auto *c = p.as<Call>();
      const auto *load = c && c->is_intrinsic(intrinsic::address_of) ? c->args[0].as<BufferLoad>() : nullptr;
      auto mem = load ? scope_of_.find(data_var(load->buffer)) : scope_of_.end();
      const DataType t = load ? load->buffer.dtype() : DataType();
      user_check(mem != scope_of_.end() && mem->second == "shared" &&
                     (t == Float(16) || t == BFloat(16) || t.is_float8()),
                 "codegen_cuda")
          << name << " in kernel '" << f_.name
          << "': an operand must be address_of(buffer[index]) of a float16, bfloat16 or float8 "
             "shared buffer, got " << p;
      return t;
    };
    const DataType tb = operand_type(a[b_at]);
    const DataType ta = rs ? wgmma_a_dtype_.lookup(a[3].as<Variable>()) : operand_type(a[3]);
    const bool fp8 = ta.is_float8();
    user_check(fp8 ? tb.is_float8() : ta == tb, "codegen_cuda")
        << name << " in kernel '" << f_.name << "': A is " << ta << " but B is " << tb
        << "; wgmma takes one 16-bit input type, or two float8 types";
    const int64_t bytes = tb.bytes();
    // Offsets between core matrices, in bytes: A's (shared A only), then B's.
    std::vector<int64_t> offsets;
    std::vector<std::pair<int, const char *>> at = {{b_at + 1, "b_lbo"}, {b_at + 2, "b_sbo"}};
    if (!rs)
      at.insert(at.begin(), {{4, "a_lbo"}, {5, "a_sbo"}});
    for (auto [i, what] : at) {
      offsets.push_back(constant(a[size_t(i)], what) * bytes);
      // The descriptor holds 14 bits of (bytes >> 4).
      user_check(offsets.back() % 16 == 0 && offsets.back() >= 0 &&
                     offsets.back() < (int64_t(1) << 18),
                 "codegen_cuda")
          << name << ": " << what << "=" << offsets.back() / bytes
          << " elements; a descriptor offset is a non-negative multiple of 16 bytes below 256 KiB";
    }
    int64_t trans_b = constant(a[size_t(b_at) + 3], "trans_b");
    int64_t swizzle = constant(a[size_t(b_at) + 4], "swizzle");
    // The descriptor's layout type: 1, 2, 3 = 128-, 64-, 32-byte swizzle, 0 = none.
    const char *layout = swizzle == 128 ? "1" : swizzle == 64 ? "2" : swizzle == 32 ? "3" : nullptr;
    user_check(swizzle == 0 || layout, "codegen_cuda")
        << name << ": swizzle must be 0, 32, 64 or 128, got " << swizzle;
    if (!layout)
      layout = "0";
    user_check(!fp8 || !trans_b, "codegen_cuda")
        << name << " in kernel '" << f_.name << "': wgmma reads float8 operands K-major only "
        << "(trans_b 0), got trans_b " << trans_b;
    auto descriptor = [&](const Expr &ptr, int64_t lbo, int64_t sbo) {
      return "tessel_wgmma_desc(" + print(ptr) + ", " + std::to_string(lbo) + ", " +
             std::to_string(sbo) + ", " + std::string(layout) + ")";
    };
    std::string db = descriptor(a[b_at], offsets.end()[-2], offsets.back());
    // PTX names of the operand types; 8-bit wgmma has K 32 and no transpose immediates.
    auto ptx_type = [](DataType t) {
      return t == Float(16)                       ? "f16"
             : t == BFloat(16)                    ? "bf16"
             : t.code() == DataType::Float8E4M3 ? "e4m3"
                                                  : "e5m2";
    };
    const std::string shape = "m64n" + std::to_string(cols) + (fp8 ? "k32" : "k16");
    // Scale A and B by 1; transpose A (shared A only: never) and B.
    const std::string immediates = fp8  ? "1, 1"
                                   : rs ? "1, 1, " + std::to_string(trans_b ? 1 : 0)
                                        : "1, 1, 0, " + std::to_string(trans_b ? 1 : 0);
    int regs = int(cols / 2);
    std::string dlist;
    for (int r = 0; r < regs; ++r)
      dlist += (r ? ", %" : "%") + std::to_string(r);
    // After D: A (a descriptor, or 4 registers), B's descriptor, then scale-d's operand.
    const int a_regs = rs ? 4 : 1;
    std::string alist = rs ? "{" : "";
    for (int r = 0; r < a_regs; ++r)
      alist += (r ? ", %" : "%") + std::to_string(regs + r);
    if (rs)
      alist += "}";
    // scale-d is a predicate: always accumulate (the reset fills the tile with zeros).
    line("asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" +
         std::to_string(regs + a_regs + 1) + ", 0;\\nwgmma.mma_async.sync.aligned." + shape +
         ".f32." + ptx_type(ta) + "." + ptx_type(tb) + " {" + dlist + "}, " + alist + ", %" +
         std::to_string(regs + a_regs) + ", p, " + immediates + ";\\n}\\n\"");
    std::string outs;
    for (int r = 0; r < regs; ++r)
      outs += std::string(r ? ", " : "") + "\"+f\"(" + acc + "[" + std::to_string(base + r) + "])";
    line("    : " + outs);
    std::string ins;
    if (rs) {
      auto [aregs, first] = wgmma_a_tile(a[3], a[4], fp8 ? 32 : 16, name);
      for (int r = 0; r < 4; ++r)
        ins += "\"r\"(" + aregs + "[" + std::to_string(first + r) + "]), ";
    } else {
      ins = "\"l\"(" + descriptor(a[3], offsets[0], offsets[1]) + "), ";
    }
    line("    : " + ins + "\"l\"(" + db + "), \"n\"(1));");
    return true;
  }
  if (n == intrinsic::wgmma_store) {
    user_check(a.size() >= 6 && a.size() <= 8, "codegen_cuda")
        << name << " in kernel '" << f_.name
        << "' takes (acc, index, n, ptr, stride, lanes[, limit[, row_limit]]), got " << a.size()
        << " arguments";
    // With limits, a group of lanes whose first column is at or past `limit`, or whose row (h:
    // the upper or lower 8 rows of the warp's 16) is at or past `row_limit`, is not stored.
    // (They are read once, before the store's own names are declared.)
    std::string limit, row_inside; // row_inside: whether the thread's row h is below the limit
    auto guarded = [&](const std::string &first_col, const std::string &store) {
      std::string cond;
      if (!limit.empty())
        cond = first_col + " < " + limit;
      if (!row_inside.empty())
        cond += (cond.empty() ? "" : " && ") + row_inside;
      line(cond.empty() ? store : "if (" + cond + ") " + store);
    };
    int64_t cols = constant(a[2], "n");
    auto [acc, base] = tile_base(a[0], a[1], cols);
    int64_t stride = constant(a[4], "stride"), lanes = constant(a[5], "lanes");
    user_check(lanes == 1 || lanes == 2 || lanes == 4 || lanes == 8, "codegen_cuda")
        << name << ": lanes must be 1, 2, 4 or 8, got " << lanes;
    const AccumulatorStore store = accumulator_store(a[3], name);
    const DataType out = store.type;
    user_check(lanes != 4 || cols % 16 == 0, "codegen_cuda")
        << name << " in kernel '" << f_.name
        << "': lanes 4 stores tiles n a multiple of 16, got n=" << cols;
    user_check(lanes != 8 || out == Float(32), "codegen_cuda")
        << name << " in kernel '" << f_.name << "': lanes 8 stores float32 outputs, got " << out;
    // A register pair rounds into one word (a float2 for float32 outputs).
    const std::string &pack = store.pair, &word = store.pair_type;
    // Register pair (i, i + 1), i = 4 q + 2 h: row + 8 h, columns 8 q + (0, 1).
    std::string p = fresh_name("wgmma_out");
    line("{");
    ++indent_;
    line(type_name(out) + "* " + p + " = " + print(a[3]) + ";");
    if (a.size() >= 7) {
      limit = fresh_name("wgmma_limit");
      line("const int " + limit + " = " + print(a[6]) + ";");
    }
    std::string row_limit;
    if (a.size() == 8) {
      row_limit = fresh_name("wgmma_row_limit");
      line("const int " + row_limit + " = " + print(a[7]) + ";");
      const std::string tid = wgmma_thread_id().text;
      row_inside = "(" + tid + " / 32 * 16 + " + tid + " % 32 / 4) + h * 8 < " + row_limit;
    }
    if (lanes == 8) {
      if (!emit_wgmma_staged_store(p, acc, base, cols, stride, limit, row_limit))
        emit_wgmma_sector_store(p, acc, base, cols, stride, limit, row_inside);
      close_block();
      return true;
    }
    if (lanes == 4) {
      // Columns 8 q + 2 t, + 1 of a lane t = l % 4 as one word per q (a 32-bit pair of 16-bit
      // values, or a float2). Over q = 2 j, 2 j + 1 the quad's words W0[t], W1[t] become lane
      // t's 4 consecutive columns by one exchange with lane t ^ 1: even lanes keep W0 and take
      // W0[t + 1] (columns 8 (2 j) + 2 t .. + 3), odd lanes keep W1 and take W1[t - 1]
      // (columns 8 (2 j + 1) + 2 (t - 1) .. + 3), that is 6 elements past the lane's own
      // pointer. A warp's store then writes 8 rows of 16 columns: half the instructions of
      // pairs (float32: 16 bytes a lane; with pairs the epilogue of a 128 x 256 tile filled the
      // memory instruction queue, ncu's lg_throttle stall, on an H100 at 4096 x 4096 x 1024).
      const bool wide = out.bits() == 32; // a word is 2 x 32 bits, exchanged in two shuffles
      std::string odd = fresh_name("odd");
      line("const bool " + odd + " = " + wgmma_thread_id().text + " & 1;");
      std::string lane_p = fresh_name("wgmma_quad_out");
      line(type_name(out) + "* " + lane_p + " = " + p + " + (" + odd + " ? 6 : 0);");
      line("#pragma unroll");
      open_block("for (int j = 0; j < " + std::to_string(cols / 16) + "; ++j)");
      line("#pragma unroll");
      open_block("for (int h = 0; h < 2; ++h)");
      auto reg = [&](int q, int e) {
        return acc + "[" + std::to_string(base) + " + (2 * j + " + std::to_string(q) +
               ") * 4 + h * 2 + " + std::to_string(e) + "]";
      };
      const std::string at = "(" + lane_p + " + h * " + std::to_string(8 * stride) + " + j * 16)";
      const std::string first_col =
          "j * 16 + (" + wgmma_thread_id().text + " % 4) * 2 + (" + odd + " ? 6 : 0)";
      if (wide) {
        // Even lanes send their W1, odd lanes their W0; each keeps the other.
        line("const float g0 = __shfl_xor_sync(0xffffffffu, " + odd + " ? " + reg(0, 0) + " : " +
             reg(1, 0) + ", 1);");
        line("const float g1 = __shfl_xor_sync(0xffffffffu, " + odd + " ? " + reg(0, 1) + " : " +
             reg(1, 1) + ", 1);");
        guarded(first_col, "*(float4*)" + at + " = " + odd + " ? make_float4(g0, g1, " +
                               reg(1, 0) + ", " + reg(1, 1) + ") : make_float4(" + reg(0, 0) +
                               ", " + reg(0, 1) + ", g0, g1);");
      } else {
        line(word + " w0 = " + pack + "(" + reg(0, 0) + ", " + reg(0, 1) + ");");
        line(word + " w1 = " + pack + "(" + reg(1, 0) + ", " + reg(1, 1) + ");");
        line("unsigned int send = " + odd + " ? *(unsigned int*)&w0 : *(unsigned int*)&w1;");
        line("unsigned int keep = " + odd + " ? *(unsigned int*)&w1 : *(unsigned int*)&w0;");
        line("unsigned int got = __shfl_xor_sync(0xffffffffu, send, 1);");
        guarded(first_col, "*(uint2*)" + at + " = " + odd +
                               " ? make_uint2(got, keep) : make_uint2(keep, got);");
      }
      close_block();
      close_block();
      close_block();
      return true;
    }
    line("#pragma unroll");
    open_block("for (int q = 0; q < " + std::to_string(cols / 8) + "; ++q)");
    line("#pragma unroll");
    open_block("for (int h = 0; h < 2; ++h)");
    std::string at = p + " + h * " + std::to_string(8 * stride) + " + q * 8";
    std::string col = "q * 8 + (" + wgmma_thread_id().text + " % 4) * 2";
    std::string r0 = acc + "[" + std::to_string(base) + " + q * 4 + h * 2]";
    std::string r1 = acc + "[" + std::to_string(base) + " + q * 4 + h * 2 + 1]";
    // Narrower outputs are rounded to nearest, a pair into one 32-bit store.
    if (lanes == 2) {
      guarded(col, "*(" + word + "*)(" + at + ") = " + pack + "(" + r0 + ", " + r1 + ");");
    } else {
      guarded(col, "(" + at + ")[0] = " + store.one(r0) + ";");
      guarded(col + " + 1", "(" + at + ")[1] = " + store.one(r1) + ";");
    }
    close_block();
    close_block();
    close_block();
    return true;
  }
  user_error("codegen_cuda") << "unknown wgmma intrinsic '" << n << "' in kernel '" << f_.name
                             << "'";
}

int64_t CUDAKernelEmitter::wgmma_staging_offset(int64_t bytes) const {
  if (!dynamic_shared_)
    return -1;
  // Not in a tile loop (a persistent kernel's, ping-pong's): the operand tiles are not dead at
  // a tile's store there (the producer fills the next tile's, the other consumer warpgroup
  // reads its own). Under warp roles without one, the producer's warps have exited when the
  // consumers store (its fills are over), so the block barriers wait for the consumers alone.
  bool tiles = false;
  post_order_visit(f_.body, [&](const IRNode *n) {
    const auto *a = llvm::dyn_cast<AttrStmt>(n);
    tiles = tiles || (a && a->key == attr::tile_loop);
  });
  if (tiles)
    return -1;
  // The shared buffers the wgmma operands are read from.
  llvm::DenseSet<const Variable *> operands;
  post_order_visit(f_.body, [&](const IRNode *n) {
    const auto *c = llvm::dyn_cast<Call>(n);
    if (!c || !c->is_intrinsic(intrinsic::wgmma_mma) || c->args.size() != 11)
      return;
    for (int i : {3, 6})
      if (const auto *addr = c->args[i].as<Call>();
          addr && addr->is_intrinsic(intrinsic::address_of))
        if (const auto *load = addr->args[0].as<BufferLoad>())
          operands.insert(data_var(load->buffer));
  });
  int64_t best = -1, best_bytes = 0;
  for (const auto &[node, offset] : shared_.offset) {
    const auto *alloc = llvm::dyn_cast<Allocate>(node);
    if (!alloc || !operands.count(alloc->buffer_var.get()))
      continue;
    int64_t size = alloc->constant_size() * alloc->dtype.bytes();
    if (size > best_bytes) {
      best = offset;
      best_bytes = size;
    }
  }
  return best_bytes >= bytes ? best : -1;
}

// wgmma_store with lanes 8 through shared memory: float32 rows that do not start on a 32-byte
// sector (C's width not a multiple of 8). The sector store below spends about 50 instructions
// per 8 columns of a row pair in shuffles and register choices, with the SMs otherwise idle
// (ncu at 4096 x 4095 x 4096: 24% more instructions than aligned rows, the kernel 4% longer).
// Here each warp writes its 16 rows 32 columns at a time into a 16 x 40 float tile (the pitch
// keeps a half-warp's 8-byte stores on distinct banks), then stores the tile row by row, a lane
// a column: 128 contiguous bytes per instruction. The tiles take the place of the largest wgmma
// operand tile, dead once the accumulators are complete: a block barrier before (every
// warpgroup past its last wgmma) and after (before anyone refills it), with the generic
// proxy's writes ordered before later TMA writes. Every thread of the block runs the store (no
// warp of the block is a producer only), so the barriers are uniform.
bool CUDAKernelEmitter::emit_wgmma_staged_store(const std::string &p, const std::string &acc,
                                               int64_t base, int64_t cols, int64_t stride,
                                               const std::string &limit,
                                               const std::string &row_limit) {
  constexpr int64_t kPitch = 40, kTileFloats = 16 * kPitch;
  const auto &block = f_.launch.block;
  const int64_t threads = f_.launch.threads_per_block();
  if (threads % 32 != 0)
    return false;
  const int64_t offset = wgmma_staging_offset(threads / 32 * kTileFloats * 4);
  if (offset < 0)
    return false;
  const std::string tid = wgmma_thread_id().text;
  const std::string lim = limit.empty() ? std::to_string(cols)
                                        : "min(" + std::to_string(cols) + ", " + limit + ")";
  line("__syncthreads();");
  line("const int warp = (threadIdx.x + " + std::to_string(block[0]) + " * (threadIdx.y + " +
       std::to_string(block[1]) + " * threadIdx.z)) / 32;");
  line("float* tile = (float*)(tessel_dynamic_smem + " + std::to_string(offset) + ") + warp * " +
       std::to_string(kTileFloats) + ";");
  line("const int lane = " + tid + " % 32, g = lane / 4, t = lane % 4, lim = " + lim + ";");
  // The warp's first row and column (the lane's pointer is at row g, column 2 t).
  line("float* rows = " + p + " - g * " + std::to_string(stride) + " - 2 * t;");
  line("#pragma unroll");
  open_block("for (int cc = 0; cc < " + std::to_string((cols + 31) / 32) + "; ++cc)");
  line("#pragma unroll");
  open_block("for (int q = 0; q < 4; ++q)");
  line("#pragma unroll");
  open_block("for (int h = 0; h < 2; ++h)");
  std::string reg = acc + "[" + std::to_string(base) + " + 4 * (4 * cc + q) + 2 * h";
  line("if (4 * cc + q < " + std::to_string(cols / 8) + ") *(float2*)(tile + (g + 8 * h) * " +
       std::to_string(kPitch) + " + 8 * q + 2 * t) = make_float2(" + reg + "], " + reg +
       " + 1]);");
  close_block();
  close_block();
  line("__syncwarp();");
  line("const int c = 32 * cc + lane;");
  line("#pragma unroll");
  open_block("for (int r = 0; r < 16; ++r)");
  std::string inside = "c < lim";
  if (!row_limit.empty())
    inside += " && " + tid + " / 32 * 16 + r < " + row_limit;
  line("if (" + inside + ") rows[r * " + std::to_string(stride) + " + c] = tile[r * " +
       std::to_string(kPitch) + " + lane];");
  close_block();
  line("__syncwarp();");
  close_block();
  line("asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");");
  line("__syncthreads();");
  return true;
}

// wgmma_store with lanes 8: float32 rows that do not start on a 32-byte sector. Row by row (h)
// and sector by sector (step s covers the row's aligned sector holding tile columns 8 s - o ..
// 8 s - o + 7, o = the row start's offset in its sector), the 4 lanes of the quad owning the row
// each store 8 bytes of the sector (columns c = 8 s - o + 2 t, c + 1), so a store instruction
// writes whole sectors. Column c + j is register 4 (c + j) / 8 + 2 h + (c + j) % 2 of quad lane
// ((c + j) % 8) / 2: two shuffles per step, in which every lane sends what the lane asking it
// needs (register group s - 1 or s, picked with constant indices). Columns outside the tile (the
// row's first and last sectors) or at / past the limit are not stored.
void CUDAKernelEmitter::emit_wgmma_sector_store(const std::string &p, const std::string &acc,
                                                int64_t base, int64_t cols, int64_t stride,
                                                const std::string &limit,
                                                const std::string &row_inside) {
  const std::string tid = wgmma_thread_id().text;
  const std::string groups = std::to_string(cols / 8);
  const std::string lim = limit.empty() ? std::to_string(cols)
                                        : "min(" + std::to_string(cols) + ", " + limit + ")";
  auto reg = [&](const std::string &group, const std::string &e) {
    return acc + "[" + std::to_string(base) + " + 4 * " + group + " + 2 * h + " + e + "]";
  };
  line("const int t = " + tid + " % 4, quad = " + tid + " % 32 & ~3;");
  line("#pragma unroll");
  open_block("for (int h = 0; h < 2; ++h)");
  line("float* row = " + p + " + h * " + std::to_string(8 * stride) + " - 2 * t;");
  line("const int o = (int)((reinterpret_cast<unsigned long long>(row) >> 2) & 7);");
  // Rows at or past the row limit store nothing (after taking part in the shuffles).
  line("const int lim = " + (row_inside.empty() ? lim : row_inside + " ? " + lim + " : 0") +
       ";");
  // Element j of a lane's pair at step s is column 8 s + k, k = j - o + 2 t. What the lane
  // sends for its asker (a register of group s + back, back = -1 or 0, of parity e) and which
  // quad lane it takes from are the same at every step.
  line("int e[2], back[2], from[2];");
  line("#pragma unroll");
  open_block("for (int j = 0; j < 2; ++j)");
  line("const int k = j - o;");
  line("e[j] = k & 1;");
  line("back[j] = (2 * (((2 * t + e[j] - k) & 7) >> 1) + k) >> 3;");
  line("from[j] = quad | (((2 * t + k) & 7) >> 1);");
  close_block();
  line("#pragma unroll");
  open_block("for (int s = 0; s <= " + groups + "; ++s)");
  line("const int lo = s > 0 ? s - 1 : 0, hi = s < " + groups + " ? s : " + groups + " - 1;");
  line("float v[2];");
  line("#pragma unroll");
  open_block("for (int j = 0; j < 2; ++j)");
  line("const float send = back[j] == 0 ? (e[j] ? " + reg("hi", "1") + " : " + reg("hi", "0") +
       ") : (e[j] ? " + reg("lo", "1") + " : " + reg("lo", "0") + ");");
  line("v[j] = __shfl_sync(0xffffffffu, send, from[j]);");
  close_block();
  line("const int c = 8 * s - o + 2 * t;");
  open_block("if (c >= 0 && c + 1 < lim)");
  line("*(float2*)(row + c) = make_float2(v[0], v[1]);");
  close_block();
  open_block("else");
  line("if (c >= 0 && c < lim) row[c] = v[0];");
  line("if (c + 1 >= 0 && c + 1 < lim) row[c + 1] = v[1];");
  close_block();
  close_block();
  close_block();
}

} // namespace tessel::codegen
