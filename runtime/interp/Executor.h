// A CPU reference executor for lowered device IR (Form 2, docs/IR_FORMS.md) with GPU semantics.
//
// CI has no GPU, so every schedule is checked numerically by running its lowered kernel here:
// every block of the grid, every thread of a block with its own threadIdx and local storage,
// block-shared memory, syncthreads as a real barrier, fp16/bf16 rounded after each operation as
// the GPU does, vector accesses, the warp-level WMMA intrinsics on per-warp fragments,
// ldmatrix / mma.sync on per-lane register fragments in the PTX ISA's layouts, cp.async, Hopper
// wgmma, and TMA bulk tensor copies with the mbarriers they complete on (Tma.cpp).
//
// A block's threads run in lock step (each statement for all of them at once), the fast way.
// Warp-specialized kernels (attr::warp_specialize: producer and consumer warps meeting only on
// mbarriers) and kernels with named barriers would deadlock that way; their warps run
// independently instead, each as a fiber, one at a time, switching at blocking points (the
// barriers, mbarrier waits); see Machine.h and WarpScheduler.h.
//
// Mistakes that would be undefined behaviour or silent corruption on the GPU are reported as
// tessel::Error naming the buffer, index, thread(s) and block: out-of-bounds accesses, reads of
// shared memory no thread wrote, barriers not reached by every thread of a block, data races
// on shared memory that no barrier orders, WMMA calls by part of a warp, asynchronous copies
// read before their wait or overwritten while in flight, mbarrier waits that would hang, and
// blocks whose warps deadlock (with what each one waits for).
//
//   HostBuffer a = HostBuffer::from_doubles(Float(16), data_a), c = HostBuffer::zeros(Float(32), n);
//   interp::execute(func, {&a, &b, &c});
//   std::vector<double> result = c.to_doubles();
#pragma once

#include "compiler/lower/LoweredFunc.h"

#include <cstddef>
#include <optional>
#include <vector>

namespace tessel::interp {

/// A kernel argument on the host: `elements()` values of `dtype` (a scalar type), stored as the
/// device stores them (float16 / bfloat16 as their 16-bit encodings, bool as one byte).
class HostBuffer {
public:
  HostBuffer() = default;
  HostBuffer(DataType dtype, size_t elements);

  static HostBuffer zeros(DataType dtype, size_t elements) { return HostBuffer(dtype, elements); }
  /// Converts each value to dtype (floats rounded to nearest even, integers truncated toward
  /// zero then wrapped).
  static HostBuffer from_doubles(DataType dtype, const std::vector<double> &values);
  static HostBuffer from_floats(DataType dtype, const std::vector<float> &values);

  DataType dtype() const { return dtype_; }
  size_t elements() const { return elements_; }
  std::byte *data() { return bytes_.data(); }
  const std::byte *data() const { return bytes_.data(); }

  /// Element i as a double (exact for every supported dtype except 64-bit integers beyond 2^53).
  double get(size_t i) const;
  /// Stores v converted to dtype as in from_doubles.
  void set(size_t i, double v);
  /// Raw integer access without the round trip through double.
  int64_t get_int(size_t i) const;
  void set_int(size_t i, int64_t v);

  std::vector<double> to_doubles() const;
  std::vector<float> to_floats() const;

private:
  DataType dtype_;
  size_t elements_ = 0;
  std::vector<std::byte> bytes_;
};

struct ExecOptions {
  /// Report write/write, write/read and read/write conflicts between different threads on the
  /// same shared element within one barrier interval.
  bool check_races = true;
  /// Report reads of shared memory that no thread wrote since its allocation.
  bool check_uninitialized_shared = true;
  /// Run each warp of a block as its own fiber (true) or all threads in lock step (false).
  /// Unset: independent warps for kernels with attr::warp_specialize or named_barrier_* calls,
  /// lock step for the others. Both give the same results for a kernel that runs either way;
  /// tests set true to run ordinary kernels with independent warps.
  std::optional<bool> independent_warps;
};

/// Runs `f` over its whole grid on `args` (in the order of f.args; the same HostBuffer may be
/// passed twice for in-place kernels). Throws tessel::Error on a mismatched argument, an
/// unsupported construct or any problem listed above; `args` are then partly written.
void execute(const LoweredFunc &f, const std::vector<HostBuffer *> &args,
             const ExecOptions &options = {});
/// Runs the kernels of `m` in order on `args` (the arguments, without the workspaces), with
/// workspaces it allocates filled with NaN (floats) or -1 (integers).
void execute(const LoweredModule &m, const std::vector<HostBuffer *> &args,
             const ExecOptions &options = {});

} // namespace tessel::interp
