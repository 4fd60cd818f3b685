// IEEE binary16 (half) and bfloat16 conversions on the host, for preparing inputs and checking
// outputs of fp16 kernels. Values travel as their raw 16-bit patterns (uint16_t), which is also
// how DeviceArray stores them.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace tessel {

/// float -> IEEE half, rounding to nearest even; overflow gives +-inf, NaN stays a (quiet) NaN,
/// and values below the smallest normal become subnormals or zero, correctly rounded.
inline uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) // inf or NaN; keep NaN's top payload bits and force it quiet
    return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u);
  if (abs >= 0x477ff000u) // >= 65520 rounds to inf
    return sign | 0x7c00u;
  if (abs < 0x38800000u) { // below 2^-14: subnormal half (or zero)
    if (abs < 0x33000000u) // below 2^-25: rounds to zero (2^-25 itself ties to even zero)
      return sign;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23); // 14..24 for exponents -14..-24 and below
    uint32_t kept = mant >> shift;
    uint32_t rest = mant & ((1u << shift) - 1u);
    uint32_t half_way = 1u << (shift - 1);
    if (rest > half_way || (rest == half_way && (kept & 1u)))
      ++kept;
    return sign | static_cast<uint16_t>(kept);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits; a carry
  // out of the mantissa correctly bumps the exponent.
  uint32_t h = ((abs - 0x38000000u) >> 13);
  uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    ++h;
  return sign | static_cast<uint16_t>(h);
}

/// IEEE half -> float (exact).
inline float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) // inf or NaN
    return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0)
      return std::bit_cast<float>(sign);
    // Subnormal: mant * 2^-24, exact in float.
    float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

/// float -> bfloat16, rounding to nearest even; NaN stays a quiet NaN.
inline uint16_t float_to_bfloat16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

/// bfloat16 -> float (exact).
inline float bfloat16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

inline std::vector<uint16_t> floats_to_halves(const std::vector<float> &v) {
  std::vector<uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out[i] = float_to_half(v[i]);
  return out;
}

inline std::vector<float> halves_to_floats(const std::vector<uint16_t> &v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out[i] = half_to_float(v[i]);
  return out;
}

/// `n` float16 values drawn uniformly from [lo, hi) with a fixed seed (test and benchmark data).
inline std::vector<uint16_t> random_halves(size_t n, uint64_t seed, float lo = -1.0f,
                                           float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<uint16_t> v(n);
  for (uint16_t &x : v)
    x = float_to_half(d(rng));
  return v;
}

} // namespace tessel
