// Storage scopes of warp-level matrix fragments. Such storage never becomes an array that
// loads and stores address element by element: only the intrinsics of its family use it.
#pragma once

#include <string>

namespace tessel {

/// nvcuda::wmma fragments: wmma.matrix_a, wmma.matrix_b, wmma.accumulator.
inline bool is_wmma_scope(const std::string &s) { return s.rfind("wmma.", 0) == 0; }
/// Per-thread registers of PTX ldmatrix / mma.sync: mma.matrix_a, mma.matrix_b, mma.accumulator.
inline bool is_mma_scope(const std::string &s) { return s.rfind("mma.", 0) == 0; }
/// Per-thread registers of a warpgroup's wgmma accumulator (wgmma.accumulator), of values per
/// row of its layout (wgmma.rows) and of an A operand in that layout (wgmma.matrix_a).
inline bool is_wgmma_scope(const std::string &s) { return s.rfind("wgmma.", 0) == 0; }
inline bool is_fragment_scope(const std::string &s) {
  return is_wmma_scope(s) || is_mma_scope(s) || is_wgmma_scope(s);
}

} // namespace tessel
