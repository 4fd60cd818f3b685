// Tensor intrinsics for the PTX warp-level matrix instructions, on per-thread register
// fragments (scopes mma.matrix_a, mma.matrix_b, mma.accumulator): ldmatrix loads of fp16 tiles
// from shared memory, mma.sync.m16n8k16 (fp16 in, fp32 accumulate) with a zero fill of the
// accumulators, and a store of the accumulators from registers straight to memory, each thread
// writing its own elements (the register-blocked epilogue). The operands may be bfloat16
// instead (mma.sync ...f32.bf16.bf16.f32, sm_80 and later; ldmatrix moves any 16-bit element).
//
// Every intrinsic covers a 16x16 tile (16x16x16 for the MMA), as the WMMA set does, so the two
// are scheduled alike. One ldmatrix.x4 loads a whole 16x16 tile: all of A's m16k16 operand, or
// the k16n8 operands of two MMAs for B; a 16x16 accumulator tile is therefore two m16n8k16
// instructions that share the A registers. Exposing 16x8 instead would halve the B loads to
// ldmatrix.x2 and load nothing less.
//
//   s[AF].tensorize(aii, mma_load_matrix("mma.matrix_a"));
//   s[BF].tensorize(bk, mma_load_matrix("mma.matrix_b"));   // B stored K x N: ldmatrix.trans
//   s[CF].tensorize(cii, mma_gemm());
//   s[C].tensorize(ii, mma_store_matrix());
#pragma once

#include "compiler/schedule/TensorIntrin.h"

#include <memory>
#include <string>

namespace tessel {

/// Loads a 16x16 tile of `in` (float16 or bfloat16) from shared memory into registers of
/// `scope` (mma.matrix_a: an m x k tile, mma.matrix_b: k x n) with one ldmatrix.x4. `layout` is
/// how the tile is stored: "row_major" (A as M x K; B as K x N, which loads with .trans) or
/// "col_major" (the stored tile is the transpose: A as K x M, loaded with .trans; B as N x K,
/// loaded without); left empty, the stage's body and its reader say. The fragment stage may
/// hold the operand as is or transposed, as the GEMM's body reads it (schedules/OperandLayouts.h).
std::shared_ptr<const TensorIntrin>
mma_load_matrix(const std::string &scope, const std::string &layout = "", DataType in = Float(16));

/// C[i, j] += sum_k float32(A[i, k]) * float32(B[k, j]) on a 16x16x16 block of register
/// fragments, A and B of `in` (float16 or bfloat16): two mma.sync.m16n8k16; the reset fills the
/// accumulators with zeros. The body may read A[k, i] and B[j, k] too (fragments holding their
/// operand transposed): tensorize takes the order the body is written in.
std::shared_ptr<const TensorIntrin> mma_gemm(DataType in = Float(16));

/// Stores a 16x16 float32 accumulator tile from registers to memory of `scope` ("global" or
/// "shared"), row major, each thread its own elements: one float2 per row and 8-column half
/// when the row stride is even, single floats otherwise. With `out` float16 or bfloat16 each
/// value is rounded as it is stored (a half2 / bfloat162 where a float2 would be).
std::shared_ptr<const TensorIntrin> mma_store_matrix(const std::string &scope = "global",
                                                     DataType out = Float(32));

} // namespace tessel
