#pragma once

#include "compiler/ir/IR.h"
#include "compiler/lower/LoweredFunc.h"

#include <string>
#include <vector>

namespace tessel {

/// Packages a lowered kernel body (Form 2) as a LoweredFunc named `name`, with its flat
/// argument buffers and their original shapes, and the launch configuration read from its
/// thread_extent attrs (and ThreadBinding loops): blockIdx.x/y/z give the grid, threadIdx.x/y/z
/// the block, an axis never declared is 1, and dynamic shared memory is 0. Every declaration of
/// one tag must have the same constant extent, else a tessel::Error names the tag and both
/// extents (the kernel could not be launched with one size). The body stays whole: tessel's
/// host side is the runtime's launch, so there is no host code to split off yet.
LoweredFunc split_host_device(Stmt s, std::string name, std::vector<Buffer> flat_args,
                              std::vector<std::vector<int64_t>> arg_shapes);

} // namespace tessel
