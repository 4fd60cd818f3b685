#pragma once

#include "compiler/ir/IR.h"
#include "compiler/lower/LoweredFunc.h"

#include <string>
#include <vector>

namespace tessel {

/// Packages a lowered body (Form 2) as device kernels, each with the flat argument buffers
/// `flat_args` (their original shapes in `arg_shapes`) and the launch configuration read from
/// its thread_extent attrs (and ThreadBinding loops): blockIdx.x/y/z give the grid,
/// threadIdx.x/y/z the block, an axis never declared is 1, and dynamic shared memory is 0.
///
/// Without workspaces (num_workspaces == 0, the last entries of `flat_args`) the body is one
/// kernel named `name`. With them, its top-level statements (one per stage at the root) are
/// grouped into kernels launched in order: a statement starts a new kernel when it reads a
/// buffer an earlier statement of the kernel writes (directly or through one of `tensor_maps`:
/// blocks cannot wait for each other) or needs another block of threads; statements of one
/// kernel run in the largest of their grids, each guarded to its own. The last kernel is named
/// `name`, the others `name` + "_" + the workspace they write. Each kernel gets the tensor maps
/// its body uses.
///
/// Every declaration of one tag within a statement must have the same constant extent, else a
/// tessel::Error names the tag and both extents (the kernel could not be launched with one
/// size). tessel's host side is the runtime's launch, so there is no host code to split off.
std::vector<LoweredFunc> split_host_device(Stmt s, const std::string &name,
                                           const std::vector<Buffer> &flat_args,
                                           const std::vector<std::vector<int64_t>> &arg_shapes,
                                           size_t num_workspaces,
                                           const std::vector<TensorMapParam> &tensor_maps = {});

} // namespace tessel
