// The registry's shape parameters as a user gives them (--shape, tuning records): parsed,
// range-checked and refused with a message before any schedule sees them. No GPU needed.
#include "TestUtil.h"

#include "schedules/GemmWgmma.h"
#include "schedules/Registry.h"

#include <gtest/gtest.h>

using namespace tessel;
using tessel::test::expect_error;

TEST(Registry, ParseShapeReadsEachParameterOnce) {
  EXPECT_EQ(parse_shape("M=16,N=32, K = 8"), (ShapeParams{{"M", 16}, {"N", 32}, {"K", 8}}));
  expect_error([] { parse_shape("M=16,M=32"); }, {"M is given twice in 'M=16,M=32'"});
  expect_error([] { parse_shape("M=16,,N=16"); }, {"cannot read '' in 'M=16,,N=16'", "NAME=INTEGER"});
  expect_error([] { parse_shape("M=16,"); }, {"cannot read ''"});
  expect_error([] { parse_shape("M"); }, {"cannot read 'M'"});
  expect_error([] { parse_shape("=4"); }, {"cannot read '=4'"});
  expect_error([] { parse_shape("M=1e3"); }, {"M must be a decimal integer, at most 2147483647"});
  expect_error([] { parse_shape("M=99999999999999999999"); }, {"M must be a decimal integer"});
}

// Values past 32 bits were taken and wrapped by the schedules' int parameters: H=4294967310
// built H=14, N=4294967297 built N=1, BM=4294967360 built BM=64, SK=2147483648 said "got
// -2147483648". Each is refused as given.
TEST(Registry, ValuesPast32BitsAreRefusedNotWrapped) {
  const ScheduleEntry &conv = find_schedule("conv2d_tc");
  expect_error([&] { resolve_shape(conv, parse_shape("H=4294967310")); },
               {"shape parameter H must be from 1 to 2147483647", "got 4294967310"});
  expect_error([&] { resolve_shape(conv, parse_shape("N=4294967297")); },
               {"shape parameter N must be from 1 to 2147483647", "got 4294967297"});
  const ScheduleEntry &w = find_schedule("gemm_wgmma");
  expect_error([&] { resolve_shape(w, parse_shape("BM=4294967360")); },
               {"shape parameter BM must be from 0 to 2147483647", "got 4294967360"});
  expect_error([&] { resolve_shape(w, parse_shape("SK=2147483648")); },
               {"SK must be from 0 to 2147483647", "got 2147483648"});
  expect_error([&] { resolve_shape(w, {{"S", -5}}); }, {"S must be from 0", "got -5"});
  expect_error([&] { resolve_shape(w, {{"M", 0}}); }, {"M must be from 1", "got 0"});
  expect_error([&] { resolve_shape(w, {{"Q", 1}}); },
               {"schedule 'gemm_wgmma' has no shape parameter 'Q'"});
  EXPECT_EQ(resolve_shape(w, {{"SK", 0}, {"M", 2147483647}}).at("M"), 2147483647);
  EXPECT_EQ(shape_value_problem(w, "BM", 128), "");
}

// A swizzle other than the default applies to the tiles gemm_wgmma chooses too (SW=64 was
// ignored unless BM, BN or BK were given); values it cannot take are refused as parsed.
TEST(Registry, KnobsOfFewValues) {
  const ScheduleEntry &w = find_schedule("gemm_wgmma");
  EXPECT_EQ(gemm_wgmma_tiles_from_knobs(resolve_shape(w, {{"SW", 64}})).swizzle, 64);
  EXPECT_EQ(gemm_wgmma_tiles_from_knobs(resolve_shape(w, {})).swizzle, 128);
  EXPECT_FALSE(gemm_wgmma_tiles_from_knobs(resolve_shape(w, {{"TMA", 0}})).tma);
  expect_error([&] { resolve_shape(w, {{"SW", 7}}); }, {"SW", "must be one of 0, 32, 64, 128"});
  expect_error([&] { resolve_shape(w, {{"TMA", 5}}); }, {"TMA", "must be one of 0, 1, got 5"});
  expect_error([&] { resolve_shape(find_schedule("conv2d_wgmma"), {{"TMA", 2}}); },
               {"TMA of schedule 'conv2d_wgmma' must be one of 0, 1"});
}
