#pragma once

#include "compiler/ir/IR.h"

#include <vector>

namespace tessel {

/// Turns Form 1 into Form 2 (docs/IR_FORMS.md). Takes the loop nest made by ScheduleOps, with
/// multi-dimensional BufferRealize / BufferLoad / BufferStore, and the function's argument
/// buffers; gives flat IR: each realize becomes an Allocate of the product of its extents (the
/// strides padded where a `storage_align` attr asks), each access one index
/// sum((i_d - min_d) * stride_d) on a one-dimensional buffer over the same storage var. The
/// arguments are flattened with the row-major strides of their shapes; their flat buffers (same
/// data var) are appended to `flat_args`, in order, when it is given, so the caller can build
/// LoweredFunc::args. `storage_align` attrs are consumed; `pipeline_scope` attrs are kept
/// with the allocation's buffer var as node. Flat IR is what codegen and every later pass take.
/// An argument of `wide_index_elements` elements or more (2^31 by default: int32 cannot hold
/// its indices) is indexed in int64, computed so from its leaves; every other buffer keeps int32.
Stmt storage_flatten(Stmt s, const std::vector<Buffer> &args,
                     std::vector<Buffer> *flat_args = nullptr,
                     int64_t wide_index_elements = int64_t(1) << 31);

} // namespace tessel
