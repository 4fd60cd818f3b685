// Elementwise epilogues fused into a Tensor Core GEMM or convolution: the float32 accumulators
// go through f(acc, bias[column]) in registers before they are rounded and stored, so
// conv + bias + ReLU or GEMM + bias + GELU is one kernel.
//
//   WgmmaEpilogue e = bias_relu_epilogue(Float(16));
//   Tensor y = compute({M, N}, [&](Var i, Var j) {
//     return e.f(acc(i, j), {bias(j)}).astype(Float(16)); }, "y");
//   s[y].tensorize(ii, wgmma_store_matrix(n, "global", Float(16), e));
#pragma once

#include "schedules/WgmmaIntrinsics.h"

namespace tessel {

/// max(acc + bias, 0), the bias of type `bias` (float16 / bfloat16 / float32) widened to float32.
WgmmaEpilogue bias_relu_epilogue(DataType bias);
/// GELU(acc + bias) in the exact form 0.5 x (1 + erf(x / sqrt 2)), in float32.
WgmmaEpilogue bias_gelu_epilogue(DataType bias);

} // namespace tessel
