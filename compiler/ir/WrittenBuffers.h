// Which buffers a statement writes.
#pragma once

#include "compiler/ir/IR.h"

#include <llvm/ADT/DenseSet.h>

namespace tessel {

/// The data variables of the buffers `body` writes: stored to, or pointed to by an intrinsic
/// that stores through its pointer (wmma_store_matrix_sync, mma_store_fragment, wgmma_store) or
/// by an access_ptr that may be written through.
llvm::DenseSet<const Variable *> written_buffers(const Stmt &body);

} // namespace tessel
