// Randomized shapes, tiles and types through the Tensor Core schedules (the Hopper ones, and the
// WMMA and ldmatrix / mma.sync GEMMs and conv of older GPUs), on the CPU executor against the
// float64 reference of each definition.
//
// Each case draws a shape (ragged M, N and K included: the last wgmma block shifts inwards,
// the WMMA / mma paths pad what is not whole fragments), tiles (block sizes, stages, TMA or
// cp.async, swizzled or not), input and output types and, for the conv, an epilogue, from a
// seed; a failure names the seed and what it drew. CI runs a fixed few cases per schedule; more
// with the environment:
//
//   TESSEL_RANDOM_CASES=200 ./build/tests/tessel_tests --gtest_filter='RandomSchedules.*'
//   TESSEL_RANDOM_SEED=1234 ...     # one case: replays a failure
#include "TestUtil.h"

#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "schedules/Conv2dTc.h"
#include "schedules/Epilogues.h"
#include "schedules/GemmTc.h"
#include "schedules/GemmWgmma.h"
#include "schedules/GemmWmma.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace tessel;

namespace {

std::vector<uint64_t> seeds(int fixed, uint64_t base) { return test::random_seeds(fixed, base); }

template <typename T> const T &pick(std::mt19937_64 &rng, const std::vector<T> &v) {
  return v[rng() % v.size()];
}

int64_t in_range(std::mt19937_64 &rng, int64_t lo, int64_t hi) {
  return lo + int64_t(rng() % uint64_t(hi - lo + 1));
}

// Tiles small enough for the executor: blocks of 64 or 128 rows (1 or 2 warpgroups), 64 or 128
// columns, K steps of 64 (128-byte swizzle) or 32 (no swizzle), 2 to 4 stages.
GemmWgmmaTiles random_tiles(std::mt19937_64 &rng) {
  GemmWgmmaTiles t;
  t.block_m = pick<int>(rng, {64, 128});
  t.warpgroups_m = t.block_m / 64;
  t.block_n = pick<int>(rng, {64, 128});
  t.swizzle = pick<int>(rng, {128, 128, 0});
  t.block_k = t.swizzle ? 64 : 32;
  t.stages = int(in_range(rng, 2, 4));
  t.tma = t.swizzle != 0 && rng() % 3 != 0;
  t.raster_group = pick<int64_t>(rng, {0, 2});
  return t;
}

// A convolution's geometry: 1x1 or 3x3 (pad 0 or 1, dilation 1 or 2, a different padding
// after), stride 1 or 2, batch 1 to 3, images of 4 to 9 pixels a side (the dilated filter
// fits), channels from the lists, x and w float16 or bfloat16.
Conv2dTcShape random_conv(std::mt19937_64 &rng, const std::vector<int> &in_channels,
                          const std::vector<int> &out_channels) {
  Conv2dTcShape sh;
  sh.kernel = pick<int>(rng, {1, 3});
  sh.pad = sh.kernel == 3 ? int(in_range(rng, 0, 1)) : 0;
  sh.stride = pick<int>(rng, {1, 1, 2});
  sh.dilation = sh.kernel == 3 ? pick<int>(rng, {1, 1, 2}) : 1;
  sh.pad_end = sh.kernel == 3 ? pick<int>(rng, {-1, -1, 0, 2}) : -1;
  sh.batch = int(in_range(rng, 1, 3));
  sh.height = int(in_range(rng, std::max(4, sh.span()), 9));
  sh.width = int(in_range(rng, std::max(4, sh.span()), 9));
  sh.in_channels = pick<int>(rng, in_channels);
  sh.out_channels = pick<int>(rng, out_channels);
  sh.in_dtype = pick<DataType>(rng, {Float(16), BFloat(16)});
  return sh;
}

std::string describe(const Conv2dTcShape &sh) {
  std::ostringstream os;
  os << "N=" << sh.batch << " " << sh.height << "x" << sh.width << " " << sh.in_channels << "->"
     << sh.out_channels << " " << sh.kernel << "x" << sh.kernel << " pad " << sh.pad << "/"
     << sh.pad_after() << " stride " << sh.stride << " dilation " << sh.dilation << ", "
     << sh.in_dtype << " -> " << sh.out_dtype;
  return os.str();
}

// WMMA / mma.sync tiles: 1 or 2 warps each way, 1 or 2 fragments a warp each way, K steps of
// 16 or 32, 1 to 3 stages, rasterized or not, drawn until the block's threads copy whole
// 16-byte vectors of both shared tiles and `fits` accepts them.
GemmWmmaTiles random_wmma_tiles(std::mt19937_64 &rng,
                                const std::function<bool(const GemmWmmaTiles &)> &fits) {
  GemmWmmaTiles t;
  auto vectors = [&] { return int64_t(8) * 32 * t.warps(); };
  do {
    t = {.block_row_warps = int(in_range(rng, 1, 2)),
         .block_col_warps = int(in_range(rng, 1, 2)),
         .warp_row_tiles = int(in_range(rng, 1, 2)),
         .warp_col_tiles = int(in_range(rng, 1, 2)),
         .chunk = int(in_range(rng, 1, 2)),
         .stages = int(in_range(rng, 1, 3)),
         .raster_group = pick<int64_t>(rng, {0, 2})};
  } while (int64_t(t.block_m()) * t.block_k() % vectors() != 0 ||
           int64_t(t.block_k()) * t.block_n() % vectors() != 0 || !fits(t));
  return t;
}

} // namespace

TEST(RandomSchedules, GemmWgmma) {
  for (uint64_t seed : seeds(4, 20261123)) {
    std::mt19937_64 rng(seed);
    GemmWgmmaTiles t = random_tiles(rng);
    // M from 1 to about three blocks (fewer rows than a block: a block computed, M kept), N from
    // one block to about three, K from 1 to 4 steps: any of them ragged (K or rows that are not
    // whole 16-byte units run on padded copies).
    int64_t M = in_range(rng, 1, 3 * t.block_m);
    int64_t N = in_range(rng, t.block_n, 2 * t.block_n + 32);
    int64_t K = in_range(rng, 1, 4 * t.block_k);
    DataType in = pick<DataType>(rng, {Float(16), BFloat(16)});
    bool fused = rng() % 3 == 0;
    t.split_k = fused ? 1 : pick<int>(rng, {1, 1, 2, 3}); // the epilogue needs K whole
    t.split_k = int(std::min<int64_t>(t.split_k, (K + t.block_k - 1) / t.block_k)); // a step each
    std::ostringstream what;
    what << "seed " << seed << ": " << M << "x" << N << "x" << K << " " << in << " "
         << to_string(t) << (fused ? " + bias + GELU" : "");
    DataType out = fused || rng() % 2 ? in : Float(32); // C rounded to A's type, or float32
    what << " -> " << out;
    SCOPED_TRACE(what.str());
    ScheduledProgram p = fused ? gemm_wgmma_fused(M, N, K, t, in, in, bias_gelu_epilogue(in))
                               : gemm_wgmma(M, N, K, t, in, out);
    CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs, seed);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

TEST(RandomSchedules, Conv2dWgmma) {
  for (uint64_t seed : seeds(4, 20261124)) {
    std::mt19937_64 rng(seed);
    Conv2dTcShape sh = random_conv(rng, {64, 128}, {64, 128, 192});
    sh.out_dtype = pick<DataType>(rng, {Float(32), Float(16), BFloat(16)});
    bool bias_relu = rng() % 2 == 0;
    GemmWgmmaTiles t = random_tiles(rng);
    t.block_n = std::min<int>(t.block_n, sh.out_channels % 128 == 0 ? 128 : 64);
    t.swizzle = 128; // the K step lies in one filter tap: 64 channels
    t.block_k = 64;
    if (sh.gemm_m() < t.block_m) { // a small image: one warpgroup of 64 rows
      t.block_m = 64;
      t.warpgroups_m = 1;
    }
    while (sh.gemm_m() < t.block_m) // at least 64 output pixels
      ++sh.batch;
    // Split-K in parts of whole filter taps (a second kernel adds them, then the epilogue).
    t.split_k = sh.kernel == 3 ? pick<int>(rng, {1, 1, 3, 9}) : 1;
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + describe(sh) +
                 (bias_relu ? " + bias + ReLU, " : ", ") + to_string(t));
    WgmmaEpilogue e = bias_relu_epilogue(sh.in_dtype);
    ScheduledProgram p = conv2d_wgmma(sh, t, bias_relu ? &e : nullptr);
    CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs, seed);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

// gemm_wmma and gemm_mma: 1 or 2 warps each way, 1 or 2 fragments a warp each way, K steps of
// 16 or 32, 1 to 3 stages, rasterized or not; each of M, N, K one to three blocks less up to 15
// (not whole fragments: padded copies and C's leading block); on mma.sync C float32 or A's type.
TEST(RandomSchedules, GemmWmmaAndMma) {
  for (uint64_t seed : seeds(6, 20261125)) {
    std::mt19937_64 rng(seed);
    GemmWmmaTiles t = random_wmma_tiles(rng, [](const GemmWmmaTiles &) { return true; });
    auto dim = [&](int block) { return block * in_range(rng, 1, 3) - in_range(rng, 0, 15); };
    const int64_t M = dim(t.block_m()), N = dim(t.block_n()), K = dim(t.block_k());
    const bool mma = rng() % 2 == 0;
    DataType in = pick<DataType>(rng, {Float(16), BFloat(16)});
    DataType out = mma && rng() % 2 ? in : Float(32); // mma.sync may round C to A's type
    std::ostringstream what;
    what << "seed " << seed << ": " << (mma ? "gemm_mma " : "gemm_wmma ") << M << "x" << N << "x"
         << K << " " << in << " -> " << out << " " << to_string(t);
    SCOPED_TRACE(what.str());
    ScheduledProgram p =
        tensor_core_gemm(mma ? "gemm_mma" : "gemm_wmma", M, N, K, t, mma, in, out);
    CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs, seed);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

// conv2d_tc off Hopper: stride, dilation, asymmetric padding, batch 1, output pixels that are
// not whole blocks (the last block shifts inwards), float16 or bfloat16 x and w, y float32
// (WMMA) or float16 / bfloat16 (mma.sync), random tiles that fit (blocks of at most N*P*Q rows,
// dividing K and C, whole 16-byte loads).
TEST(RandomSchedules, Conv2dTcWmma) {
  for (uint64_t seed : seeds(4, 20261126)) {
    std::mt19937_64 rng(seed);
    Conv2dTcShape sh = random_conv(rng, {16, 32, 48}, {16, 32, 64});
    // float32 y on WMMA; float16 / bfloat16 on mma.sync's fragments
    sh.out_dtype = pick<DataType>(rng, {Float(32), Float(32), Float(16), BFloat(16)});
    while (sh.gemm_m() < 16) // at least one fragment of output pixels
      ++sh.batch;
    GemmWmmaTiles g = random_wmma_tiles(rng, [&](const GemmWmmaTiles &t) {
      return t.block_m() <= sh.gemm_m() && sh.out_channels % t.block_n() == 0 &&
             sh.in_channels % t.block_k() == 0;
    });
    Conv2dTcTiles t{.block_row_warps = g.block_row_warps, .block_col_warps = g.block_col_warps,
                    .warp_row_tiles = g.warp_row_tiles, .warp_col_tiles = g.warp_col_tiles,
                    .chunk = g.chunk, .stages = g.stages};
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + describe(sh) + ", " +
                 std::to_string(sh.gemm_m()) + " pixels in blocks of " + to_string(g));
    ScheduledProgram p = conv2d_tc(sh, t);
    CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs, seed);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}
