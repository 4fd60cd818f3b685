// The 8-bit floats of Hopper's Tensor Cores on the host: rounding from double and the 8-bit
// encodings, for preparing inputs and checking outputs of fp8 kernels (and the executor's
// float8 values). Values travel as their raw codes (uint8_t), as DeviceArray and HostBuffer
// store them.
//
//   e4m3 (OCP "E4M3FN"): sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, NaN is
//        S.1111.111; largest finite 448, smallest normal 2^-6, smallest subnormal 2^-9.
//   e5m2: sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like (infinities and NaNs at
//        exponent 31); largest finite 57344, smallest normal 2^-14, smallest subnormal 2^-16.
//
// Rounding is what the GPU's cvt.rn.satfinite.{e4m3,e5m2}x2.f32 and cuda_fp8.h's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) / the __nv_fp8_* constructors do: to nearest,
// ties to even, and values beyond the largest finite one (infinities included) saturate to it;
// NaN stays NaN. Rounding directly from double, once, as the hardware does from float.
#pragma once

#include <cmath>
#include <cstdint>

namespace tessel {

/// The parameters of an 8-bit float format.
struct Float8Format {
  int mantissa_bits; ///< stored mantissa bits (3 for e4m3, 2 for e5m2)
  int bias;          ///< exponent bias (7, 15)
  int min_exponent;  ///< exponent of the smallest normal value (-6, -14)
  double max_finite; ///< 448, 57344
  bool has_inf;      ///< e5m2: exponent 31 holds infinities and NaNs; e4m3 only S.1111.111 = NaN
};

inline constexpr Float8Format kE4M3{3, 7, -6, 448.0, false};
inline constexpr Float8Format kE5M2{2, 15, -14, 57344.0, true};

/// x rounded to nearest even in format `f`, saturating to +-max_finite (infinities too); NaN
/// stays NaN, the sign of zero is kept.
inline double round_to_float8(double x, const Float8Format &f) {
  if (std::isnan(x) || x == 0.0)
    return x;
  if (std::fabs(x) >= f.max_finite)
    return std::copysign(f.max_finite, x);
  int e;
  std::frexp(x, &e);                             // |x| = m 2^e, m in [0.5, 1)
  const int exp = std::max(e - 1, f.min_exponent); // subnormals share the smallest quantum
  const int q = exp - f.mantissa_bits;           // the quantum at x's exponent
  // Scaling by a power of two is exact; nearbyint rounds half to even in the default mode.
  const double r = std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);
  return std::fabs(r) > f.max_finite ? std::copysign(f.max_finite, x) : r;
}

/// The value of code `c` (exact): NaN for the NaN codes, +-inf for e5m2's infinities.
inline double float8_value(uint8_t c, const Float8Format &f) {
  const bool neg = c & 0x80;
  const int e = (c & 0x7f) >> f.mantissa_bits, m = c & ((1 << f.mantissa_bits) - 1);
  const int max_e = (1 << (7 - f.mantissa_bits)) - 1;
  double v;
  if (f.has_inf && e == max_e)
    v = m == 0 ? INFINITY : NAN;
  else if (!f.has_inf && e == max_e && m == (1 << f.mantissa_bits) - 1)
    v = NAN;
  else if (e == 0)
    v = std::ldexp(double(m), f.min_exponent - f.mantissa_bits);
  else
    v = std::ldexp(double(m + (1 << f.mantissa_bits)), e - f.bias - f.mantissa_bits);
  return neg ? -v : v;
}

/// The code of x rounded in format `f` (round_to_float8 first); NaN gives 0x7f (or 0xff).
inline uint8_t float8_bits(double x, const Float8Format &f) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x))
    return sign | 0x7f;
  const double v = std::fabs(round_to_float8(x, f));
  if (v == 0.0)
    return sign;
  int e;
  std::frexp(v, &e);
  const int exp = e - 1;
  if (exp < f.min_exponent) // subnormal: a multiple of the smallest quantum
    return sign | uint8_t(std::ldexp(v, f.mantissa_bits - f.min_exponent));
  const int m = int(std::ldexp(v, f.mantissa_bits - exp)) - (1 << f.mantissa_bits);
  return sign | uint8_t(((exp + f.bias) << f.mantissa_bits) | m);
}

inline double round_to_e4m3(double x) { return round_to_float8(x, kE4M3); }
inline double round_to_e5m2(double x) { return round_to_float8(x, kE5M2); }

} // namespace tessel
