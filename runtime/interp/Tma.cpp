// Hopper bulk tensor copies (tma_load, tma_load_im2col, tma_load_multicast) and the
// shared-memory barriers they complete on (mbarrier_init, mbarrier_arrive,
// mbarrier_arrive_expect_tx, mbarrier_arrive_cluster, mbarrier_wait, fence_barrier_init), as
// compiler/ir/Intrinsics.h defines them.
//
// Clusters (Machine::cluster): a tma_load_multicast reads its box once and lands it in each
// block of its mask, at the destination's offset there, on that block's barrier at the
// barrier's offset (in flight there as for a local copy); mbarrier_arrive_cluster arrives on
// the barrier at the same offset in the block of the given rank. Using a peer's barrier before
// its mbarrier_init is an error. The race checker's clocks are per block: a peer's arrival or
// multicast is not race-checked, but its copies' in-flight cells and the wgmma operand checks
// are, so refilling a peer's slot before its consumers waited for it (or while their wgmma
// still reads it) is an error.
//
// A barrier is an element of a UInt(64) shared buffer, identified by (buffer, index) and kept in
// Machine::barriers: its arrival count per phase, the arrivals and pending transaction bytes of
// the current phase, how many phases completed, and the tma_load copies not landed yet. One
// thread initializes it (several threads initializing one barrier, or any use before
// mbarrier_init, is an error, and so is a use by another thread before a syncthreads publishes
// the init). Each active thread of mbarrier_arrive / mbarrier_arrive_expect_tx arrives once, the
// latter after adding its bytes to the pending count; a tma_load counts its box's bytes as
// transferred when it is issued (the pending count may go negative until the matching
// expect_tx, as on the GPU). The phase completes when all `count` threads arrived and no bytes
// are pending; an arrival beyond `count` in a phase is an error.
//
// Landing is lazy: a tma_load reads its box from global memory when issued (zeros outside the
// tensor) and writes shared memory only at the first mbarrier_wait, by any thread, that returns
// after its phase completed. Until then its destination elements are "in flight": any read or
// write of them (by threads, warp-level intrinsics, cp.async landings) and any other tma_load
// into them is an error naming the copy and its barrier, so a kernel that reads a stage before
// waiting for it, or refills a stage still in flight, is caught whatever the values.
//
// mbarrier_wait(bar, parity) returns when the current phase's parity differs from `parity` (the
// phase of that parity completed: initially wait(1) returns and wait(0) blocks). In lock step
// a wait that would block can never be released (no other thread runs meanwhile): it is
// reported as a hang with what the phase lacks. With independent warps (warp-specialized
// kernels) the warp blocks until the phase completes, and a wait no warp can release is part of
// the deadlock report (WarpScheduler.h).
//
// The race checker: a landing writes its elements as the asynchronous agent of its barrier
// (async_agent(id)), in the barrier interval of the wait that landed it. In that interval, a
// thread may read or write them only if it has waited for the copy's phase (the barrier's
// completed-phase count it saw at its last wait is above the phase), or its warp acquired an
// arrival by a thread that had (HappensBefore.h: the consumers' arrivals on an empty barrier
// carry their waits on the full one to the producer); after a syncthreads everyone may, as for
// ordinary writes. Arrivals release what their warp did and knows into the barrier's phase, and
// a wait that returns acquires the last completed phase's releases, so the consumers' reads of a
// stage are ordered before the producer's refill after its wait on the stage's empty barrier. A
// wait that observes a phase every thread of the block arrived at also starts a barrier interval
// (once per phase), like a syncthreads. A tma_load is checked, when issued, against reads and
// writes of its destination by other agents in the current interval that nothing orders before
// it (the asynchronous write may land before them). At the end of a block, a copy not landed or
// a barrier still expecting bytes is an error.
//
// tma_load_im2col is the same copy (one code path, BulkTensorCode: destination alignment, the
// swizzle, byte accounting, landing, in-flight cells and the race checker) with another source:
// box[1] pixels of box[0] channels of an NHWC tensor, walking the map's bounding box from the
// start pixel (an error if the start (w, h) is outside it) and read at the pixel moved by the
// call's offsets, zeros outside the tensor. tma_load takes only tiled maps, tma_load_im2col only
// im2col maps; bind_tensor_maps checks each kind's shape at launch.
#include "runtime/interp/SharedMemoryChecker.h"
#include "runtime/interp/TmaBox.h"
#include "runtime/interp/WarpIntrinsic.h"
#include "runtime/interp/WarpScheduler.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

#include <algorithm>
#include <sstream>

namespace tessel::interp {

namespace {

/// The PTX ISA's limits: 2^20 - 1 arrivals per phase, tx-count in [-(2^20 - 1), 2^20 - 1].
constexpr int64_t kMaxCount = (int64_t(1) << 20) - 1;

std::string by(const Machine &M, const std::string &op, uint32_t t) {
  return op + " by " + M.where(t) + " in kernel '" + M.kernel + "'";
}

/// "phase 2 has 0 of 1 arrivals and waits for 4096 more transaction bytes ..."
std::string phase_state(const Barrier &b) {
  std::ostringstream os;
  os << "phase " << b.completed << " has " << b.arrivals << " of " << b.count << " arrivals";
  if (b.pending_bytes > 0)
    os << " and waits for " << b.pending_bytes
       << " transaction bytes announced by mbarrier_arrive_expect_tx that no tma_load brought";
  else if (b.pending_bytes < 0)
    os << " and " << -b.pending_bytes
       << " transaction bytes of tma_load calls that no mbarrier_arrive_expect_tx announced";
  else
    os << " and no pending transaction bytes";
  return os.str();
}

/// "the tma_load of ... (issued by thread (0,0,0) on barrier 'bar'[0], phase 1)".
std::string describe(const Machine &M, uint32_t id, const TmaCopy &c) {
  return "the " + c.what + " (issued by " + M.thread_name(c.issuer) + " on " + M.barrier_name(id) +
         ", phase " + std::to_string(c.phase) + ")";
}

/// Why copy `c` of barrier `b` has not landed.
std::string not_landed_because(const Barrier &b, const TmaCopy &c) {
  if (c.phase < b.completed)
    return "its phase completed but no thread has waited for it yet";
  return phase_state(b);
}

/// The live barrier at mem[index], or -1.
int64_t find_barrier(const Machine &M, const Memory *mem, int64_t index) {
  for (size_t id = M.barriers.size(); id-- > 0;) {
    const Barrier &b = M.barriers[id];
    if (b.live && b.mem == mem && b.index == index)
      return int64_t(id);
  }
  return -1;
}

void check_tx(const Machine &M, const std::string &op, uint32_t t, uint32_t id, const Barrier &b) {
  user_check(b.pending_bytes >= -kMaxCount && b.pending_bytes <= kMaxCount, "interp")
      << by(M, op, t) << ": the transaction count of " << M.barrier_name(id) << " is "
      << b.pending_bytes << ", outside the range of the hardware's tx-count (+-(2^20 - 1))";
}

/// The phase completes when every arrival is in and no bytes are pending; its waits acquire
/// its arrivals' releases.
void try_complete(Barrier &b) {
  if (b.arrivals == b.count && b.pending_bytes == 0) {
    ++b.completed;
    b.arrivals = 0;
    b.completed_clock = std::move(b.arrivals_clock);
    b.arrivals_clock.clear();
  }
}

/// Writes the copies of barrier `id` whose phase completed into shared memory, in issue order.
void land_ready(Machine &M, uint32_t id) {
  Barrier &b = M.barriers[id];
  size_t kept = 0;
  for (size_t j = 0; j < b.copies.size(); ++j) {
    TmaCopy &c = b.copies[j];
    if (c.phase < b.completed) {
      Memory &mem = *c.dst;
      for (size_t k = 0; k < c.cells.size(); ++k) {
        ShadowCell &s = mem.shadow[size_t(c.cells[k])];
        s.in_flight = false;
        s.write_epoch = M.epoch;
        s.writer = async_agent(id);
        s.async_phase = c.phase;
        mem.data[size_t(c.cells[k])] = c.values[k];
      }
      continue;
    }
    if (kept != j)
      b.copies[kept] = std::move(c);
    ++kept;
  }
  b.copies.resize(kept);
}

/// After the arrivals of a statement: the accesses that follow in the arriving warps are after
/// their releases (HappensBefore.h).
void tick_warps(Machine &M, const Mask &m) {
  uint32_t last = ~0u;
  m.each([&](uint32_t t) {
    if (t / 32 != last)
      M.clocks.tick(last = t / 32);
  });
}

/// A barrier operand: address_of(bar[i]) of a UInt(64) shared buffer.
struct BarrierArg {
  Memory *mem = nullptr;
  ExprPtr index;
};

BarrierArg compile_barrier(Compiler &C, const Call *call, const Expr &arg) {
  PtrArg p = compile_pointer(C, call, arg);
  user_check(p.mem->scope == MemScope::Shared && p.mem->dtype == UInt(64), "interp")
      << call->name << " in kernel '" << C.M.kernel << "': the barrier '" << p.mem->name << "' is "
      << p.mem->dtype << " in " << scope_name(p.mem->scope)
      << " memory; a barrier is an element of a uint64 buffer in shared memory";
  return {p.mem, std::move(p.index)};
}

/// The barrier at mem[index] that thread t uses in `op`: initialized, and published to t.
uint32_t use_barrier(Machine &M, const std::string &op, Memory &mem, int64_t index, uint32_t t) {
  if (index < 0 || index >= mem.size)
    report_out_of_bounds(M, mem, false, index, mem.size, int32_t(t));
  int64_t id = find_barrier(M, &mem, index);
  user_check(id >= 0, "interp")
      << by(M, op, t) << ": barrier '" << mem.name << "'[" << index
      << "] is used before mbarrier_init (one thread initializes it, then fence_barrier_init "
         "and syncthreads publish it to the others)";
  const Barrier &b = M.barriers[size_t(id)];
  user_check(t == b.init_thread || M.epoch != b.init_epoch, "interp")
      << by(M, op, t) << ": " << M.barrier_name(uint32_t(id)) << " was initialized by "
      << M.thread_name(b.init_thread) << " with no syncthreads since (barrier interval " << M.epoch
      << "); other threads may use a barrier only after the fence_barrier_init and "
         "syncthreads that publish its mbarrier_init";
  return uint32_t(id);
}

class InitCode : public StmtCode {
public:
  InitCode(BarrierArg bar, ExprPtr count) : bar_(std::move(bar)), count_(std::move(count)) {}
  void exec(Machine &M, const Mask &m) override {
    const Val *bi = bar_.index->eval(M, m), *cnt = count_->eval(M, m);
    Memory &mem = *bar_.mem;
    m.each([&](uint32_t t) {
      const int64_t i = bi[t].i, n = cnt[t].i;
      const std::string op = intrinsic::mbarrier_init;
      if (i < 0 || i >= mem.size)
        report_out_of_bounds(M, mem, true, i, mem.size, int32_t(t));
      user_check(n >= 1 && n <= kMaxCount, "interp")
          << by(M, op, t) << ": barrier '" << mem.name << "'[" << i << "] initialized for " << n
          << " arrivals per phase; the count must be 1 .. 2^20 - 1";
      int64_t old = find_barrier(M, &mem, i);
      if (old >= 0) {
        Barrier &o = M.barriers[size_t(old)];
        user_check(o.init_thread == t || o.init_epoch != M.epoch, "interp")
            << by(M, op, t) << ": " << M.barrier_name(uint32_t(old)) << " is also initialized by "
            << M.thread_name(o.init_thread)
            << " in this barrier interval; exactly one thread initializes a barrier";
        user_check(o.copies.empty() && o.arrivals == 0 && o.pending_bytes == 0, "interp")
            << by(M, op, t) << ": " << M.barrier_name(uint32_t(old))
            << " is initialized again while in use: " << phase_state(o)
            << (o.copies.empty()
                    ? ""
                    : ", and " + describe(M, uint32_t(old), o.copies[0]) + " has not landed");
        o.live = false; // its id keeps naming the copies it landed
      }
      Barrier b;
      b.mem = &mem;
      b.index = i;
      b.count = uint32_t(n);
      b.init_thread = t;
      b.init_epoch = M.epoch;
      b.init_cluster_phase = M.cluster_barrier ? M.cluster_barrier->completed : 0;
      b.observed.assign(M.n_threads, 0);
      M.barriers.push_back(std::move(b));
    });
  }

private:
  BarrierArg bar_;
  ExprPtr count_;
};

/// The live barrier at `mem`[index] of peer P of M's cluster, used by thread t of M in `op`:
/// initialized (a cluster_sync after the peer's mbarrier_init orders it before).
uint32_t use_peer_barrier(const Machine &M, const Machine &P, const std::string &op,
                          const Memory &mem, int64_t index, uint32_t t) {
  const Memory &pmem = peer_memory(P, mem);
  if (index < 0 || index >= pmem.size)
    report_out_of_bounds(M, pmem, false, index, pmem.size, int32_t(t));
  user_check(!M.warps->block_finished(P.cluster_rank), "interp")
      << by(M, op, t) << ": block " << P.block_name() << " (rank " << P.cluster_rank
      << " of the cluster) has exited, and its barrier '" << pmem.name << "'[" << index
      << "] with it; a block must not exit while a peer may still reach its shared memory "
         "(a cluster_sync at the end of every block's work)";
  const int64_t id = find_barrier(P, &pmem, index);
  const ClusterBarrier *cb = M.cluster_barrier;
  user_check(id >= 0 && cb && cb->completed > P.barriers[size_t(id)].init_cluster_phase,
             "interp")
      << by(M, op, t) << ": barrier '" << pmem.name << "'[" << index << "] of block "
      << P.block_name() << " (rank " << P.cluster_rank << " of the cluster) is used before its "
      << "mbarrier_init is ordered before the use: "
      << (id < 0 ? std::string("it is not initialized")
                 : "no cluster_sync completed since " +
                       P.thread_name(P.barriers[size_t(id)].init_thread) + " initialized it")
      << "; the blocks of a cluster meet at a cluster_sync after initializing their barriers "
         "(mbarrier_init, fence_barrier_init), before any of them reaches a peer's";
  return uint32_t(id);
}

/// mbarrier_arrive, or mbarrier_arrive_expect_tx when `bytes` is set, or
/// mbarrier_arrive_cluster when `rank` is: an arrival on the barrier at the same offset in the
/// block of that rank of the cluster. A remote arrival counts on the peer's barrier but carries
/// no release to the race checker, whose clocks are per block (Machine::clocks): across blocks
/// the executor checks in-flight copies and wgmma operands instead.
class ArriveCode : public StmtCode {
public:
  ArriveCode(std::string op, BarrierArg bar, ExprPtr bytes, ExprPtr rank = nullptr)
      : op_(std::move(op)), bar_(std::move(bar)), bytes_(std::move(bytes)),
        rank_(std::move(rank)) {}
  void exec(Machine &M, const Mask &m) override {
    const Val *bi = bar_.index->eval(M, m);
    const Val *tx = bytes_ ? bytes_->eval(M, m) : nullptr;
    const Val *rk = rank_ ? rank_->eval(M, m) : nullptr;
    m.each([&](uint32_t t) {
      if (rk) {
        Machine &P = cluster_peer(M, rk[t].i, op_, t);
        if (&P != &M) {
          const uint32_t id = use_peer_barrier(M, P, op_, *bar_.mem, bi[t].i, t);
          Barrier &b = P.barriers[id];
          user_check(b.arrivals < b.count, "interp")
              << by(M, op_, t) << ": one arrival too many on " << P.barrier_name(id)
              << " of block " << P.block_name() << ": " << phase_state(b)
              << "; arriving beyond the count of an incomplete phase is undefined on the GPU";
          ++b.arrivals;
          const uint32_t before = b.completed;
          try_complete(b);
          if (b.completed != before && b.count == P.n_threads)
            b.block_wide_phase = b.completed;
          return;
        }
      }
      const uint32_t id = use_barrier(M, op_, *bar_.mem, bi[t].i, t);
      Barrier &b = M.barriers[id];
      const int64_t bytes = tx ? tx[t].i : 0;
      user_check(bytes >= 0 && bytes <= kMaxCount, "interp")
          << by(M, op_, t) << " on " << M.barrier_name(id) << ": " << bytes
          << " transaction bytes; expect 0 .. 2^20 - 1";
      user_check(b.arrivals < b.count, "interp")
          << by(M, op_, t) << ": one arrival too many on " << M.barrier_name(id) << ": "
          << phase_state(b)
          << "; arriving beyond the count of an incomplete phase is undefined on the GPU";
      b.pending_bytes += bytes; // expect-tx, then arrive-on
      check_tx(M, op_, t, id, b);
      // The release: what t's warp did and knows, and the phases t itself waited for.
      M.clocks.release(t / 32, b.arrivals_clock);
      for (uint32_t x = 0; x < M.barriers.size(); ++x)
        M.clocks.release_phase(x, M.barriers[x].observed[t], b.arrivals_clock);
      ++b.arrivals;
      const uint32_t before = b.completed;
      try_complete(b);
      if (b.completed != before && b.count == M.n_threads)
        b.block_wide_phase = b.completed;
    });
    tick_warps(M, m);
  }

private:
  std::string op_;
  BarrierArg bar_;
  ExprPtr bytes_, rank_;
};

class WaitCode : public StmtCode {
public:
  WaitCode(BarrierArg bar, ExprPtr parity) : bar_(std::move(bar)), parity_(std::move(parity)) {}
  void exec(Machine &M, const Mask &m) override {
    const Val *bi = bar_.index->eval(M, m), *par = parity_->eval(M, m);
    const std::string op = intrinsic::mbarrier_wait;
    // Copied out: with independent warps the wait may block, and other warps evaluate the same
    // expressions meanwhile.
    std::vector<ThreadWait> waits;
    waits.reserve(m.count());
    m.each([&](uint32_t t) {
      const uint32_t id = use_barrier(M, op, *bar_.mem, bi[t].i, t);
      const int64_t parity = par[t].i;
      user_check(parity == 0 || parity == 1, "interp")
          << by(M, op, t) << " on " << M.barrier_name(id) << ": parity " << parity
          << "; it must be 0 or 1";
      waits.push_back({t, id, uint32_t(parity)});
    });
    auto blocked = [&M](const ThreadWait &x) {
      return M.barriers[x.id].completed % 2 == x.parity;
    };
    auto first = std::find_if(waits.begin(), waits.end(), blocked);
    if (first != waits.end()) {
      if (!M.warps)
        report_hang(M, *first);
      WarpScheduler::Wait wait;
      wait.ready = [&] { return std::none_of(waits.begin(), waits.end(), blocked); };
      wait.describe = [&] {
        const ThreadWait &x = *std::find_if(waits.begin(), waits.end(), blocked);
        const Barrier &b = M.barriers[x.id];
        return "mbarrier_wait on " + M.barrier_name(x.id) + " for parity " +
               std::to_string(x.parity) + ": " + phase_state(b) + " (" +
               std::to_string(b.completed) + " phases completed, " +
               std::to_string(b.copies.size()) + " tma_load copies not landed)";
      };
      wait.hint =
          "An mbarrier's phase completes when `count` arrivals (and the transaction bytes "
          "announced) came in: check that the other role arrives on it (the consumers on the "
          "empty barrier the producer waits on, the producer on the full one), that the parity "
          "matches the phase (a ring's first wait on an empty barrier uses parity 1 so that it "
          "returns at once; an off-by-one parity waits for a phase that comes only after this "
          "one), and that the ring is no deeper than the loop that fills it.";
      M.warps->wait_until(wait);
    }
    bool synced = false;
    for (const ThreadWait &x : waits) {
      Barrier &b = M.barriers[x.id];
      land_ready(M, x.id);
      synced |= b.block_wide_phase == b.completed && b.observed[x.t] < b.completed &&
                b.epoch_phase != b.completed;
      b.observed[x.t] = b.completed;
      M.clocks.acquire(x.t / 32, b.completed_clock);
    }
    // A new barrier interval, once per phase: the race checker's model of "ordered by a
    // barrier". Every thread arrived; what they do between their arrival and this wait (nothing,
    // in inject_pipeline's rings) is treated as ordered too.
    if (synced) {
      ++M.epoch;
      for (const ThreadWait &x : waits)
        M.barriers[x.id].epoch_phase = M.barriers[x.id].completed;
    }
  }

private:
  struct ThreadWait {
    uint32_t t, id, parity;
  };

  [[noreturn]] static void report_hang(const Machine &M, const ThreadWait &x) {
    const Barrier &b = M.barriers[x.id];
    user_error("interp")
        << by(M, intrinsic::mbarrier_wait, x.t) << " never returns: it waits for parity "
        << x.parity << " of " << M.barrier_name(x.id) << ", whose current phase " << b.completed
        << " (parity " << x.parity << ") has not completed (" << b.completed
        << " phases completed): " << phase_state(b) << ", "
        << "tma_load copies not landed: " << b.copies.size() << ". The executor runs this "
        << "block's threads in lock step, so no other thread can complete the phase (a wait that "
           "only a later statement or another branch of divergent code would release is reported "
           "too; warp-specialized kernels, marked with attr::warp_specialize, run with "
           "independent warps)";
  }

  BarrierArg bar_;
  ExprPtr parity_;
};

/// A bulk tensor copy, tma_load or tma_load_im2col: what they share. Issued by each active
/// thread, it reads its box from global memory (read(), in box order: rows of box[0] elements),
/// checks its swizzled destination cells (not in flight, not accessed in this barrier interval by
/// an agent nothing orders before it), marks them in flight and counts its bytes on the barrier.
class BulkTensorCode : public StmtCode {
public:
  /// `mask` (tma_load_multicast): the ranks of the blocks of the cluster it writes.
  BulkTensorCode(std::string op, const TensorMap &map, PtrArg dst, BarrierArg bar,
                 std::vector<ExprPtr> coords, ExprPtr mask = nullptr)
      : op_(std::move(op)), map_(map), dst_(std::move(dst)), bar_(std::move(bar)),
        coords_(std::move(coords)), mask_(std::move(mask)) {}

  void exec(Machine &M, const Mask &m) override {
    const Val *di = dst_.index->eval(M, m), *bi = bar_.index->eval(M, m);
    const Val *mk = mask_ ? mask_->eval(M, m) : nullptr;
    std::vector<const Val *> c;
    for (auto &e : coords_)
      c.push_back(e->eval(M, m));
    const std::string &op = op_;
    const TensorMapParam &p = map_.param;
    int64_t box_elems = 1;
    for (int64_t x : p.box)
      box_elems *= x;

    m.each([&](uint32_t t) {
      // The blocks it writes, and their barriers at bar's offset: this one alone, or the
      // blocks of the cluster in its mask.
      std::vector<std::pair<Machine *, uint32_t>> targets;
      if (!mk) {
        targets.push_back({&M, use_barrier(M, op, *bar_.mem, bi[t].i, t)});
      } else {
        const int64_t mask = mk[t].i;
        user_check(mask > 0 && mask < (1 << 16), "interp")
            << by(M, op, t) << ": the cluster mask " << mask << " names no block (1 to 16 bits)";
        for (int64_t r = 0; r < 16; ++r) {
          if (!(mask >> r & 1))
            continue;
          Machine &P = cluster_peer(M, r, op, t);
          targets.push_back({&P, &P == &M ? use_barrier(M, op, *bar_.mem, bi[t].i, t)
                                          : use_peer_barrier(M, P, op, *bar_.mem, bi[t].i, t)});
        }
      }
      const int64_t d0 = di[t].i;
      std::vector<int64_t> x(c.size());
      for (size_t d = 0; d < c.size(); ++d)
        x[d] = c[d][t].i;
      std::vector<Val> values(static_cast<size_t>(box_elems));
      read(M, t, targets[0].second, x, values);
      for (auto &[P, id] : targets)
        deliver(M, *P, t, id, d0, x, values);
    });
  }

protected:
  /// Thread t of M's copy of `values` (read at coordinates x) into shared memory at element
  /// d0 of block P (M itself, or a peer in its cluster for a multicast), completing on P's
  /// barrier `id`.
  void deliver(Machine &M, Machine &P, uint32_t t, uint32_t id, int64_t d0,
               const std::vector<int64_t> &x, const std::vector<Val> &values) {
    const std::string &op = op_;
    const TensorMapParam &p = map_.param;
    Memory &dst = &P == &M ? *dst_.mem : peer_memory(P, *dst_.mem);
    const int64_t e = dst.dtype.bytes();
    const int64_t box_elems = int64_t(values.size());
    std::ostringstream what;
    what << op << " of tensor map '" << p.var.name() << "' at " << coordinates(x) << " into '"
         << dst.name << "'[" << d0 << "..]";
    if (&P != &M)
      what << " of block " << P.block_name() << " (multicast from block " << M.block_name()
           << ")";
    const int64_t align = p.swizzle ? 1024 : 128;
    user_check(d0 * e % align == 0, "interp")
        << by(M, op, t) << ": the destination '" << dst.name << "'[" << d0 << "] is at byte "
        << d0 * e << " of the buffer, not a multiple of " << align
        << " (the shared destination of a " << op
        << " is 128-byte aligned, 1024-byte when the map "
           "swizzles; the executor takes the buffer's start as 1024-byte aligned)";
    user_check(d0 >= 0 && d0 + box_elems <= dst.size, "interp")
        << by(M, op, t) << ": the box of " << box_elems << " elements of tensor map '"
        << p.var.name() << "' at '" << dst.name << "'[" << d0 << "] does not fit in '" << dst.name
        << "' (" << dst.size << " elements)";

    TmaCopy copy;
    copy.dst = &dst;
    copy.phase = P.barriers[id].completed;
    copy.issuer = t;
    copy.what = what.str();
    copy.values = values;
    copy.cells.resize(size_t(box_elems));
    for (int64_t j = 0; j < box_elems; ++j) {
      const int64_t f = swizzled(d0 + j, e, p.swizzle);
      if (f < 0 || f >= dst.size)
        report_out_of_bounds(M, dst, true, f, dst.size, int32_t(t));
      check_destination(P, dst, f, t, copy, &P == &M);
      copy.cells[size_t(j)] = f;
    }
    // The reads checked above are ordered before the copy; later accesses must be ordered
    // after its landing, hence after them.
    for (int64_t f : copy.cells) {
      ShadowCell &s = dst.shadow[size_t(f)];
      s.in_flight = true;
      s.read_epoch = 0;
      s.other_reader = ShadowCell::kNoAgent;
    }
    Barrier &bar = P.barriers[id];
    bar.pending_bytes -= box_elems * e; // complete_tx, counted at issue
    check_tx(P, op, t, id, bar);
    bar.copies.push_back(std::move(copy));
    try_complete(bar);
  }

  /// "(8, 8)": the call's coordinates in the copy's description.
  virtual std::string coordinates(const std::vector<int64_t> &x) const = 0;
  /// The box at coordinates x in box order (zeros outside the tensor), for thread t's call on
  /// barrier `id`; an error if the call is invalid.
  virtual void read(const Machine &M, uint32_t t, uint32_t id, const std::vector<int64_t> &x,
                    std::vector<Val> &values) const = 0;

  Val zero() const { return map_.mem->num.is_float() ? Val{.f = 0.0} : Val{.i = 0}; }

  const std::string op_;
  const TensorMap &map_;

private:
  /// Element f of the destination (of block M): not in flight, and, when thread t is M's own
  /// (`local`), not accessed in this barrier interval by an agent that nothing orders before
  /// the copy (a peer's multicast is not race-checked: the clocks are per block).
  void check_destination(const Machine &M, const Memory &dst, int64_t f, uint32_t t,
                         const TmaCopy &copy, bool local) const {
    const ShadowCell &s = dst.shadow[size_t(f)];
    const std::string &op = op_;
    if (s.in_flight) {
      for (size_t id = 0; id < M.barriers.size(); ++id)
        for (const TmaCopy &o : M.barriers[id].copies)
          if (o.dst == &dst && std::find(o.cells.begin(), o.cells.end(), f) != o.cells.end())
            user_error("interp")
                << by(M, op, t) << ": " << copy.what << " writes '" << dst.name << "'[" << f
                << "] while " << describe(M, uint32_t(id), o) << " into it is in flight ("
                << not_landed_because(M.barriers[id], o)
                << "); wait for its phase (and syncthreads) before reusing the stage";
      internal_error << "interp: '" << dst.name << "'[" << f << "] in flight with no copy";
    }
    if (!M.opts.check_races || !local)
      return;
    const int32_t agent = int32_t(t);
    auto race = [&](int32_t other, bool wrote) {
      user_error("interp") << "data race on shared buffer '" << dst.name << "'[" << f
                           << "] in block " << M.block_name() << " of kernel '" << M.kernel
                           << "': " << M.agent_name(other) << (wrote ? " wrote" : " read")
                           << " it and " << M.thread_name(t) << " issues the " << copy.what
                           << " with no syncthreads between (barrier interval " << M.epoch
                           << ") and no wait on a barrier that the other side arrived at after "
                              "it; the copy may land before that "
                           << (wrote ? "write" : "read");
    };
    if (unordered_write(M, s, agent))
      race(s.writer, true);
    if (int32_t reader = unordered_reader(M, s, agent); reader != ShadowCell::kNoAgent)
      race(reader, false);
  }

  PtrArg dst_;
  BarrierArg bar_;
  std::vector<ExprPtr> coords_;
  ExprPtr mask_;
};

/// tma_load(map, dst, bar, c0, ..., c{r-1}) of a tiled map: the box at (c0, ..); with a mask,
/// tma_load_multicast(map, dst, bar, mask, c0, ..).
class TmaLoadCode : public BulkTensorCode {
public:
  /// `op`: tma_load, or tma_load_multicast with its `mask`.
  TmaLoadCode(std::string op, const TensorMap &map, PtrArg dst, BarrierArg bar,
              std::vector<ExprPtr> coords, ExprPtr mask = nullptr)
      : BulkTensorCode(std::move(op), map, std::move(dst), std::move(bar), std::move(coords),
                       std::move(mask)) {}

protected:
  std::string coordinates(const std::vector<int64_t> &x) const override {
    std::ostringstream os;
    os << "(";
    for (size_t d = 0; d < x.size(); ++d)
      os << (d ? ", " : "") << x[d];
    os << ")";
    return os.str();
  }

  void read(const Machine &, uint32_t, uint32_t, const std::vector<int64_t> &x,
            std::vector<Val> &values) const override {
    const TensorMapParam &p = map_.param;
    const Memory &src = *map_.mem;
    const size_t rank = p.dims.size();
    const Val z = zero();
    std::vector<int64_t> b(rank, 0); // the element's coordinates in the box
    for (size_t j = 0; j < values.size(); ++j) {
      const std::optional<int64_t> off = box_element_offset(p, x, b);
      values[j] = off ? src.data[size_t(*off)] : z;
      next_box_element(p, b);
    }
  }
};

/// tma_load_im2col(map, dst, bar, c, w, h, n, off_w, off_h) of an im2col map over x (dims C, W,
/// H, N): box[1] pixels walking the bounding box from (w, h, n), box[0] channels each from c,
/// read at the pixel moved by (off_w, off_h).
class TmaLoadIm2colCode : public BulkTensorCode {
public:
  TmaLoadIm2colCode(const TensorMap &map, PtrArg dst, BarrierArg bar, std::vector<ExprPtr> coords)
      : BulkTensorCode(intrinsic::tma_load_im2col, map, std::move(dst), std::move(bar),
                       std::move(coords)) {}

protected:
  std::string coordinates(const std::vector<int64_t> &x) const override {
    std::ostringstream os;
    os << "(c, w, h, n) = (" << x[0] << ", " << x[1] << ", " << x[2] << ", " << x[3]
       << ") with offsets (" << x[4] << ", " << x[5] << ")";
    return os.str();
  }

  void read(const Machine &M, uint32_t t, uint32_t id, const std::vector<int64_t> &x,
            std::vector<Val> &values) const override {
    const TensorMapParam &p = map_.param;
    const Memory &src = *map_.mem;
    const int64_t C = p.dims[0], W = p.dims[1], H = p.dims[2], N = p.dims[3];
    const int64_t w_lo = p.lower_corner[0], w_hi = W - 1 + p.upper_corner[0];
    const int64_t h_lo = p.lower_corner[1], h_hi = H - 1 + p.upper_corner[1];
    const int64_t c0 = x[0], off_w = x[4], off_h = x[5];
    // The walk's step along W and H (a convolution's stride), from the lower corner.
    const int64_t step_w = p.traversal.empty() ? 1 : p.traversal[1],
                  step_h = p.traversal.empty() ? 1 : p.traversal[2];
    int64_t w = x[1], h = x[2], n = x[3];
    user_check(w >= w_lo && w <= w_hi && h >= h_lo && h <= h_hi && (w - w_lo) % step_w == 0 &&
                   (h - h_lo) % step_h == 0,
               "interp")
        << by(M, op_, t) << " on " << M.barrier_name(id) << ": the start (w, h) = (" << w << ", "
        << h << ") is outside the bounding box of im2col tensor map '" << p.var.name()
        << "' (w in [" << w_lo << ", " << w_hi << "], h in [" << h_lo << ", " << h_hi
        << "]: lower corner {" << p.lower_corner[0] << ", " << p.lower_corner[1]
        << "}, upper corner {" << p.upper_corner[0] << ", " << p.upper_corner[1] << "})"
        << (step_w > 1 || step_h > 1
                ? ", or not a whole number of its traversal steps (" + std::to_string(step_w) +
                      ", " + std::to_string(step_h) + ") from the lower corner"
                : std::string());
    const Val z = zero();
    const int64_t channels = p.box[0], pixels = p.box[1];
    for (int64_t q = 0; q < pixels; ++q) {
      const int64_t wq = w + off_w, hq = h + off_h;
      const bool pixel = wq >= 0 && wq < W && hq >= 0 && hq < H && n >= 0 && n < N;
      for (int64_t k = 0; k < channels; ++k) {
        const int64_t ch = c0 + k;
        values[size_t(q * channels + k)] =
            pixel && ch >= 0 && ch < C
                ? src.data[size_t(ch + wq * p.strides[1] + hq * p.strides[2] + n * p.strides[3])]
                : z;
      }
      if ((w += step_w) > w_hi) { // the next pixel of the bounding box: w, then h, then n
        w = w_lo;
        if ((h += step_h) > h_hi) {
          h = h_lo;
          ++n;
        }
      }
    }
  }
};

/// fence_barrier_init(): orders the thread's mbarrier_init before the asynchronous proxy's use
/// of the barrier. The executor has one proxy, so it does nothing here.
class NoOpCode : public StmtCode {
public:
  void exec(Machine &, const Mask &) override {}
};

} // namespace

std::string Machine::barrier_name(uint32_t id) const {
  const Barrier &b = barriers[id];
  return "barrier '" + b.mem->name + "'[" + std::to_string(b.index) + "]";
}

PtrArg compile_box_tile(Compiler &C, const Call *call, const Expr &arg, const TensorMap &map,
                        bool source) {
  const std::string &n = call->name;
  const TensorMapParam &p = map.param;
  PtrArg tile = compile_pointer(C, call, arg);
  user_check(tile.mem->scope == MemScope::Shared, "interp")
      << n << " of tensor map '" << p.var.name() << "': the " << (source ? "source" : "destination")
      << " '" << tile.mem->name << "' is in " << scope_name(tile.mem->scope) << " memory; " << n
      << " copies " << (source ? "from" : "into") << " shared memory";
  user_check(tile.mem->dtype == map.mem->dtype, "interp")
      << n << " of tensor map '" << p.var.name() << "' (over '" << map.mem->name << "', "
      << map.mem->dtype << ") " << (source ? "from" : "into") << " '" << tile.mem->name << "' ("
      << tile.mem->dtype << "): the types must be the same";
  return tile;
}

StmtPtr compile_tma(Compiler &C, const Call *call) {
  const std::string &n = call->name;
  const std::vector<Expr> &a = call->args;
  auto expect_args = [&](size_t k, const char *signature) {
    user_check(a.size() == k, "interp") << n << " takes " << k << " arguments " << signature
                                        << ", got " << a.size() << ": " << Expr(call);
  };
  auto integer = [&](const Expr &e, const char *what) {
    user_check(e.type().is_scalar() && e.type().is_integer_like() && !e.type().is_bool(), "interp")
        << n << ": " << what << " must be a scalar integer, got " << e << " (" << e.type() << ")";
    return C.expr(e);
  };
  if (n == intrinsic::fence_barrier_init) {
    expect_args(0, "()");
    return std::make_unique<NoOpCode>();
  }
  if (n == intrinsic::mbarrier_init) {
    expect_args(2, "(bar, count)");
    BarrierArg bar = compile_barrier(C, call, a[0]);
    return std::make_unique<InitCode>(std::move(bar), integer(a[1], "count"));
  }
  if (n == intrinsic::mbarrier_arrive) {
    expect_args(1, "(bar)");
    return std::make_unique<ArriveCode>(n, compile_barrier(C, call, a[0]), nullptr);
  }
  if (n == intrinsic::mbarrier_arrive_cluster) {
    expect_args(2, "(bar, rank)");
    BarrierArg bar = compile_barrier(C, call, a[0]);
    return std::make_unique<ArriveCode>(n, std::move(bar), nullptr, integer(a[1], "rank"));
  }
  if (n == intrinsic::mbarrier_arrive_expect_tx) {
    expect_args(2, "(bar, bytes)");
    BarrierArg bar = compile_barrier(C, call, a[0]);
    return std::make_unique<ArriveCode>(n, std::move(bar), integer(a[1], "bytes"));
  }
  if (n == intrinsic::mbarrier_wait) {
    expect_args(2, "(bar, parity)");
    BarrierArg bar = compile_barrier(C, call, a[0]);
    return std::make_unique<WaitCode>(std::move(bar), integer(a[1], "parity"));
  }
  if (n == intrinsic::tma_load || n == intrinsic::tma_load_im2col ||
      n == intrinsic::tma_load_multicast) {
    const bool im2col = n == intrinsic::tma_load_im2col;
    const bool multicast = n == intrinsic::tma_load_multicast;
    const size_t first = multicast ? 4 : 3; // the first coordinate
    const char *signature = im2col      ? "(map, dst, bar, c, w, h, n, off_w, off_h)"
                            : multicast ? "(map, dst, bar, mask, c0, ..., c{r-1})"
                                        : "(map, dst, bar, c0, ..., c{r-1})";
    user_check(a.size() >= 3, "interp") << n << " takes " << signature << ", got " << Expr(call);
    const auto *v = a[0].as<Variable>();
    const TensorMap *map = nullptr;
    for (const TensorMap &m : C.M.tensor_maps)
      if (m.param.var.get() == v)
        map = &m;
    user_check(map != nullptr, "interp")
        << n << " in kernel '" << C.M.kernel << "': the first argument " << a[0]
        << " is not one of the kernel's tensor maps (LoweredFunc::tensor_maps)";
    const TensorMapParam &p = map->param;
    user_check(p.im2col == im2col, "interp")
        << n << " in kernel '" << C.M.kernel << "': tensor map '" << p.var.name() << "' is "
        << (p.im2col ? "an im2col map (TensorMapParam::im2col); copy through it with "
                       "tma_load_im2col"
                     : "a tiled map (not TensorMapParam::im2col); copy through it with tma_load");
    if (im2col)
      user_check(a.size() == 9, "interp")
          << "tma_load_im2col of tensor map '" << p.var.name() << "' takes " << signature
          << ", got " << a.size() << " arguments: " << Expr(call);
    else
      user_check(a.size() == first + p.dims.size(), "interp")
          << n << " of tensor map '" << p.var.name() << "' (rank " << p.dims.size()
          << ") takes (map, dst, bar, " << (multicast ? "mask, " : "") << "c0, ..., c"
          << p.dims.size() - 1 << "), got " << int64_t(a.size()) - int64_t(first)
          << " coordinates: " << Expr(call);
    PtrArg dst = compile_box_tile(C, call, a[1], *map, /*source=*/false);
    BarrierArg bar = compile_barrier(C, call, a[2]);
    std::vector<ExprPtr> coords;
    for (size_t d = first; d < a.size(); ++d)
      coords.push_back(integer(a[d], d < 7 || !im2col ? "a coordinate" : "an im2col offset"));
    if (im2col)
      return std::make_unique<TmaLoadIm2colCode>(*map, std::move(dst), std::move(bar),
                                                 std::move(coords));
    return std::make_unique<TmaLoadCode>(n, *map, std::move(dst), std::move(bar),
                                         std::move(coords),
                                         multicast ? integer(a[3], "the mask") : nullptr);
  }
  user_error("interp") << "unknown intrinsic '" << n << "'";
}

void bind_tensor_maps(Machine &M, const LoweredFunc &f, const std::vector<Memory *> &args) {
  M.tensor_maps.clear();
  for (const TensorMapParam &p : f.tensor_maps) {
    user_check(p.var.defined(), "interp")
        << "kernel '" << f.name << "' has a tensor map without a variable";
    std::ostringstream ctx;
    ctx << "tensor map '" << p.var.name() << "' of kernel '" << f.name << "'";
    for (const TensorMap &m : M.tensor_maps)
      user_check(m.param.var.get() != p.var.get(), "interp") << ctx.str() << " is listed twice";
    user_check(p.arg >= 0 && size_t(p.arg) < args.size(), "interp")
        << ctx.str() << " views argument " << p.arg << "; the kernel has " << args.size();
    const size_t r = p.dims.size();
    if (p.im2col) {
      user_check(r == 4 && p.strides.size() == 4 && p.box.size() == 2, "interp")
          << ctx.str() << " (im2col) has " << r << " dims, " << p.strides.size() << " strides and "
          << p.box.size()
          << " box extents; an im2col map views a rank-4 NHWC tensor (dims and strides C, W, H, "
             "N) in boxes of {channels, pixels}";
      user_check(p.lower_corner.size() == 2 && p.upper_corner.size() == 2, "interp")
          << ctx.str() << " (im2col) has " << p.lower_corner.size() << " lower and "
          << p.upper_corner.size() << " upper corner entries; it takes 2 of each (W, H)";
    } else {
      user_check(r >= 1 && r <= 5 && p.strides.size() == r && p.box.size() == r, "interp")
          << ctx.str() << " has " << r << " dims, " << p.strides.size() << " strides and "
          << p.box.size()
          << " box extents; a tensor map has rank 1 to 5 and one of each per "
             "dimension";
    }
    Memory *mem = args[size_t(p.arg)];
    const int64_t e = mem->dtype.bytes();
    user_check(p.swizzle == 0 || p.swizzle == 32 || p.swizzle == 64 || p.swizzle == 128, "interp")
        << ctx.str() << ": swizzle " << p.swizzle << "; it must be 0, 32, 64 or 128 bytes";
    user_check(p.strides[0] == 1, "interp")
        << ctx.str() << ": strides[0] is " << p.strides[0]
        << "; the innermost dimension is contiguous (strides[0] = 1)";
    const char *encode = p.im2col ? "cuTensorMapEncodeIm2col" : "cuTensorMapEncodeTiled";
    int64_t last = 0;
    for (size_t d = 0; d < r; ++d) {
      user_check(p.dims[d] >= 1 && p.dims[d] <= (int64_t(1) << 32), "interp")
          << ctx.str() << ": dims[" << d << "] = " << p.dims[d] << "; it must be 1 .. 2^32";
      if (d > 0)
        user_check(p.strides[d] >= 1 && p.strides[d] * e % 16 == 0, "interp")
            << ctx.str() << ": strides[" << d << "] = " << p.strides[d] << " elements ("
            << p.strides[d] * e << " bytes); " << encode
            << " takes positive multiples "
               "of 16 bytes";
      last += (p.dims[d] - 1) * p.strides[d];
    }
    for (size_t d = 0; d < p.box.size(); ++d)
      user_check(p.box[d] >= 1 && p.box[d] <= 256, "interp")
          << ctx.str() << ": box[" << d << "] = " << p.box[d] << "; it must be 1 .. 256"
          << (p.im2col ? (d ? " (pixels per copy)" : " (channels per pixel)") : "");
    user_check(p.box[0] * e % 16 == 0, "interp")
        << ctx.str() << ": the box's inner extent is " << p.box[0] * e
        << " bytes; it must be a multiple of 16";
    user_check(p.swizzle == 0 || p.box[0] * e <= p.swizzle, "interp")
        << ctx.str() << ": the box's inner extent is " << p.box[0] * e << " bytes, wider than its "
        << p.swizzle << "-byte swizzle";
    user_check(last < mem->size, "interp")
        << ctx.str() << " reaches element " << last << " of argument '" << mem->name
        << "', which has " << mem->size;
    M.tensor_maps.push_back({p, mem});
  }
}

void check_tma_landed(const Machine &M) {
  for (uint32_t id = 0; id < M.barriers.size(); ++id) {
    const Barrier &b = M.barriers[id];
    if (!b.copies.empty())
      user_error("interp") << "kernel '" << M.kernel << "': block " << M.block_name()
                           << " ends while " << describe(M, id, b.copies[0])
                           << " has not landed: " << not_landed_because(b, b.copies[0])
                           << "; mbarrier_wait for the phase of every tma_load before the "
                              "block ends";
    if (b.live && b.pending_bytes != 0)
      user_error("interp") << "kernel '" << M.kernel << "': block " << M.block_name()
                           << " ends while " << M.barrier_name(id) << "'s " << phase_state(b);
  }
}

Machine &cluster_peer(Machine &M, int64_t rank, const std::string &op, uint32_t t) {
  if (M.cluster.empty() && rank == 0)
    return M;
  user_check(rank >= 0 && size_t(rank) < M.cluster.size(), "interp")
      << by(M, op, t) << ": block rank " << rank << " of the cluster, but the kernel is launched "
      << (M.cluster.empty() ? std::string("without clusters")
                            : "in clusters of " + std::to_string(M.cluster.size()) + " blocks");
  return *M.cluster[size_t(rank)];
}

Memory &peer_memory(const Machine &P, const Memory &mem) {
  auto it = mem.var ? P.shared_by_var.find(mem.var) : P.shared_by_var.end();
  internal_check(it != P.shared_by_var.end())
      << "interp: shared buffer '" << mem.name << "' has no copy in block " << P.block_name();
  return *it->second;
}

void release_barriers(Machine &M, const Memory &mem) {
  for (uint32_t id = 0; id < M.barriers.size(); ++id) {
    Barrier &b = M.barriers[id];
    for (const TmaCopy &c : b.copies)
      user_check(c.dst != &mem && b.mem != &mem, "interp")
          << "kernel '" << M.kernel << "', block " << M.block_name() << ": shared buffer '"
          << mem.name << "' is allocated again while " << describe(M, id, c) << " is in flight ("
          << not_landed_because(b, c) << ")";
    if (b.mem == &mem) {
      user_check(b.pending_bytes == 0, "interp")
          << "kernel '" << M.kernel << "', block " << M.block_name() << ": shared buffer '"
          << mem.name << "' is allocated again while " << M.barrier_name(id) << "'s "
          << phase_state(b);
      b.live = false;
    }
  }
}

bool async_ordered(const Machine &M, const ShadowCell &c, int32_t agent) {
  const size_t id = size_t(kAsyncAgentBase - c.writer);
  if (id >= M.barriers.size())
    return false;
  const Barrier &b = M.barriers[id];
  if (!is_async_agent(agent) && M.clocks.knows_phase(warp_of(agent), uint32_t(id), c.async_phase))
    return true;
  auto waited = [&](uint32_t t) { return b.observed[t] > c.async_phase; };
  if (agent >= 0)
    return waited(uint32_t(agent));
  if (!is_warp_agent(agent))
    return false;
  const uint32_t w = uint32_t(-2 - agent);
  for (uint32_t t = 32 * w; t < std::min(M.n_threads, 32 * w + 32); ++t)
    if (!waited(t))
      return false;
  return true;
}

void report_in_flight(const Machine &M, const Memory &mem, int64_t index, int32_t agent,
                      bool write) {
  for (uint32_t id = 0; id < M.barriers.size(); ++id)
    for (const TmaCopy &c : M.barriers[id].copies)
      if (c.dst == &mem && std::find(c.cells.begin(), c.cells.end(), index) != c.cells.end())
        user_error("interp") << (write ? "write to" : "read of") << " shared buffer '" << mem.name
                             << "'[" << index << "] by " << M.agent_name(agent) << " of block "
                             << M.block_name() << " in kernel '" << M.kernel << "' while "
                             << describe(M, id, c) << " into it is in flight ("
                             << not_landed_because(M.barriers[id], c) << "); mbarrier_wait for "
                             << "phase " << c.phase << " of " << M.barrier_name(id)
                             << " before accessing the destination";
  internal_error << "interp: '" << mem.name << "'[" << index << "] in flight with no copy";
}

} // namespace tessel::interp
