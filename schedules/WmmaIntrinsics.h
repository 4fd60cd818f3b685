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
/// stored: "row_major", or "col_major" (the stored tile is the transpose); left empty, the
/// stage's body and its reader say (schedules/OperandLayouts.h). The fragment stage may hold
/// the operand as is or transposed (B[k, j] or B[j, k] in the GEMM's body): the load copies the
/// tile as is or transposed, and loads it with the layout that makes.
std::shared_ptr<const TensorIntrin> wmma_load_matrix(const std::string &scope,
                                                     const std::string &layout = "",
                                                     WmmaShape shape = {}, DataType in = Float(16));

/// C[i, j] += sum_k A[i, k] * B[k, j] on fragments of `in` (float16, or bfloat16 with a float32
/// accumulator: sm_80 and later); the reset fills C with zeros. `accumulator` is Float(32)
/// (inputs cast up) or Float(16). The body may read A as A[i, k] or A[k, i] and B as B[k, j]
/// or B[j, k] (a fragment holding its operand transposed, loaded col_major or row_major by
/// wmma_load_matrix): tensorize takes the order the body is written in.
std::shared_ptr<const TensorIntrin> wmma_gemm(WmmaShape shape = {},
                                              DataType accumulator = Float(32),
                                              DataType in = Float(16));

/// Stores an accumulator fragment (m x n of `dtype`) to memory of `scope`, row major.
std::shared_ptr<const TensorIntrin> wmma_store_matrix(WmmaShape shape = {},
                                                      DataType dtype = Float(32),
                                                      const std::string &scope = "global");

} // namespace tessel
