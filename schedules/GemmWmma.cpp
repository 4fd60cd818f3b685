#include "schedules/GemmWmma.h"

#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"
#include "schedules/Gemm.h"
#include "schedules/GemmPadding.h"
#include "schedules/GemmTiling.h"
#include "schedules/MmaIntrinsics.h"
#include "schedules/WmmaIntrinsics.h"

#include <initializer_list>
#include <tuple>
#include <utility>

namespace tessel {

namespace {

constexpr int kFragment = 16; // the m16n16k16 WMMA shape
constexpr int kWarpSize = 32;
constexpr int kVector = 8;    // halves per 16-byte load

// Shared rows are padded to an odd number of 16-byte chunks (stride % 16 == 8 halves): the
// 8 rows that one fragment load reads then start in 8 different groups of 4 banks. The stride
// stays a multiple of 8 halves, which WMMA requires of a leading dimension.
constexpr int kAlignFactor = 16, kAlignOffset = 8;

// A shared tile of `elems` halves is loaded by all threads of the block, 8 halves each per
// step; the schedule splits exactly, so the tile must be a whole number of such steps.
bool loads_divide(int64_t elems, const GemmWmmaTiles &t) {
  return elems % (int64_t(kVector) * kWarpSize * t.warps()) == 0;
}

bool tiles_fit(int64_t M, int64_t N, int64_t K, const GemmWmmaTiles &t) {
  return M % t.block_m() == 0 && N % t.block_n() == 0 && K % t.block_k() == 0 &&
         loads_divide(int64_t(t.block_m()) * t.block_k(), t) &&
         loads_divide(int64_t(t.block_k()) * t.block_n(), t);
}

// A GEMM dimension as the fragments walk it: rounded up to whole 16x16x16 fragments (the
// operands then run on padded copies: tensor_core_gemm).
int64_t in_fragments(const std::string &context, const char *name, int64_t v) {
  user_check(v > 0, context) << name << "=" << v << " must be positive";
  return (v + kFragment - 1) / kFragment * kFragment;
}

} // namespace

void check_wmma_gemm_tiles(const std::string &context, const WmmaGemmDim &M, const WmmaGemmDim &N,
                           const WmmaGemmDim &K, const GemmWmmaTiles &t) {
  user_check(t.block_row_warps > 0 && t.block_col_warps > 0 && t.warp_row_tiles > 0 &&
                 t.warp_col_tiles > 0 && t.chunk > 0,
             context)
      << "tile parameters must be positive";
  user_check(t.warps() * kWarpSize <= 1024, context)
      << t.block_row_warps << " x " << t.block_col_warps << " warps make "
      << t.warps() * kWarpSize << " threads; a block has at most 1024";
  auto divides = [&](const WmmaGemmDim &d, int block, const std::string &why) {
    if (d.shifts)
      user_check(d.value >= block, context)
          << d.name << "=" << d.value << " is less than one block of " << block << " (" << why
          << "; the last block shifts inwards, so it must fit); use smaller tiles";
    else
      user_check(d.value % block == 0, context)
          << d.name << "=" << d.value << " must be a multiple of " << block << " (" << why
          << "); pad it or use tile sizes that divide it";
  };
  divides(M, t.block_m(),
          "the block tile: " + std::to_string(t.block_row_warps) + " warps x " +
              std::to_string(t.warp_row_tiles) + " fragments x 16");
  divides(N, t.block_n(),
          "the block tile: " + std::to_string(t.block_col_warps) + " warps x " +
              std::to_string(t.warp_col_tiles) + " fragments x 16");
  divides(K, t.block_k(), "the K step: chunk " + std::to_string(t.chunk) + " x 16");
  int64_t step = int64_t(kVector) * kWarpSize * t.warps();
  user_check(loads_divide(int64_t(t.block_m()) * t.block_k(), t) &&
                 loads_divide(int64_t(t.block_k()) * t.block_n(), t),
             context)
      << "the shared tiles (" << t.block_m() << "x" << t.block_k() << " of A, " << t.block_k()
      << "x" << t.block_n() << " of B) must be multiples of " << step << " halves ("
      << t.warps() * kWarpSize << " threads x " << kVector
      << " halves) so every thread loads whole vectors; use fewer warps or larger tiles";
}

int64_t gemm_wmma_shared_bytes(const GemmWmmaTiles &t) {
  // Rows padded as storage_align does: the smallest stride >= the row with stride % kAlignFactor
  // == kAlignOffset. A is block_m x block_k, B block_k x block_n (row major); 2 bytes a half.
  auto padded = [](int64_t row) {
    return row + (kAlignOffset - row % kAlignFactor + kAlignFactor) % kAlignFactor;
  };
  int64_t a = int64_t(t.block_m()) * padded(t.block_k());
  int64_t b = int64_t(t.block_k()) * padded(t.block_n());
  return std::max(1, t.stages) * (a + b) * 2;
}

GemmWmmaTiles gemm_wmma_tiles(int64_t M, int64_t N, int64_t K, const std::string &context) {
  M = in_fragments(context, "M", M);
  N = in_fragments(context, "N", N);
  K = in_fragments(context, "K", K);
  GemmWmmaTiles best;
  if (tiles_fit(M, N, K, best))
    return best;
  // The largest block tile that divides the shape (at most the default's 128 x 128, at most 8
  // fragments per warp to bound accumulator registers), then the longer K step, then more warps.
  // Every multiple of 16 fits one warp with one fragment, so a candidate always exists.
  std::tuple<int64_t, int, int> best_score{-1, 0, 0};
  for (int wm : {2, 1, 4})
    for (int wn : {4, 2, 1})
      for (int tm : {4, 2, 3, 1})
        for (int tn : {2, 4, 1, 3})
          for (int chunk : {2, 1}) {
            GemmWmmaTiles t{.block_row_warps = wm, .block_col_warps = wn, .warp_row_tiles = tm,
                            .warp_col_tiles = tn, .chunk = chunk};
            if (wm * wn > 8 || tm * tn > 8 || t.block_m() > 128 || t.block_n() > 128 ||
                !tiles_fit(M, N, K, t))
              continue;
            std::tuple<int64_t, int, int> score{int64_t(t.block_m()) * t.block_n(), chunk,
                                                t.warps()};
            if (score > best_score) {
              best_score = score;
              best = t;
            }
          }
  internal_check(std::get<0>(best_score) > 0) << "no WMMA tiles for " << M << "x" << N << "x" << K;
  return best;
}

ScheduledProgram gemm_wmma(int64_t M, int64_t N, int64_t K) {
  return gemm_wmma(M, N, K, gemm_wmma_tiles(M, N, K));
}

ScheduledProgram gemm_wmma(int64_t M, int64_t N, int64_t K, const GemmWmmaTiles &t) {
  return tensor_core_gemm("gemm_wmma", M, N, K, t, /*ptx_mma=*/false);
}

ScheduledProgram gemm_wmma(int64_t M, int64_t N, int64_t K, const GemmWmmaTiles &t, DataType in) {
  return tensor_core_gemm("gemm_wmma", M, N, K, t, /*ptx_mma=*/false, in);
}

ScheduledProgram tensor_core_gemm(const std::string &context, int64_t M, int64_t N, int64_t K,
                                  const GemmWmmaTiles &t, bool ptx_mma, DataType in,
                                  DataType out) {
  // Dimensions that are not whole fragments run on copies padded with zeros, into a padded C
  // whose leading M x N block a last kernel copies out (GemmPadding.h).
  const int64_t Mp = in_fragments(context, "M", M), Np = in_fragments(context, "N", N),
                Kp = in_fragments(context, "K", K);
  check_wmma_gemm_tiles(context, {"M", Mp}, {"N", Np}, {"K", Kp}, t);
  user_check(in == Float(16) || in == BFloat(16), context)
      << "A and B must be float16 or bfloat16, got " << in;
  const bool narrow = out != Float(32);
  user_check(!narrow || (ptx_mma && (out == Float(16) || out == BFloat(16))), context)
      << "C must be float32" << (ptx_mma ? ", float16 or bfloat16" : "") << ", got " << out
      << (ptx_mma ? "" : "; WMMA stores float32 fragments: float16 / bfloat16 C on gemm_mma "
                         "(mma.sync) or gemm_wgmma");
  const bool padded = Mp != M || Np != N || Kp != K, kept = Mp != M || Np != N;
  GemmTensors g = gemm_definition(M, N, K, in);
  // The sum (float32, in the accumulators; its own stage where the shape is padded or C is
  // narrower), what the GEMM kernel stores (the sum, or the sum rounded to a narrower C), and C
  // (a last kernel keeps its leading block where the shape is padded).
  Tensor AP = g.A, BP = g.B, acc = g.C;
  if (padded || narrow) {
    AP = padded_copy(g.A, Mp, Kp, "A_pad");
    BP = padded_copy(g.B, Kp, Np, "B_pad");
    IterVar k = reduce_axis({0, Kp}, "k");
    acc = compute(
        {Mp, Np},
        [&](Var i, Var j) {
          return sum(AP(i, k).astype(Float(32)) * BP(k, j).astype(Float(32)), {k});
        },
        narrow ? "C_acc" : kept ? "C_full" : "C", {"i", "j"});
  }
  Tensor stored = acc;
  if (narrow)
    stored = compute(
        {Mp, Np}, [&](Var i, Var j) { return acc(i, j).astype(out); },
        kept ? "C_full" : "C", {"i", "j"});
  g.C = kept ? leading_block(stored, M, N, "C") : stored;
  Schedule s = create_schedule({g.C});
  for (const Tensor &copy : {AP, BP})
    schedule_padded_copy(s, copy);
  if (stored != g.C)
    schedule_leading_block(s, g.C);

  // Memory hierarchy: global -> shared -> fragments -> accumulator -> global.
  std::string frag = ptx_mma ? "mma." : "wmma.";
  WmmaGemmStages st;
  st.C = stored;
  st.AS = s.cache_read(AP, "shared", {acc});
  st.BS = s.cache_read(BP, "shared", {acc});
  st.AF = s.cache_read(st.AS, frag + "matrix_a", {acc});
  st.BF = s.cache_read(st.BS, frag + "matrix_b", {acc});
  if (narrow) {
    s[acc].set_scope(frag + "accumulator");
    st.CF = acc;
  } else {
    st.CF = s.cache_write(acc, frag + "accumulator");
  }
  st.ptx_mma = ptx_mma;
  st.in = in;
  schedule_wmma_gemm(s, st, t);

  return gemm_program(g, s, M, N, K);
}

void schedule_wmma_gemm(Schedule &s, const WmmaGemmStages &st, const GemmWmmaTiles &t) {
  GemmThreadAxes idx;

  // C: blocks, then warps on threadIdx.y/z, then each warp's fragments. threadIdx.x (the lanes)
  // is bound only in the shared loads: every loop around a WMMA call runs on all 32 lanes.
  Stage sc = s[st.C];
  GemmOutputLoops c = tile_gemm_output(sc, idx, t.block_m(), t.block_n(), t.block_row_warps,
                                       t.block_col_warps, kFragment, kFragment, t.raster_group);

  // The accumulator: one warp's warp_row_tiles x warp_col_tiles fragments, K in shared-tile
  // steps (ko), then 16-wide slices (ki), then 16x16x16 MMAs.
  Stage sf = s[st.CF];
  sf.compute_at(sc, c.group_j);
  auto [ci, cj] = sf.axes<2>();
  auto [ko, k1] = split_gemm_reduction(sf, t.block_k(), st.k_period);
  auto [ki, kk] = sf.split(k1, kFragment);
  auto [cfi, cii] = sf.split(ci, kFragment);
  auto [cfj, cjj] = sf.split(cj, kFragment);
  sf.reorder({ko, ki, cfi, cfj, cii, cjj, kk});

  // Fragments of one K slice, loaded where they are used.
  Stage af = s[st.AF], bf = s[st.BF];
  af.compute_at(sf, ki);
  auto [ai, ak] = af.axes<2>();
  auto [afi, aii] = af.split(ai, kFragment);
  af.reorder({afi, aii, ak});
  bf.compute_at(sf, ki);
  auto [bk, bn] = bf.axes<2>();
  auto [bfj, bjj] = bf.split(bn, kFragment);
  bf.reorder({bfj, bk, bjj});

  // Shared tiles of one K step, loaded by the whole block: consecutive lanes take consecutive
  // 16-byte vectors, so each warp's loads are coalesced. The vector is split off the row before
  // fusing (rather than off the fused loop) so its index stays `row * stride + col * 8 + vec`,
  // which the vectorizer turns into one 8-lane access without simplifying floordiv / floormod.
  for (const Tensor &sh : {st.AS, st.BS}) {
    Stage ss = s[sh];
    ss.compute_at(sf, ko);
    auto [r, c] = ss.axes<2>();
    ss.storage_align(r, kAlignFactor, kAlignOffset);
    auto [c1, vec] = ss.split(c, kVector);
    IterVar f1 = ss.fuse(r, c1);
    auto [f2, lane] = ss.split(f1, kWarpSize);
    auto [f3, wz] = ss.split(f2, t.block_col_warps);
    auto [f4, wy] = ss.split(f3, t.block_row_warps);
    ss.bind(wy, idx.thread_y);
    ss.bind(wz, idx.thread_z);
    ss.bind(lane, idx.thread_x);
    ss.vectorize(vec);
    if (t.stages > 1)
      ss.pipeline(t.stages);
  }

  if (st.ptx_mma)
    for (auto [stage, iv] : std::initializer_list<std::pair<Stage, IterVar>>{
             {sc, c.tile_i}, {sc, c.tile_j}, {sf, ki}, {sf, cfi}, {sf, cfj}, {af, afi}, {bf, bfj}})
      stage.unroll(iv);
  if (t.tensorize && st.ptx_mma) {
    af.tensorize(aii, mma_load_matrix("mma.matrix_a", "row_major", st.in));
    bf.tensorize(bk, mma_load_matrix("mma.matrix_b", st.b_layout, st.in));
    sf.tensorize(cii, mma_gemm(st.in));
    sc.tensorize(c.inner_i, mma_store_matrix("global", st.C.dtype()));
  } else if (t.tensorize) {
    af.tensorize(aii, wmma_load_matrix("wmma.matrix_a", "row_major", {}, st.in));
    bf.tensorize(bk, wmma_load_matrix("wmma.matrix_b", st.b_layout, {}, st.in));
    sf.tensorize(cii, wmma_gemm({}, Float(32), st.in));
    sc.tensorize(c.inner_i, wmma_store_matrix());
  }
}

ScheduleEntry gemm_wmma_entry() {
  return tensor_core_gemm_entry(
      "gemm_wmma",
      "GEMM on Tensor Cores (WMMA), fp16 or bf16 in, fp32 out; 128x128 blocks of 2x4 warps, 64x32 per "
      "warp, K step 32 through padded shared tiles; blocks rasterized in groups of G rows",
      /*ptx_mma=*/false);
}

ScheduleEntry tensor_core_gemm_entry(const std::string &name, const std::string &description,
                                     bool ptx_mma) {
  ScheduleEntry e;
  e.name = name;
  e.description = description;
  // G: the blocks' rasterization group (GemmWmmaTiles::raster_group); 1 is the row-major order.
  // BRW, BCW: warps along M and N; WRT, WCT: 16x16 fragments per warp along M and N; CHUNK:
  // the K step in 16s; S: stages. 0 is gemm_wmma_tiles' choice for the shape.
  e.default_shape = {{"M", 1024}, {"N", 1024}, {"K", 1024}, {"G", 1},   {"BRW", 0},
                     {"BCW", 0},  {"WRT", 0},  {"WCT", 0},  {"CHUNK", 0}, {"S", 0}};
  e.nonnegative = {"G", "BRW", "BCW", "WRT", "WCT", "CHUNK", "S"};
  // The grid `tessel_bench --tune` searched on the H100 (bench/Tune.cpp).
  e.knobs = {{"BRW", {2, 4}},   {"BCW", {2, 4}},    {"WRT", {2, 4}}, {"WCT", {2, 4}},
             {"CHUNK", {2, 4}}, {"S", {2, 3, 4}}, {"G", {1, 8}}};
  e.dtypes = {Float(16), BFloat(16)};
  e.build = [name, ptx_mma](const ShapeParams &p, DataType in) {
    auto get = [&](const char *k) { return knob_or_zero(p, k); };
    GemmWmmaTiles t = gemm_wmma_tiles(p.at("M"), p.at("N"), p.at("K"), name);
    for (auto [knob, field] : {std::pair{"BRW", &t.block_row_warps}, {"BCW", &t.block_col_warps},
                               {"WRT", &t.warp_row_tiles}, {"WCT", &t.warp_col_tiles},
                               {"CHUNK", &t.chunk}, {"S", &t.stages}})
      if (get(knob))
        *field = int(get(knob));
    // Callers that build with M, N, K only (bench/bench.cpp) get the row-major order.
    t.raster_group = get("G");
    return tensor_core_gemm(name, p.at("M"), p.at("N"), p.at("K"), t, ptx_mma, in);
  };
  return e;
}

} // namespace tessel
