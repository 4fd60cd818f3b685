// conv2d on Tensor Cores as an implicit GEMM, on cuDNN's NHWC layouts: no relayout of the
// inputs, fp16 or bf16 in, fp32 accumulate, fp32 out (or fp16 / bf16 on the wgmma path).
//
//   x: N x H x W x C, w: K x R x S x C (R == S), stride, dilation, zero padding `pad` above and
//   left and `pad_end` below and right; y: (N*P*Q) x K, the memory of N x P x Q x K (P, Q:
//   Conv2dTcShape::out_height / out_width). Any N*P*Q of at least one block: the last block of
//   output pixels shifts inwards to end at the edge.
//
// The output is computed as the GEMM y[m, k] = sum_rk A[m, rk] * B[rk, k] with m = (n, p, q)
// and rk = (r, s, c), C innermost: A is the im2col of x (zero where the filter hangs over the
// padding), B[rk, k] = w[k, r, s, c]. Both are views (inlined), so a row of 8 consecutive rk is
// 8 consecutive halves of x or of w, loaded as one 16-byte vector. The schedule is gemm_wmma's:
// block tiles of output pixels x output channels, warps on threadIdx.y / z, padded shared
// tiles, WMMA fragments (B "col_major": its shared tile is k x rk, rk contiguous).
//
//   ScheduledProgram p = conv2d_tc({});                        // the seed shape, measured tiles
//   ScheduledProgram q = conv2d_tc({.batch = 2, .height = 8, .width = 8, .in_channels = 32,
//                                   .out_channels = 32});     // tiles chosen for the shape
//   ScheduledProgram r = conv2d_tc(shape, {.chunk = 1, .stages = 1});
#pragma once

#include "schedules/GemmWgmma.h"
#include "schedules/GemmWmma.h"

#include <vector>

namespace tessel {

struct Conv2dTcShape {
  int batch = 256, height = 14, width = 14, in_channels = 256, out_channels = 512;
  int kernel = 3, pad = 1; ///< R = S = kernel; pad: zero rows / columns above and left
  int stride = 1;          ///< of the output pixels over the input, along H and W
  int dilation = 1;        ///< of the filter taps over the input, along H and W
  int pad_end = -1;        ///< zero rows / columns below and right; -1: pad (symmetric)
  /// y's type: float32 (the accumulator's), or float16 / bfloat16 (rounded from it, as cuDNN's
  /// fp16 convolutions write; off the wgmma path on mma.sync's register fragments).
  DataType out_dtype = Float(32);
  /// x's and w's type: float16 or bfloat16.
  DataType in_dtype = Float(16);

  int pad_after() const { return pad_end < 0 ? pad : pad_end; }
  /// The filter's extent over the input, dilated.
  int span() const { return dilation * (kernel - 1) + 1; }
  int out_height() const { return (height + pad + pad_after() - span()) / stride + 1; }
  int out_width() const { return (width + pad + pad_after() - span()) / stride + 1; }
  /// The GEMM's M (output pixels), N (output channels) and K (reduction) extents.
  int64_t gemm_m() const { return int64_t(batch) * out_height() * out_width(); }
  int64_t gemm_n() const { return out_channels; }
  int64_t gemm_k() const { return int64_t(kernel) * kernel * in_channels; }
  double flops() const { return 2.0 * double(gemm_m()) * double(gemm_n()) * double(gemm_k()); }
};

/// The shape the registry's conv entries take: N, H, W, C, K, R, pad, stride, dil.
Conv2dTcShape conv2d_shape_of(const ShapeParams &p);

struct Conv2dTcTiles {
  int block_row_warps = 2; ///< warps along the output pixels, bound to threadIdx.y
  int block_col_warps = 4; ///< warps along the output channels, bound to threadIdx.z
  int warp_row_tiles = 4;  ///< 16x16 fragments per warp along the pixels
  int warp_col_tiles = 2;  ///< 16x16 fragments per warp along the channels
  int chunk = 2;           ///< reduction step of the shared tiles, in units of 16 channels
  /// Shared-memory stages: 1 (load, then compute) or N >= 2 (pipelined: the loads of step
  /// k + N - 1 overlap step k's MMAs).
  int stages = 2;
  /// Replace the fragment loops by WMMA calls (without: plain loops, CPU executor only).
  bool tensorize = true;

  int block_m() const { return 16 * block_row_warps * warp_row_tiles; }
  int block_n() const { return 16 * block_col_warps * warp_col_tiles; }
  int block_k() const { return 16 * chunk; }
};

/// The compute definition: x and w (inputs), the im2col view A (M x R*S*C), the filter views
/// Wv (K x R*S*C, the memory of w) and B (R*S*C x K, Wv transposed), the float32 sum acc and y
/// (the output: acc itself when out_dtype is float32 and there is no epilogue, else acc through
/// the epilogue, cast to out_dtype). With an epilogue, `columns` are its per-output-channel
/// inputs (placeholders of K elements: "bias", "bias1", ...).
///
/// Split-K (`split_k` > 1 parts, each of whole filter taps: R*S must be a multiple of it): acc
/// is split_k x M x K, part p the sum over taps p * R*S / split_k onwards, and `total` (M x K)
/// adds the parts in order; y is total, or total through the epilogue and cast.
struct Conv2dTcTensors {
  Tensor x, w, A, Wv, B, acc, y;
  std::vector<Tensor> columns;
  Tensor total; ///< split-K only: the parts' sum
};
Conv2dTcTensors conv2d_tc_definition(const Conv2dTcShape &shape,
                                     const WgmmaEpilogue *epilogue = nullptr, int split_k = 1);

/// A shape tuned on the GPU and the tiles measured fastest for it.
struct Conv2dTcMeasured {
  Conv2dTcShape shape;
  Conv2dTcTiles tiles;
};
/// Conv2dTc.cpp's table of measured winners (its comment says on which GPU and when).
const std::vector<Conv2dTcMeasured> &conv2d_tc_measured();

/// Tiles for `shape`: those measured fastest for it by `tessel_bench --tune` when it is in
/// Conv2dTc.cpp's table; otherwise the defaults (128 x 128 blocks of 2 x 4 warps, 32 channels
/// per step, double-buffered) when they divide it, or the largest that do (as gemm_wmma_tiles).
/// Blocks of output pixels are at most N*P*Q (the last one shifts inwards). tessel::Error when
/// N*P*Q is under 16 or K or C is not a multiple of 16, naming the dimension.
Conv2dTcTiles conv2d_tc_tiles(const Conv2dTcShape &shape);

/// On a Hopper GPU (hopper_gpu()) conv2d_wgmma where its tiles fit; otherwise the WMMA
/// convolution with tiles chosen by conv2d_tc_tiles.
ScheduledProgram conv2d_tc(const Conv2dTcShape &shape);
/// With the given tiles; tessel::Error up front if they do not divide the shape.
ScheduledProgram conv2d_tc(const Conv2dTcShape &shape, const Conv2dTcTiles &tiles);

ScheduleEntry conv2d_tc_entry();

// ---- The Hopper path: the same implicit GEMM on wgmma (sm_90a) --------------------------------

/// Tiles for `shape` on wgmma: gemm_wgmma_tiles of N*P*Q x K x C (a K step stays within one
/// filter tap), filled by TMA, not rasterized; persistent at 1 to 8 waves, with ping-pong
/// consumers (128 x 128 a warpgroup) where those blocks are 128 wide. tessel::Error when none
/// fits.
GemmWgmmaTiles conv2d_wgmma_tiles(const Conv2dTcShape &shape);
/// conv2d_tc's definition and arrays (x NHWC, w KRSC, y NPQK) with gemm_wgmma's schedule: the
/// im2col tile of x and the filter tile, both K-major in 128-byte swizzled shared memory, read
/// by wgmma (the filter as a "col_major" B). With tiles.tma, the x tile is copied by TMA's
/// im2col mode (Stage::bulk_copy_im2col) and the filter tile by 4-D boxes of w.
ScheduledProgram conv2d_wgmma(const Conv2dTcShape &shape);
/// With the given tiles; with `epilogue` fused into the store (arguments x, w, the epilogue's
/// column vectors, y).
ScheduledProgram conv2d_wgmma(const Conv2dTcShape &shape, const GemmWgmmaTiles &tiles,
                              const WgmmaEpilogue *epilogue = nullptr);

ScheduleEntry conv2d_wgmma_entry();

/// y = ReLU(conv2d(x, w) + bias[k]) in shape.out_dtype (Float(16) as cuDNN writes it, or
/// float32 / bfloat16), bias per output channel of x's type: conv2d_wgmma with
/// bias_relu_epilogue, one kernel (sm_90a). Arguments x, w, bias, y.
ScheduledProgram conv2d_bias_relu(const Conv2dTcShape &shape);
ScheduledProgram conv2d_bias_relu(const Conv2dTcShape &shape, const GemmWgmmaTiles &tiles);
/// "conv2d_bias_relu": conv2d_wgmma's knobs, y float16.
ScheduleEntry conv2d_bias_relu_entry();

} // namespace tessel
