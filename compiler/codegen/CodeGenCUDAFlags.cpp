// CUDA code for the flags by which the blocks of a kernel hand each other data (flag_release,
// flag_wait; compiler/ir/Intrinsics.h): one lane of the warp raises or waits for the flag, the
// warp meeting around it (__syncwarp orders the other lanes' accesses with that lane's), with a
// GPU-scope fence and release / acquire operations on the flag.
#include "compiler/codegen/CUDAKernelEmitter.h"

#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

namespace tessel::codegen {

bool CUDAKernelEmitter::emit_block_flag(const Call *op) {
  const bool release = op->is_intrinsic(intrinsic::flag_release);
  if (!release && !op->is_intrinsic(intrinsic::flag_wait))
    return false;
  check_intrinsic_args(op, 1, "(ptr)");
  needs_.block_flags = true;
  line(std::string(release ? "tessel_flag_release(" : "tessel_flag_wait(") + print(op->args[0]) +
       ");");
  return true;
}

std::string block_flag_preamble() {
  return R"(__device__ __forceinline__ unsigned tessel_lane_id() {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}
__device__ __forceinline__ void tessel_flag_release(int *flag) {
  __syncwarp();
  if (tessel_lane_id() == 0) {
    __threadfence();
    asm volatile("st.release.gpu.global.b32 [%0], %1;\n" :: "l"(flag), "r"(1) : "memory");
  }
}
__device__ __forceinline__ void tessel_flag_wait(int *flag) {
  if (tessel_lane_id() == 0) {
    int raised;
    do {
      asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(raised) : "l"(flag) : "memory");
    } while (raised != 1);
    asm volatile("st.relaxed.gpu.global.b32 [%0], %1;\n" :: "l"(flag), "r"(0) : "memory");
  }
  __syncwarp();
}
)";
}

} // namespace tessel::codegen
