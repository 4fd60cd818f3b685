// Helpers shared by tessel's unit tests.
#pragma once

#include "compiler/support/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

namespace tessel::test {

/// Expects `f` to throw tessel::Error whose message contains every one of `parts`.
template <typename F> void expect_error(F f, std::initializer_list<const char *> parts) {
  try {
    f();
    ADD_FAILURE() << "expected tessel::Error";
  } catch (const Error &e) {
    for (const char *p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message lacks '" << p << "':\n"
          << e.what();
  }
}

/// How many times `needle` occurs in `hay` (overlapping occurrences included).
inline int count_of(const std::string &hay, const std::string &needle) {
  int n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1))
    ++n;
  return n;
}

/// `n` multiples of 1/8 in [-1, 1] drawn with `seed`: exact in float16 and bfloat16, products
/// and sums of a few thousand exact in float32, so a kernel's result must equal a float64
/// reference exactly.
inline std::vector<double> dyadic_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(n);
  for (double &x : v)
    x = (int(rng() % 17) - 8) / 8.0;
  return v;
}

/// The seeds a randomized test runs: TESSEL_RANDOM_SEED alone (replaying one case), else
/// TESSEL_RANDOM_CASES (default `fixed`) consecutive seeds from `base`, so that CI runs the same
/// cases every time. Every randomized test and the schedule fuzzer read these two.
inline std::vector<uint64_t> random_seeds(int fixed, uint64_t base) {
  if (const char *s = std::getenv("TESSEL_RANDOM_SEED"))
    return {std::strtoull(s, nullptr, 10)};
  if (const char *n = std::getenv("TESSEL_RANDOM_CASES"))
    fixed = std::max(1, std::atoi(n));
  std::vector<uint64_t> out;
  for (int i = 0; i < fixed; ++i)
    out.push_back(base + uint64_t(i));
  return out;
}

/// True when TESSEL_RANDOM_SEED asks for one case.
inline bool replaying_one_seed() { return std::getenv("TESSEL_RANDOM_SEED") != nullptr; }

} // namespace tessel::test
