// Uninitialized-read and data-race detection on shared memory.
//
// Every shared element has a ShadowCell: who last wrote it and in which barrier epoch, and who
// read it in the current epoch, each with the clock of the accessor's warp. Two accesses by
// different agents to one element in the same epoch, at least one of them a write, are a race
// unless an mbarrier or named barrier orders them (HappensBefore.h: the earlier accessor's warp
// arrived after the access and the later one's warp acquired that arrival). Agents are threads,
// or whole warps for WMMA loads and stores (a warp does not race with its own lanes); lanes of
// one warp are ordered only by epochs.
//
// TMA copies (Tma.cpp) write as the asynchronous proxy of their barrier. While one is in flight
// (issued, not landed) its destination must not be accessed at all. Once landed, in the epoch it
// landed in, a thread may access it only if it waited for the barrier phase the copy completed
// on (an mbarrier wait is a synchronization); in later epochs the syncthreads between orders
// everyone after the thread whose wait landed it, as for ordinary writes.
#pragma once

#include "runtime/interp/Machine.h"

namespace tessel::interp {

[[noreturn]] void report_uninitialized(const Machine &M, const Memory &mem, int64_t index,
                                       int32_t reader);
/// A race with `other`; when `other` is an async agent, a tma_load landing that `agent` did
/// not wait for (the phase is the cell's async_phase).
[[noreturn]] void report_race(const Machine &M, const Memory &mem, int64_t index,
                              int32_t agent, bool agent_writes, int32_t other,
                              bool other_wrote);
/// An access to an element while a tma_load into it is in flight (Tma.cpp).
[[noreturn]] void report_in_flight(const Machine &M, const Memory &mem, int64_t index,
                                   int32_t agent, bool write);
/// Whether `agent` waited for the barrier phase whose tma_load wrote `c` (c.writer is an async
/// agent): every thread of it did, for a warp (Tma.cpp).
bool async_ordered(const Machine &M, const ShadowCell &c, int32_t agent);

/// Whether an access by `earlier` (a thread or warp agent) stamped `clock`, in this epoch, is
/// ordered before an access by `agent` now.
inline bool ordered(const Machine &M, int32_t earlier, uint32_t clock, int32_t agent) {
  if (same_agent(earlier, agent))
    return true;
  if (is_async_agent(earlier) || is_async_agent(agent))
    return false;
  const uint32_t we = warp_of(earlier), wa = warp_of(agent);
  return we != wa && M.clocks.ordered_after(wa, we, clock);
}

/// The last write of `c` is in this epoch and not ordered before an access by `agent`.
inline bool unordered_write(const Machine &M, const ShadowCell &c, int32_t agent) {
  if (c.write_epoch != M.epoch)
    return false;
  if (is_async_agent(c.writer))
    return !async_ordered(M, c, agent);
  return !ordered(M, c.writer, c.write_clock, agent);
}

/// A reader of `c` in this epoch not ordered before a write by `agent`, or kNoAgent.
inline int32_t unordered_reader(const Machine &M, const ShadowCell &c, int32_t agent) {
  if (c.read_epoch != M.epoch)
    return ShadowCell::kNoAgent;
  if (!ordered(M, c.reader, c.read_clock, agent))
    return c.reader;
  if (c.other_reader != ShadowCell::kNoAgent &&
      !ordered(M, c.other_reader, c.other_read_clock, agent))
    return c.other_reader;
  return ShadowCell::kNoAgent;
}

/// The clock an access by `agent` (a thread or warp agent) carries.
inline uint32_t clock_of(const Machine &M, int32_t agent) { return M.clocks.now(warp_of(agent)); }

/// Records a read of `c` by `agent` for the race checker: the latest clock of each remembered
/// reader (a later read is ordered by later arrivals only).
inline void record_read(const Machine &M, ShadowCell &c, int32_t agent) {
  const uint32_t clock = clock_of(M, agent);
  if (c.read_epoch != M.epoch) {
    c.read_epoch = M.epoch;
    c.reader = agent;
    c.read_clock = clock;
    c.other_reader = ShadowCell::kNoAgent;
  } else if (same_agent(c.reader, agent)) {
    c.read_clock = clock;
  } else {
    c.other_reader = agent;
    c.other_read_clock = clock;
  }
}

/// Checks and records a read of shared element `index` (in bounds) by `agent`.
inline void shared_read(const Machine &M, Memory &mem, int64_t index, int32_t agent) {
  ShadowCell &c = mem.shadow[index];
  if (c.in_flight) [[unlikely]]
    report_in_flight(M, mem, index, agent, false);
  if (c.write_epoch == 0 && M.opts.check_uninitialized_shared)
    report_uninitialized(M, mem, index, agent);
  if (!M.opts.check_races)
    return;
  if (unordered_write(M, c, agent)) [[unlikely]]
    report_race(M, mem, index, agent, false, c.writer, true);
  record_read(M, c, agent);
}

/// Checks and records a write of shared element `index` (in bounds) by `agent`.
inline void shared_write(const Machine &M, Memory &mem, int64_t index, int32_t agent) {
  ShadowCell &c = mem.shadow[index];
  if (c.in_flight) [[unlikely]]
    report_in_flight(M, mem, index, agent, true);
  if (c.store_reading) [[unlikely]]
    report_store_reading(M, mem, index, agent);
  if (M.opts.check_races) {
    if (unordered_write(M, c, agent)) [[unlikely]]
      report_race(M, mem, index, agent, true, c.writer, true);
    if (int32_t reader = unordered_reader(M, c, agent); reader != ShadowCell::kNoAgent) [[unlikely]]
      report_race(M, mem, index, agent, true, reader, false);
  }
  c.write_epoch = M.epoch;
  c.writer = agent;
  c.write_clock = clock_of(M, agent);
  c.writer_fences = agent >= 0 && size_t(agent) < M.proxy_fences.size() ? M.proxy_fences[agent] : 0;
}

} // namespace tessel::interp
