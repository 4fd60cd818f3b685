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

} // namespace tessel::intrinsic
