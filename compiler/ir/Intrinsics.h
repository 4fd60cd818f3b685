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
