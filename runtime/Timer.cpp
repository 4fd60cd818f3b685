#include "runtime/Timer.h"

#include "compiler/support/Error.h"
#include "runtime/CudaDriver.h"
#include "runtime/Device.h"
#include "runtime/DeviceArray.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>

namespace tessel {

namespace {

// Destroys its events on every path out, errors included.
struct EventPair {
  CUevent start = nullptr, stop = nullptr;
  EventPair() {
    TESSEL_CU(cuEventCreate, &start, CU_EVENT_DEFAULT);
    TESSEL_CU(cuEventCreate, &stop, CU_EVENT_DEFAULT);
  }
  ~EventPair() {
    const CudaDriver &d = CudaDriver::instance();
    if (start)
      d.cuEventDestroy_v2(start);
    if (stop)
      d.cuEventDestroy_v2(stop);
  }
};

} // namespace

std::string TimeResult::str() const {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "median %.4f ms (min %.4f, max %.4f, mean %.4f; %zu x %d launches)",
                median_ms, min_ms, max_ms, mean_ms, ms.size(), number);
  return buf;
}

TimeResult summarize_times(std::vector<double> ms, int number) {
  TimeResult r;
  r.number = number;
  r.ms = std::move(ms);
  if (r.ms.empty())
    return r;
  std::vector<double> sorted = r.ms;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  r.median_ms = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  r.min_ms = sorted.front();
  r.max_ms = sorted.back();
  r.mean_ms = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(n);
  return r;
}

TimeResult time_launches(const std::function<void()> &launch, const TimeOptions &options,
                         Device *device) {
  user_check(options.number >= 1 && options.repeat >= 1 && options.warmup >= 0 &&
                 options.hold_seconds >= 0,
             "time_launches")
      << "number and repeat must be >= 1, warmup and hold_seconds >= 0 (got number "
      << options.number << ", repeat " << options.repeat << ", warmup " << options.warmup
      << ", hold_seconds " << options.hold_seconds << ")";
  Device &dev = device ? *device : Device::get();
  dev.make_current();

  DeviceArray flush;
  if (options.flush_l2) {
    // Twice the L2 size, so that no line of the kernel's data can survive the memset.
    int64_t bytes = std::max<int64_t>(2 * dev.l2_cache_bytes(), 1 << 20);
    flush = DeviceArray(UInt(8), {bytes}, &dev);
  }

  // Hold: batches of `number` launches until the time is up (a batch's end synchronized, so
  // that the queue stays short and the hold ends on time).
  const auto hold_start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - hold_start).count() <
         options.hold_seconds) {
    for (int i = 0; i < options.number; ++i)
      launch();
    dev.synchronize();
  }
  for (int i = 0; i < options.warmup; ++i)
    launch();
  dev.synchronize();

  EventPair ev;
  std::vector<double> ms;
  for (int r = 0; r < options.repeat; ++r) {
    if (options.flush_l2)
      TESSEL_CU(cuMemsetD8Async, flush.data(), static_cast<unsigned char>(r), flush.bytes(),
                nullptr);
    TESSEL_CU(cuEventRecord, ev.start, nullptr);
    for (int i = 0; i < options.number; ++i)
      launch();
    TESSEL_CU(cuEventRecord, ev.stop, nullptr);
    TESSEL_CU(cuEventSynchronize, ev.stop);
    float elapsed = 0;
    TESSEL_CU(cuEventElapsedTime_v2, &elapsed, ev.start, ev.stop);
    ms.push_back(static_cast<double>(elapsed) / options.number);
  }
  return summarize_times(std::move(ms), options.number);
}

} // namespace tessel
