// The result of lowering: device kernels in flat IR with their launch configuration.
//
// See docs/IR_FORMS.md for the exact forms of the IR before and after storage flattening.
#pragma once

#include "compiler/ir/IR.h"
#include "compiler/support/Remarks.h"

#include <array>
#include <string>
#include <vector>

namespace tessel {

/// Grid and block sizes and dynamic shared memory of a kernel launch. Shapes are compile-time
/// constants in tessel, so these are numbers.
struct LaunchConfig {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t dynamic_shared_bytes = 0;
  /// A kernel after the first of its module: on sm_90 and later it is launched as a
  /// programmatic dependent of the one before (its blocks may start, and set up, while that one
  /// drains) and waits for it (griddepcontrol.wait) before its first instruction.
  bool after_previous = false;
  /// Thread-block clusters (Stage::cluster): blocks launched in groups of cluster[0] x
  /// cluster[1] x cluster[2] consecutive blocks (`__cluster_dims__` in the CUDA source; the grid
  /// is a multiple of it). {1, 1, 1}: no clusters.
  std::array<int64_t, 3> cluster{1, 1, 1};

  int64_t threads_per_block() const { return block[0] * block[1] * block[2]; }
  int64_t cluster_size() const { return cluster[0] * cluster[1] * cluster[2]; }
};

/// A TMA tensor map (CUtensorMap) the kernel takes by value (`const __grid_constant__`) after
/// its buffer arguments: argument `arg` viewed as a tensor of `dims` elements (innermost first)
/// whose dimension d > 0 is `strides[d]` elements apart, copied in boxes of `box` elements
/// (innermost first) into shared memory swizzled by `swizzle` bytes (0, 32, 64 or 128). The
/// runtime encodes it at launch (cuTensorMapEncodeTiled) with the argument's device pointer;
/// tma_load calls name it by `var`. Elements outside `dims` read as zero.
///
/// An im2col map (`im2col`, cuTensorMapEncodeIm2col; taken by tma_load_im2col) views a 4-D NHWC
/// tensor (dims C, W, H, N): `box` is {channels per pixel, pixels per copy},
/// `lower_corner` / `upper_corner` bound the pixels a copy walks, for W then H, and `traversal`
/// (empty: all 1) is the step of that walk per dimension (a convolution's stride; see
/// tma_load_im2col in compiler/ir/Intrinsics.h).
struct TensorMapParam {
  Var var;
  int arg = 0;
  std::vector<int64_t> dims, strides, box;
  int swizzle = 0;
  bool im2col = false;
  std::vector<int64_t> lower_corner{}, upper_corner{};
  std::vector<int64_t> traversal{};
};

/// One device kernel.
struct LoweredFunc {
  std::string name;
  /// The kernel's parameters, in call order: global buffers (flat after storage flattening: one
  /// dimension, the product of the tensor's shape; the original shape is in `arg_shapes`).
  std::vector<Buffer> args;
  std::vector<std::vector<int64_t>> arg_shapes;
  /// The kernel body. Thread indices appear as AttrStmt(IterVar, "thread_extent", extent).
  Stmt body;
  LaunchConfig launch;
  /// TMA tensor maps, passed after `args` in this order.
  std::vector<TensorMapParam> tensor_maps;
  /// Each parameter's strides in elements (a strided placeholder's; empty for the others and
  /// where the vector is shorter: compact row-major). The flat buffer spans
  /// storage_elements(shape, strides).
  std::vector<std::vector<int64_t>> arg_strides{};
};

/// Everything one lower() call produced: the kernels, to be launched in order.
///
/// A stage stored in "global" scope that is not an argument (a padded copy of an input, a
/// partial sum) is a workspace: the kernel that writes it ends before the ones that read it
/// start, and every kernel takes the workspaces as its last `num_workspaces` parameters, after
/// the arguments. Whoever runs the module allocates them (Module::run, interp::execute).
struct LoweredModule {
  std::vector<LoweredFunc> funcs;
  size_t num_workspaces = 0;
  /// What lowering did with the schedule's vectorize, unroll and pipeline requests: applied or
  /// not, and why not (compiler/support/Remarks.h), in the order the passes decided.
  std::vector<Remark> remarks;
};

} // namespace tessel
