// Schedules: how to compute what the DSL defined.
//
// A Schedule has one Stage per operation. Scheduling primitives record loop transformations
// (split, fuse, reorder), placement (compute_at / compute_inline / compute_root), storage
// (cache_read / cache_write, set_scope, storage_align, storage_interleave, pipeline),
// annotations (bind, unroll, vectorize, pragma) and the order of blocks (rasterize) on stages.
// Nothing is applied until lower(): relations between iteration variables are recorded as in TVM
// and resolved by bound inference.
//
//   Schedule s = create_schedule({C});
//   auto [io, ii] = s[C].split(s[C].op_axis(0), 16);
//   s[C].bind(io, thread_axis("blockIdx.x"));
#pragma once

#include "compiler/ir/IR.h"
#include "compiler/te/Operation.h"

#include <llvm/ADT/DenseMap.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tessel {

class ScheduleNode;
class StageNode;
struct TensorIntrin;

/// What a split does where its factor does not divide the parent's extent (Halide's tail
/// strategies). GuardWithIf: the last outer iteration runs past the end, under a guard.
/// ShiftInwards: the last outer iteration starts factor before the end instead, overlapping
/// the one before (parent = min(outer * factor, extent - factor) + inner): every iteration is a
/// whole block, with no guard, at the price of recomputing the overlap; only for data-parallel
/// axes (recomputed outputs are stored again with the same values) of extent >= factor.
enum class TailStrategy : uint8_t { GuardWithIf, ShiftInwards };

/// How Stage::warp_specialize's consumer warpgroups share a block's work. cooperative: the
/// stage's warpgroups (on threadIdx.y) compute each tile together. ping_pong: the stage's one
/// warpgroup becomes two that take alternate tiles of a persistent kernel's tile loop, their
/// main loops in turn (named barriers), so that one's epilogue runs beside the other's MMAs.
enum class ConsumerRoles : uint8_t { cooperative, ping_pong };

/// parent = outer * factor + inner. Exactly one of factor / nparts is set.
struct SplitRelation {
  IterVar parent, outer, inner;
  std::optional<int64_t> factor, nparts;
  TailStrategy tail = TailStrategy::GuardWithIf;
};
/// fused = outer * extent(inner) + inner.
struct FuseRelation {
  IterVar outer, inner, fused;
};
using IterVarRelation = std::variant<SplitRelation, FuseRelation>;

/// Grouped block order (Stage::rasterize). The loops `rows` and `cols` still run over the grid
/// in launch order; the block at linear position by * nx + bx computes tile (row, col) of the
/// grouped ordering instead of (by, bx). The stage's body, and the stages computed inside it,
/// read the loops' values through the variables `row` and `col`, let-bound just inside the inner
/// of the two loops.
///
/// A persistent stage (Stage::persistent) has no block per tile: `blocks` blocks (blockIdx.x)
/// each run a tile loop, iteration `iteration` computing tile `tile` = iteration * grid +
/// blockIdx.x of the grouped order while it is below the number of tiles (grid: `blocks`, or
/// fewer where there are fewer tiles). The loops `rows` and `cols` are not emitted.
struct Rasterization {
  IterVar rows, cols;
  int64_t group;
  Var row, col;
  int64_t blocks = 0; ///< persistent: the blocks that walk the tiles; 0: one block per tile
  IterVar block{};    ///< persistent: the block axis (blockIdx.x) of the fixed grid
  Var iteration{}, tile{}; ///< persistent: the tile loop's variable, the tile it computes

  bool persistent() const { return blocks != 0; }
};

/// Thread-block clusters (Stage::cluster): the stage's blocks are launched in clusters of
/// `size` blocks along its block-tile axis `axis`, the blocks of a cluster computing `size`
/// adjacent tiles along it.
struct ClusterLaunch {
  IterVar axis;
  int size = 1;
};

enum class AttachType : uint8_t {
  Root,   ///< its own loop nest at the top of the kernel
  Inline, ///< substituted into its consumers
  Scope,  ///< inside a loop of another stage (compute_at)
};

/// Per-IterVar annotations of a stage.
struct IterVarAttr {
  ForKind for_kind = ForKind::Serial; ///< Serial, Unrolled, Vectorized or Parallel
  IterVar bind_thread;                ///< the thread axis this loop is bound to, if any
  std::vector<std::pair<std::string, Expr>> pragmas;
  /// Stage::reverse: the value the body sees (extent - 1 - the loop's), bound inside the loop.
  Var reversed;
  const TensorIntrin *tensorize = nullptr; ///< the intrinsic replacing the loops from here in
  std::shared_ptr<const TensorIntrin> tensorize_holder;
};

/// The convolution an im2col bulk copy reads (Stage::bulk_copy_im2col): stride 1, dilation 1.
struct Im2colCopy {
  int out_height = 0, out_width = 0; ///< P, Q
  int channels = 0;                  ///< C
  int kernel_h = 0, kernel_w = 0;    ///< R, S
  int pad = 0;                       ///< above and left
  int stride = 1, dilation = 1;      ///< along H and W
  int pad_end = -1;                  ///< below and right; -1: pad
};

/// One stage of a schedule: the loops and placement of one operation.
class Stage {
public:
  explicit Stage(StageNode *n) : n_(n) {}

  /// The operation this stage computes now (cache_read/cache_write may have rewritten it).
  const Operation &op() const;
  /// The operation the stage was created for.
  const Operation &origin_op() const;
  const std::string &name() const;
  /// The data-parallel axes of the operation (empty for placeholders), i.e. TVM's op.axis.
  const std::vector<IterVar> &op_axis() const;
  /// op_axis()[i]; a negative i counts from the end, as in Python.
  IterVar op_axis(int i) const;
  /// The reduction axes of the operation, i.e. TVM's op.reduce_axis (a fold's: its fold axis).
  std::vector<IterVar> reduce_axis() const;
  /// The data-parallel axes as an array, for structured bindings: auto [i, j] = s[C].axes<2>().
  template <size_t N> std::array<IterVar, N> axes() const {
    std::array<IterVar, N> out;
    check_axis_count(N);
    for (size_t i = 0; i < N; ++i)
      out[i] = op_axis()[i];
    return out;
  }
  /// The loops of this stage from outermost to innermost.
  const std::vector<IterVar> &leaf_iter_vars() const;
  const std::vector<IterVarRelation> &relations() const;
  AttachType attach_type() const;
  /// For AttachType::Scope: the stage and loop this stage is computed in.
  StageNode *attach_stage() const;
  const IterVar &attach_ivar() const;
  const std::string &scope() const;
  bool is_output() const;

  /// Splits `parent` into (outer, inner) with inner of extent `factor`; `tail` says what the
  /// last outer iteration does when factor does not divide the extent.
  std::pair<IterVar, IterVar> split(const IterVar &parent, int64_t factor,
                                    TailStrategy tail = TailStrategy::GuardWithIf);
  /// Splits `parent` into (outer, inner) with outer of extent `nparts`.
  std::pair<IterVar, IterVar> split_nparts(const IterVar &parent, int64_t nparts);
  /// Fuses two adjacent loops, outer then inner, into one.
  IterVar fuse(const IterVar &outer, const IterVar &inner);
  /// Fuses adjacent loops, outermost first.
  IterVar fuse(const std::vector<IterVar> &axes);
  /// Tiles (x, y) into (x.outer, y.outer, x.inner, y.inner), in that loop order.
  std::array<IterVar, 4> tile(const IterVar &x, const IterVar &y, int64_t x_factor,
                              int64_t y_factor);
  /// Puts the given loops in this relative order; loops not listed keep their places.
  Stage &reorder(const std::vector<IterVar> &order);
  /// Runs the loop `iv` on the thread index `thread` (made with thread_axis).
  Stage &bind(const IterVar &iv, const IterVar &thread);
  /// Computes this stage inside loop `scope` of `parent`.
  Stage &compute_at(Stage parent, const IterVar &scope);
  /// Substitutes this stage's expression into its consumers; it gets no loops or storage.
  Stage &compute_inline();
  /// Computes this stage in its own loop nest at the top of the kernel.
  Stage &compute_root();
  /// Stores this stage's result in `scope` ("global", "shared", "local", "wmma.*").
  Stage &set_scope(const std::string &scope);
  /// Stores one output of a fold (one state, `output` among fold()'s results) in `scope`, the
  /// others in the stage's: a fold per warpgroup keeps its row values in wgmma.rows and its
  /// per-element state in a wgmma.accumulator.
  Stage &set_scope(const std::string &scope, const Tensor &output);
  /// Pads the stride of the dimension of `axis` so that stride % factor == offset.
  Stage &storage_align(const IterVar &axis, int factor, int offset);
  /// Stores this stage's buffer in columns of `chunk` contiguous elements of its last
  /// dimension: element (i, .., j) at ((j / chunk) * rows + row(i, ..)) * chunk + j % chunk,
  /// where row() is the row-major number of the outer indices and rows their count. With chunk
  /// 8 on fp16 each 8 rows x 16 bytes are one contiguous 128-byte block: the "core matrices"
  /// that wgmma reads from shared memory without swizzling.
  Stage &storage_interleave(int chunk);
  /// Stores this stage's buffer in the `bytes`-byte swizzled layout of Hopper's wgmma and TMA
  /// (32, 64 or 128): columns of `bytes` of the last dimension as storage_interleave does
  /// (chunk = bytes / element size), and in each row its U = bytes / 16 units of 16 bytes
  /// permuted, unit u of row r stored at u ^ ((r / (8 / U)) % U): on byte offsets, bits 4.. of
  /// the address XORed with bits 7.. (CUTLASS' Swizzle<log2 U, 4, 3>). With 128 bytes, eight
  /// rows are one 1024-byte atom whose every column of units covers all 32 banks, so whole
  /// 16-byte accesses down a column are free of bank conflicts.
  Stage &swizzle(int bytes);
  /// Double-buffers this stage's storage so loading the next tile overlaps computing on this
  /// one: pipeline(2).
  Stage &double_buffer();
  /// Software-pipelines this stage's storage over `stages` copies: the loop it is attached in
  /// fills the tile of iteration i + stages - 1 while computing on the tile of iteration i.
  /// Copies from global to shared memory become cp.async (sm_80+) where they are 4, 8 or 16 bytes
  /// per thread (vectorize the copy's inner axis). Stages filled in the same loop are pipelined
  /// together (with the largest count among them). A stage in local scope (a thread's own
  /// registers) pipelines as a software prefetch: the next iteration's loads are issued before
  /// this one's compute, with no barrier (unroll the loop so the copies' indices are constants).
  /// `slack` (TMA rings, bulk_copy): a slot is refilled `slack` iterations after the one whose
  /// reads released it, the fills that many iterations less ahead, so that the threads reading
  /// the ring may drift that many iterations apart before a refill waits for the slowest (two
  /// warpgroups out of step, Stage::ping_pong). Needs stages >= 2 + slack.
  Stage &pipeline(int stages, int slack = 0);
  /// Fills this shared stage with TMA bulk tensor copies (cp.async.bulk.tensor, Hopper): one
  /// thread copies the whole tile in boxes of the tensor map that lower_bulk_copy derives from
  /// the copy, completing on the mbarriers of the pipeline ring (so the stage must also be
  /// pipelined, 2+ stages). The stage's body must read a global input at its own indices plus
  /// offsets (a cache_read), its axes left as they are: no split, bind or vectorize. Tensors of
  /// up to 5 dimensions: one the tile holds one index of (a batch at the attach point) is a box
  /// dimension of size 1.
  /// On a global stage that copies a shared one (the output after cache_write(C, "shared")),
  /// it is a TMA store instead: the stage's nest over one tile (its loops inside the attach
  /// point of the shared stage, left as they are) becomes tma_store boxes issued by one
  /// thread after the block's threads wrote the shared tile, their reads of it awaited
  /// (cp.async.bulk.wait_group.read) before the tile is written again; boxes past the
  /// tensor's edges are clipped by the hardware, so a guarded tail needs no guard.
  Stage &bulk_copy();
  /// Reads this stage's global inputs as a stream: its vector loads (4, 8 or 16 bytes a thread)
  /// of buffers the kernel does not write are emitted as ld.global.nc.L1::no_allocate, which
  /// does not allocate lines in L1. For data a block reads once (a key/value cache): a load
  /// that allocates holds its L1 line until the data arrive, so where shared memory takes most
  /// of the SM's L1 the lines left bound the bytes in flight. Scalar loads, copies to shared
  /// memory (cp.async.cg already bypasses L1) and the CPU executor are unaffected.
  Stage &stream_loads();
  /// bulk_copy for the implicit-GEMM input tile of a convolution: this stage is A(m, rk) =
  /// x[n, oh + r - pad, ow + s - pad, c] (zero outside x) of an NHWC input x, with m = (n * P +
  /// oh) * Q + ow and rk = (r * S + s) * C + c as `conv` says; each K step of the tile (its
  /// columns) must lie in one filter tap. TMA's im2col mode copies it, one tap at a time.
  Stage &bulk_copy_im2col(const Im2colCopy &conv);
  /// Runs this stage's whole nest on the threads of `threads` (thread axes with a range) without
  /// binding a loop to them: every one of those threads executes it (TVM's env_threads). A
  /// warpgroup's wgmma needs its 128 threads even when no loop is split over them.
  Stage &env_threads(const std::vector<IterVar> &threads);
  /// Splits the block into warp roles around the TMA rings (bulk_copy + pipeline) filled in
  /// this stage's loops: a producer warpgroup of its own (one more on threadIdx.y, whose one
  /// thread waits for empty slots and issues the copies, with its registers lowered by
  /// setmaxnreg) and this stage's warpgroups as consumers (waiting for full slots, computing,
  /// releasing them; registers raised). The copies then run as far ahead as the ring allows,
  /// never behind a consumer's wait. The block's threads must be warpgroups on threadIdx.x
  /// (128) and threadIdx.y, none on threadIdx.z; threads bound inside the block's work are
  /// the consumers' (a copy split over their threads, their warpgroups bound at a split of
  /// the work). A fold's stage (online softmax) is split as a computed stage is. With
  /// ConsumerRoles::ping_pong the stage is computed by one warpgroup (no threadIdx.y) inside a
  /// persistent kernel's tiles
  /// (Stage::persistent on its output stage), and two consumer warpgroups take the tiles in
  /// turn: warpgroup 0 the block's tiles 0, 2, 4..., warpgroup 1 tiles 1, 3, 5...; a
  /// warpgroup starts its main loop (the loop that waits on the ring) once the other has
  /// issued the previous tile's, and stores its tile while the other computes.
  Stage &warp_specialize(ConsumerRoles consumers = ConsumerRoles::cooperative);
  Stage &unroll(const IterVar &iv);
  Stage &vectorize(const IterVar &iv);
  Stage &parallel(const IterVar &iv);
  Stage &pragma(const IterVar &iv, const std::string &key, Expr value = Expr(1));
  /// `iv`'s loop runs from its last iteration to its first: the stage (and the stages computed
  /// inside it) see extent - 1 - the loop's value. On a block axis it orders the blocks: e.g.
  /// causal attention's query blocks longest first (FlashAttention's order; attention's REV),
  /// so that the last blocks to start are short.
  Stage &reverse(const IterVar &iv);
  /// Loop partitioning of `iv`'s loop (Halide's, as an unswitched branch; specialize_loops):
  /// the iterations where every thread passes the loop body's comparisons of `iv` (a causal
  /// mask's, a boundary guard's) run a copy of the body without them, decided by a predicate
  /// of `iv` and the block the compiler derives; the other iterations run the body as written.
  /// E.g. causal attention's fold over key blocks evaluates its mask in the diagonal blocks
  /// only. Comparisons that hold on every iteration are dropped without a branch; a loop also
  /// marked overlap_steps keeps one body, the branch around the statements that compare.
  Stage &specialize(const IterVar &iv);
  /// The two warpgroups of the block (threadIdx.y) issue the wgmma groups of `iv`'s loop in
  /// turns (FlashAttention-3's ping-pong; order_wgmma_turns): warpgroup 1's k-th group after
  /// warpgroup 0's, warpgroup 0's next after that, so that while one works on its GEMMs'
  /// results (a softmax) the other's GEMMs keep the Tensor Cores busy.
  Stage &ping_pong(const IterVar &iv);
  /// `iv`'s loop, whose steps issue two wgmma groups (A, then B on what the work between them
  /// made of A's result), runs step t's B beside step t + 1's work: step t + 1's A and step t's
  /// B are issued together, the work on A's result runs while B is on the Tensor Cores, then B
  /// is waited for (FlashAttention-3's overlap inside a warpgroup: S(t + 1) = Q K(t + 1)^T and
  /// P(t) V(t) issued together, the softmax of S(t + 1) beside P(t) V(t);
  /// overlap_wgmma_steps). The registers the work writes must not be B's (its accumulator's
  /// reset and A operand in registers wait for B); a TMA ring of the loop should have 3 or more
  /// stages (a slot then holds step t's B operands and step t + 1's A operands).
  Stage &overlap_steps(const IterVar &iv);
  /// In a persistent kernel (this stage computed inside the tiles of a stage made
  /// persistent()), `iv` being this stage's serial reduction loop: the tiles of the last,
  /// partial round of the tile loop (the wave quantization's idle SMs) are each computed by up
  /// to `max_parts` blocks, every one of them a part of `iv`'s range; the parts past the first
  /// leave their float32 sums in a workspace and raise a flag per warp, and the first part's
  /// block waits for them, adds them in order (deterministic) and stores the tile
  /// (reduce_last_wave_parts). E.g. 1376 tiles on 132 blocks: 10 whole rounds, then 56 tiles
  /// in halves of K on 112 blocks. The tile must be stored from a wgmma accumulator by
  /// wgmma_store (not through a TMA store); no clusters, no ping-pong consumers. `iv` may
  /// also be a fold's axis (this stage a fold whose states all have a merge,
  /// FoldState::merge): the parts past the first then leave every state's registers (scopes
  /// wgmma.rows and wgmma.accumulator) and skip the rest of the tile, and the first part merges
  /// them into its own in order before it goes on (attention's online softmax over key blocks).
  /// The waiting blocks have the higher blockIdx, so a machine that runs the blocks in order
  /// (the executor) never waits; on the GPU the persistent grid must be resident at once (one
  /// block per SM), as any persistent grid.
  Stage &split_last_wave(const IterVar &iv, int max_parts = 8);
  /// Replaces the loops from `iv` inward by the tensor intrinsic's body.
  Stage &tensorize(const IterVar &iv, std::shared_ptr<const TensorIntrin> intrin);
  /// Thread-block rasterization for L2 reuse. `rows` and `cols` are the loops bound to
  /// blockIdx.y and blockIdx.x (bound before or after this call); the grid stays the same, but
  /// the blocks launched one after another walk down `group` rows of tiles before moving to the
  /// next column, so that they share tiles of the operands in L2 (Triton's grouped ordering,
  /// CUTLASS's threadblock swizzle). The last group is smaller when `group` does not divide
  /// the rows; group 1 is the plain row-major order. Split and fuse the axes before this call.
  Stage &rasterize(const IterVar &rows, const IterVar &cols, int64_t group);
  /// A persistent kernel: instead of a block per tile of `rows` x `cols` (the two block-tile
  /// loops, adjacent, outermost of the data-parallel ones, not bound to threads), a fixed grid
  /// of `blocks` blocks on blockIdx.x (default 132, the SMs of an H100 / H200; fewer where
  /// there are fewer tiles) each walks the tiles in a loop of its own: tile t = iteration *
  /// grid + blockIdx.x in the grouped order of `group` rows (as rasterize). Stages computed
  /// inside the tile (at `cols` or further in) run once per tile; a TMA ring (bulk_copy +
  /// pipeline) in them runs across the tiles, its barriers initialized once per block, and
  /// needs warp_specialize so that the producer fills the next tile's first slots during this
  /// tile's epilogue. Split and fuse the axes before this call; not with rasterize.
  Stage &persistent(const IterVar &rows, const IterVar &cols, int64_t group = 8,
                    int64_t blocks = 132);
  /// Thread-block clusters (Hopper, sm_90): launches this stage's blocks in clusters of `size`
  /// (2, 4 or 8) along its block-tile axis `axis`, so that the blocks of a cluster compute
  /// `size` adjacent tiles along it (a tile row when `axis` is the columns' loop: they share A's
  /// tile; a tile column when it is the rows': they share B's). `axis` is a loop bound to a
  /// blockIdx (the clusters run along that index: `__cluster_dims__`), or one of the two tile
  /// axes of rasterize / persistent (whose orders then walk whole clusters, each block taking
  /// the tile of its rank in the cluster; a persistent grid is then a multiple of `size` too).
  /// Its extent must be a multiple of `size`. The blocks of a cluster can write each other's
  /// shared memory: see multicast().
  Stage &cluster(const IterVar &axis, int size = 2);
  /// TMA multicast (with bulk_copy, in a stage computed inside a clustered one): this shared
  /// tile is the same for the blocks of the cluster (its box origin does not depend on the
  /// clustered axis), so each block copies 1/size of it (the box's outer rows) into the shared
  /// memory of every block of the cluster (`.multicast::cluster`), halving (for 2) the tile's
  /// reads of L2. Each block's full barrier still waits for the whole tile's bytes, and a slot
  /// is refilled only after the consumers of every block of the cluster released it (the
  /// ring's empty barriers count them all: remote arrivals).
  Stage &multicast();

  StageNode *get() const { return n_; }
  bool operator==(const Stage &o) const { return n_ == o.n_; }

private:
  void check_axis_count(size_t n) const;
  StageNode *n_;
};

/// A storage_align request on a dimension of a stage's buffer.
struct StorageAlign {
  int dim;
  int factor;
  int offset;
};

class StageNode {
public:
  Operation op;
  Operation origin_op;
  std::vector<IterVar> all_iter_vars;
  std::vector<IterVar> leaf_iter_vars;
  std::vector<IterVarRelation> relations;
  llvm::DenseMap<const IterVarNode *, IterVarAttr> iter_var_attrs;
  AttachType attach_type = AttachType::Root;
  StageNode *attach_stage = nullptr;
  IterVar attach_ivar;
  std::string scope = "global";
  /// Stage::set_scope(scope, output): a scope for some outputs of a fold (its states).
  std::vector<std::pair<int, std::string>> output_scopes;
  bool is_output = false;
  int pipeline_stages = 1; ///< 1: not pipelined
  int pipeline_slack = 0;  ///< Stage::pipeline's slack
  bool bulk_copy = false;  ///< Stage::bulk_copy
  bool stream_loads = false; ///< Stage::stream_loads
  std::optional<Im2colCopy> im2col; ///< Stage::bulk_copy_im2col
  std::vector<IterVar> env_threads;
  bool warp_specialized = false; ///< Stage::warp_specialize
  ConsumerRoles consumer_roles = ConsumerRoles::cooperative; ///< its consumers
  std::optional<ClusterLaunch> cluster; ///< Stage::cluster
  bool multicast = false;               ///< Stage::multicast
  std::vector<StorageAlign> storage_aligns;
  int storage_interleave = 0; ///< chunk of Stage::storage_interleave; 0: row major
  int storage_swizzle = 0;    ///< bytes of Stage::swizzle (with storage_interleave); 0: none
  std::optional<Rasterization> rasterization;
  ScheduleNode *schedule = nullptr;

  /// The annotations of `iv` (created empty on first use).
  IterVarAttr &attr(const IterVar &iv) { return iter_var_attrs[iv.get()]; }
  const IterVarAttr *find_attr(const IterVar &iv) const {
    auto it = iter_var_attrs.find(iv.get());
    return it == iter_var_attrs.end() ? nullptr : &it->second;
  }
};

class ScheduleNode {
public:
  std::vector<Tensor> outputs;
  /// In topological order: producers before consumers.
  std::vector<std::unique_ptr<StageNode>> stages;
  /// Both the origin and the current operation of each stage map to it.
  llvm::DenseMap<const OperationNode *, StageNode *> stage_map;
};

class Schedule {
public:
  Schedule() = default;
  explicit Schedule(std::shared_ptr<ScheduleNode> n) : n_(std::move(n)) {}

  /// The stage computing `t` (or the stage cache_read / cache_write made for it).
  Stage operator[](const Tensor &t) const;
  Stage operator[](const Operation &op) const;
  /// The stage named `name`; tessel::Error if there is none.
  Stage stage(const std::string &name) const;
  std::vector<Stage> stages() const;
  const std::vector<Tensor> &outputs() const { return n_->outputs; }

  /// A stage that copies `t` into `scope` for `readers`, which then read the copy.
  Tensor cache_read(const Tensor &t, const std::string &scope, const std::vector<Tensor> &readers);
  /// A stage that computes `t` in `scope`; `t` becomes a copy from it.
  Tensor cache_write(const Tensor &t, const std::string &scope);
  /// Factors the reduction of `t` along `axis` (a reduction loop of t's stage, as split): a new
  /// stage t.rf computes, for each value of `axis`, the partial reduction over t's other
  /// reduction loops, with `axis` as a data axis (at position `factor_axis` of its axes); t
  /// then reduces t.rf over a new reduction axis of `axis`'s extent, its reduction loops and
  /// their schedule replaced by that one (TVM's rfactor). Bind the new axis
  /// (s[t].reduce_axis()[0]) to threadIdx.x and compute t.rf at it for a reduction across
  /// threads whose partial sums are computed per thread.
  Tensor rfactor(const Tensor &t, const IterVar &axis, int factor_axis = 0);

  ScheduleNode *get() const { return n_.get(); }

private:
  std::shared_ptr<ScheduleNode> n_;
};

/// A schedule with one stage (at the root, in global memory) per operation `outputs` need.
Schedule create_schedule(const std::vector<Tensor> &outputs);

/// fold_states_read over the operations of `sch`'s stages: each stage computing a tensor of a
/// fold's step, with the running states it reads.
llvm::DenseMap<const OperationNode *, llvm::DenseSet<const OperationNode *>>
fold_steps(const ScheduleNode *sch);

/// A description of a stage and its loops for error messages and debugging:
/// "stage 'C' (loops: i.outer, j.outer, i.inner, j.inner)".
std::string describe(const StageNode *s);

} // namespace tessel
