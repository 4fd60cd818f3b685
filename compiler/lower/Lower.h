// lower(): from a schedule to device kernels in flat IR, through the passes in order.
#pragma once

#include "compiler/lower/LoweredFunc.h"
#include "compiler/schedule/Schedule.h"

#include <ostream>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
}

namespace tessel {

struct LowerOptions {
  /// The kernel's name.
  std::string name = "default_function";
  /// Print the IR after these steps ("all" for every step). The environment variable
  /// TESSEL_PRINT_AFTER=all|name[,name...] adds to this list.
  std::vector<std::string> print_after;
  /// Where to print; standard error when null.
  llvm::raw_ostream *print_stream = nullptr;
  /// Print every remark (LoweredModule::remarks: each vectorize, unroll and pipeline request,
  /// applied or not and why) to print_stream. Without it, the requests that were not applied
  /// are logged as warnings (runs the same, only slower; TESSEL_LOG_LEVEL=error hides them).
  bool print_remarks = false;
  /// Serial loops with at most this many iterations in all are unrolled (TVM's
  /// tir.UnrollLoop auto_max_step); 0 unrolls only loops marked with unroll().
  int auto_unroll_max_step = 0;
  /// Arguments (and workspaces) with at least this many elements are indexed in int64, the
  /// others in int32 (storage_flatten). 2^31: where int32 stops holding the indices; lower it to
  /// run the int64 path at small sizes (tests).
  int64_t wide_index_elements = int64_t(1) << 31;
  /// The most workspace (global scratch between kernels: padded copies, split-K parts) a
  /// module may ask for; more is a tessel::Error at lowering. 128 GiB: less than the memory of
  /// the largest GPU tessel runs on (an H200's 141 GB); raise it for larger ones.
  int64_t max_workspace_bytes = int64_t(128) << 30;
};

/// The names of the lowering steps, in order (for --print-after).
const std::vector<std::string> &lowering_steps();

/// Lowers `s` to kernels whose parameters are `args` (inputs and outputs, in call order).
LoweredModule lower(const Schedule &s, const std::vector<Tensor> &args,
                    const LowerOptions &options = {});

std::string to_string(const LoweredFunc &f);
std::string to_string(const LoweredModule &m);
std::ostream &operator<<(std::ostream &os, const LoweredModule &m);

} // namespace tessel
