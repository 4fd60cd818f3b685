// Names of the intrinsic calls that passes and code generators know about.
#pragma once

namespace tessel::intrinsic {

/// if_then_else(cond, t, f): evaluates only the chosen side.
inline constexpr const char *if_then_else = "if_then_else";
/// syncthreads(): a barrier for the threads of a block.
inline constexpr const char *syncthreads = "syncthreads";
/// address_of(BufferLoad): the address of an element.
inline constexpr const char *address_of = "address_of";
/// access_ptr(type_annotation, buffer_var, offset, extent, rw_mask): a pointer to a region.
inline constexpr const char *access_ptr = "access_ptr";
/// bitwise_xor(a, b): a ^ b of two integers (PureIntrinsic; the swizzled shared layouts).
inline constexpr const char *bitwise_xor = "bitwise_xor";
/// thread_allreduce(combiner, address_of(acc[i]), extent[, count]): every thread of the block
/// calls it; the values at acc[i] (a local buffer) of the threads that differ only in threadIdx.x
/// are combined ("sum", "max" or "min") and the result stored back in each. `extent` is
/// blockDim.x, a power of two: shuffles within warps (xor butterfly), then, past 32 threads, the
/// warps' results through shared memory in warp order, between two barriers. With `count` (1 if
/// absent), acc[i], ..., acc[i + count - 1] are combined each on its own, in one exchange
/// within a warp (CodeGenCUDAReduce.cpp).
inline constexpr const char *thread_allreduce = "thread_allreduce";

// Asynchronous global -> shared copies (PTX cp.async, sm_80 and later), issued per thread.
// cp_async(dst, src, bytes, predicate): copies `bytes` (4, 8 or 16) from src (global) to dst
// (shared); when `predicate` is false it writes zeros instead. dst and src are address_of(...).
inline constexpr const char *cp_async = "cp_async";
// cp_async_commit(): closes the group of this thread's cp_async calls issued since the last one.
inline constexpr const char *cp_async_commit = "cp_async_commit";
// cp_async_wait(n): waits until at most n of this thread's committed groups are incomplete.
inline constexpr const char *cp_async_wait = "cp_async_wait";

// Warp-level matrix (Tensor Core) operations on fragments, following CUDA's nvcuda::wmma.
// wmma_fill_fragment(frag, m, n, k, index, value)
inline constexpr const char *wmma_fill_fragment = "wmma_fill_fragment";
// wmma_load_matrix_sync(frag, m, n, k, index, ptr, stride, layout)
inline constexpr const char *wmma_load_matrix_sync = "wmma_load_matrix_sync";
// wmma_mma_sync(d, d_index, a, a_index, b, b_index, c, c_index)
inline constexpr const char *wmma_mma_sync = "wmma_mma_sync";
// wmma_store_matrix_sync(frag, m, n, k, index, ptr, stride, layout)
inline constexpr const char *wmma_store_matrix_sync = "wmma_store_matrix_sync";

// Warp-level PTX matrix operations on per-thread register fragments (scopes mma.matrix_a,
// mma.matrix_b, mma.accumulator; docs/IR_FORMS.md gives which thread holds which element).
// `index` counts a scope's tiles: m16k16 for matrix_a, k16n8 for matrix_b, m16n8 for the
// accumulator. Pointers are per thread: address_of(buf[index]) evaluated by each lane.
// mma_lane_id(): the thread's lane in its warp, 0..31 (Int(32), PureIntrinsic).
inline constexpr const char *mma_lane_id = "mma_lane_id";
// mma_fill_fragment(frag, index, value): every element of accumulator tile `index`.
inline constexpr const char *mma_fill_fragment = "mma_fill_fragment";
// mma_ldmatrix(frag, index, num, trans, ptr): ldmatrix.sync.aligned.m8n8.x{num}[.trans]
// .shared.b16 into the `num` 32-bit registers from the first of tile `index`; lanes 8i..8i+7
// pass the row addresses of matrix i.
inline constexpr const char *mma_ldmatrix = "mma_ldmatrix";
// mma_sync(d, d_index, a, a_index, b, b_index, c, c_index):
// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32.
inline constexpr const char *mma_sync = "mma_sync";
// mma_store_fragment(frag, index, ptr, stride, lanes): each thread stores its four elements of
// accumulator tile `index`, (g, 2t..2t+1) at ptr[0..1] and (g + 8, 2t..2t+1) at
// ptr[8 * stride..], as `lanes` (1, or 2: one aligned float2 per row) at a time.
inline constexpr const char *mma_store_fragment = "mma_store_fragment";

// Flags in global memory by which the blocks of one kernel hand each other data (the parts of
// a tile split over the last wave: Stage::split_last_wave). A flag is an int32 that is 1 when
// raised; every thread of a warp makes the call together, with the same pointer.
// flag_release(ptr): once every thread of the warp made its earlier global writes, one of them
// makes those writes visible GPU-wide and raises *ptr (fence, then a store of 1).
// flag_wait(ptr): one thread of the warp waits until *ptr is raised (acquire), lowers it again
// (to 0, for the next launch), and the warp's later reads see what was released with it. A
// kernel's blocks must all be resident for a wait to end on the GPU (a persistent grid); the
// executor runs blocks in order, so there a flag must be raised by an earlier block.
inline constexpr const char *flag_release = "flag_release";
inline constexpr const char *flag_wait = "flag_wait";

// Hopper warpgroup-level matrix operations (PTX wgmma.mma_async, sm_90a only). A warpgroup is 4
// consecutive warps whose first warp index is a multiple of 4 (threads 128g .. 128g + 127 of the
// block); every wgmma_* call is made by all 128 threads of a warpgroup together.
// The accumulator is per-thread registers (scope wgmma.accumulator): an allocation of S float32
// elements is the warpgroup's, S / 128 of them in each thread. Tile `index` of an m64nN
// accumulator is the thread's registers index * N / 2 .. index * N / 2 + N / 2 - 1; register i of
// the thread with warp w = (t % 128) / 32 and lane l = t % 32 in its warpgroup holds row
// 16 w + l / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (l % 4) + i % 2 of the 64 x N tile.
// wgmma_thread_id(): the thread's index in its warpgroup, 0..127 (Int(32), PureIntrinsic).
inline constexpr const char *wgmma_thread_id = "wgmma_thread_id";
// wgmma_fill(acc, index, n, value): every register of accumulator tile `index` (64 x n).
inline constexpr const char *wgmma_fill = "wgmma_fill";
// wgmma_mma(acc, index, n, a_ptr, a_lbo, a_sbo, b_ptr, b_lbo, b_sbo, trans_b, swizzle):
// wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{f16,bf16}.{f16,bf16}: accumulator tile `index`
// (64 x n) += A (64 x 16) x B (16 x n), both float16 or both bfloat16 in shared memory. a_ptr / b_ptr are address_of(buf[i]) of
// the operands' first element; the offsets are in elements, multiples of 16 bytes. With 8-bit
// operands (float8_e4m3 / float8_e5m2, in any pair) it is m64n{n}k32.f32.{e4m3,e5m2}.{e4m3,e5m2}:
// K is 32, both operands K-major (trans_b 0) and swizzled. With swizzle 0 the
// operands are read through the no-swizzle canonical layouts of 8 x 8 core matrices (128
// contiguous bytes each):
//   A (K-major):                element (m, k) at a_ptr + (m % 8) * 8 + (m / 8) * a_sbo + (k % 8) + (k / 8) * a_lbo
//   B, trans_b = 1 (MN-major):  element (k, n) at b_ptr + (n % 8) + (n / 8) * b_sbo + (k % 8) * 8 + (k / 8) * b_lbo
//   B, trans_b = 0 (K-major):   element (k, n) at b_ptr + (n % 8) * 8 + (n / 8) * b_sbo + (k % 8) + (k / 8) * b_lbo
// With swizzle 128, 64 or 32, through that swizzled layout (Stage::swizzle: rows of
// W = swizzle / 2 halves, or swizzle 8-bit values):
//   A (K-major):                element (m, k) at S(a_ptr + (m % 8) * W + (m / 8) * a_sbo + k)
//   B, trans_b = 1 (MN-major):  element (k, n) at S(b_ptr + (n % W) + (n / W) * b_lbo + (k % 8) * W + (k / 8) * b_sbo)
//   B, trans_b = 0 (K-major):   element (k, n) at S(b_ptr + (n % 8) * W + (n / 8) * b_sbo + k)
// where S permutes the 16-byte units of each 128 bytes by the bits above them: for halves
// S(f) = f ^ (((f / 64) % (swizzle / 16)) * 8), for 8-bit values f ^ (((f / 128) % (swizzle /
// 16)) * 16), on offsets from the buffer's start (1024-byte aligned); the K-major a_lbo / b_lbo
// are unused.
// n is a multiple of 8 from 8 to 256. The operation is asynchronous: it belongs to the thread's
// next wgmma_commit group, and neither the accumulator tile may be read nor the operands
// overwritten before a wgmma_wait completes that group.
inline constexpr const char *wgmma_mma = "wgmma_mma";
// wgmma_fence([reg...]): wgmma.fence.sync.aligned; required before the first wgmma_mma and after
// any other instruction wrote the accumulator registers (wgmma_fill). The register arrays given
// are those of the wgmma that follow (codegen keeps their writes before the fence); with none,
// every wgmma register array of the kernel.
inline constexpr const char *wgmma_fence = "wgmma_fence";
// wgmma_commit(): wgmma.commit_group.sync.aligned: closes the group of wgmma_mma calls issued
// since the last commit.
inline constexpr const char *wgmma_commit = "wgmma_commit";
// wgmma_wait(n[, reg...]): wgmma.wait_group.sync.aligned n: waits until at most n committed
// groups are incomplete. The register arrays given (accumulators, A operands in registers) are
// those of the groups the wait completes: codegen orders accesses to them after it and leaves
// the registers of groups still in flight alone; with none, every wgmma register array.
inline constexpr const char *wgmma_wait = "wgmma_wait";
// wgmma_store(acc, index, n, ptr, stride, lanes[, limit[, row_limit]]): each thread stores its n / 2
// registers of accumulator tile `index`: register i at ptr + 8 ((i / 2) % 2) stride + 8 (i / 4) +
// i % 2, where ptr is the thread's own pointer (to its row 16 w + l / 4 and column 2 (l % 4) of
// the tile), `lanes` at a time: 1; 2 (one aligned pair per register pair); 4 (n a multiple of
// 16: the lanes of a quad swap pairs, each storing 4 consecutive elements, so a warp writes whole
// 32-byte sectors of a 16-bit output, or 16 bytes a lane of a float32 one); or 8 (float32 rows
// that start off 32-byte sectors: the lanes of a quad exchange registers so that each stores 8
// bytes of one aligned sector of its row). The stored values and places are those of 1 whatever `lanes`. Narrower outputs than
// float32 are rounded to nearest. With a 7th argument `limit` (an int32, the same in every
// thread) only the tile's columns c < limit are stored (the last block of a dimension that
// blocks do not divide); for lanes 2 and 4, limit must be a multiple of `lanes`. With an 8th,
// `row_limit`, only its rows r < row_limit.
inline constexpr const char *wgmma_store = "wgmma_store";
// wgmma_reg(acc, index, n, r): the value (Float(32), Call::Intrinsic) of the calling thread's
// register r (0 <= r < n / 2) of accumulator tile `index`, whose row and column are those above;
// wgmma_reg_set(acc, index, n, r, value): sets it. They apply an elementwise epilogue (bias,
// activation) in registers before wgmma_store; like wgmma_store they must not touch a tile whose
// wgmma_mma has not landed, and a wgmma_mma after them needs a wgmma_fence. Codegen indexes the
// register array, so r must become a constant once unrolled.
inline constexpr const char *wgmma_reg = "wgmma_reg";
inline constexpr const char *wgmma_reg_set = "wgmma_reg_set";
// Per-row values of a warpgroup's accumulator layout (scope wgmma.rows): an allocation of R
// float32 elements (R a multiple of 64) is the warpgroup's R rows in 64-row tiles; each thread
// holds the 2 rows of every tile that its accumulator registers hold, 16 w + l / 4 and
// 16 w + l / 4 + 8 (warp w, lane l as above; the 4 lanes of a quad hold copies), R / 32
// registers. wgmma_row(rows, index, h): the value (Float(32), Call::Intrinsic) of row
// 16 w + l / 4 + 8 h (h 0 or 1) of tile `index` in the calling thread; wgmma_row_set(rows,
// index, h, value) sets it. Ordinary registers: no fence or wait orders them.
inline constexpr const char *wgmma_row = "wgmma_row";
inline constexpr const char *wgmma_row_set = "wgmma_row_set";
// A from registers (scope wgmma.matrix_a): an allocation of S float16 or bfloat16 elements is a
// warpgroup's 64 x (S / 64) A operand, S / 128 halves a thread (S / 256 32-bit registers). Tile
// `index` of a 64 x k A tile is the thread's halves index * k / 2 .. ; half i of it holds the
// element an accumulator's register i holds (row 16 w + l / 4 + 8 ((i / 2) % 2), column
// 8 (i / 4) + 2 (l % 4) + i % 2), so a k16 slice is 8 halves and an accumulator tile's registers
// are an A tile of the same shape, in order.
// Of 8-bit values (float8): S / 128 bytes a thread in 64 x 32 tiles of 4 registers, value
// 4 (2 (c / 16) + r / 8) + c % 4 of a tile at lane 4 (r % 8) + (c % 16) / 4 (r, c within the
// warp's 16 rows; mma.m16n8k32's A fragment).
// wgmma_acc_to_a(a, a_index, acc, index, n): A tile `a_index` (64 x n) = accumulator tile `index`
// (64 x n) rounded to A's type, register by register (pairs packed); of float8 A, column
// 4 t + b of each 16 the accumulator's 2 t + 8 (b / 2) + b % 2 (wgmma_fp8_a_column: the values
// a thread holds, four packed a register). Like wgmma_reg it must not
// read a tile whose wgmma_mma has not landed, and A must not be rewritten while a wgmma_mma_rs
// that reads it has not landed.
inline constexpr const char *wgmma_acc_to_a = "wgmma_acc_to_a";
// wgmma_mma_rs(acc, index, n, a, a_index, b_ptr, b_lbo, b_sbo, trans_b, swizzle): wgmma_mma with
// A = the 64 x 16 (8-bit: 64 x 32) tile `a_index` of a wgmma.matrix_a allocation `a`
// (registers) instead of shared memory; B as wgmma_mma's.
inline constexpr const char *wgmma_mma_rs = "wgmma_mma_rs";
// shfl_xor(value, mask): the value (float32 or int32) of the lane `lane ^ mask` of the calling
// thread's warp (__shfl_xor_sync over the whole warp: every lane must call it together).
inline constexpr const char *shfl_xor = "shfl_xor";
// fence_proxy_async(): fence.proxy.async.shared::cta: orders this thread's earlier writes of
// shared memory (stores, cp.async) before later reads of it by the async proxy (wgmma).
inline constexpr const char *fence_proxy_async = "fence_proxy_async";

// Hopper bulk tensor copies (TMA) and the shared-memory barriers they complete on (sm_90).
// Barriers are elements of a UInt(64) buffer in shared memory; each is passed as
// address_of(bar[i]). A barrier counts arrivals and transaction bytes of its current phase; the
// phase completes when `count` threads have arrived and every byte announced with
// mbarrier_arrive_expect_tx has landed, and the next phase begins (phases are numbered 0, 1, ...).
// mbarrier_init(bar, count): one thread sets up a barrier for `count` arrivals per phase, in
// phase 0. Other threads may use it only after a barrier (fence_barrier_init; syncthreads).
inline constexpr const char *mbarrier_init = "mbarrier_init";
// fence_barrier_init(): fence.mbarrier_init.release.cluster: makes this thread's mbarrier_init
// visible to the asynchronous proxy (TMA), before the block barrier that publishes them.
inline constexpr const char *fence_barrier_init = "fence_barrier_init";
// mbarrier_arrive_expect_tx(bar, bytes): one arrival on the current phase, which will also wait
// for `bytes` more transaction bytes (tma_load calls naming this barrier).
inline constexpr const char *mbarrier_arrive_expect_tx = "mbarrier_arrive_expect_tx";
// mbarrier_arrive(bar): one arrival on the current phase.
inline constexpr const char *mbarrier_arrive = "mbarrier_arrive";
// mbarrier_wait(bar, parity): mbarrier.try_wait.parity in a loop: returns once the phase of
// parity `parity` (0 or 1) that is current or last completed has completed, i.e. when phase
// p completed with p % 2 == parity and phase p + 1 has not. A thread waiting on phase p of
// a barrier sees every byte that phase's tma_load calls wrote.
inline constexpr const char *mbarrier_wait = "mbarrier_wait";
// tma_load(map, dst, bar, c0, ..., c{r-1}): cp.async.bulk.tensor.{r}d.shared::cluster.global
// .mbarrier::complete_tx::bytes, issued by one thread: copies the box of tensor map `map` (a
// Variable naming one of LoweredFunc::tensor_maps) whose first element is at coordinates
// c0 (innermost) .. c{r-1} (Int(32); elements outside the tensor read as zero) to shared memory
// at dst (address_of(buf[i]), 128-byte aligned; 1024 when the map swizzles), in the map's box
// order (innermost dimension contiguous, rows of box[0] elements), permuted by the map's swizzle
// as Stage::swizzle lays tiles out (in each swizzle-wide row r, with U = swizzle / 16 units of
// 16 bytes, unit u at u ^ ((r / (8 / U)) % U): on byte offsets from the 1024-byte aligned
// start, bits 4.. XORed with bits 7..). Asynchronous: the box's bytes count as transaction
// bytes of the current phase of barrier `bar`; the destination may be read only by threads
// that waited for that phase, and must not be written or read before then.
inline constexpr const char *tma_load = "tma_load";
// tma_load_im2col(map, dst, bar, c, w, h, n, off_w, off_h): cp.async.bulk.tensor.4d.shared::cluster
// .global.im2col.mbarrier::complete_tx::bytes with im2col offsets {off_w, off_h}, issued by one
// thread, for an im2col map (TensorMapParam::im2col) over an NHWC tensor x (dims C, W, H, N
// innermost first). It copies box[1] pixels of box[0] channels each: pixel p = 0, 1, .. walks
// from (w, h, n) through the map's bounding box, w first over [lower_corner[0], W - 1 +
// upper_corner[0]] in steps of traversal[1] (1 when the map has none), then h over
// [lower_corner[1], H - 1 + upper_corner[1]] in steps of traversal[2], then n (each restarting
// at its lower corner when the one inside it wraps); row p of the destination holds
// x[n_p, h_p + off_h, w_p + off_w, c .. c + box[0] - 1], zero where that is outside x. Rows are
// box[0] elements, laid out and swizzled as tma_load's box; completion and ordering as tma_load.
// With lower corners -pad, upper corners pad_end - (kernel - 1) dilation and traversal steps of
// the stride, a start at output pixel (n, oh, ow) of a convolution is (w, h) = (ow stride - pad,
// oh stride - pad) and the filter tap (r, s) is the offset (s dilation, r dilation): row p is
// the im2col row of output pixel m + p for that tap.
inline constexpr const char *tma_load_im2col = "tma_load_im2col";

// Thread-block clusters (sm_90; Stage::cluster, Stage::multicast). The blocks of a cluster run
// at once on one GPC and can reach each other's shared memory (distributed shared memory): a
// shared address in one block names the same offset in every block of its cluster.
// tma_load_multicast(map, dst, bar, mask, c0, ..., c{r-1}): cp.async.bulk.tensor.{r}d
// .shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster, issued by one thread:
// tma_load's box, written at dst in the shared memory of every block of the cluster whose rank
// is a bit of `mask` (a 16-bit constant), its bytes counted as transaction bytes of the
// current phase of the barrier at bar's offset in each of those blocks. A block's barrier may
// see those bytes before its own expect_tx (the phase cannot complete before its arrivals).
inline constexpr const char *tma_load_multicast = "tma_load_multicast";
// mbarrier_arrive_cluster(bar, rank): mapa.shared::cluster to the barrier at bar's offset in the
// block of rank `rank` of the cluster (this one included), then
// mbarrier.arrive.shared::cluster.b64 (release at CTA scope, the default): one arrival on its
// current phase (a consumer telling every producer of the cluster that its reads of a
// multicast slot, wgmma's, completed at its wgmma_wait, are over).
inline constexpr const char *mbarrier_arrive_cluster = "mbarrier_arrive_cluster";
// cluster_sync(): barrier.cluster.arrive.release.aligned + barrier.cluster.wait.acquire.aligned:
// every thread of every block of the cluster arrives, then waits for all of them. After the
// mbarrier_init of a cluster's rings (no block may multicast into a peer, or arrive on its
// barriers, before the peer initialized them) and before a block exits (no block may exit
// while a peer may still write its shared memory or arrive on its barriers).
inline constexpr const char *cluster_sync = "cluster_sync";

// Warp roles (sm_90; Stage::warp_specialize). named_barrier_sync(id, threads): bar.sync id,
// threads: the calling warp arrives at hardware barrier `id` (1..15; 0 is syncthreads') and
// waits until `threads` threads (a multiple of 32) have arrived in its current phase.
inline constexpr const char *named_barrier_sync = "named_barrier_sync";
// named_barrier_arrive(id, threads): bar.arrive id, threads: arrives without waiting (the
// producer side of an ordering between warps).
inline constexpr const char *named_barrier_arrive = "named_barrier_arrive";
// setmaxnreg(registers, increase): setmaxnreg.{inc,dec}.sync.aligned.u32: every thread of the
// calling warpgroup asks for `registers` (24..256, a multiple of 8; constants) per thread, more
// (increase = 1) or fewer (0) than it has. A register budget hint with no effect on values.
inline constexpr const char *setmaxnreg = "setmaxnreg";

// TMA stores (Stage::bulk_copy on a global stage copied out of a shared one): the bulk-group
// side of the bulk tensor copies, sm_90. A store reads shared memory through the async proxy:
// the threads that wrote the tile run fence_proxy_async, then a barrier, before one thread
// issues it; the tile must not be written again until that thread's wait_group.read returned.
// tma_store(map, src, c0, ..., c{r-1}): cp.async.bulk.tensor.{r}d.global.shared::cta
// .bulk_group [map, {c0, ..}], [src], issued by one thread: copies the box of tensor map `map`
// (a tiled map of LoweredFunc::tensor_maps) laid out at src (address_of(buf[i]) of shared
// memory, 128-byte aligned; 1024 when the map swizzles), in tma_load's box order and swizzle,
// to global memory at coordinates c0 (innermost) .. (Int(32)). Elements of the box outside
// the tensor are not written (the hardware clips the box). Asynchronous: it belongs to the
// thread's next tma_store_commit group.
inline constexpr const char *tma_store = "tma_store";
// tma_store_commit(): cp.async.bulk.commit_group: closes the group of this thread's tma_store
// calls issued since the last commit.
inline constexpr const char *tma_store_commit = "tma_store_commit";
// tma_store_wait_read(n): cp.async.bulk.wait_group.read n (n a constant): waits until at most n
// of this thread's committed groups still read their shared sources; after it (and a barrier
// for the other threads) the sources of the others may be written again.
inline constexpr const char *tma_store_wait_read = "tma_store_wait_read";
// tma_store_wait(n): cp.async.bulk.wait_group n: waits until at most n of this thread's
// committed groups are incomplete (their global writes done); wait(0) before the block ends.
inline constexpr const char *tma_store_wait = "tma_store_wait";

} // namespace tessel::intrinsic
