// GEMM on Tensor Cores through PTX: fp16 or bf16 A (M x K) and B (K x N, row major), fp32 C. The
// schedule is gemm_wmma's with register fragments: A and B tiles go from padded shared memory
// into registers with ldmatrix (B with .trans), each 16x16x16 step is two mma.sync.m16n8k16,
// and the accumulators are stored from registers straight to C, each thread its own float2s.
// The loops over fragments are unrolled so every register index is a constant.
//
//   ScheduledProgram p = gemm_mma(1024, 1024, 1024);            // tiles chosen for the shape
//   ScheduledProgram q = gemm_mma(256, 256, 64, {.chunk = 1});  // explicit tiles
#pragma once

#include "schedules/GemmWmma.h"

namespace tessel {

/// The tiles of gemm_wmma: both schedules cut C into 16x16 warp fragments.
using GemmMmaTiles = GemmWmmaTiles;

/// Tiles for an M x N x K problem, as gemm_wmma_tiles chooses them.
GemmMmaTiles gemm_mma_tiles(int64_t M, int64_t N, int64_t K);

/// The ldmatrix / mma.sync GEMM with tiles chosen by gemm_mma_tiles; A and B of `in`
/// (float16 or bfloat16), C of `out` (float32, or float16 / bfloat16: the float32 sum rounded
/// as it is stored).
ScheduledProgram gemm_mma(int64_t M, int64_t N, int64_t K, DataType in = Float(16),
                          DataType out = Float(32));
/// The ldmatrix / mma.sync GEMM with the given tiles; tessel::Error up front if they do not
/// divide the shape.
ScheduledProgram gemm_mma(int64_t M, int64_t N, int64_t K, const GemmMmaTiles &tiles,
                          DataType in = Float(16), DataType out = Float(32));

ScheduleEntry gemm_mma_entry();

} // namespace tessel
