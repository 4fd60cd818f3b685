// Row-wise normalizations, one kernel with one block per row: softmax and layernorm.
//
// Each row's reductions (max and sum for softmax; mean and variance for layernorm) are computed
// at the row's block by all its threads: a serial share per thread, then a reduction across the
// threads (a reduction loop bound to threadIdx.x, lowered to warp shuffles and a shared-memory
// step), kept in every thread's registers ('local' stages); the output's elementwise stage reads
// them. Rows are read in vectors of `vector` elements (16 bytes of float16 / bfloat16), each
// thread taking every `threads`-th vector; the arithmetic is float32, the output of the input's
// type.
#pragma once

#include "schedules/Registry.h"

namespace tessel {

struct RowTiles {
  int threads = 0; ///< threads per block (a power of two, 32 to 1024); 0: from the row length
  int vector = 8;  ///< elements per access (1, 2, 4 or 8)
};

/// y[i, j] = exp(x[i, j] - max_k x[i, k]) / sum_k exp(x[i, k] - max_k x[i, k]).
ScheduledProgram softmax(int64_t rows, int64_t cols, DataType dtype, RowTiles tiles = {});

/// y[i, j] = (x[i, j] - mean_i) / sqrt(var_i + eps) * gamma[j] + beta[j], the variance about
/// the mean (two passes over the row, as PyTorch computes it), eps = 1e-5.
ScheduledProgram layernorm(int64_t rows, int64_t cols, DataType dtype, RowTiles tiles = {});

ScheduleEntry softmax_entry();
ScheduleEntry layernorm_entry();

} // namespace tessel
