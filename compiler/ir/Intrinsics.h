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

} // namespace tessel::intrinsic
