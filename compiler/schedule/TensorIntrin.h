// Tensor intrinsics: a small computation that hardware (or a hand-written routine) does as a
// whole, such as a 16x16x16 Tensor Core multiply-accumulate.
//
// An intrinsic is declared with a compute definition (the pattern), a buffer declaration for
// each of its inputs and its output (scope, alignment, offset factor), and a function that
// emits its bodies once the buffers are bound to the regions a stage touches:
//
//   auto gemm = decl_tensor_intrin(C, {{A, BA}, {B, BB}, {C, BC}},
//       [](const std::vector<BoundBuffer> &in, const BoundBuffer &out) {
//         TensorIntrinBodies b;
//         b.reset = Evaluate::make(call_fill(out.data(), out.elem_offset_div(256), ...));
//         b.update = ...;
//         return b;
//       }, "wmma_gemm");
//   s[ConvF].tensorize(nnf, gemm);
#pragma once

#include "compiler/ir/IR.h"
#include "compiler/te/Operation.h"

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel {

/// A declared intrinsic buffer bound to the region of a real buffer that a stage touches.
class BoundBuffer {
public:
  BoundBuffer(Buffer decl, Buffer buffer, std::vector<Expr> region_min,
              std::vector<Expr> region_offset, Expr elem_offset, std::vector<int64_t> strides,
              int64_t chunk_stride = 0)
      : decl_(std::move(decl)), buffer_(std::move(buffer)), region_min_(std::move(region_min)),
        region_offset_(std::move(region_offset)), elem_offset_(std::move(elem_offset)),
        strides_(std::move(strides)), chunk_stride_(chunk_stride) {}

  /// The declaration from the intrinsic.
  const Buffer &decl() const { return decl_; }
  /// The real buffer (an argument or a stage's storage).
  const Buffer &buffer() const { return buffer_; }
  /// The variable holding the real buffer's storage (a fragment array for wmma scopes).
  Expr data() const { return buffer_->data; }
  /// Where the region starts in the real buffer's flat storage, in elements.
  const Expr &elem_offset() const { return elem_offset_; }
  /// elem_offset() / factor; the offset factor was checked when binding, so this is exact.
  Expr elem_offset_div(int64_t factor) const;
  /// The number of the region as a tile of a buffer cut into `rows` x `cols` tiles (row-major
  /// over the last two dimensions, outer dimensions outermost): the index of a WMMA fragment in
  /// a fragment array. Unlike elem_offset_div(rows * cols) it holds when the buffer is wider
  /// than one tile, e.g. a warp's 64x32 accumulator of 4x2 fragments. tessel::Error (with
  /// `context`) when the region does not start on a tile boundary.
  Expr tile_index(int64_t rows, int64_t cols, const std::string &context) const;
  /// A pointer to the first element of the region (TVM's access_ptr).
  Expr access_ptr() const;
  /// A pointer to element (row, col) of the region, counted in its last two dimensions from
  /// its first element; per-thread offsets (mma_lane_id) make per-lane pointers.
  Expr access_ptr(const Expr &row, const Expr &col) const;
  /// The element of the region at `offsets` (one per dimension) from its first element.
  Expr load(const std::vector<Expr> &offsets) const;
  /// The stride in elements of dimension `i` of the declaration (the real buffer's stride of
  /// the dimension it is bound to); stride(ndim - 2) is the leading dimension of a matrix.
  int64_t stride(size_t i) const;
  /// For storage interleaved in chunks (the declaration's interleave, which binding checked):
  /// the distance in elements between consecutive chunks of the last dimension.
  int64_t chunk_stride() const { return chunk_stride_; }
  /// For the output of an intrinsic that stores part of its block (TensorIntrin::partial_output):
  /// how many elements of dimension `i` of the region lie inside the stage's range, counted
  /// from the region's first; undefined where the whole dimension does.
  Expr limit(size_t i) const { return i < limits_.size() ? limits_[i] : Expr(); }
  void set_limits(std::vector<Expr> limits) { limits_ = std::move(limits); }

private:
  Buffer decl_, buffer_;
  std::vector<Expr> region_min_;
  std::vector<Expr> region_offset_; ///< region_min_ minus the origin of the buffer, per dimension
  Expr elem_offset_;
  std::vector<int64_t> strides_; ///< of the declaration's dimensions
  int64_t chunk_stride_ = 0;
  std::vector<Expr> limits_;
};

/// What an intrinsic emits. For a reduction split around the tensorized loops, `reset`
/// initialises the output region and `update` accumulates into it; when the whole reduction is
/// inside the intrinsic, `body` does everything (or reset then update when body is undefined).
struct TensorIntrinBodies {
  Stmt body, reset, update;
};

struct TensorIntrin {
  std::string name;
  /// The pattern: a compute over placeholders.
  Operation op;
  /// The placeholders the pattern reads, in first-use order, with their declared buffers.
  std::vector<Tensor> inputs;
  std::vector<Buffer> input_decls;
  Buffer output_decl;
  /// The intrinsic can store part of its output block (BoundBuffer::limit), so a stage whose
  /// blocks do not divide its range (a split guarded at its tail) can be tensorized: the last
  /// block computes whole and stores what lies inside.
  bool partial_output = false;
  std::function<TensorIntrinBodies(const std::vector<BoundBuffer> &inputs,
                                   const BoundBuffer &output)>
      emit;

  // ---- One operation, operands in several orders (tensor_intrin_layouts) ----
  /// How this pattern holds each input ("row_major", "col_major"), in `inputs` order, and the
  /// whole pattern in words ("A row_major, B col_major"); for refusals, which list the layouts
  /// tried. Empty for an intrinsic of one pattern.
  std::vector<std::string> input_layouts;
  std::string layout;
  /// For an operand load into a fragment that may be held either way round (k x n or n x k):
  /// the dimension of the pattern's output that holds k, which must be the dimension the
  /// fragment's reader (the GEMM stage) reduces over. -1: no such condition.
  int reduced_output_dim = -1;
  /// The same operation on operands in other orders, tried in turn when this pattern does not
  /// match the stage; tensorize takes the first that does.
  std::vector<std::shared_ptr<const TensorIntrin>> alternatives;
};

/// Declares a tensor intrinsic computing `pattern`. `binds` gives a buffer declaration for each
/// placeholder the pattern reads and for the pattern itself.
std::shared_ptr<const TensorIntrin>
decl_tensor_intrin(const Tensor &pattern, const std::vector<std::pair<Tensor, Buffer>> &binds,
                   std::function<TensorIntrinBodies(const std::vector<BoundBuffer> &,
                                                    const BoundBuffer &)>
                       emit,
                   const std::string &name);

/// `pattern` as one of the patterns of a many-layout intrinsic (tensor_intrin_layouts), with
/// its TensorIntrin::input_layouts, layout and reduced_output_dim set.
std::shared_ptr<const TensorIntrin>
layout_pattern(const std::shared_ptr<const TensorIntrin> &pattern,
               std::vector<std::string> input_layouts, std::string layout,
               int reduced_output_dim = -1);

/// One intrinsic from `patterns`, the same operation on operands in different orders (each
/// with its `layout` set): the first, named `name`, with the others as its alternatives.
std::shared_ptr<const TensorIntrin>
tensor_intrin_layouts(const std::string &name,
                      std::vector<std::shared_ptr<const TensorIntrin>> patterns);

} // namespace tessel
