// Internal to the executor: the state a block runs against and the compiled code that runs it.
//
// The executor is a SIMT interpreter. The kernel body is compiled once into a tree of ExprCode /
// StmtCode objects; each executes one IR node for a set of threads at once, under a Mask of the
// threads that are active there (divergent ifs and loops shrink it). An expression yields one
// value per thread and lane, so interpretation overhead is paid once per node per mask.
//
// Two ways to run a block (Executor.h, ExecOptions::independent_warps):
// - Lock step (the default): the body runs once for all threads of the block. A barrier is
//   exact: it is reached by all threads together or the mask shows which threads did not reach
//   it; a wait that another branch would release cannot be released and is an error.
// - Independent warps (warp-specialized kernels, named barriers): each warp runs the same code
//   as a fiber under a Mask of its own threads (WarpScheduler.h). Fibers run one at a time and
//   switch only at blocking points (syncthreads, named_barrier_sync, an mbarrier_wait on an
//   incomplete phase, thread_allreduce), so the Machine needs no locking; a block in which every
//   unfinished warp is blocked is a deadlock, reported with what each warp waits for. Code that
//   may block copies what it needs out of shared ExprCode results first; those results are
//   written only for the threads of the mask, so warps do not overwrite each other's.
#pragma once

#include "compiler/ir/IR.h"
#include "compiler/lower/LoweredFunc.h"
#include "runtime/interp/Executor.h"
#include "runtime/interp/HappensBefore.h"

#include <llvm/ADT/DenseMap.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessel::interp {

/// A value of one lane of one thread: int64 for integer-like types (wrapped to their width),
/// double for floats (exactly representable in their IR type). The IR type says which member.
union Val {
  int64_t i;
  double f;
};

/// How results of a type are brought back into the type after computing in int64 / double.
struct Numeric {
  enum Kind : uint8_t { F64, F32, F16, BF16, F8E4M3, F8E5M2, Int, UInt, Bool };
  Kind kind = Int;
  uint8_t bits = 32;

  static Numeric of(DataType t);
  bool is_float() const { return kind <= F8E5M2; }
  int64_t wrap(int64_t x) const {
    if (kind == Bool)
      return x != 0;
    if (bits >= 64)
      return x;
    unsigned s = 64 - bits;
    auto u = static_cast<uint64_t>(x) << s;
    return kind == Int ? static_cast<int64_t>(u) >> s : static_cast<int64_t>(u >> s);
  }
};

double round_float(Numeric::Kind k, double x);

/// The threads of a block active at a point of the program.
struct Mask {
  uint32_t n_threads = 0;
  bool all = false;
  std::vector<uint32_t> ids; ///< sorted, when !all

  static Mask full(uint32_t n) { return Mask{n, true, {}}; }
  size_t count() const { return all ? n_threads : ids.size(); }
  bool empty() const { return count() == 0; }
  template <typename F> void each(F &&f) const {
    if (all)
      for (uint32_t t = 0; t < n_threads; ++t)
        f(t);
    else
      for (uint32_t t : ids)
        f(t);
  }
  bool contains(uint32_t t) const;
  /// The active threads for which pred(t) holds.
  template <typename P> Mask filter(P &&pred) const {
    Mask r{n_threads, false, {}};
    r.ids.reserve(count());
    each([&](uint32_t t) {
      if (pred(t))
        r.ids.push_back(t);
    });
    if (r.ids.size() == n_threads) {
      r.all = true;
      r.ids.clear();
    }
    return r;
  }
};

/// Per-element shadow of shared memory for uninitialized-read and race detection. Epochs count
/// barriers of the block (from 1), so an epoch of 0 means "never". Each access also records the
/// clock of the accessor's warp (HappensBefore.h).
struct ShadowCell {
  uint32_t write_epoch = 0;
  int32_t writer = 0;
  uint32_t read_epoch = 0;
  int32_t reader = 0;
  int32_t other_reader = kNoAgent; ///< a second, different reader in read_epoch
  uint32_t write_clock = 0, read_clock = 0, other_read_clock = 0;
  /// When `writer` is an async agent (a tma_load landing): the phase of its barrier that the
  /// copy completed on. In write_epoch only threads that waited for that phase may access it.
  uint32_t async_phase = 0;
  /// A tma_load into this element is issued and has not landed: no access until it has.
  bool in_flight = false;
  /// A tma_store reads this element and its issuer has not waited (wait_group.read) for it:
  /// no write until it has (TmaStore.cpp).
  bool store_reading = false;
  /// The writer's count of fence_proxy_async calls when it wrote (threads only): a tma_store
  /// reading the element needs a fence by the writer since.
  uint32_t writer_fences = 0;
  static constexpr int32_t kNoAgent = -1;
};

/// Who accesses memory: a thread (>= 0), a whole warp in a warp-level matrix intrinsic
/// (wmma_*, mma_*, wgmma_*; -2 .. -33), or the asynchronous proxy landing the tma_load copies
/// that complete on barrier `id` of Machine::barriers (<= kAsyncAgentBase).
constexpr int32_t kAsyncAgentBase = -1024;
inline int32_t warp_agent(uint32_t warp) { return -2 - static_cast<int32_t>(warp); }
inline int32_t async_agent(uint32_t barrier) {
  return kAsyncAgentBase - static_cast<int32_t>(barrier);
}
inline bool is_async_agent(int32_t a) { return a <= kAsyncAgentBase; }
inline bool is_warp_agent(int32_t a) { return a <= -2 && a > kAsyncAgentBase; }
/// The warp of a thread or warp agent.
inline uint32_t warp_of(int32_t a) { return a >= 0 ? uint32_t(a) / 32 : uint32_t(-2 - a); }
inline bool same_agent(int32_t a, int32_t b) {
  if (a == b)
    return true;
  if (is_warp_agent(a) && b >= 0)
    return b / 32 == -2 - a;
  if (is_warp_agent(b) && a >= 0)
    return a / 32 == -2 - b;
  return false;
}

enum class MemScope : uint8_t { Global, Shared, Local, Fragment };
/// wmma.* fragments (MatrixA, MatrixB, Accumulator), mma.* register fragments (Mma*) or a
/// warpgroup's wgmma.accumulator registers (WgmmaAccumulator), its rows' (WgmmaRows) and its A
/// operand's (WgmmaA).
enum class FragKind : uint8_t {
  None, MatrixA, MatrixB, Accumulator, MmaA, MmaB, MmaAccumulator, WgmmaAccumulator, WgmmaRows,
  WgmmaA
};

/// One buffer's storage. Local memory holds `size` elements per thread, fragments per warp.
struct Memory {
  std::string name;
  DataType dtype;
  Numeric num;
  MemScope scope = MemScope::Global;
  FragKind frag = FragKind::None;
  int64_t size = 0;
  std::vector<Val> data;
  std::vector<ShadowCell> shadow; ///< shared only
  /// Fragments, per warp and tile: wmma.*: the WMMA shape last loaded or filled (0: none);
  /// mma.*: 1 once written; wgmma.*: see Wgmma.cpp. mma.* data is per lane: [warp][lane][size /
  /// 32 register elements]; wgmma.* (size per warpgroup) [warp][lane][size / 128].
  std::vector<uint8_t> tile_shape;
  int64_t tiles_per_warp = 0;
  HostBuffer *host = nullptr; ///< globals: where the values come from and go back to
  /// Shared allocations: the buffer variable, by which the blocks of a cluster find each
  /// other's copy of it (Machine::shared_by_var).
  const Variable *var = nullptr;
};

const char *scope_name(MemScope s);

/// Completes the asynchronous operations of `pending` whose group is below `done`: `land(op)`
/// for each, in issue order; the others stay, in order.
template <typename Op, typename F>
void land_groups(std::vector<Op> &pending, uint32_t done, F &&land) {
  size_t kept = 0;
  for (size_t j = 0; j < pending.size(); ++j) {
    if (pending[j].group < done) {
      land(pending[j]);
      continue;
    }
    if (kept != j) // a vector moved onto itself is left empty
      pending[kept] = std::move(pending[j]);
    ++kept;
  }
  pending.resize(kept);
}

/// A cp_async of one thread not yet complete: the values it read, where they go, its group.
struct PendingCopy {
  Memory *dst = nullptr;
  int64_t dst_index = 0;
  std::vector<Val> values;
  uint32_t group = 0;
};

/// A wgmma_mma of one warp not yet landed in its accumulator: the shared cells it read at issue
/// (A's 16 rows x k of this warp, then B's k x n, both row-major; k = 16, or 32 for 8-bit
/// operands) and their values then.
struct PendingWgmma {
  Memory *acc = nullptr;
  int64_t tile = 0;
  int n = 0;
  int k = 16;
  uint32_t group = 0;
  Memory *a = nullptr, *b = nullptr;
  /// Shared cells read (A's, unless A is registers, then B's) and their values; with A in
  /// registers (a_tile >= 0, tile a_tile of k16 slices of `a`), A's values come first in
  /// `values` with no cells.
  std::vector<int64_t> cells;
  std::vector<Val> values;
  int64_t a_tile = -1;
};

/// A tma_load not yet landed (Tma.cpp): the shared elements of its box in box order (after the
/// swizzle), the values it read at issue, and the phase of its barrier it completes on.
struct TmaCopy {
  Memory *dst = nullptr;
  std::vector<int64_t> cells;
  std::vector<Val> values;
  uint32_t phase = 0;
  uint32_t issuer = 0;   ///< the issuing thread
  std::string what;      ///< "tma_load of 'A_map' at (0, 64) into 'A_shared'[0..4095]"
};

/// A tma_store of one thread not yet awaited (TmaStore.cpp): the shared elements its box reads
/// (after the swizzle), its commit group (the thread's count of commits when issued).
struct PendingTmaStore {
  Memory *src = nullptr;
  std::vector<int64_t> cells;
  uint32_t group = 0;
  std::string what; ///< "tma_store of 'C_tmap' at (0, 64) from 'C.shared'[0..]"
};

/// An mbarrier (Tma.cpp): element `index` of the UInt(64) shared buffer `mem`.
struct Barrier {
  Memory *mem = nullptr;
  int64_t index = 0;
  bool live = true;           ///< false once initialized again or its buffer reallocated
  uint32_t count = 0;         ///< arrivals per phase
  uint32_t arrivals = 0;      ///< in the current phase
  int64_t pending_bytes = 0;  ///< announced by expect_tx minus issued by tma_load, this phase
  uint32_t completed = 0;     ///< completed phases; the current phase is number `completed`
  uint32_t init_thread = 0, init_epoch = 0;
  /// The cluster barriers (ClusterBarrier::completed) completed at its init: a peer of the
  /// cluster may use it only after one more (cluster_sync after the init).
  uint32_t init_cluster_phase = 0;
  std::vector<TmaCopy> copies; ///< not landed, in issue order; phase < completed: ready
  std::vector<uint32_t> observed; ///< per thread: `completed` at its last wait that returned
  /// `completed` right after a phase that every thread of the block arrived at (count ==
  /// threads), 0 if none: a wait that observes it orders, like a syncthreads, what the threads
  /// did before arriving before what the waiter does next (a pipeline's empty barriers).
  uint32_t block_wide_phase = 0;
  /// The block_wide_phase that started a barrier interval already (one per phase).
  uint32_t epoch_phase = 0;
  /// The releases of the current phase's arrivals, and of the last completed phase's: what a
  /// wait that returns acquires (HappensBefore.h).
  VectorClock arrivals_clock, completed_clock;
};

/// A named barrier (named_barrier_sync / named_barrier_arrive, WarpSync.cpp): the current
/// phase's arrivals. Used only with independent warps.
struct NamedBarrier {
  uint32_t expected = 0;   ///< threads of the current phase (set by its first arrival; 0: none)
  uint32_t arrived = 0;    ///< threads arrived in the current phase
  uint32_t completed = 0;  ///< completed phases
  /// This phase's arrivals in order: the warp, and whether it waits (sync) or not (arrive).
  std::vector<std::pair<uint32_t, bool>> arrivals;
  VectorClock clock; ///< their releases
};

/// syncthreads (and thread_allreduce) with independent warps: who arrived at the block-wide
/// barrier's current phase (WarpSync.cpp).
struct BlockBarrier {
  uint32_t completed = 0;
  uint32_t arrived = 0;
  std::vector<uint8_t> warp_arrived;
  const char *what = nullptr; ///< the collective the arrived warps are in
};

/// A tensor map of the kernel (LoweredFunc::tensor_maps) and the argument it views.
struct TensorMap {
  TensorMapParam param;
  Memory *mem = nullptr;
};

class WarpScheduler;
struct Machine;

/// The cluster-wide barrier (cluster_sync, WarpSync.cpp) of the blocks of a cluster run
/// together: who arrived at its current phase, per block and warp.
struct ClusterBarrier {
  uint32_t completed = 0;
  uint32_t arrived = 0;                       ///< warps, over the cluster
  std::vector<std::vector<uint8_t>> warp_arrived; ///< [rank][warp]
};

struct Machine {
  ExecOptions opts;
  LaunchConfig launch;
  uint32_t n_threads = 0;
  uint32_t n_warps = 0;
  std::vector<std::array<int64_t, 3>> tid; ///< threadIdx of each linear thread id
  std::array<int64_t, 3> block_idx{0, 0, 0};
  uint32_t epoch = 1;
  /// Variables: n_threads * lanes values each.
  std::vector<std::vector<Val>> slots;
  std::vector<std::unique_ptr<Memory>> memories;
  /// Per thread: its incomplete cp_async copies, and how many groups it has committed. The
  /// copies land in shared memory when a cp_async_wait completes their group, so reading a
  /// tile before waiting for it reads what was there before (or uninitialized memory).
  std::vector<std::vector<PendingCopy>> pending_copies;
  std::vector<uint32_t> committed_groups;
  /// Per warp: its wgmma_mma calls not yet landed (issue order) and its committed wgmma groups.
  std::vector<std::vector<PendingWgmma>> pending_wgmma;
  std::vector<uint32_t> wgmma_groups;
  /// The block's mbarriers, by id (the id names the async agent of their copies); a barrier
  /// initialized again gets a new id. See Tma.cpp.
  std::vector<Barrier> barriers;
  std::vector<TensorMap> tensor_maps;
  /// Per thread: its tma_store calls not yet awaited, its committed bulk groups, and its
  /// fence_proxy_async calls (TmaStore.cpp).
  std::vector<std::vector<PendingTmaStore>> pending_stores;
  std::vector<uint32_t> store_groups;
  std::vector<uint32_t> proxy_fences;
  std::string kernel; ///< the kernel's name, for errors
  /// Independent warps (null: lock step), and what only that mode uses: the block barrier's and
  /// the named barriers' state.
  WarpScheduler *warps = nullptr;
  BlockBarrier block_barrier;
  std::array<NamedBarrier, 16> named_barriers;
  /// Counts the blocks run, so code with per-block state knows a new one started.
  uint64_t block_serial = 0;
  /// Happens-before through mbarriers and named barriers, for the race checker.
  WarpClocks clocks;
  /// A kernel launched in clusters (LaunchConfig::cluster): the Machines of the blocks of this
  /// one's cluster by rank (this one at cluster_rank), run together on one WarpScheduler; empty
  /// otherwise. A block reaches a peer's shared memory and barriers at the same offsets through
  /// the peer's shared_by_var (tma_load_multicast, mbarrier_arrive_cluster).
  std::vector<Machine *> cluster;
  uint32_t cluster_rank = 0;
  ClusterBarrier *cluster_barrier = nullptr;
  llvm::DenseMap<const Variable *, Memory *> shared_by_var;

  std::string thread_name(uint32_t t) const;
  std::string agent_name(int32_t agent) const;
  /// "barrier 'bar'[1]" (Tma.cpp).
  std::string barrier_name(uint32_t id) const;
  std::string block_name() const;
  /// "thread (x,y,z) of block (x,y,z)".
  std::string where(uint32_t t) const { return thread_name(t) + " of block " + block_name(); }
};

class ExprCode {
public:
  ExprCode(DataType type, uint32_t n_threads)
      : type(type), lanes(type.lanes()), out(size_t(n_threads) * type.lanes()) {}
  virtual ~ExprCode() = default;
  /// Evaluates for the threads of `m`. The result of thread t, lane l is at [t * lanes + l];
  /// entries of other threads are unspecified. Valid until this node is evaluated again.
  virtual const Val *eval(Machine &M, const Mask &m) = 0;

  const DataType type;
  const int lanes;

protected:
  std::vector<Val> out;
};
using ExprPtr = std::unique_ptr<ExprCode>;

class StmtCode {
public:
  virtual ~StmtCode() = default;
  virtual void exec(Machine &M, const Mask &m) = 0;
};
using StmtPtr = std::unique_ptr<StmtCode>;

/// Compiles IR into code for one Machine (whose launch shape is fixed).
class Compiler {
public:
  explicit Compiler(Machine &M) : M(M) {}
  ExprPtr expr(const Expr &e);
  /// A buffer index: as expr(), but a signed integer operation in it that overflows its type
  /// is an error (in the generated CUDA it is undefined behaviour, in practice a wrong address).
  ExprPtr index(const Expr &e);
  StmtPtr stmt(const Stmt &s);

  /// The slot of a variable being bound (fresh per binding site).
  int bind_var(const Var &v);
  /// Binds `v` to a fresh slot (stored in `slot`) while `compile` compiles the binding's scope,
  /// then restores the binding around it: a variable bound again inside a scope (a thread index
  /// re-bound around a copy in a branch) must not capture the uses after it, which would read a
  /// slot that code never set when the branch was not taken.
  template <typename F> auto scoped(const Var &v, int &slot, F compile) {
    auto outer = slots_.find(v.get());
    const int before = outer == slots_.end() ? -1 : outer->second;
    slot = bind_var(v);
    auto compiled = compile();
    if (before >= 0)
      slots_[v.get()] = before;
    else
      slots_.erase(v.get());
    return compiled;
  }
  /// Storage behind a buffer variable; a user error when it is not an argument or allocation.
  Memory *memory_of(const Expr &buffer_var, const char *context);
  void bind_memory(const Var &buffer_var, Memory *m) { memories_[buffer_var.get()] = m; }

  Machine &M;

private:
  llvm::DenseMap<const Variable *, int> slots_;
  llvm::DenseMap<const Variable *, Memory *> memories_;
  bool in_index_ = false;
};

/// Code for an expression evaluated only for its effects.
StmtPtr compile_evaluate(Compiler &C, const Call *call);
/// thread_allreduce (ThreadAllreduce.cpp).
StmtPtr compile_thread_allreduce(Compiler &C, const Call *call);
/// syncthreads, named_barrier_sync, named_barrier_arrive, setmaxnreg and cluster_sync
/// (WarpSync.cpp).
StmtPtr compile_warp_sync(Compiler &C, const Call *call);
/// A collective of every thread of the block (syncthreads, thread_allreduce; `what` names it)
/// reached by the threads of `m`: in lock step they must be all of them, and `complete` runs at
/// once; with independent warps `m` is one warp, which blocks until every warp arrived, and the
/// last to arrive runs `complete` (WarpSync.cpp).
void block_collective(Machine &M, const Mask &m, const char *what,
                      const std::function<void()> &complete);
/// Whether a kernel body needs independent warps: attr::warp_specialize or named barriers.
bool uses_warp_roles(const Stmt &body);
/// flag_release and flag_wait: flags between the blocks of a kernel (BlockFlags.cpp).
StmtPtr compile_block_flag(Compiler &C, const Call *call);
/// The WMMA intrinsics; `call` is one of wmma_* (Wmma.cpp).
StmtPtr compile_wmma(Compiler &C, const Call *call);
/// cp_async, cp_async_commit and cp_async_wait (AsyncCopy.cpp).
StmtPtr compile_async_copy(Compiler &C, const Call *call);
/// The PTX warp-level matrix intrinsics; `call` is one of mma_* but mma_lane_id (Mma.cpp).
StmtPtr compile_mma(Compiler &C, const Call *call);
/// The warpgroup-level wgmma intrinsics and fence_proxy_async; `call` is one of wgmma_* but
/// wgmma_thread_id (Wgmma.cpp).
StmtPtr compile_wgmma(Compiler &C, const Call *call);
/// The math functions (exp, tanh, erf, ...) in double, by name: the executor's and the float64
/// reference's.
using UnaryMath = double (*)(double);
const std::unordered_map<std::string, UnaryMath> &unary_math();
/// wgmma_reg: a thread's accumulator register as a value (Wgmma.cpp).
ExprPtr compile_wgmma_reg(Compiler &C, const Call *call);
/// wgmma_row: a thread's value of one of its rows (wgmma.rows; Wgmma.cpp).
ExprPtr compile_wgmma_row(Compiler &C, const Call *call);
/// wgmma_row_set (Wgmma.cpp).
StmtPtr compile_wgmma_row_set(Compiler &C, const Call *call);
/// At the end of a block: an error if a warp has a wgmma_mma that no wgmma_wait landed.
void check_wgmma_landed(const Machine &M);
/// The Hopper bulk tensor copies and their barriers: mbarrier_*, fence_barrier_init and
/// tma_load (Tma.cpp).
StmtPtr compile_tma(Compiler &C, const Call *call);
/// Checks LoweredFunc::tensor_maps and records them in M.tensor_maps; `args` are the memories
/// of f.args in order.
void bind_tensor_maps(Machine &M, const LoweredFunc &f, const std::vector<Memory *> &args);
/// At the end of a block: an error if a tma_load has not landed or a barrier still expects
/// transaction bytes.
void check_tma_landed(const Machine &M);
/// tma_store, tma_store_commit, tma_store_wait_read and tma_store_wait (TmaStore.cpp).
StmtPtr compile_tma_store(Compiler &C, const Call *call);
/// At the end of a block: an error if a thread's tma_store was never awaited.
void check_tma_stores_done(const Machine &M);
/// A shared allocation was entered again (its shadow reset): the elements that tma_store calls
/// still read stay marked (the allocation is the same memory on the GPU).
void keep_store_reads(Machine &M, Memory &mem);
/// A write of shared element `index` by `agent` while a tma_store reads it.
[[noreturn]] void report_store_reading(const Machine &M, const Memory &mem, int64_t index,
                                       int32_t agent);
/// The peer of rank `rank` in M's cluster (M itself for its own rank); an error naming `op` and
/// thread t unless M runs in a cluster of more than `rank` blocks.
Machine &cluster_peer(Machine &M, int64_t rank, const std::string &op, uint32_t t);
/// The copy of shared buffer `mem` (of M) in block P of M's cluster.
Memory &peer_memory(const Machine &P, const Memory &mem);
/// A shared allocation is (re)entered: its barriers are forgotten; an error while a tma_load
/// into it or on one of its barriers is in flight.
void release_barriers(Machine &M, const Memory &mem);

// Errors that name the thread and block (they throw tessel::Error).
[[noreturn]] void report_out_of_bounds(const Machine &M, const Memory &mem, bool write,
                                       int64_t index, int64_t limit, int32_t agent);

} // namespace tessel::interp
