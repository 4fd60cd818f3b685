// Timing GPU work with CUDA events, in the manner of TVM's time_evaluator: warm up, then
// `repeat` measurements of `number` back-to-back launches each; each measurement yields the mean
// time of one launch, and the statistics are over the measurements.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace tessel {

class Device;

struct TimeOptions {
  int number = 10;  ///< launches per measurement
  int repeat = 30;  ///< measurements
  int warmup = 3;   ///< untimed launches first (module load, clocks, caches)
  /// Overwrite a buffer larger than the L2 cache before each measurement, so that the first
  /// launch of it finds its inputs in DRAM, not in L2. With number > 1 only that first launch
  /// runs cold; use number = 1 to time cold launches alone.
  bool flush_l2 = false;
  /// Launch for this many seconds before the warm-up, so that the measurements meet the GPU at
  /// the clocks it sustains under load (its power limit) rather than a cool GPU's boost: on the
  /// H100 a GEMM ran 10% faster in its first second than after (bench/RESULTS.md, 2026-11-27).
  double hold_seconds = 0;
};

struct TimeResult {
  std::vector<double> ms; ///< per measurement: milliseconds per launch
  double median_ms = 0, min_ms = 0, max_ms = 0, mean_ms = 0;
  int number = 1; ///< launches per measurement

  /// "median 0.123 ms (min 0.120, max 0.130, mean 0.124; 30 x 10 launches)"
  std::string str() const;
};

/// Times `launch`, which must enqueue its work on the default stream of `device` (the default
/// device when null) and not synchronize. Throws tessel::Error for bad options or GPU errors.
TimeResult time_launches(const std::function<void()> &launch, const TimeOptions &options = {},
                         Device *device = nullptr);

/// The statistics of a list of per-measurement times.
TimeResult summarize_times(std::vector<double> ms, int number = 1);

} // namespace tessel
