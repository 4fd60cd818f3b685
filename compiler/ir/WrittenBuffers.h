// Which buffers a statement writes.
#pragma once

#include "compiler/ir/IR.h"

#include <llvm/ADT/DenseSet.h>

#include <string>

namespace tessel {

/// The data variables of the buffers `body` writes: stored to, or pointed to by an intrinsic
/// that stores through its pointer (wmma_store_matrix_sync, mma_store_fragment, wgmma_store) or
/// by an access_ptr that may be written through.
llvm::DenseSet<const Variable *> written_buffers(const Stmt &body);

/// The name of the first buffer `body` writes, in program order; empty if it writes none. A
/// loop's stage, for messages: every stage writes its own buffer, named after it.
std::string first_written_buffer(const Stmt &body);

} // namespace tessel
