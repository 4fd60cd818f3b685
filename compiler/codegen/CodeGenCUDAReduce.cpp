// CUDA for thread_allreduce (Intrinsics.h): a reduction across the threads along threadIdx.x.
//
// Every thread of the block executes it. Within a warp the threads combine their values in an
// xor butterfly of __shfl_xor_sync (offsets 16, 8, ..., 1, or from extent / 2 when the axis is
// narrower than a warp, which keeps each exchange inside its group of threads); past 32 threads
// lane 0 of each warp writes its warp's result to shared memory and, after a barrier, every
// thread combines the warps' results in warp order. The CPU executor (runtime/interp) follows
// the same order, so both round the same way.
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
  const auto *combiner = op->args.size() == 3 ? op->args[0].as<StringImm>() : nullptr;
  const auto *addr = op->args.size() == 3 ? op->args[1].as<Call>() : nullptr;
  const BufferLoad *acc = addr && addr->is_intrinsic(intrinsic::address_of)
                              ? addr->args[0].as<BufferLoad>()
                              : nullptr;
  auto extent = op->args.size() == 3 ? as_const_int(op->args[2]) : std::nullopt;
  user_check(combiner && acc && extent, "codegen_cuda")
      << "thread_allreduce takes (\"sum\" | \"max\" | \"min\", address_of(acc[i]), extent), got "
      << Expr(op);
  const std::array<int64_t, 3> &block = f_.launch.block;
  const int64_t x = *extent;
  user_check(x == block[0] && x > 0 && (x & (x - 1)) == 0, "codegen_cuda")
      << "kernel '" << f_.name << "': thread_allreduce across " << x
      << " threads of threadIdx.x needs the whole axis (blockDim.x = " << block[0]
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
  const std::string ref = "*(" + address_of(Expr(acc)) + ")";
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
  return true;
}

} // namespace tessel::codegen
