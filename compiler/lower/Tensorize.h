// Tensorize: replace a stage's innermost loops by a tensor intrinsic.
//
// The loops from the tensorize axis inward compute a region of the stage. That region must be
// the intrinsic's block (trailing dimensions equal, the others of extent 1), and the stage's
// expression over it must be the intrinsic's pattern: same combiner, same types, same index
// structure once each input's region origin is subtracted. Then each intrinsic buffer is bound
// to the region of the real buffer it stands for (checking scope, alignment and offset factor)
// and the intrinsic emits the statements that replace the loops.
//
// An intrinsic may have several patterns, one operation on operands in different orders
// (TensorIntrin::alternatives: a GEMM reading B[k, j] or B[j, k]); the first that matches is
// emitted, and a refusal lists every order tried. An operand load whose fragment may be held
// either way round takes the order its reader (the GEMM stage) reduces over.
#pragma once

#include "compiler/lower/Relations.h"
#include "compiler/lower/StageBodies.h"
#include "compiler/schedule/TensorIntrin.h"

#include <array>

namespace tessel {

/// Where a stage's buffer lives in flat storage: the origin of its region and its strides
/// (padded by storage_align), as storage_flatten will lay it out.
struct BufferLayout {
  std::vector<Expr> mins;
  /// Of each dimension; with interleave, the last one's is 1 within a chunk.
  std::vector<int64_t> strides;
  /// Stage::storage_interleave's chunk (0: none) and the distance between chunks, in elements.
  int64_t interleave = 0, chunk_stride = 0;
  /// Stage::swizzle's bytes (0: none).
  int64_t swizzle = 0;
};
using BufferLayouts = llvm::DenseMap<const StageNode *, BufferLayout>;

/// The intrinsic's statements for stage `s` tensorized at leaf `t`, with the loops outside
/// running on `leaf_value` (values of the leaves before t). Of an intrinsic with alternatives
/// (TensorIntrin::alternatives), the first pattern that matches; `bodies` also tells how the
/// stage's readers index it (TensorIntrin::reduced_output_dim).
TensorIntrinBodies tensorize_stage(const StageNode *s, size_t t, const StageBodies &bodies,
                                   const DomainMap &dom,
                                   const llvm::DenseMap<const IterVarNode *, Expr> &leaf_value,
                                   const llvm::DenseMap<const StageNode *, std::vector<Buffer>>
                                       &buffers,
                                   const BufferLayouts &layouts, const ScheduleNode *sch);

/// Strides of a row-major buffer of `extents`, padded so that stride[dim] % factor == offset for
/// each (dim, factor, offset) in `aligns` (TVM's storage_align).
std::vector<int64_t> aligned_strides(const std::vector<int64_t> &extents,
                                     const std::vector<std::array<int64_t, 3>> &aligns);

/// Strides of a buffer of `extents` stored interleaved (Stage::storage_interleave) in chunks of
/// `chunk` elements of its last dimension, and (in *chunk_stride) the distance between chunks.
/// tessel::Error naming `stage` when the last extent is not a multiple of the chunk.
std::vector<int64_t> interleaved_strides(const std::string &stage,
                                         const std::vector<int64_t> &extents, int64_t chunk,
                                         int64_t *chunk_stride);

} // namespace tessel
