// What CUDA can launch at all: the limits on grids, blocks, shared memory, and the workspace a
// module asks its caller for. lower() checks them, so that a kernel that could never run is a
// tessel::Error naming the stage and axis (or the buffer) and what to change, not something
// that passes `tessel compile` and `export` and fails at cuLaunchKernel.
#pragma once

#include "compiler/lower/LoweredFunc.h"
#include "compiler/lower/Relations.h"
#include "compiler/schedule/Schedule.h"

#include <cstdint>
#include <string>

namespace tessel {

/// CUDA's limits for compute capability 7.0 and later.
inline constexpr int64_t kMaxGridX = 2147483647, kMaxGridYZ = 65535;
inline constexpr int64_t kMaxBlockXY = 1024, kMaxBlockZ = 64, kMaxThreadsPerBlock = 1024;
/// Shared memory a block can have (opted in): 227 KiB on sm_90. Lowering knows no target; the
/// build checks the target's own (max_shared_bytes_per_block).
inline constexpr int64_t kMaxSharedBytesPerBlock = 227 * 1024;

/// The most shared memory a block can have on `arch` ("sm_80": 163 KiB, "sm_86"/"sm_89": 99
/// KiB, "sm_90"/"sm_90a": 227 KiB, sm_70 to sm_75 too); 0 for an architecture not listed.
int64_t max_shared_bytes_per_block(const std::string &arch);

/// tessel::Error when a kernel of `m` exceeds a grid, block or shared-memory limit, or its
/// workspaces together exceed `max_workspace_bytes`; the message names the kernel, the stage
/// and axis bound to the offending thread index (from `sch` and `dom`) or the workspace, the
/// limit, and what to change.
void check_launch_limits(const ScheduleNode *sch, const DomainMap &dom, const LoweredModule &m,
                         int64_t max_workspace_bytes);

} // namespace tessel
