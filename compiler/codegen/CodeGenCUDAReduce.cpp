// CUDA for thread_allreduce (Intrinsics.h): a reduction across the threads along threadIdx.x.
//
// Every thread of the block executes it. Within a warp the threads combine their values in an
// xor butterfly of __shfl_xor_sync (offsets 16, 8, ..., 1, or from extent / 2 when the axis is
// narrower than a warp, which keeps each exchange inside its group of threads); past 32 threads
// lane 0 of each warp writes its warp's result to shared memory and, after a barrier, every
// thread combines the warps' results in warp order. The CPU executor (runtime/interp) follows
// the same order, so both round the same way.
//
// Several values at once (count > 1, within a warp: extent <= 32): the first log2(count) steps
// halve what each thread holds, a thread keeping the half its lane's bit at that offset selects
// and sending the other half to its partner, so each exchange combines count / 2, then
// count / 4, ... values in one shuffle each instead of count; the last steps combine one value;
// then every thread reads each result back from a lane that holds it. Each value is combined
// over the same pairs as a butterfly of its own (the thread's own value first), so the results
// are the executor's.
#include "compiler/codegen/CUDAKernelEmitter.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

#include <optional>

namespace tessel::codegen {

bool CUDAKernelEmitter::emit_thread_allreduce(const Call *op) {
  if (!op->is_intrinsic(intrinsic::thread_allreduce))
    return false;
  const bool arity = op->args.size() == 3 || op->args.size() == 4;
  const auto *combiner = arity ? op->args[0].as<StringImm>() : nullptr;
  const auto *addr = arity ? op->args[1].as<Call>() : nullptr;
  const BufferLoad *acc = addr && addr->is_intrinsic(intrinsic::address_of)
                              ? addr->args[0].as<BufferLoad>()
                              : nullptr;
  auto extent = arity ? as_const_int(op->args[2]) : std::nullopt;
  auto count = op->args.size() == 4 ? as_const_int(op->args[3]) : std::optional<int64_t>(1);
  user_check(combiner && acc && extent && count && *count >= 1, "codegen_cuda")
      << "thread_allreduce takes (\"sum\" | \"max\" | \"min\", address_of(acc[i]), extent[, "
         "count]), got "
      << Expr(op);
  const int64_t x = *extent;
  user_check(x == f_.launch.block[0] && x > 0 && (x & (x - 1)) == 0, "codegen_cuda")
      << "kernel '" << f_.name << "': thread_allreduce across " << x
      << " threads of threadIdx.x needs the whole axis (blockDim.x = " << f_.launch.block[0]
      << ") and a power of two";
  const DataType t = acc->buffer.dtype();
  const std::string type = type_name(t), name = combiner->value;
  user_check(name == "sum" || name == "max" || name == "min", "codegen_cuda")
      << "thread_allreduce combines by sum, max or min, not '" << name << "'";
  auto combine = [&](const std::string &a, const std::string &b) {
    if (name == "sum")
      return t.is_float() && t.bits() == 16 ? "(" + type + ")(" + a + " + " + b + ")"
                                            : a + " + " + b;
    const char *f = name == "max" ? "max" : "min";
    if (t.is_float())
      return std::string(t.bits() == 16 ? (name == "max" ? "__hmax(" : "__hmin(")
                                        : (name == "max" ? "fmaxf(" : "fminf(")) +
             a + ", " + b + ")";
    return std::string(f) + "(" + a + ", " + b + ")";
  };
  const int64_t n = *count;
  if (n > 1 && x <= 32 && (n & (n - 1)) == 0 && n <= x) {
    emit_batched_allreduce(address_of(Expr(acc)), type, x, n, combine);
    return true;
  }
  for (int64_t e = 0; e < n; ++e) // (count > 1 across warps: one value at a time)
    emit_one_allreduce(n == 1 ? "*(" + address_of(Expr(acc)) + ")"
                              : "(" + address_of(Expr(acc)) + ")[" + std::to_string(e) + "]",
                       type, x, combine);
  return true;
}

void CUDAKernelEmitter::emit_batched_allreduce(const std::string &base, const std::string &type,
                                               int64_t x, int64_t n, const Combine &combine) {
  auto at = [&](int64_t e) { return "(" + base + ")[" + std::to_string(e) + "]"; };
  auto v = [](int64_t e) { return "tessel_v" + std::to_string(e); };
  open_block("");
  for (int64_t e = 0; e < n; ++e)
    line(type + " " + v(e) + " = " + at(e) + ";");
  int64_t held = n;
  for (int64_t o = x / 2; o >= 1; o /= 2) {
    if (held == 1) {
      line(v(0) + " = " +
           combine(v(0), "__shfl_xor_sync(0xffffffffu, " + v(0) + ", " + std::to_string(o) + ")") +
           ";");
      continue;
    }
    // The lanes with bit o keep the upper half of what they hold and send the lower half.
    const std::string upper = "((int)threadIdx.x & " + std::to_string(o) + ")";
    held /= 2;
    for (int64_t e = 0; e < held; ++e) {
      const std::string lo = v(e), hi = v(e + held);
      line("{ const " + type + " tessel_send = " + upper + " ? " + lo + " : " + hi + ";");
      line("  " + lo + " = " + upper + " ? " + hi + " : " + lo + ";");
      line("  " + lo + " = " +
           combine(lo, "__shfl_xor_sync(0xffffffffu, tessel_send, " + std::to_string(o) + ")") +
           "; }");
    }
  }
  // Value e is held by the lanes whose high bits spell e: lane e * (x / n) of each group of x.
  for (int64_t e = 0; e < n; ++e)
    line(at(e) + " = __shfl_sync(0xffffffffu, " + v(0) + ", " + std::to_string(e * (x / n)) +
         ", " + std::to_string(x) + ");");
  close_block();
}

void CUDAKernelEmitter::emit_one_allreduce(const std::string &ref, const std::string &type,
                                           int64_t x, const Combine &combine) {
  const std::array<int64_t, 3> &block = f_.launch.block;
  open_block("");
  line(type + " tessel_v = " + ref + ";");
  for (int64_t o = std::min<int64_t>(x, 32) / 2; o >= 1; o /= 2)
    line("tessel_v = " +
         combine("tessel_v", "__shfl_xor_sync(0xffffffffu, tessel_v, " + std::to_string(o) + ")") +
         ";");
  if (x > 32) {
    const int64_t warps = x / 32, groups = block[1] * block[2];
    line("__shared__ " + type + " tessel_red[" + std::to_string(warps * groups) + "];");
    line("const int tessel_g = ((int)threadIdx.y + (int)threadIdx.z * " +
         std::to_string(block[1]) + ") * " + std::to_string(warps) + ";");
    line("if (threadIdx.x % 32 == 0) tessel_red[tessel_g + (int)threadIdx.x / 32] = tessel_v;");
    line("__syncthreads();");
    line("tessel_v = tessel_red[tessel_g];");
    for (int64_t w = 1; w < warps; ++w)
      line("tessel_v = " + combine("tessel_v", "tessel_red[tessel_g + " + std::to_string(w) + "]") +
           ";");
    line("__syncthreads();");
  }
  line(ref + " = tessel_v;");
  close_block();
}

} // namespace tessel::codegen
