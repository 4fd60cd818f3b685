#pragma once

#include "compiler/ir/IR.h"

namespace tessel {

/// Hoists the Allocates of a kernel's on-chip storage (any scope but `global`: shared, local,
/// wmma fragments) with constant sizes to the top of the kernel body, just inside the leading
/// chain of thread_extent attrs of the kernel (Form 2 in, Form 2 out), in program order, so
/// codegen declares each array once at the top of the __global__ function as TVM prints them.
/// Such storage is only defined while it is written, so moving its lifetime out of loops keeps
/// results. An allocation of the same var made twice (as unrolling can produce) is declared
/// once, with the larger size; allocations outside a kernel whose uses are all inside kernels
/// move into those kernels; allocations never used are removed.
Stmt storage_rewrite(Stmt s);

} // namespace tessel
