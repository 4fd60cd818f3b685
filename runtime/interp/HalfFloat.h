// Rounding of double values to the narrow float formats (IEEE half, bfloat16; the 8-bit floats
// are in runtime/Float8.h), and their 16-bit encodings.
//
// The executor keeps every float value as a double that is exactly representable in its IR type
// and rounds after each operation. Rounding directly from double (not through float) matters:
// double -> float -> half rounds twice and can differ from the GPU's single rounding.
#pragma once

#include "runtime/Float8.h"
#include "runtime/Half.h"

#include <bit>
#include <cmath>
#include <cstdint>

namespace tessel::interp {

/// Rounds x to nearest-even in a binary format with `precision` significand bits (the implicit
/// bit included), smallest normal exponent `emin` and largest finite value `max_finite`;
/// subnormals keep the fixed quantum 2^(emin - precision + 1), overflow gives +-inf. Done on
/// the bits because it runs after every fp16 operation.
inline double round_to_format(double x, int precision, int emin, double max_finite) {
  if (!std::isfinite(x) || x == 0.0)
    return x;
  uint64_t b = std::bit_cast<uint64_t>(x);
  int exp = static_cast<int>((b >> 52) & 0x7ff) - 1023;
  if (exp >= emin) {
    // Normal in the target: round the double's significand at bit `drop`, half to even; a
    // carry out of the significand correctly bumps the exponent.
    const int drop = 53 - precision;
    b += ((uint64_t(1) << (drop - 1)) - 1) + ((b >> drop) & 1);
    b &= ~((uint64_t(1) << drop) - 1);
    double r = std::bit_cast<double>(b);
    return std::fabs(r) > max_finite ? std::copysign(INFINITY, x) : r;
  }
  // Subnormal in the target: a fixed quantum. Scaling by a power of two is exact, and
  // nearbyint rounds half to even in the default rounding mode.
  int q = emin - (precision - 1);
  return std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);
}

inline double round_to_half(double x) { return round_to_format(x, 11, -14, 65504.0); }
inline double round_to_bfloat16(double x) {
  return round_to_format(x, 8, -126, 0x1.fep127);
}
inline double round_to_float(double x) { return static_cast<double>(static_cast<float>(x)); }

// The encodings: the value rounded from double once, then encoded exactly (runtime/Half.h).

/// The IEEE half encoding of x (rounded to nearest even first).
inline uint16_t half_bits(double x) { return float_to_half(static_cast<float>(round_to_half(x))); }

/// The value of an IEEE half encoding (exact).
inline double half_value(uint16_t h) { return half_to_float(h); }

/// The bfloat16 encoding of x (rounded to nearest even first).
inline uint16_t bfloat16_bits(double x) {
  return float_to_bfloat16(static_cast<float>(round_to_bfloat16(x)));
}

/// The value of a bfloat16 encoding (exact).
inline double bfloat16_value(uint16_t b) { return bfloat16_to_float(b); }

} // namespace tessel::interp
