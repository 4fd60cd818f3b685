// float <-> half and bfloat16 conversions (runtime/Half.h).
#include "runtime/Half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace tessel;

TEST(RuntimeHalf, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f)))) << std::hex << h;
      continue;
    }
    EXPECT_EQ(float_to_half(f), h) << std::hex << h;
  }
}

TEST(RuntimeHalf, KnownValues) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001); // smallest subnormal
  EXPECT_EQ(float_to_half(0x1p-14f), 0x0400); // smallest normal
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_FLOAT_EQ(half_to_float(0x3555), 0.333251953125f);
}

TEST(RuntimeHalf, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even 1.
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: ties up to even.
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01); // above the tie
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);                   // below the overflow tie
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);                   // the tie rounds to inf
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);                   // tie to even zero
  EXPECT_EQ(float_to_half(0x1.8p-25f), 0x0001);
  EXPECT_EQ(float_to_half(3 * 0x1p-25f), 0x0002); // 1.5 subnormal units: tie to even 2
  EXPECT_EQ(float_to_half(0x1p-30f), 0x0000);
}

TEST(RuntimeHalf, MatchesCompilerFloat16WhereAvailable) {
#if defined(__FLT16_MAX__)
  // Every 1021st float bit pattern, against the compiler's own conversion.
  for (uint64_t x = 0; x <= 0xffffffffull; x += 1021) {
    float f = std::bit_cast<float>(static_cast<uint32_t>(x));
    if (std::isnan(f))
      continue;
    _Float16 ref = static_cast<_Float16>(f);
    ASSERT_EQ(float_to_half(f), std::bit_cast<uint16_t>(ref)) << std::hexfloat << f;
  }
#else
  GTEST_SKIP() << "no _Float16 in this compiler";
#endif
}

TEST(RuntimeHalf, BFloat16) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(1.0f + 0x1p-8f), 0x3f80); // tie to even
  EXPECT_EQ(float_to_bfloat16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
  EXPECT_EQ(bfloat16_to_float(0x4049), 3.140625f);
}
