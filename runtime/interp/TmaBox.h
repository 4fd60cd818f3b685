// The geometry of a TMA box in the CPU executor, shared by the loads (Tma.cpp) and the stores
// (TmaStore.cpp): where an element of the box sits in the shared tile (the swizzle) and in the
// tensor (clipped at its edges).
#pragma once

#include "compiler/lower/LoweredFunc.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace tessel::interp {

/// B ^ (((B >> 7) % U) << 4) on the byte offset B of element f from the buffer's start, U =
/// swizzle / 16: Stage::swizzle's layout (CUTLASS Swizzle<log2 U, 4, 3>); f itself for 0.
inline int64_t swizzled(int64_t f, int64_t elem_bytes, int swizzle) {
  if (!swizzle)
    return f;
  const int64_t b = f * elem_bytes;
  return (b ^ (((b >> 7) & (swizzle / 16 - 1)) << 4)) / elem_bytes;
}

/// The element offset in the tensor of box element `b` (its coordinates in the box, innermost
/// first) of a box at `origin`; none where it lies outside the tensor (TMA clips it there).
inline std::optional<int64_t> box_element_offset(const TensorMapParam &p,
                                                 const std::vector<int64_t> &origin,
                                                 const std::vector<int64_t> &b) {
  bool inside = true;
  int64_t off = 0;
  for (size_t d = 0; d < p.dims.size(); ++d) {
    const int64_t g = origin[d] + b[d];
    inside = inside && g >= 0 && g < p.dims[d];
    off += g * (d == 0 ? 1 : p.strides[d]);
  }
  return inside ? std::optional<int64_t>(off) : std::nullopt;
}

/// Steps `b` to the box's next element (innermost dimension first).
inline void next_box_element(const TensorMapParam &p, std::vector<int64_t> &b) {
  for (size_t d = 0; d < b.size() && ++b[d] == p.box[d]; ++d)
    b[d] = 0;
}

} // namespace tessel::interp
