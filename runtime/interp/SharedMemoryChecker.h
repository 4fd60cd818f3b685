// Uninitialized-read and data-race detection on shared memory.
//
// Every shared element has a ShadowCell: who last wrote it and in which barrier epoch, and who
// read it in the current epoch. Two accesses by different agents to one element in the same
// epoch, at least one of them a write, are a race: nothing orders them on the GPU. Agents are
// threads, or whole warps for WMMA loads and stores (a warp does not race with its own lanes).
#pragma once

#include "runtime/interp/Machine.h"

namespace tessel::interp {

[[noreturn]] void report_uninitialized(const Machine &M, const Memory &mem, int64_t index,
                                       int32_t reader);
[[noreturn]] void report_race(const Machine &M, const Memory &mem, int64_t index,
                              int32_t agent, bool agent_writes, int32_t other,
                              bool other_wrote);

/// Checks and records a read of shared element `index` (in bounds) by `agent`.
inline void shared_read(const Machine &M, Memory &mem, int64_t index, int32_t agent) {
  ShadowCell &c = mem.shadow[index];
  if (c.write_epoch == 0 && M.opts.check_uninitialized_shared)
    report_uninitialized(M, mem, index, agent);
  if (!M.opts.check_races)
    return;
  if (c.write_epoch == M.epoch && !same_agent(c.writer, agent))
    report_race(M, mem, index, agent, false, c.writer, true);
  if (c.read_epoch != M.epoch) {
    c.read_epoch = M.epoch;
    c.reader = agent;
    c.other_reader = ShadowCell::kNoAgent;
  } else if (!same_agent(c.reader, agent)) {
    c.other_reader = agent;
  }
}

/// Checks and records a write of shared element `index` (in bounds) by `agent`.
inline void shared_write(const Machine &M, Memory &mem, int64_t index, int32_t agent) {
  ShadowCell &c = mem.shadow[index];
  if (M.opts.check_races) {
    if (c.write_epoch == M.epoch && !same_agent(c.writer, agent))
      report_race(M, mem, index, agent, true, c.writer, true);
    if (c.read_epoch == M.epoch) {
      if (!same_agent(c.reader, agent))
        report_race(M, mem, index, agent, true, c.reader, false);
      if (c.other_reader != ShadowCell::kNoAgent && !same_agent(c.other_reader, agent))
        report_race(M, mem, index, agent, true, c.other_reader, false);
    }
  }
  c.write_epoch = M.epoch;
  c.writer = agent;
}

} // namespace tessel::interp
