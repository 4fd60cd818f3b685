// Turning the global -> shared copies of a pipelined fill into cp.async (used by inject_pipeline).
#pragma once

#include "compiler/ir/IR.h"

#include <string>

namespace tessel {

/// Rewrites each store of `fill` that copies 4, 8 or 16 bytes per thread from global to shared
/// memory unchanged (`S[i] = G[j]`, with scalar or dense Ramp indices, or
/// `S[i] = if_then_else(c, G[j], 0)` for a zero-padded copy) into
/// `cp_async(address_of(S[i]), address_of(G[j]), bytes, c)`; other statements stay as they are.
/// `*converted` receives the number of stores rewritten, and `*refusal` (when given) why the
/// first store left as it is was not rewritten (empty if none was left).
Stmt to_async_copies(const Stmt &fill, int *converted, std::string *refusal = nullptr);

} // namespace tessel
