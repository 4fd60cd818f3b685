#include "schedules/Conv2dTc.h"

#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"
#include "schedules/Epilogues.h"
#include "schedules/GemmPadding.h"

#include <array>
#include <vector>

namespace tessel {

namespace {

constexpr int kFragment = 16;

// The output pixels N*P*Q need not be whole 16-row fragments: on both paths the last block of
// rows shifts inwards to end at the edge.
void check_shape(const Conv2dTcShape &sh) {
  user_check(sh.batch > 0 && sh.height > 0 && sh.width > 0 && sh.in_channels > 0 &&
                 sh.out_channels > 0 && sh.kernel > 0 && sh.stride > 0 && sh.dilation > 0 &&
                 sh.pad >= 0 && sh.pad_end >= -1,
             "conv2d_tc")
      << "N=" << sh.batch << ", H=" << sh.height << ", W=" << sh.width << ", C=" << sh.in_channels
      << ", K=" << sh.out_channels << ", R=" << sh.kernel << ", stride=" << sh.stride
      << ", dilation=" << sh.dilation << " must be positive and pad=" << sh.pad
      << ", pad_end=" << sh.pad_after() << " non-negative";
  user_check(sh.in_dtype == Float(16) || sh.in_dtype == BFloat(16), "conv2d_tc")
      << "x and w must be float16 or bfloat16, got " << sh.in_dtype;
  user_check(sh.out_dtype == Float(32) || sh.out_dtype == Float(16) || sh.out_dtype == BFloat(16),
             "conv2d_tc")
      << "y's type must be float32, float16 or bfloat16, got " << sh.out_dtype;
  user_check(sh.height + sh.pad + sh.pad_after() >= sh.span() &&
                 sh.width + sh.pad + sh.pad_after() >= sh.span(),
             "conv2d_tc")
      << "the " << sh.kernel << "x" << sh.kernel << " filter"
      << (sh.dilation > 1 ? " (dilated to " + std::to_string(sh.span()) + ")" : std::string())
      << " is larger than the padded " << sh.height + sh.pad + sh.pad_after() << "x"
      << sh.width + sh.pad + sh.pad_after()
      << " input (H, W plus the padding); use a smaller R or a larger pad";
  auto fragment = [](const std::string &name, int64_t v, const std::string &why,
                     const std::string &what_to_do) {
    user_check(v % kFragment == 0, "conv2d_tc")
        << name << "=" << v << " must be a multiple of " << kFragment << " (" << why << "); "
        << what_to_do;
  };
  auto pad_to = [](int64_t v) {
    return "pad it to " + std::to_string((v + kFragment - 1) / kFragment * kFragment);
  };
  fragment("K", sh.out_channels, "output channels are the columns of 16x16 fragments",
           pad_to(sh.out_channels) + " with zero filters");
  fragment("C", sh.in_channels,
           "a fragment's 16-wide reduction slice must stay within one filter tap",
           pad_to(sh.in_channels) + " with zero channels in x and w");
}


GemmWmmaTiles gemm_tiles(const Conv2dTcTiles &t) {
  return {.block_row_warps = t.block_row_warps, .block_col_warps = t.block_col_warps,
          .warp_row_tiles = t.warp_row_tiles, .warp_col_tiles = t.warp_col_tiles,
          .chunk = t.chunk, .stages = t.stages, .tensorize = t.tensorize};
}

void check_tiles(const Conv2dTcShape &sh, const Conv2dTcTiles &t) {
  check_shape(sh);
  // The reduction is walked tap by tap, C channels each, so the K step must divide C (not only
  // R*S*C).
  check_wmma_gemm_tiles("conv2d_tc", {"N*P*Q", sh.gemm_m(), /*shifts=*/true},
                        {"K", sh.out_channels},
                        {"C", sh.in_channels}, gemm_tiles(t));
  user_check(t.stages >= 1 && t.stages <= 8, "conv2d_tc")
      << "stages=" << t.stages
      << " is not supported: use 1 (load, then compute) or 2 to 8 (pipelined shared tiles)";
}

} // namespace

Conv2dTcShape conv2d_shape_of(const ShapeParams &p) {
  return {.batch = int(p.at("N")), .height = int(p.at("H")), .width = int(p.at("W")),
          .in_channels = int(p.at("C")), .out_channels = int(p.at("K")), .kernel = int(p.at("R")),
          .pad = int(p.at("pad")), .stride = int(p.at("stride")),
          .dilation = int(p.at("dil"))};
}

Conv2dTcTensors conv2d_tc_definition(const Conv2dTcShape &sh, const WgmmaEpilogue *epilogue,
                                     int split_k) {
  check_shape(sh);
  user_check(split_k >= 1 && sh.kernel * sh.kernel % split_k == 0, "conv2d_tc")
      << "split_k=" << split_k << " must divide the " << sh.kernel * sh.kernel
      << " filter taps (each part sums whole taps)";
  const int H = sh.height, W = sh.width, C = sh.in_channels, K = sh.out_channels;
  const int R = sh.kernel, pad = sh.pad, P = sh.out_height(), Q = sh.out_width();
  const int stride = sh.stride, dil = sh.dilation;
  const int M = int(sh.gemm_m()), RSC = int(sh.gemm_k());
  Conv2dTcTensors t;
  t.x = placeholder({sh.batch, H, W, C}, sh.in_dtype, "x");
  t.w = placeholder({K, R, R, C}, sh.in_dtype, "w");
  // rk = (r * S + s) * C + c: the filter tap (r, s) and the channel c.
  auto tap = [&](const Expr &rk) {
    Expr rs = floordiv(rk, C);
    return std::array<Expr, 3>{floordiv(rs, R), floormod(rs, R), floormod(rk, C)};
  };
  t.A = compute(
      {M, RSC},
      [&](Var m, Var rk) {
        auto [r, s, c] = tap(rk);
        Expr n = floordiv(m, P * Q);
        Expr h = floormod(floordiv(m, Q), P) * stride + r * dil - pad,
             w = floormod(m, Q) * stride + s * dil - pad;
        Expr v = t.x(n, h, w, c);
        if (pad == 0 && sh.pad_after() == 0) // every tap is inside x
          return v;
        return if_then_else(all(h >= 0, h < H, w >= 0, w < W), v, make_const(sh.in_dtype, 0));
      },
      "A", {"m", "rk"});
  t.Wv = compute(
      {K, RSC},
      [&](Var k, Var rk) {
        auto [r, s, c] = tap(rk);
        return t.w(k, r, s, c);
      },
      "Wv", {"k", "rk"});
  t.B = compute({RSC, K}, [&](Var rk, Var k) { return t.Wv(k, rk); }, "B", {"rk", "k"});
  const bool plain = sh.out_dtype == Float(32) && !epilogue;
  if (split_k == 1) {
    IterVar rk = reduce_axis({0, RSC}, "rk");
    t.acc = compute(
        {M, K},
        [&](Var m, Var k) {
          return sum(t.A(m, rk).astype(Float(32)) * t.B(rk, k).astype(Float(32)), {rk});
        },
        plain ? "y" : "y_acc", {"m", "k"});
  } else {
    const int64_t run = RSC / split_k;
    IterVar rk = reduce_axis({0, run}, "rk");
    t.acc = compute(
        {int64_t(split_k), M, K},
        [&](Var p, Var m, Var k) {
          Expr at = p * int(run) + rk.var();
          return sum(t.A(m, at).astype(Float(32)) * t.B(at, k).astype(Float(32)), {rk});
        },
        "y_part", {"p", "m", "k"});
    IterVar part = reduce_axis({0, split_k}, "part");
    t.total = compute(
        {M, K}, [&](Var m, Var k) { return sum(t.acc(part.var(), m, k), {part}); },
        plain ? "y" : "y_total", {"m", "k"});
  }
  const Tensor &sum_of_all = split_k == 1 ? t.acc : t.total;
  if (plain) {
    t.y = sum_of_all;
    return t;
  }
  if (epilogue)
    for (size_t i = 0; i < epilogue->column_inputs.size(); ++i)
      t.columns.push_back(placeholder({K}, epilogue->column_inputs[i],
                                      i ? "bias" + std::to_string(i) : std::string("bias")));
  t.y = compute(
      {M, K},
      [&](Var m, Var k) {
        Expr v = sum_of_all(m, k);
        if (epilogue) {
          std::vector<Expr> at;
          for (const Tensor &c : t.columns)
            at.push_back(c(k));
          v = epilogue->f(v, at);
        }
        return sh.out_dtype == Float(32) ? v : v.astype(sh.out_dtype);
      },
      "y", {"m", "k"});
  return t;
}

namespace {

// Winners of `tessel_bench --tune` for whole shapes: the fastest candidate whose output matched
// cuDNN's. The table does not know the GPU (conv2d_tc has no target to key on): measured on an
// NVIDIA H100 80GB HBM3 (sm_90; driver 580.159.04, CUDA 13.0, cuDNN 9) on 2026-11-23 by
// `tessel_bench --tune` built from commit e47e2e3 (the tune step of bench/gpu_session.sh). The
// seed conv: best of 54 candidates, 0.3852 ms (307.3 TFLOP/s, 0.464 x cuDNN). Another GPU wants
// its own run.
const std::vector<Conv2dTcMeasured> &tuned_convs() {
  static const std::vector<Conv2dTcMeasured> table = {
      // N=256 14x14 C=256 -> K=512, 3x3, pad 1: "brw=2 bcw=4 wrt=4 wct=4 chunk=4 stages=2",
      // 128 x 256 blocks of 2 x 4 warps, 64 channels per step, double-buffered.
      {{.batch = 256, .height = 14, .width = 14, .in_channels = 256, .out_channels = 512,
        .kernel = 3, .pad = 1},
       {.block_row_warps = 2, .block_col_warps = 4, .warp_row_tiles = 4, .warp_col_tiles = 4,
        .chunk = 4, .stages = 2}},
  };
  return table;
}

bool same_shape(const Conv2dTcShape &a, const Conv2dTcShape &b) {
  return a.batch == b.batch && a.height == b.height && a.width == b.width &&
         a.in_channels == b.in_channels && a.out_channels == b.out_channels &&
         a.kernel == b.kernel && a.pad == b.pad && a.stride == b.stride &&
         a.dilation == b.dilation && a.pad_after() == b.pad_after();
}

} // namespace

const std::vector<Conv2dTcMeasured> &conv2d_tc_measured() { return tuned_convs(); }

Conv2dTcTiles conv2d_tc_tiles(const Conv2dTcShape &sh) {
  check_shape(sh);
  for (const Conv2dTcMeasured &t : tuned_convs())
    if (same_shape(t.shape, sh))
      return t.tiles;
  Conv2dTcTiles best;
  // The channels play the GEMM's K: the step must divide C. Blocks of rows that divide the
  // whole fragments of N*P*Q, so at most N*P*Q (the last block shifts inwards over the rest).
  const int64_t rows = sh.gemm_m() / kFragment * kFragment;
  user_check(rows > 0, "conv2d_tc")
      << "N*P*Q=" << sh.gemm_m() << " output pixels (N=" << sh.batch << " x P="
      << sh.out_height() << " x Q=" << sh.out_width()
      << ") fill no 16-row Tensor Core fragment; use a larger batch or image";
  GemmWmmaTiles g = gemm_wmma_tiles(rows, sh.out_channels, sh.in_channels);
  best.block_row_warps = g.block_row_warps;
  best.block_col_warps = g.block_col_warps;
  best.warp_row_tiles = g.warp_row_tiles;
  best.warp_col_tiles = g.warp_col_tiles;
  best.chunk = g.chunk;
  // Double buffering pays only when there is a next step to load.
  best.stages = sh.gemm_k() / best.block_k() > 1 ? 2 : 1;
  return best;
}

ScheduledProgram conv2d_tc(const Conv2dTcShape &sh) {
  // On Hopper the wgmma path wherever its tiles fit (any N*P*Q of 64 or more); both paths
  // shift their last block of rows inwards.
  check_shape(sh);
  if (hopper_gpu() && sh.gemm_m() >= 64 && sh.out_channels % 32 == 0 &&
      sh.in_channels % 32 == 0)
    return conv2d_wgmma(sh);
  return conv2d_tc(sh, conv2d_tc_tiles(sh));
}

ScheduledProgram conv2d_tc(const Conv2dTcShape &sh, const Conv2dTcTiles &t) {
  check_tiles(sh, t);
  Conv2dTcTensors d = conv2d_tc_definition(sh);
  Schedule s = create_schedule({d.y});
  // A and Wv are views of x and w: only their shared copies are stored.
  s[d.A].compute_inline();
  s[d.Wv].compute_inline();

  // WMMA fragments, or, for a float16 / bfloat16 y (WMMA stores float32 only), mma.sync's
  // register fragments, whose store rounds each value (the sum stays float32 until then).
  const bool narrow = d.acc != d.y;
  const std::string frag = narrow ? "mma." : "wmma.";
  WmmaGemmStages st;
  st.C = d.y;
  st.AS = s.cache_read(d.A, "shared", {d.acc});
  st.AF = s.cache_read(st.AS, frag + "matrix_a", {d.acc});
  // The filter's shared tile keeps w's order, output channel x rk (rk contiguous, 16-byte
  // loads); B = its transpose is the fragment, loaded "col_major" from it.
  st.BS = s.cache_read(d.Wv, "shared", {d.B});
  s[d.B].set_scope(frag + "matrix_b");
  st.BF = d.B;
  if (narrow) {
    s[d.acc].set_scope("mma.accumulator");
    st.CF = d.acc;
  } else {
    st.CF = s.cache_write(d.y, "wmma.accumulator");
  }
  st.ptx_mma = narrow;
  st.b_layout = "col_major";
  st.k_period = sh.in_channels;
  st.in = sh.in_dtype;
  schedule_wmma_gemm(s, st, gemm_tiles(t));

  ScheduledProgram p;
  p.schedule = s;
  p.args = {d.x, d.w, d.y};
  p.num_inputs = 2;
  p.flops = sh.flops();
  return p;
}

namespace {
// TMA's im2col copies (Im2colCopy) step through the input up to 8 pixels apart.
bool im2col_tma_fits(const Conv2dTcShape &sh) { return sh.stride <= 8; }
} // namespace

namespace {

// Persistent blocks 128 wide (res5's 128x128, the stride-2 conv's 256x128) as ping-pong
// consumers, each warpgroup a whole 128 x 128 tile, one's epilogue beside the other's main
// loop: on the H100 (y float16, two alternated runs) res5 0.0782 -> 0.0749 ms, stride 2
// 0.1185 -> 0.1164, res3 (256x128 too) 0.0955 -> 0.0962; not the seed conv's 128x256 (0.156 ->
// 0.166), nor grids that are not persistent (batch 8).
// Strided (unless `stages_given`), their ring up to 6 deep (128 x 128 tiles: 6 fit): x, stride^2 times the
// output's pixels, comes from DRAM more (L2 hit 69% against res3's 90%) and the deeper ring
// covers its latency. H200, 3x3 stride 2 256x56x56 128->128 y fp16, sustained_ab in three calls
// (bench/RESULTS.md 2026-11-28): 0.1003 / 0.1163 / 0.1141 ms against 4 stages' 0.1173 /
// 0.1176-0.1203 / 0.1181; res3 and res5 (stride 1) were slower at 5-7 stages.
void ping_pong_by_default(const Conv2dTcShape &sh, GemmWgmmaTiles &t, bool stages_given = false) {
  if (!t.persistent || t.block_n != 128 || t.warpgroups_n != 1)
    return;
  t.ping_pong = true;
  t.block_m = 128;
  t.warpgroups_m = 1;
  t.wgmma_n = 0;
  if (sh.stride > 1 && !stages_given)
    t = deepest_ring(t, 6);
}

// conv2d_wgmma's tiles before ping_pong_by_default: cooperative warpgroups.
GemmWgmmaTiles cooperative_conv_tiles(const Conv2dTcShape &sh) {
  check_shape(sh);
  GemmWgmmaTiles t =
      gemm_wgmma_tiles(sh.gemm_m(), sh.out_channels, sh.in_channels, "conv2d_wgmma",
                       /*partial_blocks=*/false);
  // TMA (im2col mode for x) wherever the K step lies in one filter tap; no rasterization
  // (measured no better on the bench's convs).
  t.tma = t.tma && sh.in_channels % t.block_k == 0 && im2col_tma_fits(sh);
  t.raster_group = 0;
  // Grids under half a wave (batch 1: the seed conv's 196 x 512 output makes 32 blocks of
  // 64 x 64) split the reduction into parts of whole filter taps, as gemm_wgmma_tiles does for
  // a few rows of C.
  const int64_t taps = int64_t(sh.kernel) * sh.kernel;
  t.split_k = split_k_for_small_grid(output_tiles(sh.gemm_m(), sh.out_channels, t), sh.gemm_k() / t.block_k, {4, 3, 2},
                                     [&](int parts) { return taps % parts == 0; });
  // Persistent at 1 to 8 waves, as gemm_wgmma: on the H100 (y float16) the seed conv 0.1682 ->
  // 0.1564 ms, res3 0.1024 -> 0.0971, res5 0.0829 -> 0.0786, stride 2 0.1219 -> 0.1196.
  t.persistent = persistent_by_default(sh.gemm_m(), sh.out_channels, t);
  return t;
}

} // namespace

GemmWgmmaTiles conv2d_wgmma_tiles(const Conv2dTcShape &sh) {
  GemmWgmmaTiles t = cooperative_conv_tiles(sh);
  ping_pong_by_default(sh, t);
  return t;
}

ScheduledProgram conv2d_wgmma(const Conv2dTcShape &sh) {
  return conv2d_wgmma(sh, conv2d_wgmma_tiles(sh));
}

ScheduledProgram conv2d_wgmma(const Conv2dTcShape &sh, const GemmWgmmaTiles &t,
                              const WgmmaEpilogue *epilogue) {
  check_shape(sh);
  user_check(t.cluster != 2, "conv2d_wgmma")
      << "clusters along N (cluster=2, knob CL=2) would multicast x's tile, which TMA's im2col "
         "copies cannot; use CL=1 (along M, the filter's tile multicast) or CL=0";
  // The reduction is walked tap by tap, C channels each: the K step must divide C. Split-K's
  // parts are whole taps (conv2d_tc_definition checks).
  GemmWgmmaTiles whole = t;
  whole.split_k = 1;
  check_gemm_wgmma_tiles("conv2d_wgmma", sh.gemm_m(), sh.out_channels, sh.in_channels, whole,
                         /*partial_blocks=*/false);
  user_check(!t.tma || im2col_tma_fits(sh), "conv2d_wgmma")
      << "TMA's im2col copies step at most 8 pixels, got stride " << sh.stride
      << "; fill the tiles with cp.async (tma off, TMA=0)";
  Conv2dTcTensors d = conv2d_tc_definition(sh, epilogue, t.split_k);
  Schedule s = create_schedule({d.y});
  s[d.A].compute_inline();
  s[d.Wv].compute_inline();
  WgmmaGemmStages st;
  st.C = t.split_k > 1 ? d.acc : d.y;
  st.AS = s.cache_read(d.A, "shared", {d.acc});
  // The filter's tile keeps w's order (output channel x rk, rk contiguous): wgmma reads it as a
  // K-major B, so B (its transpose) is only a view.
  st.BS = s.cache_read(d.Wv, "shared", {d.B});
  s[d.B].compute_inline();
  if (t.split_k > 1) {
    // The parts into a float32 workspace (one per block along z); their sum, the epilogue and
    // the cast by a second kernel, an element a thread.
    st.CF = s.cache_write(d.acc, "wgmma.accumulator");
    schedule_leading_block(s, d.y, d.y == d.total ? Tensor() : d.total);
  } else if (d.acc == d.y) {
    st.CF = s.cache_write(d.y, "wgmma.accumulator");
  } else {
    // y = acc rounded: the sum stays in the warpgroups' registers and is rounded as it is
    // stored (wgmma_store_matrix to float16 / bfloat16).
    s[d.acc].set_scope("wgmma.accumulator");
    st.CF = d.acc;
  }
  st.b_layout = "col_major";
  st.in = sh.in_dtype;
  st.k_period = sh.in_channels;
  st.a_im2col = Im2colCopy{.out_height = sh.out_height(), .out_width = sh.out_width(),
                           .channels = sh.in_channels, .kernel_h = sh.kernel,
                           .kernel_w = sh.kernel, .pad = sh.pad, .stride = sh.stride,
                           .dilation = sh.dilation, .pad_end = sh.pad_after()};
  if (epilogue && t.split_k == 1)
    st.epilogue = *epilogue;
  schedule_wgmma_gemm(s, st, t);

  ScheduledProgram p;
  p.schedule = s;
  p.args = {d.x, d.w};
  p.args.insert(p.args.end(), d.columns.begin(), d.columns.end());
  p.args.push_back(d.y);
  p.num_inputs = p.args.size() - 1;
  p.flops = sh.flops();
  return p;
}

ScheduledProgram conv2d_bias_relu(const Conv2dTcShape &sh) {
  return conv2d_bias_relu(sh, conv2d_wgmma_tiles(sh));
}

ScheduledProgram conv2d_bias_relu(const Conv2dTcShape &sh, const GemmWgmmaTiles &t) {
  WgmmaEpilogue e = bias_relu_epilogue(sh.in_dtype);
  return conv2d_wgmma(sh, t, &e);
}

namespace {

// conv2d_wgmma's registry knobs over the tiles chosen for the shape: BM, BN, S, G, TMA, Y16.
std::pair<Conv2dTcShape, GemmWgmmaTiles> wgmma_conv_from_knobs(const ShapeParams &p,
                                                                DataType in) {
  auto get = [&](const char *k) { return knob_or_zero(p, k); };
  Conv2dTcShape sh = conv2d_shape_of(p);
  sh.in_dtype = in;
  if (get("Y16"))
    sh.out_dtype = Float(16);
  GemmWgmmaTiles t = cooperative_conv_tiles(sh);
  if (get("BM")) {
    t.block_m = int(get("BM"));
    t.warpgroups_m = std::max(1, std::min(2, t.block_m / 64));
  }
  if (get("BN"))
    t.block_n = int(get("BN"));
  if (get("S"))
    t.stages = int(get("S"));
  if (get("SK"))
    t.split_k = int(get("SK"));
  t.raster_group = get("G");
  // TMA=1 (the default) where TMA's im2col copies can take the conv; TMA=0 turns them off.
  t.tma = get("TMA") != 0 && t.swizzle != 0 && t.stages >= 2 && im2col_tma_fits(sh);
  // WS=1 (the default): a producer warpgroup issues the TMA copies (warp roles).
  t.warp_specialized = t.warpgroups_n == 1 && (!p.count("WS") || get("WS") != 0);
  // P=0 (the default): persistent where conv2d_wgmma_tiles says and the knobs keep warp roles
  // and whole K; P=1: persistent on PB blocks (0: 132); P=2: not.
  if (get("P") == 2 || !t.roles() || t.split_k > 1)
    t.persistent = false;
  if (get("P") == 1 || get("PP") == 1) {
    t.persistent = true;
    if (get("PB"))
      t.persistent_blocks = int(get("PB"));
  }
  // PP=0: ping-pong where ping_pong_by_default says and the tiles are the default ones; PP=1:
  // ping-pong consumers, each warpgroup a whole tile (128 x 128 unless BM / BN say); PP=2: not.
  if (get("PP") == 0 && !get("BM") && !get("BN"))
    ping_pong_by_default(sh, t, get("S") != 0);
  if (get("PP") == 1) {
    t.ping_pong = true;
    t.block_m = get("BM") ? int(get("BM")) : 128;
    t.block_n = get("BN") ? int(get("BN")) : 128;
    t.warpgroups_m = t.warpgroups_n = 1;
    t.wgmma_n = 0;
  }
  // CL=1: clusters along M multicasting the filter's tile (B); CS: the blocks of a cluster (0:
  // 2). (CL=2, along N, is refused: x's im2col tile cannot be multicast.)
  if (get("CL"))
    t.cluster = int(get("CL"));
  if (get("CS"))
    t.cluster_size = int(get("CS"));
  return {sh, t};
}

ScheduleEntry wgmma_conv_entry(const char *name, const char *description, int64_t y16) {
  ScheduleEntry e = conv2d_tc_entry();
  e.name = name;
  e.description = description;
  for (const char *knob :
       {"BM", "BN", "S", "G", "SK", "TMA", "WS", "P", "PB", "PP", "CL", "CS"}) {
    e.default_shape[knob] = std::string(knob) == "TMA" || std::string(knob) == "WS" ? 1 : 0;
    e.nonnegative.push_back(knob);
  }
  e.default_shape["Y16"] = y16; // conv2d_tc's, with this entry's default
  e.choices["TMA"] = {0, 1};
  e.choices["WS"] = {0, 1};
  e.choices["P"] = {0, 1, 2};
  e.choices["PP"] = {0, 1, 2};
  e.choices["CL"] = {0, 1};
  e.choices["CS"] = {0, 2, 4, 8};
  e.dtypes = {Float(16), BFloat(16)};
  return e;
}

} // namespace

ScheduleEntry conv2d_wgmma_entry() {
  ScheduleEntry e = wgmma_conv_entry(
      "conv2d_wgmma",
      "conv2d as an implicit GEMM on Hopper Tensor Cores (wgmma, sm_90a) on cuDNN's "
      "layouts: x NHWC, w KRSC fp16 or bf16, y NPQK fp32; stride, dil(ation), zero padding; "
      "gemm_wgmma's schedule; BM, BN, S (stages), G (rasterization group), SK (split-K "
      "parts of whole filter taps; 1: none) override its tiles (0: the default); TMA=1 "
      "(the default) fills them with TMA (im2col mode for x), TMA=0 with cp.async; WS=1 "
      "(the default) issues the TMA copies from a producer warpgroup (warp roles); P=0 (the "
      "default) makes it persistent at 1 to 8 waves, P=1 always (PB blocks; 0: 132), P=2 never; "
      "PP=0 (the default) has ping-pong consumers where persistent blocks are 128 wide, PP=1 "
      "always, PP=2 never; CL=1 makes clusters of CS (0: 2) blocks along M multicasting the "
      "filter's tile by TMA (0, the default: none); Y16=1 writes y as float16 (rounded from the "
      "float32 sum, as cuDNN's fp16 convolutions do)",
      0);
  e.build = [](const ShapeParams &p, DataType in) {
    auto [sh, t] = wgmma_conv_from_knobs(p, in);
    return conv2d_wgmma(sh, t);
  };
  return e;
}

ScheduleEntry conv2d_bias_relu_entry() {
  ScheduleEntry e = wgmma_conv_entry(
      "conv2d_bias_relu",
      "y = ReLU(conv2d(x, w) + bias) in one kernel: conv2d_wgmma (sm_90a, same knobs) with "
      "the bias (x's type, per output channel) and ReLU applied to the float32 accumulators "
      "in registers; y float16 (Y16=1, the default) or float32 (Y16=0)",
      1);
  e.build = [](const ShapeParams &p, DataType in) {
    auto [sh, t] = wgmma_conv_from_knobs(p, in);
    return conv2d_bias_relu(sh, t);
  };
  return e;
}

ScheduleEntry conv2d_tc_entry() {
  ScheduleEntry e;
  e.name = "conv2d_tc";
  e.description = "conv2d as an implicit GEMM on Tensor Cores (on Hopper conv2d_wgmma, else WMMA) "
                  "on cuDNN's layouts: x NHWC, w KRSC fp16 or bf16, y NPQK fp32 (Y16=1: "
                  "float16, off Hopper on mma.sync); stride, dil(ation), zero padding";
  e.default_shape = {{"N", 256}, {"H", 14},     {"W", 14},  {"C", 256}, {"K", 512},
                     {"R", 3},   {"pad", 1},    {"stride", 1}, {"dil", 1}, {"Y16", 0}};
  e.nonnegative = {"pad", "Y16"};
  e.choices["Y16"] = {0, 1}; // y float32, or in the input type
  e.dtypes = {Float(16), BFloat(16)};
  e.build = [](const ShapeParams &p, DataType in) {
    Conv2dTcShape sh = conv2d_shape_of(p);
    sh.in_dtype = in;
    if (p.at("Y16"))
      sh.out_dtype = Float(16);
    return conv2d_tc(sh);
  };
  return e;
}

} // namespace tessel
