// One row of tessel_bench's table: our kernel against the vendor's on one problem.
#pragma once

#include "runtime/Timer.h"
#include "schedules/Registry.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace tessel::bench {

/// Which of our schedules runs a row: a registered name and shape parameters to give it,
/// "NAME" or "NAME:P=V,P=V" (tessel run's --shape syntax), e.g. gemm_tc:PP=2. Empty name: none.
struct ScheduleSpec {
  std::string name;
  std::string params;
  static ScheduleSpec parse(const std::string &spec) {
    size_t colon = spec.find(':');
    if (colon == std::string::npos)
      return {spec, ""};
    return {spec.substr(0, colon), spec.substr(colon + 1)};
  }
  std::string str() const { return params.empty() ? name : name + ":" + params; }
  /// The shape to build it with: `params`, and the problem's M, N and K.
  ShapeParams shape(int64_t M, int64_t N, int64_t K) const {
    ShapeParams p = params.empty() ? ShapeParams{} : parse_shape(params);
    p["M"] = M;
    p["N"] = N;
    p["K"] = K;
    return p;
  }
};

struct Row {
  std::string kernel, shape, ours_name;
  double flops = 0, ours_ms = NAN, vendor_ms = NAN, max_err = NAN;
  std::string note;
  /// What gave vendor_ms ("cuDNN eng34 k2=1 (heuristic A)", "cuBLASLt algo 66 ...").
  std::string vendor_call;
  /// The vendor as bench called it before issue 25 (cuDNN's legacy Find choice,
  /// cublasGemmEx's default algorithm), where the row has one: how the baseline moved.
  double vendor_default_ms = NAN;
};

/// Every timing of the table: CUDA events, 3 warm-up launches, median of 30 measurements of 10.
inline TimeOptions timing() { return {.number = 10, .repeat = 30, .warmup = 3, .flush_l2 = false}; }

/// Ours and the vendor's choice timed in turns: `rounds` rounds of the vendor's kernel, then
/// ours (each a `timing()` median, from the functions given), each side's figure the median of
/// its rounds, so that both meet the GPU in the same state. The vendor's search (cuBLASLt's
/// algorithms, cuDNN's engines) runs at full power just before a row, and a long kernel timed
/// once after it meets a hotter GPU at lower clocks than the vendor's best did (H100, 8192^3:
/// ours 1.757 ms timed after cuBLASLt's search, 1.646 timed beside our other kernels).
inline void time_in_turns(Row &r, const std::function<double()> &ours,
                          const std::function<double()> &vendor, int rounds = 3) {
  std::vector<double> o, v;
  for (int i = 0; i < rounds; ++i) {
    v.push_back(vendor());
    o.push_back(ours());
  }
  r.vendor_ms = summarize_times(std::move(v)).median_ms;
  r.ours_ms = summarize_times(std::move(o)).median_ms;
}

/// The table's line; after the check, what the vendor ran and the pre-issue-25 baseline.
inline void print_row(const Row &r) {
  std::printf("%-6s %-28s %-20s %10.4f %10.4f %9.1f %9.1f %7.3f  %-9.2e %s", r.kernel.c_str(),
              r.shape.c_str(), r.ours_name.c_str(), r.ours_ms, r.vendor_ms,
              r.flops / (r.ours_ms * 1e9), r.flops / (r.vendor_ms * 1e9), r.vendor_ms / r.ours_ms,
              r.max_err, r.note.c_str());
  if (!r.vendor_call.empty())
    std::printf(" | vendor: %s", r.vendor_call.c_str());
  if (!std::isnan(r.vendor_default_ms))
    std::printf(" (default choice %.4f ms)", r.vendor_default_ms);
  std::printf("\n");
  std::fflush(stdout);
}

} // namespace tessel::bench
