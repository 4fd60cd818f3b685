// Internal to the executor: runs the warps of a block independently, one at a time (the
// independent-warps mode of Machine.h).
//
// Each warp is a fiber: a thread of a pool kept for the whole launch (reused block after block)
// that runs the kernel body under a Mask of the warp's threads. Exactly one fiber runs at a
// time, the one holding the baton; it hands the baton on under a mutex, with a condition
// variable per fiber, only when it blocks (wait_until) or finishes. The next to run is the first
// warp after it in warp order (round robin) that can progress: one that has not started, or a
// blocked one whose condition now holds (checked by the baton holder, without switching to it).
// Runs are therefore deterministic and the Machine needs no locking.
//
// A cluster's blocks (Machine::cluster) run together: one fiber per warp of each block, picked
// in the same round robin (block 0's warps, then block 1's, ...), so that a block's wait can be
// released by a peer's remote arrival or multicast, and a deadlock report covers the cluster.
//
// When no unfinished warp can progress the block is deadlocked: a tessel::Error that lists what
// each blocked warp waits for (grouped when several wait alike), which warps finished, and the
// hints of the waits. An error raised in a fiber (this one included) ends the block: the other
// fibers are resumed to unwind (wait_until throws an internal exception in them), and run_block
// rethrows the first error to its caller. The destructor ends and joins every thread.
//
// Why threads and not ucontext: threads are clean under ASan/UBSan/TSan without fiber
// annotations, and a switch (a futex wake-up, some microseconds) happens only at blocking
// points, a few per loop iteration of a warp-specialized kernel.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessel::interp {

struct Machine;

class WarpScheduler {
public:
  /// What a blocked warp waits for.
  struct Wait {
    /// Whether the warp can go on; evaluated by the baton holder.
    std::function<bool()> ready;
    /// "mbarrier_wait on barrier 'full'[0] for parity 0: phase 0 has 0 of 1 arrivals ...",
    /// evaluated when the block deadlocks.
    std::function<std::string()> describe;
    /// What usually causes such a deadlock, said once per report.
    std::string hint;
  };

  /// Starts one thread per warp of M's block (idle until run_block).
  explicit WarpScheduler(Machine &M);
  /// Starts one thread per warp of each block of a cluster (Machines with the same number of
  /// warps, by rank).
  explicit WarpScheduler(std::vector<Machine *> blocks);
  ~WarpScheduler();
  WarpScheduler(const WarpScheduler &) = delete;
  WarpScheduler &operator=(const WarpScheduler &) = delete;

  /// Runs body(w) for every warp w of the block as fibers until all finished; rethrows the first
  /// error (a deadlock included) once every fiber has stopped.
  void run_block(const std::function<void(uint32_t warp)> &body);
  /// The same for the blocks of a cluster: body(rank, w) for every warp w of every block.
  void run_cluster(const std::function<void(uint32_t rank, uint32_t warp)> &body);

  /// The warp running now, in its block (called from inside body).
  uint32_t current() const { return running_ % warps_per_block_; }
  /// Blocks the running warp until wait.ready() holds; returns at once if it holds now. A
  /// tessel::Error if no warp can progress.
  void wait_until(const Wait &wait);
  /// Whether warp w of the running warp's block has finished the body.
  bool finished(uint32_t w) const {
    return fibers_[running_ / warps_per_block_ * warps_per_block_ + w].state == Finished;
  }
  /// Whether every warp of block `rank` of the cluster has finished the body.
  bool block_finished(uint32_t rank) const {
    for (uint32_t w = 0; w < warps_per_block_; ++w)
      if (fibers_[rank * warps_per_block_ + w].state != Finished)
        return false;
    return true;
  }
  /// Baton hand-overs since construction.
  uint64_t switches() const { return switches_; }

private:
  enum State : uint8_t { NotStarted, Running, Blocked, Finished };
  struct Fiber {
    std::thread thread;
    std::condition_variable cv;
    State state = Finished;
    const Wait *wait = nullptr;
  };
  static constexpr uint32_t kNone = ~0u, kCaller = ~0u - 1;

  void fiber_main(uint32_t w);
  /// The next warp after `from` that can progress (any unfinished one while aborting), or kNone.
  uint32_t pick(uint32_t from) const;
  /// Hands the baton to `next` (lock held).
  void hand_to(uint32_t next);
  /// The running warp finished: the baton goes on, or back to run_block's caller.
  void hand_on_finish(uint32_t w);
  std::string deadlock_report() const;

  std::vector<Machine *> blocks_;
  uint32_t warps_per_block_ = 1;
  std::vector<Fiber> fibers_;
  std::mutex mu_;
  std::condition_variable caller_cv_;
  uint32_t running_ = kCaller;
  bool shutdown_ = false;
  bool aborting_ = false;
  std::exception_ptr error_;
  const std::function<void(uint32_t, uint32_t)> *body_ = nullptr;
  uint64_t switches_ = 0;
};

} // namespace tessel::interp
