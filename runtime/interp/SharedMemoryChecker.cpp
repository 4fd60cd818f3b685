#include "runtime/interp/SharedMemoryChecker.h"

#include "compiler/support/Error.h"

namespace tessel::interp {

void report_uninitialized(const Machine &M, const Memory &mem, int64_t index, int32_t reader) {
  user_error("interp") << "read of uninitialized shared memory: " << M.agent_name(reader)
                       << " of block " << M.block_name() << " reads '" << mem.name << "'["
                       << index << "], which no thread wrote since its allocation";
}

void report_race(const Machine &M, const Memory &mem, int64_t index, int32_t agent,
                 bool agent_writes, int32_t other, bool other_wrote) {
  if (is_async_agent(other))
    user_error("interp") << "data race on shared buffer '" << mem.name << "'[" << index
                         << "] in block " << M.block_name() << " of kernel '" << M.kernel
                         << "': " << M.agent_name(agent) << (agent_writes ? " writes" : " reads")
                         << " it in the barrier interval (" << M.epoch
                         << ") in which a tma_load landed it, without having waited for phase "
                         << mem.shadow[size_t(index)].async_phase << " of "
                         << M.barrier_name(uint32_t(kAsyncAgentBase - other))
                         << "; mbarrier_wait for that phase (or syncthreads after the wait of "
                            "another thread) first";
  const char *kind = other_wrote ? (agent_writes ? "write/write" : "write/read") : "read/write";
  user_error("interp") << "data race (" << kind << ") on shared buffer '" << mem.name << "'["
                       << index << "] in block " << M.block_name() << ": "
                       << M.agent_name(other) << (other_wrote ? " wrote" : " read")
                       << " it and " << M.agent_name(agent)
                       << (agent_writes ? " writes" : " reads")
                       << " it with no syncthreads between (barrier interval " << M.epoch
                       << ")";
}

void report_out_of_bounds(const Machine &M, const Memory &mem, bool write, int64_t index,
                          int64_t limit, int32_t agent) {
  user_error("interp") << "out-of-bounds " << (write ? "write to" : "read of") << " "
                       << scope_name(mem.scope) << " buffer '" << mem.name << "' at index "
                       << index << " (valid: 0.." << limit - 1 << ") by "
                       << M.agent_name(agent) << " of block " << M.block_name();
}

} // namespace tessel::interp
