// Rounding of double values to the narrow float formats (IEEE half, bfloat16), and their 16-bit
// encodings.
//
// The executor keeps every float value as a double that is exactly representable in its IR type
// and rounds after each operation. Rounding directly from double (not through float) matters:
// double -> float -> half rounds twice and can differ from the GPU's single rounding. The raw-bit
// helpers overlap runtime/Half.h (branch runtime, float-based); dedupe once both are on main.
#pragma once

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

/// The IEEE half encoding of x (rounded to nearest even first).
inline uint16_t half_bits(double x) {
  double r = round_to_half(x);
  uint16_t sign = std::signbit(r) ? 0x8000u : 0u;
  if (std::isnan(r))
    return 0x7e00u;
  double a = std::fabs(r);
  if (std::isinf(a))
    return sign | 0x7c00u;
  if (a < 0x1p-14) // subnormal (or zero): a multiple of 2^-24
    return sign | static_cast<uint16_t>(a * 0x1p24);
  int e;
  double m = std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1)
  auto exp_field = static_cast<uint16_t>(e - 1 + 15);
  auto mant = static_cast<uint16_t>((m * 2.0 - 1.0) * 1024.0);
  return sign | static_cast<uint16_t>(exp_field << 10) | mant;
}

/// The value of an IEEE half encoding (exact).
inline double half_value(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  int mant = h & 0x3ff;
  double sign = (h & 0x8000u) ? -1.0 : 1.0;
  if (exp == 0x1f)
    return mant ? NAN : sign * INFINITY;
  if (exp == 0)
    return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

/// The bfloat16 encoding of x (rounded to nearest even first).
inline uint16_t bfloat16_bits(double x) {
  double r = round_to_bfloat16(x);
  if (std::isnan(r))
    return 0x7fc0u;
  // r is exact in float, so the float's top half is the encoding.
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(r)) >> 16);
}

inline double bfloat16_value(uint16_t b) {
  return static_cast<double>(std::bit_cast<float>(uint32_t(b) << 16));
}

} // namespace tessel::interp
