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
