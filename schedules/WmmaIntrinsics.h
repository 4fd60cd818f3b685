// Tensor intrinsics for CUDA's warp-level matrix operations (nvcuda::wmma): fragment loads,
// multiply-accumulate with fragment fill, and stores. Shapes m16n16k16, m32n8k16, m8n32k16 with
// float16 inputs and float32 or float16 accumulators.
#pragma once

#include "compiler/schedule/TensorIntrin.h"

#include <memory>
#include <string>

namespace tessel {

struct WmmaShape {
  int m = 16, n = 16, k = 16;
};

/// Loads a tile of `in` (float16 or bfloat16) from shared memory into a fragment of `scope`
/// ("wmma.matrix_a": an m x k tile, "wmma.matrix_b": k x n). `layout` is how the tile is
/// stored: "row_major", or "col_major" (the stored tile is the transpose).
std::shared_ptr<const TensorIntrin> wmma_load_matrix(const std::string &scope,
                                                     const std::string &layout = "row_major",
                                                     WmmaShape shape = {},
                                                     DataType in = Float(16));

/// C[i, j] += sum_k A[i, k] * B[k, j] on fragments of `in` (float16, or bfloat16 with a float32
/// accumulator: sm_80 and later); the reset fills C with zeros. `accumulator` is Float(32)
/// (inputs cast up) or Float(16).
std::shared_ptr<const TensorIntrin> wmma_gemm(WmmaShape shape = {},
                                              DataType accumulator = Float(32),
                                              DataType in = Float(16));

/// Stores an accumulator fragment (m x n of `dtype`) to memory of `scope`, row major.
std::shared_ptr<const TensorIntrin> wmma_store_matrix(WmmaShape shape = {},
                                                      DataType dtype = Float(32),
                                                      const std::string &scope = "global");

} // namespace tessel
