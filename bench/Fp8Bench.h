// The fp8 rows: C[M, N] = sum_k sa * A[i, k] * sb * B[j, k], A (M x K) and B (N x K) e4m3,
// K contiguous, C bfloat16, float32 accumulation, against cuBLASLt's fp8 matmul on the same
// inputs and scales in the same process.
#pragma once

#include "bench/BenchRow.h"

#include <cstdint>
#include <string>

namespace tessel::bench {

/// Per-tensor scales (`block` false: one float32 each for A and B) or block scales (one per
/// 1 x 128 of A, one per 128 x 128 of B). If `ours` is not registered in this build the row
/// has cuBLASLt's figure alone and says "ours: not built". Where cuBLASLt refuses block
/// scaling, the block row times cuBLASLt's per-tensor fp8 instead and says so.
Row bench_fp8(int64_t M, int64_t N, int64_t K, bool block, const ScheduleSpec &ours);

} // namespace tessel::bench
