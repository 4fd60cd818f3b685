// Internal to the executor: intrinsics that a whole warp executes together (wmma_*, mma_*), or a
// whole warpgroup of 4 warps (wgmma_*).
//
// A call is checked to be made by all 32 threads of a warp (and all warps of its group), with
// the same values of its uniform arguments (fragment indices, strides) over the warp (and
// group); per-lane arguments (the row addresses of ldmatrix, each thread's pointer in an mma
// store) may differ and reach run() lane by lane. run() is called warp by warp. With independent
// warps (Machine.h) a call runs for one warp, which issues its part of a warpgroup instruction
// on its own: the whole-group and group-uniform checks apply in lock step only.
#pragma once

#include "runtime/interp/Machine.h"

#include <array>
#include <string>
#include <vector>

namespace tessel::interp {

class WarpIntrinsicCode : public StmtCode {
public:
  void exec(Machine &M, const Mask &m) final;

  /// Adds a warp-uniform scalar argument, named in errors.
  void add_uniform(ExprPtr e, std::string name);
  /// Adds an argument that each lane evaluates for itself.
  void add_per_lane(ExprPtr e);

  Expr src;
  std::string name_;
  /// Warps that make the call together: 1, or 4 for a warpgroup (warps 4g .. 4g + 3).
  uint32_t group_warps_ = 1;

protected:
  using LaneValues = std::array<int64_t, 32>;
  /// Runs the call for warp `w`: `args` are the uniform arguments in the order they were added,
  /// `lanes[j][l]` the value of per-lane argument j in lane l.
  virtual void run(Machine &M, uint32_t w, const std::vector<int64_t> &args,
                   const std::vector<LaneValues> &lanes) = 0;

  std::vector<ExprPtr> uniform_;
  std::vector<std::string> uniform_names_;
  std::vector<ExprPtr> per_lane_;

private:
  void check_whole_warp(const Machine &M, const Mask &m, uint32_t w, uint32_t count) const;
  /// All warps of warp w's group call (count[x]: the calling threads of warp x).
  void check_whole_group(const Machine &M, const std::vector<uint32_t> &count, uint32_t w) const;
};

/// A pointer into a buffer: address_of(buf[index]) or access_ptr(type, buf, offset, ...).
struct PtrArg {
  Memory *mem = nullptr;
  ExprPtr index;
};
PtrArg compile_pointer(Compiler &C, const Call *call, const Expr &arg);
/// The shared tile of a TMA box copy with tensor map `map` (its source when `source`, else its
/// destination): an error naming the call unless it is in shared memory, of the map's type.
PtrArg compile_box_tile(Compiler &C, const Call *call, const Expr &arg, const TensorMap &map,
                        bool source);

/// The fragment storage `arg` names; an error unless it is a fragment of kind `want` (None:
/// any kind).
Memory *compile_fragment(Compiler &C, const Call *call, const Expr &arg, FragKind want);

/// The scope a fragment kind stands for ("wmma.matrix_a", "mma.accumulator", ...).
const char *fragment_scope_name(FragKind f);

/// Argument `i` of `call`, which must be an integer constant.
int64_t const_arg(const Call *call, size_t i, const char *what);

} // namespace tessel::interp
