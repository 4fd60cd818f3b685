// Internal to the executor: happens-before between the warps of a block through mbarriers and
// named barriers, for the race checker (SharedMemoryChecker.h).
//
// Barrier epochs (Machine::epoch) order everything before a syncthreads before everything after
// it. Warp-specialized kernels have no syncthreads in their main loop: the consumers read a
// stage, arrive on its empty barrier, and the producer's wait on that barrier orders those reads
// before its refill. That ordering is tracked with vector clocks at warp granularity:
//
// - Each warp has a clock; every shared-memory access records its warp's clock (ShadowCell), and
//   the warp's clock ticks after each release (an mbarrier or named-barrier arrival), so the
//   accesses before the arrival carry a smaller clock than those after it.
// - A release adds the warp's vector (what it knows of every warp) into the barrier's current
//   phase; an mbarrier_wait that returns, or a named_barrier_sync that completes, acquires the
//   releases of the phase it observed: the waiting warp's vector takes their maximum.
// - An access by warp a stamped c is ordered before warp b's later access when b's vector holds
//   at least c for a. Lanes of one warp are not ordered by this (only by epochs), as before.
// - Entries past the warps stand for mbarriers (id n_warps + barrier id): how many phases of that
//   barrier the releases acquired so far had waited for. A thread's own waits are in
//   Barrier::observed; what its warp learned from others is here. Together they say whether a
//   thread is ordered after a tma_load's landing (Tma.cpp, async_ordered).
//
// The granularity errs toward no false reports: a wait by one lane orders the later accesses of
// its whole warp after the arrivals it acquired (as if the warp synchronized after the wait).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tessel::interp {

/// Per entry (a warp, then barriers), the largest clock known.
using VectorClock = std::vector<uint32_t>;

inline void join(VectorClock &into, const VectorClock &from) {
  if (into.size() < from.size())
    into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i)
    into[i] = std::max(into[i], from[i]);
}

class WarpClocks {
public:
  /// A new block: every warp at clock 1, knowing nothing of the others.
  void reset(uint32_t n_warps) {
    n_warps_ = n_warps;
    vc_.assign(n_warps, VectorClock(n_warps, 0));
    for (uint32_t w = 0; w < n_warps; ++w)
      vc_[w][w] = 1;
  }

  /// The clock that warp w's accesses carry now.
  uint32_t now(uint32_t w) const { return vc_[w][w]; }

  /// Whether an access by warp `other` stamped `clock` is ordered before warp w's next access.
  bool ordered_after(uint32_t w, uint32_t other, uint32_t clock) const {
    return vc_[w][other] >= clock;
  }

  /// Whether warp w acquired a release by a thread that had waited for phase `phase` of
  /// mbarrier `id` (or later).
  bool knows_phase(uint32_t w, uint32_t id, uint32_t phase) const {
    const size_t i = size_t(n_warps_) + id;
    return i < vc_[w].size() && vc_[w][i] > phase;
  }

  /// An arrival by warp w: its knowledge goes into `sync` (a barrier phase's releases).
  void release(uint32_t w, VectorClock &sync) const { join(sync, vc_[w]); }
  /// After the releases of warp w's arrivals in one statement: its later accesses are after.
  void tick(uint32_t w) { ++vc_[w][w]; }
  /// A thread of warp w observed `phases` completed phases of mbarrier `id` (its own wait), now
  /// part of what it releases: into `sync`.
  void release_phase(uint32_t id, uint32_t phases, VectorClock &sync) const {
    const size_t i = size_t(n_warps_) + id;
    if (sync.size() <= i)
      sync.resize(i + 1, 0);
    sync[i] = std::max(sync[i], phases);
  }
  /// Warp w's wait returned after the phase whose releases are `sync`.
  void acquire(uint32_t w, const VectorClock &sync) { join(vc_[w], sync); }

private:
  uint32_t n_warps_ = 0;
  std::vector<VectorClock> vc_;
};

} // namespace tessel::interp
