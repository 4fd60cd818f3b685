// Zero-padded copies of GEMM operands, and the part of a padded result a caller keeps: how the
// Tensor Core GEMMs run shapes their copies and blocks cannot take directly. Each copy and the
// padded result are stages in global memory that are not arguments, so workspaces, each written
// by a kernel of its own (LoweredModule).
//
//   Tensor AP = padded_copy(A, 112, 128, "A_pad");          // A: 100 x 120
//   ... C_full (112 x N) = sum_k AP(i, k) * BP(k, j) ...
//   Tensor C = leading_block(C_full, 100, N, "C");
//   schedule_padded_copy(s, AP);
//   schedule_leading_block(s, C);
#pragma once

#include "compiler/schedule/Schedule.h"

#include <optional>
#include <string>

namespace tessel {

/// `from` (2-D) padded with zeros to rows x cols, named `name`; `from` itself when that is its
/// shape.
Tensor padded_copy(const Tensor &from, int64_t rows, int64_t cols, const std::string &name);

/// padded_copy's kernel: each thread reads 8 consecutive elements of a padded row one by one (the
/// source rows need not be aligned; the guard zero-fills past them) into registers and stores
/// them as one 16-byte vector. `cols` of the copy must be a multiple of 8. Nothing where `copy`
/// is an input (padded_copy returned the operand itself). With `in_place` the copy is computed
/// inline instead (no kernel, no workspace): its reader must be a TMA fill and the operand one
/// that tma_reads_in_place.
void schedule_padded_copy(Schedule &s, const Tensor &copy, bool in_place = false);

/// Whether a TMA fill can read an operand with rows of `cols` elements of `type` in place of a
/// padded copy: where the copy is computed inline into the shared tile (schedule_padded_copy
/// with `in_place`), the tile reads the operand inside and zero outside, which lower_bulk_copy
/// issues as boxes of the operand whose elements past its edges TMA fills with zeros. A tensor
/// map needs rows of whole 16-byte units.
bool tma_reads_in_place(int64_t cols, DataType type);

/// The first rows x cols of `full` (rows x cols x ... of a padded result), or, where `full` has
/// a leading axis of parts (split-K's partial sums), their sum in order; cast to `out` where
/// given. A sum that is cast is a stage of its own (name + "_total", returned in `*total`).
Tensor leading_block(const Tensor &full, int64_t rows, int64_t cols, const std::string &name,
                     std::optional<DataType> out = std::nullopt, Tensor *total = nullptr);

/// The kernel of a leading_block, or of any elementwise stage over a sum of parts (a conv's
/// epilogue after split-K: pass that sum as `total`): an element a thread, consecutive threads
/// along a row; parts added in a register.
void schedule_leading_block(Schedule &s, const Tensor &block, const Tensor &total = Tensor());

} // namespace tessel
