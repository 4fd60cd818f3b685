// fp8 GEMM on Hopper's wgmma (sm_90a), DeepSeek-V3 / DeepGEMM style: A (M x K) and B (N x K),
// both K-contiguous ("TN": C = A B^T, the only layout 8-bit wgmma reads), float8_e4m3 or
// float8_e5m2, with float32 scales, C in bfloat16 (the default), float16 or float32.
//
//   per-tensor:  C[i, j] = out(sum_kb P[kb, i, j] * (scale_a[0] * scale_b[0]))
//   block-wise:  C[i, j] = out(sum_kb P[kb, i, j] * (scale_a[i, kb] * scale_b[j / 128, kb]))
//   where P[kb, i, j] = sum_{k < 128} float32(A[i, 128 kb + k]) * float32(B[j, 128 kb + k])
//
// (scale_a: 1 x 128 blocks of A, M x K / 128; scale_b: 128 x 128 blocks of B, N / 128 x K / 128.)
// The two-level sum is the schedule: P, one 128-K block's partial sum, is a wgmma accumulator
// (the Tensor Cores' fp8 accumulation keeps about 14 bits, so it sums 128 of K only), and each
// block is promoted into a float32 register accumulator with its scales (wgmma_promote), the
// wgmma accumulator then starting again from zero. K advances one 128 block per step: the A and
// B tiles of a step are 128 bytes wide, TMA-filled into 128-byte swizzled shared tiles through an
// mbarrier ring.
//
//   ScheduledProgram p = gemm_fp8(4096, 4096, 4096, Float8E4M3());       // block-wise, bf16 out
//   ScheduledProgram q = gemm_fp8(128, 256, 512, gemm_fp8_tiles(128, 256, 512), Float8E5M2(),
//                                 Fp8Scales::PerTensor, Float(32));
#pragma once

#include "schedules/GemmWgmma.h"
#include "schedules/Registry.h"
#include "schedules/WgmmaIntrinsics.h"

namespace tessel {

/// The K of one promotion block and of one shared-tile step: 128 fp8 values, a swizzled row.
inline constexpr int kFp8BlockK = 128;

/// How the products are summed over K.
enum class Fp8Accumulation {
  /// Each 128 of K summed by wgmma, then promoted into a float32 accumulator with its scales
  /// (the default; per-tensor or block-wise scales).
  Promoted,
  /// One wgmma accumulator over the whole of K, scaled once as C is stored (cuBLASLt's "fast
  /// accumulation"): per-tensor scales only. Half the registers, so 128 x 256 blocks fit, and no
  /// wait for the Tensor Cores each 128 of K; the ~14-bit sums err more as K grows (H100,
  /// cuBLASLt at 4096^3: 0.0075 against 0.0031 promoted, bench/RESULTS.md).
  Fast,
};

/// tessel::Error (naming `context`) unless `tiles` can compute an M x N x K fp8 GEMM with
/// `scales`: block_k 128, 128-byte swizzle, TMA through 2 or more stages, no split-K; with
/// block-wise scales wgmma n 128 (one scale_b per tile). The message names the knob to change.
void check_gemm_fp8_tiles(const std::string &context, int64_t M, int64_t N, int64_t K,
                          const GemmWgmmaTiles &tiles, Fp8Scales scales,
                          Fp8Accumulation accumulation = Fp8Accumulation::Promoted);

/// The default tiles for the shape: 128 x 128 blocks of 2 warpgroups (64 x 128 each: 64
/// registers of partial sums and 64 of the float32 accumulator per thread), K step 128 through
/// 4 TMA stages, rasterized in groups of 8; 64 x 128 blocks where M is below 128; persistent
/// (132 blocks) where the tiles make 1 to 8 waves of them. Fast accumulation: 128 x 256 blocks
/// (one accumulator of 64 x 256 a warpgroup), 128 wide where N is less than 256, persistent from
/// one wave up on as few blocks as take the tiles in the same rounds, rasterized in groups of 16.
GemmWgmmaTiles gemm_fp8_tiles(int64_t M, int64_t N, int64_t K, Fp8Scales scales,
                              Fp8Accumulation accumulation = Fp8Accumulation::Promoted);

/// A of type `a` and B of type `b` (float8_e4m3 / float8_e5m2, in any pair; void: b = a), float32
/// scales as `scales` says, C of type `out` (bfloat16, float16 or float32). Arguments A, B,
/// scale_a, scale_b, C. Fast accumulation (per-tensor scales):
///   C[i, j] = out(sum_k float32(A[i, k]) * float32(B[j, k]) * (scale_a[0] * scale_b[0]))
/// as one wgmma reduction over K (gemm_wgmma's schedule on 8-bit operands), the scales an
/// epilogue of the store.
ScheduledProgram gemm_fp8(int64_t M, int64_t N, int64_t K, const GemmWgmmaTiles &tiles,
                          DataType a, Fp8Scales scales = Fp8Scales::BlockWise,
                          DataType out = BFloat(16), DataType b = DataType(),
                          Fp8Accumulation accumulation = Fp8Accumulation::Promoted);
ScheduledProgram gemm_fp8(int64_t M, int64_t N, int64_t K, DataType a,
                          Fp8Scales scales = Fp8Scales::BlockWise, DataType out = BFloat(16));

/// "gemm_fp8": the registry's entry (dtypes float8_e4m3, float8_e5m2; knobs BM, BN, S, G; SCALE
/// 1 block-wise or 0 per-tensor; FAST 1: fast accumulation (SCALE=0); OUT 0 bfloat16, 1
/// float16, 2 float32; WS; TS; P, PB as gemm_wgmma's; CL with FAST=1).
ScheduleEntry gemm_fp8_entry();

} // namespace tessel
