#pragma once

#include "compiler/ir/IR.h"
#include "compiler/support/Remarks.h"

namespace tessel {

/// Splits a warp-specialized kernel into its roles (Form 2 in, Form 2 out; Stage::warp_specialize).
/// inject_pipeline left the fills of the kernel's TMA ring marked warp_producer inside the
/// loop that consumes them; this pass makes of the block's work after the ring's barriers are
/// initialized
///
///   attr warp_specialize = 128 {
///     if (threadIdx.y == G) {                 // the producer: one warpgroup more
///       setmaxnreg(40, dec)
///       if (threadIdx.x == 0) { <the loops around the fills, with only the fills> }
///     } else {                                // the G consumer warpgroups
///       setmaxnreg(R, inc)
///       <the work, without the fills; syncthreads become a named barrier of the consumers>
///     }
///   }
///
/// so that the producer runs ahead of the consumers as far as the ring's empty barriers let
/// it, and the consumers only wait for full slots, compute and release. threadIdx.y's extent
/// grows by one (threadIdx.x must be one warpgroup, 128 threads; threadIdx.z unused).
/// Thread bindings inside the work are the consumers' own (threadIdx.x; threadIdx.y over the
/// consumer warpgroups, which where nothing binds threadIdx.y around the work are the
/// warpgroups bound inside, and their axis the roles' test): their statements are the
/// consumers', their extents the launch's; any other is a user error. R is the
/// most registers the consumers can take from the block's pool once the producer gave its up
/// (warp_role_registers).
/// Consumes the warp_roles and warp_producer attrs. A warp_roles attr with no ring to split (a
/// K loop of one step) leaves the kernel as it is, with a missed remark in `remarks`; a ring in
/// a loop run more than once per block is a user error naming the stage, except in a
/// persistent kernel's tile loop (attr tile_loop), whose ring runs across the tiles with its
/// barriers initialized before the loop: the producer's part keeps the tile loop (its lets and
/// guard), so that it fills the next tile's first slots while the consumers store this one.
/// Ping-pong consumers (warp_roles value 1, ConsumerRoles::ping_pong; the stage computed by one
/// warpgroup) become two consumer warpgroups (threadIdx.y 0 and 1, the producer 2): the
/// consumers' tile loop walks warpgroup g's tiles g, g + 2, ..., each main loop (the statements
/// waiting on the ring) after named_barrier_sync(3 + g) except on the block's first tile and
/// followed by named_barrier_arrive(4 - g) where the block has a next tile; a block of one tile
/// runs it on warpgroup 0 (a missed remark).
Stmt split_warp_roles(Stmt s, Remarks *remarks = nullptr);

/// The registers per thread split_warp_roles gives the producer warpgroup and each of
/// `consumer_warpgroups` consumer warpgroups (setmaxnreg): {40, R}, R within the registers the
/// block holds at launch (232 for 2 consumer warpgroups, 104 for 4).
std::pair<int, int> warp_role_registers(int consumer_warpgroups);

} // namespace tessel
