// A batched GEMM on gemm_wgmma's schedule, for tests of TMA fills of operands of rank 3:
// C[b] = A[b] B[b], A[b, M, K] (compact, or laid out with `a_strides`: a strided placeholder),
// B[b, K, N], shared tiles filled per the tiles given (TMA boxes whose batch dimension is 1).
#pragma once

#include "compiler/tessel.h"
#include "schedules/GemmWgmma.h"

namespace tessel::test {

struct BatchedWgmmaGemm {
  Tensor A, B, C;
  Schedule s;

  BatchedWgmmaGemm(int64_t batch, int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &t,
                   std::vector<int64_t> a_strides = {}) {
    A = a_strides.empty() ? placeholder({batch, M, K}, Float(16), "A")
                          : placeholder({batch, M, K}, Float(16), "A", std::move(a_strides));
    B = placeholder({batch, K, N}, Float(16), "B");
    IterVar k = reduce_axis({0, K}, "k");
    C = compute(
        {batch, M, N},
        [&](Var b, Var i, Var j) {
          return sum(A(b, i, k).astype(Float(32)) * B(b, k, j).astype(Float(32)), {k});
        },
        "C", {"b", "i", "j"});
    s = create_schedule({C});
    WgmmaGemmStages st;
    st.C = C;
    st.AS = s.cache_read(A, "shared", {C});
    st.BS = s.cache_read(B, "shared", {C});
    st.CF = s.cache_write(C, "wgmma.accumulator");
    schedule_wgmma_gemm(s, st, t);
  }
  LoweredModule lowered() { return lower(s, {A, B, C}); }
};

/// 128 x 64 blocks of two warpgroups, K step 64, TMA fills through `stages` stages.
inline GemmWgmmaTiles batched_tma_tiles(int stages) {
  return {.block_m = 128, .block_n = 64, .block_k = 64, .warpgroups_m = 2, .stages = stages,
          .tma = true};
}

} // namespace tessel::test
