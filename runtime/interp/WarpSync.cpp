// Barriers between the threads and warps of a block: syncthreads, the named barriers of warp
// roles (named_barrier_sync, named_barrier_arrive) and setmaxnreg, as compiler/ir/Intrinsics.h
// defines them, in both execution modes (Machine.h).
//
// syncthreads: in lock step, every thread of the block reaches it together (else a divergent
// barrier) and it starts a new barrier interval (Machine::epoch). With independent warps it is a
// block collective: each warp arrives (all of its threads, else a divergent barrier) and blocks;
// the last to arrive starts the interval and releases the others. A warp that finished the kernel
// never arrives: the block deadlocks, and the report says which warps finished.
//
// named_barrier_sync(id, threads) / named_barrier_arrive(id, threads), id 0..15, threads a
// positive multiple of 32: with independent warps, each warp (all its threads) arrives on the
// current phase of barrier `id`; the phase completes when `threads` threads arrived, counting both
// kinds; sync blocks until then, arrive does not. Every arrival of one phase passes the same
// count, and the arrivals never exceed it (errors otherwise). The phase orders what its arrivers
// did before arriving before what its syncing warps do after it (HappensBefore.h). In lock step
// a named barrier is allowed only as a syncthreads: all threads of the block, threads = their
// number. Barrier 0 is syncthreads' on the GPU; the executor keeps them apart (mixing the two in
// one phase is not modelled).
//
// setmaxnreg(registers, increase): a register budget, no effect on values; checked to be called
// by whole warps (it is .sync.aligned) with constants in 24..256, a multiple of 8.
#include "runtime/interp/Machine.h"
#include "runtime/interp/WarpScheduler.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/support/Error.h"

#include <algorithm>
#include <sstream>

namespace tessel::interp {

namespace {

/// The threads of warp w.
uint32_t warp_size(const Machine &M, uint32_t w) { return std::min(32u, M.n_threads - 32 * w); }

/// "warps 0, 1, 3" / "none".
std::string warp_list(const std::vector<uint32_t> &ws) {
  if (ws.empty())
    return "none";
  std::string s = ws.size() > 1 ? "warps " : "warp ";
  for (size_t i = 0; i < ws.size(); ++i)
    s += (i ? ", " : "") + std::to_string(ws[i]);
  return s;
}

/// An error unless every warp with a thread in `m` has all its threads there.
void check_whole_warps(const Machine &M, const Mask &m, const std::string &what) {
  std::vector<uint32_t> count(M.n_warps, 0);
  m.each([&](uint32_t t) { ++count[t / 32]; });
  for (uint32_t w = 0; w < M.n_warps; ++w) {
    if (count[w] == 0 || count[w] == warp_size(M, w))
      continue;
    uint32_t missing = 32 * w;
    while (m.contains(missing))
      ++missing;
    user_error("interp") << what << " is reached by only " << count[w] << " of the "
                         << warp_size(M, w) << " threads of warp " << w << " in block "
                         << M.block_name() << " of kernel '" << M.kernel
                         << "': " << M.thread_name(missing)
                         << " does not reach it. The threads of a warp reach it together (it "
                            "must not be inside control flow that depends on the lane)";
  }
}

class SyncCode : public StmtCode {
public:
  void exec(Machine &M, const Mask &m) override {
    block_collective(M, m, "syncthreads", [&] { ++M.epoch; });
  }
};

/// cluster_sync: with independent warps, every warp of every block of the cluster arrives (all
/// of its threads) and blocks until all did; the last to arrive starts a new barrier interval
/// in every block (it orders their threads as a syncthreads does each block's). In a kernel
/// launched without clusters it is a syncthreads.
class ClusterSyncCode : public StmtCode {
public:
  void exec(Machine &M, const Mask &m) override {
    if (M.cluster.size() <= 1)
      return block_collective(M, m, intrinsic::cluster_sync, [&] { ++M.epoch; });
    internal_check(M.warps && M.cluster_barrier) << "a cluster run without independent warps";
    check_whole_warps(M, m, std::string("divergent barrier: ") + intrinsic::cluster_sync);
    ClusterBarrier &cb = *M.cluster_barrier;
    const size_t blocks = M.cluster.size();
    if (cb.warp_arrived.size() != blocks)
      cb.warp_arrived.assign(blocks, std::vector<uint8_t>(M.n_warps, 0));
    cb.warp_arrived[M.cluster_rank][M.warps->current()] = 1;
    if (++cb.arrived == blocks * M.n_warps) {
      for (Machine *P : M.cluster)
        ++P->epoch;
      ++cb.completed;
      cb.arrived = 0;
      for (auto &w : cb.warp_arrived)
        std::fill(w.begin(), w.end(), 0);
      return;
    }
    const uint32_t phase = cb.completed;
    WarpScheduler::Wait wait;
    wait.ready = [&cb, phase] { return cb.completed != phase; };
    wait.describe = [&M, &cb] {
      std::string s = std::string(intrinsic::cluster_sync) + " (every warp of the " +
                      std::to_string(M.cluster.size()) + " blocks of the cluster): ";
      for (size_t r = 0; r < M.cluster.size(); ++r) {
        std::vector<uint32_t> missing;
        for (uint32_t x = 0; x < M.n_warps; ++x)
          if (!cb.warp_arrived[r][x])
            missing.push_back(x);
        s += (r ? "; " : "") + std::string("block ") + M.cluster[r]->block_name() +
             " not arrived: " + warp_list(missing);
      }
      return s;
    };
    wait.hint = "A cluster barrier needs every warp of every block of the cluster: check that "
                "no block or role skips it (a branch on the block's rank, a warp that exits "
                "early).";
    M.warps->wait_until(wait);
  }
};

class NamedBarrierCode : public StmtCode {
public:
  NamedBarrierCode(bool sync, ExprPtr id, ExprPtr threads)
      : sync_(sync), id_(std::move(id)), threads_(std::move(threads)) {}

  void exec(Machine &M, const Mask &m) override {
    const Val *id = id_->eval(M, m), *threads = threads_->eval(M, m);
    uint32_t first = M.n_threads;
    m.each([&](uint32_t t) { first = std::min(first, t); });
    const int64_t b = id[first].i, n = threads[first].i;
    m.each([&](uint32_t t) {
      user_check(id[t].i == b && threads[t].i == n, "interp")
          << call(b, n) << " in block " << M.block_name() << " of kernel '" << M.kernel
          << "': " << M.thread_name(first) << " and " << M.thread_name(t)
          << " pass different arguments; the threads that reach a named barrier together pass "
             "the same barrier and count";
    });
    user_check(b >= 0 && b <= 15, "interp") << call(b, n) << " in kernel '" << M.kernel
                                            << "': barrier " << b << "; named barriers are 0 .. 15";
    user_check(n > 0 && n % 32 == 0 && n <= 32 * int64_t(M.n_warps), "interp")
        << call(b, n) << " in kernel '" << M.kernel << "': " << n
        << " threads; a named barrier counts whole warps: a positive multiple of 32, at most the "
           "block's "
        << 32 * M.n_warps;
    if (!M.warps)
      return lock_step(M, m, b, n);
    check_whole_warps(M, m, call(b, n));
    arrive(M, uint32_t(b), uint32_t(n), uint32_t(m.count()));
  }

private:
  std::string call(int64_t b, int64_t n) const {
    return std::string(sync_ ? intrinsic::named_barrier_sync : intrinsic::named_barrier_arrive) +
           "(" + std::to_string(b) + ", " + std::to_string(n) + ")";
  }

  void lock_step(Machine &M, const Mask &m, int64_t b, int64_t n) {
    user_check(m.count() == M.n_threads && n == M.n_threads, "interp")
        << call(b, n) << " is reached by " << m.count() << " of the " << M.n_threads
        << " threads of block " << M.block_name() << " of kernel '" << M.kernel
        << "' running in lock step, where a named barrier can only be a syncthreads (all threads "
           "of the block, and threads = their number); warps that meet on a named barrier need "
           "independent warps (the default for kernels with named barriers or "
           "attr::warp_specialize; ExecOptions::independent_warps)";
    if (sync_)
      ++M.epoch;
  }

  void arrive(Machine &M, uint32_t b, uint32_t n, uint32_t count) {
    const uint32_t w = M.warps->current();
    NamedBarrier &nb = M.named_barriers[b];
    std::ostringstream by;
    by << call(b, n) << " by warp " << w << " of block " << M.block_name() << " in kernel '"
       << M.kernel << "'";
    if (nb.expected == 0)
      nb.expected = n;
    user_check(nb.expected == n, "interp")
        << by.str() << ": phase " << nb.completed << " of named barrier " << b << " counts "
        << nb.expected << " threads (" << arrivals(nb)
        << "); every arrival of one phase must pass the same thread count";
    user_check(nb.arrived + count <= n, "interp")
        << by.str() << ": one arrival too many: phase " << nb.completed << " of named barrier " << b
        << " already has " << nb.arrived << " of " << n << " threads (" << arrivals(nb) << ")";
    M.clocks.release(w, nb.clock);
    M.clocks.tick(w);
    nb.arrived += count;
    nb.arrivals.push_back({w, sync_});
    if (nb.arrived == nb.expected) {
      // Complete: the syncing warps acquire every arrival's release.
      for (auto [x, synced] : nb.arrivals)
        if (synced)
          M.clocks.acquire(x, nb.clock);
      ++nb.completed;
      nb = NamedBarrier{0, 0, nb.completed, {}, {}};
      return;
    }
    if (!sync_)
      return;
    const uint32_t phase = nb.completed;
    WarpScheduler::Wait wait;
    wait.ready = [&M, b, phase] { return M.named_barriers[b].completed != phase; };
    wait.describe = [&M, b, n] {
      const NamedBarrier &x = M.named_barriers[b];
      std::ostringstream os;
      os << "named_barrier_sync(" << b << ", " << n << "): phase " << x.completed
         << " of named barrier " << b << " has " << x.arrived << " of " << x.expected
         << " threads (" << arrivals(x) << ")";
      return os.str();
    };
    wait.hint = "A named barrier's phase completes when `threads` threads arrived on it "
                "(named_barrier_sync or named_barrier_arrive): check that the partner warps "
                "arrive on the same id with the same count, and in an order that does not wait "
                "on each other (in a ping-pong, each warpgroup arrives on the barrier the other "
                "one syncs on before it syncs on its own).";
    M.warps->wait_until(wait);
  }

  /// "warps 0 (sync), 4 (arrive)".
  static std::string arrivals(const NamedBarrier &nb) {
    if (nb.arrivals.empty())
      return "no arrivals";
    std::string s = "arrived: ";
    for (size_t i = 0; i < nb.arrivals.size(); ++i)
      s += (i ? ", warp " : "warp ") + std::to_string(nb.arrivals[i].first) +
           (nb.arrivals[i].second ? " (sync)" : " (arrive)");
    return s;
  }

  bool sync_;
  ExprPtr id_, threads_;
};

class SetMaxNRegCode : public StmtCode {
public:
  void exec(Machine &M, const Mask &m) override { check_whole_warps(M, m, intrinsic::setmaxnreg); }
};

} // namespace

void block_collective(Machine &M, const Mask &m, const char *what,
                      const std::function<void()> &complete) {
  if (!M.warps) {
    if (m.count() != M.n_threads) {
      uint32_t missing = 0;
      while (m.contains(missing))
        ++missing;
      user_error("interp") << "divergent barrier: " << what << " is reached by only " << m.count()
                           << " of the " << M.n_threads << " threads of block " << M.block_name()
                           << "; " << M.thread_name(missing)
                           << " does not reach it. A barrier must not be inside control flow "
                              "that depends on threadIdx";
    }
    complete();
    return;
  }
  const uint32_t w = M.warps->current();
  check_whole_warps(M, m, std::string("divergent barrier: ") + what);
  BlockBarrier &bb = M.block_barrier;
  if (bb.warp_arrived.size() != M.n_warps)
    bb.warp_arrived.assign(M.n_warps, 0);
  if (bb.arrived > 0)
    user_check(std::string(bb.what) == what, "interp")
        << what << " by warp " << w << " of block " << M.block_name() << " in kernel '" << M.kernel
        << "' while other warps wait in " << bb.what
        << "; every warp of the block must reach the same block-wide barrier";
  bb.what = what;
  bb.warp_arrived[w] = 1;
  if (++bb.arrived == M.n_warps) {
    complete();
    ++bb.completed;
    bb.arrived = 0;
    std::fill(bb.warp_arrived.begin(), bb.warp_arrived.end(), 0);
    return;
  }
  const uint32_t phase = bb.completed;
  WarpScheduler::Wait wait;
  wait.ready = [&M, phase] { return M.block_barrier.completed != phase; };
  wait.describe = [&M, what] {
    std::vector<uint32_t> arrived, missing, finished;
    for (uint32_t x = 0; x < M.n_warps; ++x)
      (M.block_barrier.warp_arrived[x] ? arrived
       : M.warps->finished(x)          ? finished
                                       : missing)
          .push_back(x);
    std::string s = std::string(what) + " (all " + std::to_string(M.n_warps) +
                    " warps of the block): arrived: " + warp_list(arrived) +
                    "; not arrived: " + warp_list(missing);
    if (!finished.empty())
      s += "; " + warp_list(finished) + (finished.size() > 1 ? " have" : " has") +
           " finished the kernel and will never arrive";
    return s;
  };
  wait.hint = std::string("A block-wide barrier (") + what +
              ") needs every warp of the block: a role that finishes the kernel early (a "
              "producer that exits after its last load) must not be followed by one; order the "
              "remaining warps with a named barrier over their threads instead.";
  M.warps->wait_until(wait);
}

bool uses_warp_roles(const Stmt &body) {
  bool found = false;
  post_order_visit(body, [&](const IRNode *n) {
    if (const auto *a = llvm::dyn_cast<AttrStmt>(n))
      found |= a->key == attr::warp_specialize;
    else if (const auto *c = llvm::dyn_cast<Call>(n))
      found |= c->is_intrinsic(intrinsic::named_barrier_sync) ||
               c->is_intrinsic(intrinsic::named_barrier_arrive);
  });
  return found;
}

StmtPtr compile_warp_sync(Compiler &C, const Call *call) {
  const std::string &n = call->name;
  const std::vector<Expr> &a = call->args;
  if (n == intrinsic::syncthreads)
    return std::make_unique<SyncCode>();
  if (n == intrinsic::cluster_sync) {
    user_check(a.empty(), "interp") << "cluster_sync takes no arguments, got " << Expr(call);
    return std::make_unique<ClusterSyncCode>();
  }
  user_check(a.size() == 2, "interp")
      << n << " takes 2 arguments "
      << (n == intrinsic::setmaxnreg ? "(registers, increase)" : "(id, threads)") << ", got "
      << a.size() << ": " << Expr(call);
  if (n == intrinsic::setmaxnreg) {
    auto regs = as_const_int(a[0]), inc = as_const_int(a[1]);
    user_check(regs && inc, "interp")
        << "setmaxnreg in kernel '" << C.M.kernel << "': the register count and the direction "
        << "must be constants, got " << Expr(call);
    user_check(*regs >= 24 && *regs <= 256 && *regs % 8 == 0 && (*inc == 0 || *inc == 1), "interp")
        << "setmaxnreg in kernel '" << C.M.kernel << "': " << Expr(call)
        << "; it takes 24 .. 256 registers, a multiple of 8, and increase 0 or 1";
    return std::make_unique<SetMaxNRegCode>();
  }
  for (const Expr &e : a)
    user_check(e.type().is_scalar() && e.type().is_integer_like() && !e.type().is_bool(), "interp")
        << n << ": the barrier id and thread count must be scalar integers, got " << Expr(call);
  return std::make_unique<NamedBarrierCode>(n == intrinsic::named_barrier_sync, C.expr(a[0]),
                                            C.expr(a[1]));
}

} // namespace tessel::interp
