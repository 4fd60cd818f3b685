#pragma once

#include "compiler/ir/IR.h"

namespace tessel {

/// The cluster-wide barriers of a clustered kernel (Form 2 in, Form 2 out; Stage::cluster):
/// in each top-level statement with an attr::cluster_extent, a cluster_sync() (every thread of
/// every block of the cluster) after each syncthreads that publishes a TMA ring's barriers
/// (one following a statement with fence_barrier_init, outside the warp roles' branches), so
/// that no block multicasts into a peer or arrives on its barriers before the peer initialized
/// them; and one at the end of the block's work (inside its thread bindings and allocations),
/// so that no block exits while a peer may still write its shared memory or arrive on its
/// barriers. Runs after split_warp_roles, whose shared part (before the roles' branch) holds
/// the barrier initialization.
Stmt insert_cluster_syncs(Stmt s);

} // namespace tessel
