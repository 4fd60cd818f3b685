// conv2d_tc: the implicit-GEMM Tensor Core convolution on NHWC / KRSC. On the CPU executor
// against a direct convolution written here on the NHWC / KRSC arrays (not the compute
// definition, so a wrong im2col is caught) and against the float64 reference of the
// definition; its lowered IR (WMMA calls, 16-byte loads of x and w, the padding branch); NVRTC
// for sm_80 / sm_90 with HMMA in the SASS; errors for shapes the tiles do not fit; on a GPU
// (skipped without one) a mid-size shape against the float64 reference.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Check.h"
#include "runtime/Device.h"
#include "runtime/Nvrtc.h"
#include "runtime/interp/Executor.h"
#include "schedules/Conv2dTc.h"

#include "SassUtil.h"

#include <gtest/gtest.h>

#include <array>

#include <cmath>
#include <random>
#include <string>
#include <tuple>

using namespace tessel;
using tessel::test::dyadic_values;
using tessel::test::expect_error;

namespace {

// y[n, p, q, k] = sum_{r, s, c} x[n, p stride + r dilation - pad, q stride + s dilation - pad,
// c] * w[k, r, s, c], zero outside x, straight from cuDNN's NHWC / KRSC definition.
// With `bias_relu` (conv2d_bias_relu's arguments x, w, bias, y): y = max(conv + bias[k], 0).
void expect_direct_conv(const ScheduledProgram &prog, const Conv2dTcShape &sh,
                        bool bias_relu = false) {
  LoweredModule m = lower(prog.schedule, prog.args);
  const int N = sh.batch, H = sh.height, W = sh.width, C = sh.in_channels, K = sh.out_channels,
            R = sh.kernel, P = sh.out_height(), Q = sh.out_width();
  std::vector<double> x = dyadic_values(size_t(N) * H * W * C, 1);
  std::vector<double> w = dyadic_values(size_t(K) * R * R * C, 2);
  std::vector<double> bias = dyadic_values(size_t(K), 3);
  interp::HostBuffer bx = interp::HostBuffer::from_doubles(sh.in_dtype, x);
  interp::HostBuffer bw = interp::HostBuffer::from_doubles(sh.in_dtype, w);
  interp::HostBuffer bb = interp::HostBuffer::from_doubles(sh.in_dtype, bias);
  interp::HostBuffer by = interp::HostBuffer::from_doubles(
      sh.out_dtype, std::vector<double>(size_t(N) * P * Q * K, NAN));
  ASSERT_EQ(prog.args.size(), bias_relu ? 4u : 3u);
  if (bias_relu)
    interp::execute(m, {&bx, &bw, &bb, &by});
  else
    interp::execute(m, {&bx, &bw, &by});
  std::vector<double> y = by.to_doubles();
  // The exact sum rounded once to y's type (float16 / bfloat16 y; float32 keeps it).
  auto rounded = [&](double v) {
    return interp::HostBuffer::from_doubles(sh.out_dtype, {v}).to_doubles()[0];
  };
  for (int n = 0; n < N; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q)
        for (int k = 0; k < K; ++k) {
          double ref = 0;
          for (int r = 0; r < R; ++r)
            for (int s = 0; s < R; ++s) {
              int h = p * sh.stride + r * sh.dilation - sh.pad,
                  ww = q * sh.stride + s * sh.dilation - sh.pad;
              if (h < 0 || h >= H || ww < 0 || ww >= W)
                continue;
              for (int c = 0; c < C; ++c)
                ref += x[((size_t(n) * H + h) * W + ww) * C + c] *
                       w[((size_t(k) * R + r) * R + s) * C + c];
            }
          if (bias_relu)
            ref = std::max(ref + bias[size_t(k)], 0.0);
          ASSERT_EQ(y[((size_t(n) * P + p) * Q + q) * K + k], rounded(ref))
              << "y[" << n << ", " << p << ", " << q << ", " << k << "]";
        }
}

Conv2dTcShape small_shape() {
  return {.batch = 2, .height = 8, .width = 8, .in_channels = 32, .out_channels = 32,
          .kernel = 3, .pad = 1};
}

} // namespace

TEST(Conv2dTc, CpuExecutorMatchesDirectConvolution) {
  Conv2dTcShape sh = small_shape(); // M = 128, 3x3 pad 1: the borders read the padding
  expect_direct_conv(conv2d_tc(sh), sh);
  // 1x1 without padding, 9 fragments of output pixels, C = K = 48 (three 16-wide steps).
  Conv2dTcShape one{.batch = 1, .height = 12, .width = 12, .in_channels = 48,
                    .out_channels = 48, .kernel = 1, .pad = 0};
  expect_direct_conv(conv2d_tc(one), one);
  // 3x3 without padding (the output shrinks to 4x4), and 5x5 with pad 2 on a non-square count
  // of pixels.
  Conv2dTcShape valid{.batch = 3, .height = 6, .width = 6, .in_channels = 16,
                      .out_channels = 32, .kernel = 3, .pad = 0};
  expect_direct_conv(conv2d_tc(valid), valid);
  Conv2dTcShape five{.batch = 1, .height = 4, .width = 12, .in_channels = 16,
                     .out_channels = 16, .kernel = 5, .pad = 2};
  expect_direct_conv(conv2d_tc(five), five);
}

// Strides, dilations and padding that differs above / below (ResNet's downsampling convs,
// dilated convs, TensorFlow's "same" padding): the im2col view's indices, on the WMMA path and
// the wgmma path, its tiles filled by TMA's im2col copies (a walk a stride apart over the first
// tap's pixels, the taps dilated offsets) and by cp.async.
TEST(Conv2dTc, StrideDilationAndAsymmetricPadding) {
  const Conv2dTcShape shapes[] = {
      {.batch = 4, .height = 9, .width = 9, .in_channels = 32, .out_channels = 32, .kernel = 3,
       .pad = 1, .stride = 2},
      {.batch = 2, .height = 10, .width = 10, .in_channels = 32, .out_channels = 32,
       .kernel = 3, .pad = 2, .dilation = 2},
      {.batch = 4, .height = 8, .width = 8, .in_channels = 32, .out_channels = 32, .kernel = 3,
       .pad = 0, .stride = 2, .pad_end = 1},
      {.batch = 16, .height = 7, .width = 7, .in_channels = 32, .out_channels = 32, .kernel = 1,
       .pad = 0, .stride = 2}};
  for (const Conv2dTcShape &sh : shapes) {
    SCOPED_TRACE("stride " + std::to_string(sh.stride) + " dilation " +
                 std::to_string(sh.dilation) + " pad " + std::to_string(sh.pad) + "/" +
                 std::to_string(sh.pad_after()));
    if (sh.gemm_m() % 16 == 0)
      expect_direct_conv(conv2d_tc(sh, conv2d_tc_tiles(sh)), sh);
    Conv2dTcShape wide = sh;
    wide.in_channels = wide.out_channels = 64;
    GemmWgmmaTiles t = conv2d_wgmma_tiles(wide);
    EXPECT_TRUE(t.tma);
    expect_direct_conv(conv2d_wgmma(wide, t), wide);
    t.tma = false;
    t.raster_group = 0;
    expect_direct_conv(conv2d_wgmma(wide, t), wide);
  }
  // The stride is TMA's traversal step, the corners bound the first tap's walk.
  Conv2dTcShape down{.batch = 4, .height = 9, .width = 9, .in_channels = 64, .out_channels = 64,
                     .kernel = 3, .pad = 1, .stride = 2, .dilation = 2, .pad_end = 2};
  ScheduledProgram p = conv2d_wgmma(down);
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(m.funcs[0].tensor_maps.size(), 2u);
  const TensorMapParam &x_map = m.funcs[0].tensor_maps[0];
  EXPECT_TRUE(x_map.im2col);
  EXPECT_EQ(x_map.traversal, (std::vector<int64_t>{1, 2, 2, 1}));
  EXPECT_EQ(x_map.lower_corner, (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(x_map.upper_corner, (std::vector<int64_t>{2 - 2 * 2, 2 - 2 * 2}));
  EXPECT_EQ(Conv2dTcShape({.height = 56, .width = 56, .kernel = 3, .pad = 1, .stride = 2})
                .out_height(),
            28);
  Conv2dTcShape strided{.batch = 4, .height = 40, .width = 40, .in_channels = 64,
                        .out_channels = 64, .kernel = 1, .pad = 0, .stride = 9};
  EXPECT_FALSE(conv2d_wgmma_tiles(strided).tma);
  GemmWgmmaTiles tma = conv2d_wgmma_tiles(strided);
  tma.tma = true;
  expect_error([&] { conv2d_wgmma(strided, tma); },
               {"conv2d_wgmma", "at most 8 pixels, got stride 9", "TMA=0"});
  expect_error([] { conv2d_tc({.kernel = 3, .stride = 0}); }, {"stride=0", "must be positive"});
  expect_error([] { conv2d_tc({.height = 4, .width = 4, .kernel = 3, .pad = 0, .dilation = 3}); },
               {"dilated to 7", "larger than the padded 4x4"});
}

TEST(Conv2dTc, ExplicitTilesSingleAndDoubleBuffered) {
  Conv2dTcShape sh = small_shape();
  for (int stages : {1, 2}) {
    SCOPED_TRACE(stages);
    Conv2dTcTiles t{.block_row_warps = 2, .block_col_warps = 1, .warp_row_tiles = 2,
                    .warp_col_tiles = 2, .chunk = 1, .stages = stages};
    expect_direct_conv(conv2d_tc(sh, t), sh);
  }
  // One warp per block, the K step covering all 32 channels of a tap.
  Conv2dTcTiles one_warp{.block_row_warps = 1, .block_col_warps = 1, .warp_row_tiles = 1,
                         .warp_col_tiles = 2, .chunk = 2, .stages = 2};
  expect_direct_conv(conv2d_tc(sh, one_warp), sh);
}

// The float64 reference of the compute definition, on random (not dyadic) inputs, as `tessel
// interpret` checks it.
TEST(Conv2dTc, CpuExecutorMatchesReferenceOfDefinition) {
  for (Conv2dTcShape sh : {small_shape(), Conv2dTcShape{.batch = 1, .height = 12, .width = 12,
                                                         .in_channels = 16, .out_channels = 48,
                                                         .kernel = 1, .pad = 0}}) {
    ScheduledProgram p = conv2d_tc(sh);
    CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs);
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}

TEST(Conv2dTc, TilesFollowTheShape) {
  // The seed conv is measured: 128 x 256 blocks, 64 channels per step, double-buffered.
  Conv2dTcTiles seed = conv2d_tc_tiles({});
  EXPECT_EQ(seed.block_m(), 128);
  EXPECT_EQ(seed.block_n(), 256);
  EXPECT_EQ(seed.block_k(), 64);
  EXPECT_EQ(seed.stages, 2);
  // Half its batch is not: the default tiles, which divide it.
  Conv2dTcTiles half = conv2d_tc_tiles({.batch = 128});
  EXPECT_EQ(half.block_m(), 128);
  EXPECT_EQ(half.block_n(), 128);
  EXPECT_EQ(half.block_k(), 32);
  EXPECT_EQ(half.stages, 2);
  // 144 output pixels: no 128 block; 48 channels: 16-wide steps.
  Conv2dTcTiles odd = conv2d_tc_tiles({.batch = 1, .height = 12, .width = 12, .in_channels = 48,
                                       .out_channels = 48, .kernel = 1, .pad = 0});
  EXPECT_EQ(144 % odd.block_m(), 0);
  EXPECT_EQ(48 % odd.block_n(), 0);
  EXPECT_EQ(odd.block_k(), 16);
  // One K step in all (1x1, 16 channels): nothing to double-buffer.
  EXPECT_EQ(conv2d_tc_tiles({.batch = 1, .height = 4, .width = 4, .in_channels = 16,
                             .out_channels = 16, .kernel = 1, .pad = 0})
                .stages,
            1);
}

// Every entry of the table of measured tiles passes conv2d_tc's own checks at its shape, is what
// conv2d_tc_tiles returns there, and lowers to a kernel with the shared tiles it implies (taken
// dynamically beyond 48 KiB) and to CUDA with WMMA calls.
TEST(Conv2dTc, MeasuredTilesAreLegalAndLowerAtTheirShapes) {
  ASSERT_FALSE(conv2d_tc_measured().empty());
  for (const Conv2dTcMeasured &m : conv2d_tc_measured()) {
    const Conv2dTcShape &sh = m.shape;
    const Conv2dTcTiles &t = m.tiles;
    SCOPED_TRACE("N=" + std::to_string(sh.batch) + " " + std::to_string(sh.height) + "x" +
                 std::to_string(sh.width) + " " + std::to_string(sh.in_channels) + "->" +
                 std::to_string(sh.out_channels) + " R=" + std::to_string(sh.kernel) +
                 " pad=" + std::to_string(sh.pad));
    EXPECT_TRUE(t.tensorize);
    EXPECT_EQ(sh.gemm_m() % t.block_m(), 0);
    EXPECT_EQ(sh.gemm_n() % t.block_n(), 0);
    EXPECT_EQ(sh.in_channels % t.block_k(), 0) << "a K step stays within one filter tap";
    Conv2dTcTiles chosen = conv2d_tc_tiles(sh);
    EXPECT_EQ(std::tuple(chosen.block_row_warps, chosen.block_col_warps, chosen.warp_row_tiles,
                         chosen.warp_col_tiles, chosen.chunk, chosen.stages),
              std::tuple(t.block_row_warps, t.block_col_warps, t.warp_row_tiles,
                         t.warp_col_tiles, t.chunk, t.stages));

    ScheduledProgram p = conv2d_tc(sh, t); // conv2d_tc's tile checks, then the schedule
    LoweredModule lowered = lower(p.schedule, p.args);
    ASSERT_EQ(lowered.funcs.size(), 1u);
    const LoweredFunc &f = lowered.funcs[0];
    // The tiles of A (pixels x rk) and of w (channels x rk), `stages` of each, in rows of
    // block_k halves (a multiple of 16) padded by storage_align to 8 mod 16.
    int64_t row = t.block_k() + 8;
    int64_t shared = int64_t(t.stages) * (t.block_m() + t.block_n()) * row * 2;
    EXPECT_EQ(cuda_shared_memory_bytes(f), shared);
    EXPECT_LE(shared, 227 * 1024);
    EXPECT_EQ(f.launch.dynamic_shared_bytes, shared > 48 * 1024 ? shared : 0);
    EXPECT_NE(codegen_cuda(lowered).find("nvcuda::wmma::mma_sync("), std::string::npos);
  }
}

// Fragments only through WMMA calls; x and w read into shared memory with 8-lane (16-byte)
// vectors; the padding is a branch around the vector copy, not a choice per lane. The seed
// shape with the default tiles (its measured ones are above).
TEST(Conv2dTc, LoweredIrUsesWmmaAndVectorLoads) {
  ScheduledProgram p = conv2d_tc({}, Conv2dTcTiles{});
  std::string ir = to_string(lower(p.schedule, p.args));
  for (const char *call :
       {"@wmma_fill_fragment(y.wmma.accumulator", "@wmma_load_matrix_sync(A.shared.wmma.matrix_a",
        "@wmma_load_matrix_sync(B, ", "\"col_major\")", "@wmma_mma_sync(y.wmma.accumulator",
        "@wmma_store_matrix_sync(y.wmma.accumulator"})
    EXPECT_NE(ir.find(call), std::string::npos) << call << "\n" << ir;
  for (const char *scalar : {".wmma.matrix_a[", "B[", ".wmma.accumulator["})
    EXPECT_EQ(ir.find(scalar), std::string::npos) << scalar << "\n" << ir;
  // 128 x 32 tiles of A (pixels x rk) and of w (channels x rk), rows padded to 40 halves;
  // each double-buffered.
  EXPECT_NE(ir.find("allocate(A.shared, float16, [10240])"), std::string::npos) << ir;
  EXPECT_NE(ir.find("allocate(Wv.shared, float16, [10240])"), std::string::npos) << ir;
  // 16-byte asynchronous copies (the tiles are double-buffered): x into A.shared (in the
  // padding branch), w into Wv.shared; and the vector zero store of the padding.
  EXPECT_NE(ir.find("@cp_async(@address_of(A.shared["), std::string::npos) << ir;
  EXPECT_NE(ir.find("@address_of(x["), std::string::npos) << ir;
  EXPECT_NE(ir.find("@cp_async(@address_of(Wv.shared["), std::string::npos) << ir;
  EXPECT_NE(ir.find("@address_of(w["), std::string::npos) << ir;
  EXPECT_NE(ir.find(", 16, true)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("} else {"), std::string::npos) << ir;
  EXPECT_NE(ir.find("] = broadcast(0f16, 8)"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("if_then_else"), std::string::npos) << ir;
  EXPECT_NE(ir.find("// grid (4, 392, 1), block (32, 2, 4)"), std::string::npos) << ir;

  // Without padding there is nothing to branch on.
  ScheduledProgram q = conv2d_tc({.batch = 1, .height = 16, .width = 16, .in_channels = 64,
                                  .out_channels = 64, .kernel = 1, .pad = 0});
  std::string valid = to_string(lower(q.schedule, q.args));
  EXPECT_EQ(valid.find("broadcast(0f16, 8)"), std::string::npos) << valid;
  EXPECT_EQ(valid.find("} else {"), std::string::npos) << valid;
  EXPECT_NE(valid.find("@address_of(x["), std::string::npos) << valid;
}

TEST(Conv2dTc, CudaSourceAndNvrtcForSm80AndSm90) {
  ScheduledProgram p = conv2d_tc({});
  std::string src = codegen_cuda(lower(p.schedule, p.args));
  for (const char *text :
       {"nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::col_major>",
        "nvcuda::wmma::mma_sync(", "tessel_cp_async<16>(&A_shared[", "], &x[",
        "tessel_cp_async<16>(&Wv_shared[", "], &w[", "tessel_cp_async_wait<0>();",
        "__launch_bounds__(256)"})
    EXPECT_NE(src.find(text), std::string::npos) << text << "\n" << src;
  if (!tessel::test::compiles_for_sm80_and_sm90(src, "conv2d_tc",
                                                {"HMMA", "LDGSTS.E.BYPASS.128"}))
    GTEST_SKIP() << tessel::test::kNoCuobjdump;
}

// Output pixels that are not whole fragments or blocks: the last block of rows shifts inwards
// to end at the edge (batch 1 at 7x7 and 5x5, 72 pixels in blocks of 64 and of 48), exact on the
// executor against the direct convolution, and the tiles chosen for such shapes fit them.
TEST(Conv2dTc, RaggedPixelsShiftTheLastBlock) {
  for (Conv2dTcShape sh : {Conv2dTcShape{.batch = 1, .height = 7, .width = 7, .in_channels = 32,
                                         .out_channels = 32},
                           Conv2dTcShape{.batch = 1, .height = 5, .width = 5, .in_channels = 16,
                                         .out_channels = 16},
                           Conv2dTcShape{.batch = 2, .height = 6, .width = 6, .in_channels = 32,
                                         .out_channels = 64, .kernel = 3, .pad = 1}}) {
    SCOPED_TRACE(std::to_string(sh.gemm_m()) + " pixels");
    Conv2dTcTiles t = conv2d_tc_tiles(sh);
    EXPECT_LE(t.block_m(), sh.gemm_m());
    expect_direct_conv(conv2d_tc(sh, t), sh);
  }
  Conv2dTcShape sh{.batch = 2, .height = 6, .width = 6, .in_channels = 32, .out_channels = 64};
  expect_direct_conv(conv2d_tc(sh, {.block_row_warps = 1, .block_col_warps = 2,
                                    .warp_row_tiles = 4, .warp_col_tiles = 2, .chunk = 1}),
                     sh); // 72 pixels in blocks of 64: the second starts at row 8
}

// y in float16 or bfloat16 off Hopper: mma.sync's register fragments (WMMA stores float32
// only), each value rounded once as it is stored; exact against the direct conv; sm_80 CUDA.
TEST(Conv2dTc, NarrowOutputOnMmaSync) {
  for (DataType y : {Float(16), BFloat(16)}) {
    SCOPED_TRACE(y.str());
    Conv2dTcShape sh{.batch = 1, .height = 7, .width = 7, .in_channels = 32, .out_channels = 32,
                     .stride = 1, .out_dtype = y, .in_dtype = y};
    ScheduledProgram p = conv2d_tc(sh, conv2d_tc_tiles(sh));
    expect_direct_conv(p, sh);
    std::string src = codegen_cuda(lower(p.schedule, p.args));
    EXPECT_NE(src.find("mma.sync.aligned.m16n8k16"), std::string::npos) << src;
    EXPECT_EQ(src.find("nvcuda::wmma"), std::string::npos) << src;
    CompileOptions o;
    o.arch = "sm_80";
    EXPECT_FALSE(nvrtc_compile(src, nvrtc_options(o), "conv2d_tc_y16.cu").cubin.empty());
  }
}

TEST(Conv2dTcErrors, ShapesTheTilesDoNotFit) {
  expect_error([] { conv2d_tc({.batch = 1, .height = 3, .width = 3, .in_channels = 32,
                               .out_channels = 32, .kernel = 3, .pad = 1}); },
               {"conv2d_tc", "N*P*Q=9 output pixels (N=1 x P=3 x Q=3)",
                "fill no 16-row Tensor Core fragment", "use a larger batch or image"});
  expect_error([] { conv2d_tc({.batch = 2, .height = 8, .width = 8, .in_channels = 24,
                               .out_channels = 32}); },
               {"C=24 must be a multiple of 16", "within one filter tap", "pad it to 32"});
  expect_error([] { conv2d_tc({.batch = 2, .height = 8, .width = 8, .in_channels = 32,
                               .out_channels = 40}); },
               {"K=40 must be a multiple of 16", "output channels"});
  expect_error([] { conv2d_tc({.batch = 1, .height = 2, .width = 2, .kernel = 5, .pad = 0}); },
               {"5x5 filter is larger than the padded 2x2 input"});
  // Explicit tiles that do not divide: the messages name the convolution's dimensions.
  Conv2dTcShape sh = small_shape();
  sh.batch = 1; // 64 pixels
  expect_error([&] { conv2d_tc(sh, Conv2dTcTiles{}); },
               {"N*P*Q=64 is less than one block of 128 (the block tile: 2 warps x 4 fragments "
                "x 16; the last block shifts inwards, so it must fit); use smaller tiles"});
  Conv2dTcShape narrow{.batch = 2, .height = 8, .width = 8, .in_channels = 48,
                       .out_channels = 128};
  expect_error([&] { conv2d_tc(narrow, Conv2dTcTiles{}); },
               {"C=48 must be a multiple of 32 (the K step: chunk 2 x 16)"});
  expect_error([&] { conv2d_tc(small_shape(), Conv2dTcTiles{.block_row_warps = 1,
                                                            .block_col_warps = 1,
                                                            .warp_row_tiles = 1,
                                                            .warp_col_tiles = 1, .stages = 9}); },
               {"stages=9 is not supported", "use 1", "2 to 8"});
  // Through the registry, as `tessel --shape` gives them.
  const ScheduleEntry &e = find_schedule("conv2d_tc");
  expect_error([&] { e.build(resolve_shape(e, {{"C", 20}}), Float(16)); },
               {"C=20 must be a multiple of 16"});
  expect_error([&] { resolve_shape(e, {{"pad", -1}}); },
               {"shape parameter pad must be from 0 to 2147483647", "got -1"});
  expect_error([&] { resolve_shape(e, {{"R", 0}}); },
               {"shape parameter R must be from 1 to 2147483647", "got 0"});
  EXPECT_EQ(resolve_shape(e, {{"pad", 0}}).at("pad"), 0);
}

// The Hopper path: the same arrays through wgmma, swizzled (C, K multiples of 64) and not.
TEST(Conv2dWgmma, CpuExecutorMatchesDirectConvolution) {
  Conv2dTcShape sh{.batch = 2, .height = 8, .width = 8, .in_channels = 64, .out_channels = 64,
                   .kernel = 3, .pad = 1};
  EXPECT_EQ(conv2d_wgmma_tiles(sh).swizzle, 128);
  expect_direct_conv(conv2d_wgmma(sh), sh);
  Conv2dTcShape narrow = small_shape(); // C = K = 32: the no-swizzle layout, K step 32
  EXPECT_EQ(conv2d_wgmma_tiles(narrow).swizzle, 0);
  expect_direct_conv(conv2d_wgmma(narrow), narrow);
  Conv2dTcShape one{.batch = 1, .height = 8, .width = 16, .in_channels = 128,
                    .out_channels = 128, .kernel = 1, .pad = 0};
  expect_direct_conv(conv2d_wgmma(one, {.block_m = 128, .block_n = 128, .block_k = 64,
                                        .warpgroups_m = 2, .stages = 3}),
                     one);
  // TMA: the input tile by im2col copies (64-row tiles crossing image rows and images), the
  // filter tile by 4-D boxes of w, at 2 and 4 stages and with a 1x1 filter.
  EXPECT_TRUE(conv2d_wgmma_tiles(sh).tma);
  Conv2dTcShape crossing{.batch = 4, .height = 12, .width = 12, .in_channels = 64,
                         .out_channels = 64, .kernel = 3, .pad = 1};
  for (int stages : {2, 4}) {
    SCOPED_TRACE("stages " + std::to_string(stages));
    expect_direct_conv(conv2d_wgmma(crossing, {.block_m = 64, .block_n = 64, .block_k = 64,
                                               .warpgroups_m = 1, .stages = stages,
                                               .tma = true}),
                       crossing);
  }
  expect_direct_conv(conv2d_wgmma(one, {.block_m = 128, .block_n = 128, .block_k = 64,
                                        .warpgroups_m = 2, .stages = 3, .tma = true}),
                     one);
  // Batch 1: N*P*Q = 196 output pixels, not a multiple of the 128-row block (nor of 16): the
  // last block shifts inwards; TMA's im2col boxes and the filter boxes stay whole.
  Conv2dTcShape batch1{.batch = 1, .height = 14, .width = 14, .in_channels = 64,
                       .out_channels = 64, .kernel = 3, .pad = 1};
  EXPECT_TRUE(conv2d_wgmma_tiles(batch1).tma);
  expect_direct_conv(conv2d_wgmma(batch1), batch1);
  expect_error([] { conv2d_wgmma({.batch = 1, .height = 5, .width = 5}); },
               {"conv2d_wgmma: 25x512x256 has no wgmma tiling", "M must be at least 64"});
  // The WMMA path takes those 25 pixels (in blocks of 16, the second shifted by 9 rows).
  Conv2dTcShape five{.batch = 1, .height = 5, .width = 5, .in_channels = 32, .out_channels = 32};
  expect_direct_conv(conv2d_tc(five, conv2d_tc_tiles(five)), five);
}

// y in float16 or bfloat16, as cuDNN's fp16 convolutions write it: the float32 sum stays in the
// accumulators and each value is rounded once as it is stored (a pair per 32-bit store).
// Persistent (the default at 1 to 8 waves of 132 blocks; here on 3 blocks): the blocks walk
// the output tiles, the TMA ring (im2col copies of x, boxes of w) running across them with warp
// roles; a stride-2 conv too. The default tiles of the seed conv at batch 256 are persistent.
TEST(Conv2dWgmma, PersistentMatchesDirectConvolution) {
  Conv2dTcShape sh{.batch = 4, .height = 8, .width = 8, .in_channels = 128, .out_channels = 128,
                   .kernel = 3, .pad = 1};
  GemmWgmmaTiles t{.block_m = 64, .block_n = 64, .block_k = 64, .warpgroups_m = 1,
                   .stages = 3, .tma = true, .warp_specialized = true, .persistent = true,
                   .persistent_blocks = 3};
  expect_direct_conv(conv2d_wgmma(sh, t), sh);
  Conv2dTcShape strided{.batch = 4, .height = 16, .width = 16, .in_channels = 64,
                        .out_channels = 128, .kernel = 3, .pad = 1, .stride = 2};
  expect_direct_conv(conv2d_wgmma(strided, t), strided);
  Conv2dTcShape seed{.batch = 256, .height = 14, .width = 14, .in_channels = 256,
                     .out_channels = 512, .kernel = 3, .pad = 1};
  EXPECT_TRUE(conv2d_wgmma_tiles(seed).persistent);
  EXPECT_FALSE(conv2d_wgmma_tiles(Conv2dTcShape{.batch = 8, .height = 14, .width = 14,
                                                .in_channels = 256, .out_channels = 512,
                                                .kernel = 3, .pad = 1})
                   .persistent); // 100 blocks: under a wave
}

// Ping-pong consumers (the default for persistent blocks 128 wide; knob PP): two warpgroups
// take the tiles of a persistent conv in turn, each a whole 128 x 128 tile, here 8 tiles over
// 3 blocks, stride 1 and 2 (a ring of 6 there), y in float16. ResNet's res5 and the stride-2
// conv at batch 256 get them by default (the strided one with a ring of 6), the seed conv
// (128 x 256 blocks) and batch 8 (not persistent) do not; the registry's PP=2 and explicit
// tiles keep cooperative warpgroups.
TEST(Conv2dWgmma, PingPongMatchesDirectConvolution) {
  GemmWgmmaTiles t{.block_m = 128, .block_n = 128, .block_k = 64, .warpgroups_m = 1,
                   .stages = 4, .tma = true, .warp_specialized = true, .persistent = true,
                   .persistent_blocks = 3, .ping_pong = true};
  for (int stride : {1, 2}) {
    Conv2dTcShape sh{.batch = 4, .height = 16 * stride, .width = 16 * stride, .in_channels = 64,
                     .out_channels = 128, .kernel = 3, .pad = 1, .stride = stride,
                     .out_dtype = Float(16)};
    SCOPED_TRACE("stride " + std::to_string(stride));
    GemmWgmmaTiles ring = t;
    ring.stages = stride == 2 ? 6 : 4; // strided: the default's deeper ring
    expect_direct_conv(conv2d_wgmma(sh, ring), sh);
  }
  auto tiles = [](int n, int hw, int c, int k, int stride) {
    return conv2d_wgmma_tiles(Conv2dTcShape{.batch = n, .height = hw, .width = hw,
                                            .in_channels = c, .out_channels = k, .kernel = 3,
                                            .pad = 1, .stride = stride});
  };
  GemmWgmmaTiles res5 = tiles(256, 7, 512, 512, 1), strided = tiles(256, 56, 128, 128, 2);
  for (const GemmWgmmaTiles &d : {res5, strided}) {
    EXPECT_TRUE(d.ping_pong && d.persistent);
    EXPECT_EQ(d.block_m, 128);
    EXPECT_EQ(d.block_n, 128);
    EXPECT_EQ(d.warpgroups_m, 1);
  }
  EXPECT_EQ(strided.stages, 6); // x from DRAM more: a deeper ring
  EXPECT_LT(res5.stages, 6);
  EXPECT_FALSE(tiles(256, 14, 256, 512, 1).ping_pong); // the seed conv: 128 x 256
  EXPECT_FALSE(tiles(8, 14, 256, 512, 1).ping_pong);   // under a wave
  const ScheduleEntry &e = find_schedule("conv2d_wgmma");
  auto ping_pong = [&](ShapeParams knobs) {
    for (auto [k, v] : ShapeParams{{"N", 256}, {"H", 7}, {"W", 7}, {"C", 512}, {"K", 512}})
      knobs[k] = v;
    ScheduledProgram prog = e.build(resolve_shape(e, knobs), Float(16));
    std::ostringstream os;
    os << lower(prog.schedule, prog.args).funcs.back().body;
    return os.str().find("named_barrier_sync") != std::string::npos; // the turns
  };
  EXPECT_TRUE(ping_pong({}));
  EXPECT_TRUE(ping_pong({{"PP", 1}}));
  EXPECT_FALSE(ping_pong({{"PP", 2}}));
  EXPECT_FALSE(ping_pong({{"BM", 128}, {"BN", 128}}));
  EXPECT_FALSE(ping_pong({{"P", 2}}));
}

// Clustered conv tiles (CL=1): ping-pong persistent blocks on 4 blocks, cooperative ones.
namespace {
std::vector<GemmWgmmaTiles> clustered_conv_tiles() {
  GemmWgmmaTiles pp{.block_m = 128, .block_n = 128, .block_k = 64, .warpgroups_m = 1,
                    .stages = 4, .tma = true, .warp_specialized = true, .persistent = true,
                    .persistent_blocks = 4, .ping_pong = true, .cluster = 1};
  GemmWgmmaTiles coop{.block_m = 128, .block_n = 128, .block_k = 64, .warpgroups_m = 1,
                      .stages = 4, .tma = true, .warp_specialized = true, .cluster = 1};
  return {pp, coop};
}
} // namespace

// Clusters of 2 blocks along M (knob CL=1) share the filter's tile, each block multicasting
// half of its box: ping-pong persistent blocks (8 tiles over 2 clusters) and cooperative ones
// (not persistent), stride 2, y in float16. Along N (CL=2) is refused: x's im2col tile
// cannot be multicast.
TEST(Conv2dWgmma, ClustersShareTheFilterTile) {
  Conv2dTcShape sh{.batch = 4, .height = 32, .width = 32, .in_channels = 64,
                   .out_channels = 128, .kernel = 3, .pad = 1, .stride = 2,
                   .out_dtype = Float(16)};
  for (const GemmWgmmaTiles &t : clustered_conv_tiles()) {
    SCOPED_TRACE(t.ping_pong ? "ping-pong" : "cooperative");
    ScheduledProgram prog = conv2d_wgmma(sh, t);
    std::ostringstream os;
    os << lower(prog.schedule, prog.args).funcs.back().body;
    EXPECT_NE(os.str().find("multicast"), std::string::npos);
    expect_direct_conv(prog, sh);
  }
  GemmWgmmaTiles along_n = clustered_conv_tiles()[1];
  along_n.cluster = 2;
  expect_error([&] { conv2d_wgmma(sh, along_n); },
               {"conv2d_wgmma", "CL=2", "im2col", "use CL=1"});
  const ScheduleEntry &e = find_schedule("conv2d_wgmma");
  expect_error([&] { resolve_shape(e, {{"CL", 2}}); }, {"CL", "must be one of 0, 1"});
}

TEST(Conv2dWgmma, NarrowOutputRoundsTheSum) {
  Conv2dTcShape sh{.batch = 2, .height = 8, .width = 8, .in_channels = 64, .out_channels = 64,
                   .kernel = 3, .pad = 1, .out_dtype = Float(16)};
  ScheduledProgram p = conv2d_wgmma(sh);
  EXPECT_EQ(p.args.back().dtype(), Float(16));
  expect_direct_conv(p, sh);
  // Against the float64 reference of the definition, on random (not dyadic) data.
  CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs);
  EXPECT_TRUE(r.compare.ok) << r.str();
  Conv2dTcShape bf = sh; // bfloat16 in and out
  bf.out_dtype = BFloat(16);
  bf.in_dtype = BFloat(16);
  expect_direct_conv(conv2d_wgmma(bf, {.block_m = 64, .block_n = 64, .block_k = 64,
                                       .warpgroups_m = 1, .stages = 2, .tma = true}),
                     bf);
  // Each lane stores 4 consecutive halves (lanes 4) after one exchange within its quad, so a
  // warp's store covers whole 32-byte sectors.
  LoweredModule m = lower(p.schedule, p.args);
  std::string ir = to_string(m);
  EXPECT_NE(ir.find("@wgmma_store(y_acc, 0, 64, address_of(y["), std::string::npos) << ir;
  EXPECT_NE(ir.find("]), 64, 4)"), std::string::npos) << ir;
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("__floats2half2_rn("), std::string::npos) << src;
  EXPECT_NE(src.find("__shfl_xor_sync(0xffffffffu, send, 1)"), std::string::npos) << src;
  CompiledKernel k = tessel::test::compile_for_sm90(m, src, "conv2d_wgmma_y16.cu");
  ASSERT_FALSE(k.cubin.empty());
  EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
  if (std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "conv2d_wgmma_y16")) {
    EXPECT_NE(sass->find("SHFL.BFLY"), std::string::npos) << *sass;
    EXPECT_NE(sass->find("STG.E.64"), std::string::npos) << *sass;
    EXPECT_EQ(sass->find("STG.E "), std::string::npos) << *sass; // no 4-byte stores
  }

  // Off Hopper: a narrow y on mma.sync's fragments (WMMA stores float32 only), bfloat16 x and w
  // with a float32 y on WMMA.
  expect_direct_conv(conv2d_tc(sh, conv2d_tc_tiles(sh)), sh);
  expect_direct_conv(conv2d_tc(bf, conv2d_tc_tiles(bf)), bf);
  Conv2dTcShape bf_in = bf;
  bf_in.out_dtype = Float(32);
  expect_direct_conv(conv2d_tc(bf_in, conv2d_tc_tiles(bf_in)), bf_in);
  Conv2dTcShape bad = sh;
  bad.out_dtype = Int(32);
  expect_error([&] { conv2d_wgmma(bad); }, {"y's type must be float32, float16 or bfloat16"});
  // The registry's knob: 0 or 1.
  const ScheduleEntry &entry = find_schedule("conv2d_wgmma");
  expect_error([&] { entry.build(resolve_shape(entry, {{"Y16", 2}}), Float(16)); },
               {"Y16 of schedule 'conv2d_wgmma' must be one of 0, 1, got 2"});
  const ScheduleEntry &tc = find_schedule("conv2d_tc");
  expect_error([&] { tc.build(resolve_shape(tc, {{"Y16", 2}}), Float(16)); },
               {"Y16 of schedule 'conv2d_tc' must be one of 0, 1, got 2"});
}

// conv + bias + ReLU in one kernel: the bias and ReLU applied to the accumulators in registers
// (wgmma_reg / wgmma_reg_set), then the float16 store; exact on dyadic data, and against the
// float64 reference on random data.
TEST(Conv2dWgmma, FusedBiasRelu) {
  Conv2dTcShape sh{.batch = 2, .height = 8, .width = 8, .in_channels = 64, .out_channels = 64,
                   .kernel = 3, .pad = 1, .out_dtype = Float(16)};
  ScheduledProgram p = conv2d_bias_relu(sh);
  expect_direct_conv(p, sh, true);
  CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs);
  EXPECT_TRUE(r.compare.ok) << r.str();
  Conv2dTcShape f32 = sh; // float32 y, pairs of floats; 2 stages of 64 x 64 tiles, 2 along K
  f32.out_dtype = Float(32);
  f32.out_channels = 128;
  expect_direct_conv(conv2d_bias_relu(f32, {.block_m = 64, .block_n = 64, .block_k = 64,
                                            .warpgroups_m = 1, .stages = 2, .tma = true}),
                     f32, true);

  LoweredModule m = lower(p.schedule, p.args);
  std::string ir = to_string(m);
  // Each column's bias is loaded once for the thread's two rows of it (registers 0 and 2).
  // (In the consumers' branch of the warp roles.)
  EXPECT_NE(ir.find("let v0: float16 = bias[floormod(wgmma_thread_id(), 4) * 2]\n"
                    "    @wgmma_reg_set(y_acc, 0, 64, 0, max(@wgmma_reg(y_acc, 0, 64, 0) + "
                    "cast(float32, v0), 0f32))\n"
                    "    @wgmma_reg_set(y_acc, 0, 64, 2, "),
            std::string::npos)
      << ir;
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("y_acc[0 + 0] = max(y_acc[0 + 0] + __half2float(v0), 0.0f);"),
            std::string::npos)
      << src;
  CompiledKernel k = tessel::test::compile_for_sm90(m, src, "conv2d_bias_relu.cu");
  ASSERT_FALSE(k.cubin.empty());
  // The epilogue indexes the accumulator array by constants: it stays in registers.
  EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
  if (std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "conv2d_bias_relu")) {
    EXPECT_EQ(sass->find("LDL"), std::string::npos) << *sass;
    EXPECT_EQ(sass->find("STL"), std::string::npos) << *sass;
  }
}

// On a GPU: a mid-size shape against the float64 reference, timed. Skipped without one.
TEST(Conv2dTcGpu, MidShapeMatchesReference) {
  if (!Device::available())
    GTEST_SKIP() << Device::unavailable_reason();
  for (Conv2dTcShape sh : {Conv2dTcShape{.batch = 32, .height = 14, .width = 14,
                                         .in_channels = 64, .out_channels = 128},
                           Conv2dTcShape{.batch = 16, .height = 7, .width = 7,
                                         .in_channels = 128, .out_channels = 64, .kernel = 1,
                                         .pad = 0},
                           // batch 1, bfloat16: 49 output pixels, the last block shifted
                           Conv2dTcShape{.batch = 1, .height = 7, .width = 7,
                                         .in_channels = 256, .out_channels = 256,
                                         .in_dtype = BFloat(16)},
                           // the seed conv at batch 1: split-K on the wgmma path
                           Conv2dTcShape{.batch = 1}}) {
    // conv2d_tc's own choice (wgmma on a Hopper GPU where it fits), then its WMMA path.
    for (bool wmma : {false, true}) {
      ScheduledProgram p = wmma ? conv2d_tc(sh, conv2d_tc_tiles(sh)) : conv2d_tc(sh);
      CheckResult r = check_on_gpu(p.schedule, p.args, p.num_inputs,
                                   TimeOptions{.number = 10, .repeat = 30});
      EXPECT_TRUE(r.compare.ok) << r.str();
      if (r.time)
        std::cout << "  " << (wmma ? "conv2d_tc (WMMA)" : "conv2d_tc") << " N=" << sh.batch << " "
                  << sh.height << "x" << sh.width << " " << sh.in_channels << "->"
                  << sh.out_channels << " " << sh.kernel << "x" << sh.kernel << ": "
                  << r.time->median_ms << " ms, " << sh.flops() / (r.time->median_ms * 1e9)
                  << " TFLOP/s\n";
    }
    // y float16, rounded from the sum as it is stored (wgmma: 64 output pixels or more).
    if (hopper_gpu() && sh.kernel == 3 && sh.gemm_m() >= 64) {
      Conv2dTcShape y16 = sh;
      y16.out_dtype = Float(16);
      for (bool fused : {false, true}) {
        ScheduledProgram p = fused ? conv2d_bias_relu(y16) : conv2d_wgmma(y16);
        CheckResult r = check_on_gpu(p.schedule, p.args, p.num_inputs);
        EXPECT_TRUE(r.compare.ok) << (fused ? "bias + ReLU, " : "") << "y float16: " << r.str();
      }
    }
  }
}

// On a Hopper GPU: the clustered convs of Conv2dWgmma.ClustersShareTheFilterTile, stride 1 and
// 2, against float64.
TEST(Conv2dTcGpu, ClustersMatchReference) {
  if (!Device::available())
    GTEST_SKIP() << Device::unavailable_reason();
  if (!hopper_gpu())
    GTEST_SKIP() << "clusters with wgmma need a Hopper GPU";
  for (int stride : {1, 2}) {
    Conv2dTcShape sh{.batch = 4, .height = 16 * stride, .width = 16 * stride, .in_channels = 64,
                     .out_channels = 128, .kernel = 3, .pad = 1, .stride = stride,
                     .out_dtype = Float(16)};
    for (const GemmWgmmaTiles &t : clustered_conv_tiles()) {
      ScheduledProgram p = conv2d_wgmma(sh, t);
      CheckResult r = check_on_gpu(p.schedule, p.args, p.num_inputs);
      EXPECT_TRUE(r.compare.ok) << "stride " << stride << (t.ping_pong ? " ping-pong: " : ": ")
                                << r.str();
    }
  }
}

// Grids under half a wave split the reduction into parts of whole filter taps (the seed conv
// at batch 1: 32 blocks of 64 x 64, in 3 parts of 3 taps), each part a block along z into a
// float32 workspace, the parts added in order by a second kernel, which also applies the
// epilogue and the cast. Exact against the direct conv with TMA or cp.async fills, float32 or
// float16 y, with bias + ReLU; parts that split a tap are refused.
TEST(Conv2dWgmma, SplitKForSmallGrids) {
  Conv2dTcShape seed1{.batch = 1};
  EXPECT_EQ(conv2d_wgmma_tiles(seed1).split_k, 3);
  EXPECT_EQ(conv2d_wgmma_tiles(Conv2dTcShape{.batch = 8}).split_k, 1); // 100 blocks
  ScheduledProgram p = conv2d_wgmma(seed1);
  LoweredModule m = lower(p.schedule, p.args);
  ASSERT_EQ(m.funcs.size(), 2u);
  EXPECT_EQ(m.funcs[0].launch.grid, (std::array<int64_t, 3>{8, 4, 3}));
  EXPECT_EQ(m.funcs[0].arg_shapes.back(), (std::vector<int64_t>{3, 196, 512})); // y_part
  EXPECT_TRUE(m.funcs[1].launch.after_previous);

  Conv2dTcShape sh{.batch = 1, .height = 9, .width = 9, .in_channels = 64, .out_channels = 64,
                   .kernel = 3, .pad = 1};
  for (int parts : {3, 9})
    for (bool tma : {true, false})
      for (DataType y : {Float(32), Float(16)}) {
        SCOPED_TRACE("split_k " + std::to_string(parts) + (tma ? " tma " : " cp.async ") +
                     y.str());
        Conv2dTcShape s = sh;
        s.out_dtype = y;
        GemmWgmmaTiles t = conv2d_wgmma_tiles(s);
        t.split_k = parts;
        t.tma = tma;
        expect_direct_conv(conv2d_wgmma(s, t), s);
        if (y == Float(16))
          expect_direct_conv(conv2d_bias_relu(s, t), s, /*bias_relu=*/true);
      }
  GemmWgmmaTiles t = conv2d_wgmma_tiles(sh);
  t.split_k = 2;
  expect_error([&] { conv2d_wgmma(sh, t); },
               {"conv2d_tc", "split_k=2 must divide the 9 filter taps",
                "each part sums whole taps"});
}

// The TMA conv's lowered IR, CUDA and SASS: one im2col copy of x (start at the tile's first
// output pixel shifted by -pad, the filter tap as offsets) and one 4-D box of w per K step.
TEST(Conv2dWgmma, TmaIm2colCopies) {
  Conv2dTcShape sh{.batch = 256, .height = 14, .width = 14, .in_channels = 256,
                   .out_channels = 512, .kernel = 3, .pad = 1};
  ScheduledProgram p = conv2d_wgmma(sh);
  LoweredModule m = lower(p.schedule, p.args);
  const LoweredFunc &f = m.funcs[0];
  ASSERT_EQ(f.tensor_maps.size(), 2u);
  const TensorMapParam &x = f.tensor_maps[0], &w = f.tensor_maps[1];
  EXPECT_TRUE(x.im2col);
  EXPECT_EQ(x.dims, (std::vector<int64_t>{256, 14, 14, 256}));
  EXPECT_EQ(x.box, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(x.lower_corner, (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(x.upper_corner, (std::vector<int64_t>{-1, -1}));
  EXPECT_FALSE(w.im2col);
  EXPECT_EQ(w.dims, (std::vector<int64_t>{256, 3, 3, 512}));
  EXPECT_EQ(w.box, (std::vector<int64_t>{64, 1, 1, 256}));
  std::string ir = to_string(m);
  EXPECT_EQ(ir.find("cp_async"), std::string::npos) << ir;
  // Issued by the producer warpgroup, one K step (filter tap and 64 channels) at a time.
  EXPECT_NE(ir.find("@tma_load_im2col(x_tmap, @address_of(A.shared["), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("if (threadIdx.y == 2) {\n    @setmaxnreg(40, 0)"), std::string::npos) << ir;
  std::string src = codegen_cuda(m);
  EXPECT_NE(src.find("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::"
                     "complete_tx::bytes"),
            std::string::npos);
  CompiledKernel k = tessel::test::compile_for_sm90(m, src, "conv2d_wgmma_tma.cu");
  ASSERT_FALSE(k.cubin.empty());
  EXPECT_EQ(k.kernels.at(0).spill_store_bytes, 0) << k.log;
  std::optional<std::string> sass = tessel::test::sass_of(k.cubin, "conv2d_wgmma_tma");
  if (!sass)
    GTEST_SKIP() << "no cuobjdump to check the SASS";
  for (const char *op : {"UTMALDG.4D.IM2COL", "UTMALDG.4D", "HGMMA.64x256x16.F32"})
    EXPECT_NE(sass->find(op), std::string::npos) << op << ":\n" << sass->substr(0, 3000);
  EXPECT_EQ(sass->find("LDGSTS"), std::string::npos);
}
