#pragma once

#include "compiler/ir/Buffer.h"
#include "compiler/ir/IR.h"

#include <vector>

namespace tessel {

/// The parts of the tiles split over a persistent kernel's last wave (Stage::split_last_wave;
/// attr::last_wave around a tile's work, Form 2). Where the tile is stored (the smallest
/// statement holding its wgmma_store calls, say X):
///
///   if (part > 0) { X' : each thread's accumulator registers into the workspace of parts
///                   (coalesced: register-major, the block's threads minor);
///                   flag_release(its warp's flag of this part) }
///   else if (tail) { for q in 1 .. parts - 1: flag_wait(the warp's flag of part q);
///                                             X'' : the registers += part q's;
///                    X }
///   else X
///
/// so the first part adds the others in a fixed order (the same sum on every run) before it
/// stores the tile, with its epilogue, as X always did. X' and X'' keep X's loops and lets and
/// drop its other effects (an epilogue in registers, a staging tile's TMA store). Warp w of a
/// part's block stores registers that warp w of the first part's block reads (the same
/// threads' registers), so a flag per warp suffices. The workspaces (the parts' float32 sums,
/// the int32 flags; a flag is lowered again by its wait, so the flags start and end a launch
/// at 0) are appended to `workspaces`. Ping-pong consumers and a tile stored otherwise than by
/// wgmma_store are user errors. A fold's steps split instead (attr::fold_merge around them):
/// after them, a part past the first leaves every state's registers in a workspace, raises its
/// warps' flags and skips the rest of the tile; the first part of a split tile waits for each
/// later part in order and merges its states into its own by the fold's merge, then goes on.
/// Form 2 in, Form 2 out; the attrs (and attr::last_wave_steps that no TMA ring consumed, and
/// attr::fold_merge of tiles left whole) are consumed.
Stmt reduce_last_wave_parts(Stmt s, std::vector<Buffer> *workspaces);

} // namespace tessel
