#include "schedules/GemmMma.h"

namespace tessel {

GemmMmaTiles gemm_mma_tiles(int64_t M, int64_t N, int64_t K) {
  return gemm_wmma_tiles(M, N, K, "gemm_mma");
}

ScheduledProgram gemm_mma(int64_t M, int64_t N, int64_t K, DataType in, DataType out) {
  return gemm_mma(M, N, K, gemm_mma_tiles(M, N, K), in, out);
}

ScheduledProgram gemm_mma(int64_t M, int64_t N, int64_t K, const GemmMmaTiles &t, DataType in,
                          DataType out) {
  return tensor_core_gemm("gemm_mma", M, N, K, t, /*ptx_mma=*/true, in, out);
}

ScheduleEntry gemm_mma_entry() {
  return tensor_core_gemm_entry(
      "gemm_mma",
      "GEMM on Tensor Cores (PTX ldmatrix + mma.sync.m16n8k16), fp16 or bf16 in, fp32 out; "
      "gemm_wmma's "
      "tiles, register fragments, float2 stores from registers; blocks rasterized in groups of "
      "G rows",
      /*ptx_mma=*/true);
}

} // namespace tessel
