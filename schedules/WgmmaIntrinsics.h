// Tensor intrinsics for Hopper's warpgroup-level matrix multiply (PTX wgmma.mma_async, sm_90a):
// a warpgroup (4 warps, 128 threads) multiplies a 64 x 16 fp16 tile of A by a 16 x n tile of B,
// both read by the Tensor Cores straight from shared memory, into a 64 x n fp32 accumulator held
// in the warpgroup's registers (scope wgmma.accumulator, n / 2 floats per thread a tile).
//
// The shared operands must be stored in one of wgmma's canonical layouts: swizzled
// (Stage::swizzle(128): rows of 128 bytes whose 16-byte units are permuted per 8 rows, read
// without bank conflicts) or interleaved in chunks of 8 halves (Stage::storage_interleave(8):
// the no-swizzle layout of 8 x 8 "core matrices" of 128 contiguous bytes, which measured 4x
// slower on the H100). The intrinsic derives the descriptors' byte offsets from the bound
// tiles' strides. A is read K-major (rows of A contiguous in K); B "row_major" (K x N,
// N contiguous) is read MN-major (imm-trans-b), B "col_major" (N x K, K contiguous, as a
// K x R x S x C filter) K-major.
//
//   s[CF].tensorize(cii, wgmma_gemm(256));          // C tile 64 x 256 += A 64 x 16 x B 16 x 256
//   s[C].tensorize(ii, wgmma_store_matrix(256));     // the accumulators to C, float2 per thread
//
// The asynchronous ordering (wgmma_fence before a run of wgmma_mma, commit and wait after it,
// fence.proxy.async before the barriers that publish shared tiles) is not part of these bodies:
// the pass insert_wgmma_syncs adds it around whatever runs of wgmma_mma the loops produce.
#pragma once

#include "compiler/schedule/TensorIntrin.h"

#include <functional>
#include <memory>
#include <string>

namespace tessel {

/// The instruction shapes wgmma has for fp16 inputs: n a multiple of 8 from 8 to 256.
bool is_wgmma_n(int64_t n);

/// C[i, j] += sum_k float32(A[i, k]) * float32(B[k, j]) for a 64 x n x 16 block: one
/// wgmma.mma_async.m64n{n}k16.f32.f16.f16 on interleaved shared tiles; the reset fills the
/// accumulator tile with zeros. `b_layout`: how B's shared tile holds it ("row_major": k x n,
/// "col_major": n x k).
/// `swizzle`: the operands' layout, 128, 64 or 32 (Stage::swizzle) or 0 (storage_interleave(8)).
/// `dtype`: the operands' type, float16 or bfloat16.
///
/// 8-bit operands (`dtype` float8_e4m3 or float8_e5m2, and `b_dtype` either of them; void: the
/// same as A): a 64 x n x 32 block, wgmma.mma_async.m64n{n}k32.f32.{e4m3,e5m2}.{e4m3,e5m2}.
/// wgmma reads 8-bit operands only K-major, so B must be "col_major" (n x k, C = A B^T: both
/// operands "TN"), and only from swizzled tiles (a 128-byte row holds 128 values: 4 K steps).
std::shared_ptr<const TensorIntrin> wgmma_gemm(int64_t n, const std::string &b_layout = "row_major",
                                               int swizzle = 128, DataType dtype = Float(16),
                                               DataType b_dtype = DataType());

/// Stores a 64 x n float32 accumulator tile from the warpgroup's registers to memory of `scope`
/// ("global" or "shared"), row major, each thread its own elements: one pair per register pair
/// when the row stride is even, single elements otherwise. `out`: the stored type, float32, or
/// float16 / bfloat16 (each value rounded to nearest, the body C = A.astype(out)).
std::shared_ptr<const TensorIntrin> wgmma_store_matrix(int64_t n, const std::string &scope = "global",
                                                       DataType out = Float(32));

/// An elementwise epilogue on the float32 accumulators, applied in registers before they are
/// stored: each element becomes f(acc, {v[col] for each column vector v, then s[0] for each
/// scalar s}), still float32 (then rounded to the output type). Column vectors are
/// per-output-column inputs (a bias, a per-channel scale), scalars 1-element tensors (a
/// per-tensor scale), both read from global memory.
///
///   WgmmaEpilogue bias_relu{"bias_relu", {Float(16)}, [](Expr acc, const std::vector<Expr> &v) {
///     return max(acc + v[0].astype(Float(32)), make_zero(Float(32)));
///   }};
///   Tensor y = compute({M, N}, [&](Var i, Var j) {
///     return bias_relu.f(acc(i, j), {bias(j)}).astype(Float(16)); });
///   s[y].tensorize(ii, wgmma_store_matrix(256, "global", Float(16), bias_relu));
struct WgmmaEpilogue {
  std::string name;
  std::vector<DataType> column_inputs;
  std::function<Expr(Expr acc, const std::vector<Expr> &columns)> f;
  std::vector<DataType> scalar_inputs = {}; ///< after the columns in f's vector, each read at [0]
};

/// wgmma_store_matrix with `epilogue` applied first (wgmma_reg / wgmma_reg_set per register):
/// the pattern is C(i, j) = epilogue.f(A(i, j), {V0(j), ..., S0(0), ...}) cast to `out`, so it
/// tensorizes a stage written with the same function over the accumulator, 1-D column tensors
/// and 1-element scalar tensors.
std::shared_ptr<const TensorIntrin> wgmma_store_matrix(int64_t n, const std::string &scope,
                                                       DataType out,
                                                       const WgmmaEpilogue &epilogue);

// ---- fp8 GEMMs: promotion of a block's partial sum into a float32 accumulator ----------------

/// How the scales of an fp8 GEMM are given (gemm_fp8): one float32 per operand, or one per
/// 1 x 128 block of A (scale_a[M, K / 128]) and per 128 x 128 block of B (scale_b[N / 128,
/// K / 128]).
enum class Fp8Scales { PerTensor, BlockWise };

/// The term the promotion adds: a K block's partial sum (float32) times its scales,
/// partial * (scale_a * scale_b). gemm_fp8's definition and wgmma_promote's pattern are written
/// with it, so that the stage tensorizes.
Expr fp8_scaled_partial(const Expr &partial, const Expr &scale_a, const Expr &scale_b);

/// D[i, j] += fp8_scaled_partial(P[i, j], SA, SB) for a 64 x n tile, the sum over a reduction
/// axis of extent 1 (the K block, looped outside): the promotion of a wgmma accumulator P
/// holding one K block's partial sum into a float32 accumulator D, both in scope
/// wgmma.accumulator, register by register (wgmma_reg / wgmma_reg_set), each register with the
/// scales of its row; the reset fills D with zeros. Fp8 wgmma keeps about 14 bits of its sum,
/// so a long K is summed this way, a block of K at a time (DeepSeek-V3's "promotion").
///   PerTensor: SA and SB are 1-element tensors (SA[0], SB[0]).
///   BlockWise: SA[i, kb] is the tile's rows' scales in this K block (a 64 x 1 region of
///     scale_a), SB[jb, kb] one scale (a 1 x 1 region of scale_b, jb = j / 128): the tile's
///     columns are one 128-column block of B, so n is 128.
std::shared_ptr<const TensorIntrin> wgmma_promote(int64_t n, Fp8Scales scales);

// ---- Work along the rows of an accumulator (a row softmax, attention's online softmax) --------
//
// A row value of a 64 x n accumulator tile lives in scope wgmma.rows (Intrinsics.h): each thread
// holds its two rows, 16 w + l / 4 and + 8, as its registers hold them; a row's 4 lanes (a quad)
// hold copies. Stages over such values and the accumulators are tensorized with these, written
// with the function the stage's body applies (as an epilogue's).

/// A function of an accumulator element `x` and its row's value `row` (undefined for a
/// reduction's function), named in the intrinsic's name.
struct WgmmaRowFunction {
  std::string name;
  std::function<Expr(const Expr &x, const Expr &row)> f;
};

enum class RowReduce { Max, Sum };

/// R(i) = max (or sum) over j of f(X(i, j)) for a 64 x n accumulator tile X into its rows R
/// (wgmma.rows); f is the identity when undefined. Each thread combines its n / 4 registers of
/// each of its rows, then the row's quad by two shuffles (xor 1, 2); the result is combined
/// with R's value, so a row reduced over several tiles (the reduction split around the
/// intrinsic) accumulates: the reset sets R to -inf (0 for a sum).
std::shared_ptr<const TensorIntrin> wgmma_row_reduce(int64_t n, RowReduce kind,
                                                     const WgmmaRowFunction &f = {});

/// Y(i, j) = f(X(i, j), R(i)) for 64 x n accumulator tiles X and Y (Y may be X: in place) and
/// X's rows R, register by register.
std::shared_ptr<const TensorIntrin> wgmma_rowwise(int64_t n, const WgmmaRowFunction &f);

// ---- A chain of contractions: an accumulator as the next wgmma's A operand ---------------------

/// A(i, j) = X(i, j) rounded to `dtype` (float16 or bfloat16): a 64 x n accumulator tile X into a
/// 64 x n A operand in registers (scope wgmma.matrix_a), its registers packed in pairs: an
/// accumulator's layout is the A fragment's, so P = softmax(S) feeds P V without shared memory.
/// With a float8 `dtype` (e4m3 or e5m2; n a multiple of 32), A(i, j) = X(i, wgmma_fp8_a_column(j))
/// rounded to it: an 8-bit A fragment holds 4 consecutive columns a register where the
/// accumulator holds 2, so instead of exchanging values across the quad the A operand takes the
/// columns in the order a thread already holds them, four to a register; the contraction that
/// reads it must take its other operand's K in the same order (for attention, V's keys).
std::shared_ptr<const TensorIntrin> wgmma_acc_to_a(int64_t n, DataType dtype = Float(16));

/// The accumulator column that column `j` of a float8 A operand holds (wgmma_acc_to_a): within
/// each 32 columns, 4 t + b holds 2 t + 8 (b / 2) + b % 2 of its 16 (t 0..3, b 0..3).
Expr wgmma_fp8_a_column(const Expr &j);

/// wgmma_gemm with A (64 x 16; 64 x 32 of float8) from registers (wgmma.matrix_a, filled by
/// wgmma_acc_to_a), B from shared memory as wgmma_gemm takes it (float8: K-major, swizzled).
std::shared_ptr<const TensorIntrin> wgmma_gemm_rs(int64_t n, const std::string &b_layout = "row_major",
                                                  int swizzle = 0, DataType dtype = Float(16));

} // namespace tessel
