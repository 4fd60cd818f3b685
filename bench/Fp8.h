// float8 e4m3 (OCP "E4M3FN": bias 7, no infinities, NaN = S.1111.111, largest 448) on the host:
// the fp8 benchmark's random inputs and its float64 reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace tessel::bench {

/// e4m3 -> float (exact).
inline float e4m3_to_float(uint8_t b) {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int exp = (b >> 3) & 0xF, man = b & 0x7;
  if (exp == 0xF && man == 0x7)
    return NAN;
  if (exp == 0) // subnormal: man / 8 * 2^-6
    return sign * std::ldexp(float(man), -9);
  return sign * std::ldexp(float(8 + man), exp - 10);
}

/// float -> e4m3, rounding to nearest even, saturating to +-448 (the "satfinite" conversion).
inline uint8_t float_to_e4m3(float f) {
  if (std::isnan(f))
    return 0x7F;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  float a = std::fabs(f);
  if (a >= 448.0f)
    return sign | 0x7E;
  if (a == 0.0f)
    return sign;
  int e = 0;
  std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1): the leading bit is 2^(e-1)
  int exp = e - 1 + 7;
  if (exp < 1) { // subnormal range: multiples of 2^-9
    int man = int(std::nearbyint(std::ldexp(a, 9)));
    return man >= 8 ? uint8_t(sign | 0x08) : uint8_t(sign | man);
  }
  // 3 fraction bits: steps of 2^(e-1-3).
  int q = int(std::nearbyint(std::ldexp(a, 3 - (e - 1)))); // in [8, 16]
  if (q == 16) {
    q = 8;
    ++exp;
  }
  if (exp > 15 || (exp == 15 && q - 8 == 7))
    return sign | 0x7E;
  return uint8_t(sign | (exp << 3) | (q - 8));
}

/// `n` e4m3 values of uniform draws from [-1, 1) with a fixed seed; a draw that rounds to zero
/// becomes the smallest subnormal of its sign, so no element is zero.
inline std::vector<uint8_t> random_e4m3(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<uint8_t> v(n);
  for (uint8_t &x : v) {
    x = float_to_e4m3(d(rng));
    if ((x & 0x7F) == 0)
      x |= 0x01;
  }
  return v;
}

/// `n` float32 scales drawn uniformly from [lo, hi) with a fixed seed.
inline std::vector<float> random_scales(size_t n, uint64_t seed, float lo = 0.5f, float hi = 2.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

} // namespace tessel::bench
