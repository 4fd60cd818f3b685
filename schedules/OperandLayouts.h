// The orders a GEMM operand tile may be held in, for the Tensor Core intrinsics whose operands
// are fragments (WMMA, mma.sync): tensorize tries each and takes the one the stage's body is
// written in (TensorIntrin::alternatives).
//
// An operand is A (m x k) or B (k x n). Its tile in memory is "row_major" (stored as the operand)
// or "col_major" (stored as its transpose: A k x m, B n x k); the fragment stage holds it as the
// operand or transposed, as the GEMM's body reads it (B[k, j] or B[j, k]). A load copies the
// tile as is or transposed; which one, and the fragment's order, give the memory layout the
// hardware loads with. A batched NT GEMM, sum(A[b, i, k] * B[b, j, k]), holds its B fragment
// n x k and loads it col_major.
#pragma once

#include "compiler/ir/Tensor.h"
#include "compiler/schedule/TensorIntrin.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel {

/// One way an operand tile goes from memory into a fragment.
struct OperandLoadLayout {
  bool col_major = false;           ///< the memory tile is the operand's transpose
  bool fragment_transposed = false; ///< the fragment holds the operand's transpose

  const char *memory() const { return col_major ? "col_major" : "row_major"; }
  /// The fragment's dimensions, of an operand of `rows` x `cols`.
  std::pair<int, int> fragment(int rows, int cols) const {
    return fragment_transposed ? std::pair{cols, rows} : std::pair{rows, cols};
  }
  /// The dimension of the fragment that holds k: A's is its second as the operand, B's its first.
  int k_dim(bool is_a) const { return is_a != fragment_transposed ? 1 : 0; }
  /// "col_major into an n x k fragment", for refusals; `rows` / `cols` name the operand's axes.
  std::string describe(const char *rows, const char *cols) const;
};

/// The layouts a load declared with `layout` may take: "row_major" or "col_major" (the memory
/// tile's), each into either fragment order, or all four when `layout` is empty; the operand's
/// own order first. tessel::Error (naming `intrin`) for any other layout.
std::vector<OperandLoadLayout> operand_load_layouts(const std::string &layout, const char *intrin);

/// The pattern of a load of an operand tile of `rows` x `cols` of `in`: the fragment C from the
/// memory tile *memory (a placeholder named "A"), as `l` says.
Tensor operand_load_pattern(int rows, int cols, DataType in, const OperandLoadLayout &l,
                            Tensor *memory);

/// The pattern C (m x n, `acc`) = sum_k A[i, k] * B[k, j] with A (`a_col`: read A[k, i]) and B
/// (`b_col`: B[j, k]) of `in`; the products in `acc`, the inputs cast to it unless they are of
/// it already.
Tensor gemm_pattern(int m, int n, int k, DataType in, DataType acc, bool a_col, bool b_col,
                    Tensor *A, Tensor *B);

/// A load's pattern (of `l`, for A when `is_a`, else B) as one layout of a load intrinsic
/// (tensor_intrin_layouts): named, with the fragment's k dimension its reader must reduce over.
std::shared_ptr<const TensorIntrin>
operand_load_layout(const std::shared_ptr<const TensorIntrin> &pattern, const OperandLoadLayout &l,
                    bool is_a);

/// A GEMM's pattern (gemm_pattern's `a_col`, `b_col`) as one layout of a GEMM intrinsic, named
/// "A row_major, B col_major".
std::shared_ptr<const TensorIntrin> gemm_layout(const std::shared_ptr<const TensorIntrin> &pattern,
                                                bool a_col, bool b_col);

} // namespace tessel
