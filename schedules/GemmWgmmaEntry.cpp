// The registry's gemm_wgmma and gemm_bias_gelu: their shapes, knobs and choices, and the
// knobs read into GemmWgmmaTiles (gemm_wgmma_tiles_from_knobs, which gemm_tc and the tuner
// use too). The schedule itself is GemmWgmma.cpp.
#include "schedules/Epilogues.h"
#include "schedules/GemmWgmma.h"

#include <algorithm>

namespace tessel {

GemmWgmmaTiles gemm_wgmma_tiles_from_knobs(const ShapeParams &p, DataType out) {
  auto get = [&](const char *k) { return knob_or_zero(p, k); };
  int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
  GemmWgmmaTiles t;
  bool explicit_tiles = get("BM") || get("BN") || get("BK");
  if (explicit_tiles) {
    if (get("BM"))
      t.block_m = int(get("BM"));
    if (get("BN"))
      t.block_n = int(get("BN"));
    if (get("BK"))
      t.block_k = int(get("BK"));
    t.warpgroups_m = t.block_m <= 256 ? std::max(1, t.block_m / 64) : 2;
  } else {
    t = gemm_wgmma_tiles(M, N, K);
  }
  if (get("S"))
    t.stages = int(get("S"));
  // SW=128 (the default) asks for the widest swizzle on explicit tiles (the chosen ones have it
  // wherever they can); another value sets it on any tiles, which must then take it.
  if (p.count("SW") && (explicit_tiles || get("SW") != 128))
    t.swizzle = int(get("SW"));
  t.raster_group = get("G");
  t.tma = get("TMA") != 0 && t.swizzle != 0 && t.stages >= 2;
  // WS=1 (the default) gives TMA fills warp roles wherever the warpgroups allow them.
  t.warp_specialized = t.tma && (!p.count("WS") || get("WS") != 0) && t.warpgroups_n == 1;
  if (get("SK"))
    t.split_k = int(get("SK"));
  // P=0: the tiles' choice, which stands only where the knobs leave it warp roles and whole K
  // (TMA=0, WS=0 or SK > 1 turn it off), explicit tiles (a tuning record's) included; P=1:
  // persistent on PB blocks (0: 132), whole K per tile unless SK says otherwise; P=2: not.
  if (explicit_tiles)
    t.persistent = persistent_by_default(M, N, t);
  if (get("P") == 2 || t.split_k > 1 || !t.roles())
    t.persistent = false;
  if (get("P") == 1 || get("PP") == 1) {
    t.persistent = true;
    if (get("PB"))
      t.persistent_blocks = int(get("PB"));
    if (!get("SK"))
      t.split_k = 1;
  }
  // LW: the most parts of K a tile of a persistent kernel's last round is split into (0: the
  // choice below, 1: not split).
  if (get("LW") > 1)
    t.split_last_wave = int(get("LW"));
  // PP=1: ping-pong consumers, each warpgroup a whole tile (128 x 128 unless BM / BN say).
  if (get("PP") == 1) {
    const int block_m = t.block_m, block_n = t.block_n;
    t = as_ping_pong(t, /*deepest=*/false);
    if (get("BM"))
      t.block_m = block_m;
    if (get("BN"))
      t.block_n = block_n;
  }
  // PP=0 on the tiles' choice (no P=2, TS or CL): ping-pong where ping_pong_by_default says,
  // through the deepest ring unless S says; small GEMMs with a K tail (no SK or PAD either)
  // read in place by blocks of 64 x 128 where small_ragged_by_default says.
  const bool own_form =
      get("PP") == 0 && !explicit_tiles && get("P") != 2 && !get("TS") && !get("CL");
  if (own_form && ping_pong_by_default(M, N, K, t, out))
    t = as_ping_pong(t, /*deepest=*/!get("S"));
  else if (own_form && !get("SK") && !get("PAD") && small_ragged_by_default(M, N, K, t, out))
    t = as_small_ragged(M, t);
  // LW=0 on the tiles' choice: persistent with the last round split where that pays; LW=1:
  // never split; LW=2..8: split into up to that many parts (with P=1).
  if (own_form && !get("LW") && get("P") == 0 && last_wave_split_by_default(M, N, K, t)) {
    t.persistent = true;
    t.split_last_wave = 8;
  }
  // TS=1: C stored by TMA through a shared staging tile, whole K (unless SK says otherwise),
  // the ring made shallower where the staging tile would not fit beside it (unless S says).
  if (get("TS")) {
    t.tma_store = true;
    if (!get("SK"))
      t.split_k = 1;
    if (!get("S"))
      t.stages = tma_store_stages(t, get("C16") ? 2 : 4);
  }
  // CL=1: clusters of 2 along M multicasting B's tile (2x1), CL=2: along N, A's (1x2); CL=0:
  // the tiles' choice (none but as_small_ragged's).
  if (get("CL"))
    t.cluster = int(get("CL"));
  if (get("CS")) // CS: the blocks of a cluster (0: 2)
    t.cluster_size = int(get("CS"));
  // PAD=0: ragged operands read in place by TMA or through padded copies by their size; PAD=1:
  // copies; PAD=2: in place wherever TMA can.
  if (get("PAD"))
    t.ragged_operands = get("PAD") == 1 ? GemmWgmmaTiles::RaggedOperands::Copied
                                        : GemmWgmmaTiles::RaggedOperands::InPlace;
  return t;
}

const std::map<std::string, std::vector<int64_t>> &gemm_wgmma_knobs() {
  // What `tessel tune` tries: block tiles of 1, 2 or 4 warpgroups, stages to fill shared
  // memory, rasterization groups, and the kernel's form: persistent or not (P: the tiles'
  // choice, on, off), ping-pong consumers (PP) and clusters of 2 (CL: none, 2x1, 1x2). Tiles that
  // do not fit are refused and recorded as such. (648 in all: `--trials` samples them.)
  static const std::map<std::string, std::vector<int64_t>> knobs = {
      {"BM", {64, 128, 256}}, {"BN", {128, 256}}, {"S", {3, 4, 5}}, {"G", {8, 16}},
      {"P", {0, 1, 2}},       {"PP", {0, 1}},     {"CL", {0, 1, 2}}};
  return knobs;
}

namespace {

// An entry over gemm_wgmma's shape and knobs (M, N, K; G, BM, BN, BK, S, SW, TMA), f16 or bf16.
ScheduleEntry wgmma_gemm_entry(const char *name, const char *description) {
  ScheduleEntry e;
  e.name = name;
  e.description = description;
  e.default_shape = {{"M", 1024}, {"N", 1024}, {"K", 1024}, {"G", 8},    {"BM", 0},
                     {"BN", 0},   {"BK", 0},   {"S", 0},    {"SW", 128}, {"TMA", 1},
                     {"WS", 1},   {"SK", 0},   {"P", 0},    {"PB", 0},   {"PP", 0},
                     {"TS", 0},   {"CL", 0},   {"CS", 0},   {"PAD", 0},  {"LW", 0}};
  e.nonnegative = {"G",  "BM", "BN", "BK", "S",  "SW", "TMA", "WS", "SK",
                   "P",  "PB", "PP", "TS", "CL", "CS", "PAD", "LW"};
  e.choices = {{"SW", {0, 32, 64, 128}}, {"TMA", {0, 1}}, {"WS", {0, 1}}, {"P", {0, 1, 2}},
               {"PP", {0, 1, 2}},        {"TS", {0, 1}},  {"CL", {0, 1, 2}},
               {"CS", {0, 2, 4, 8}},     {"PAD", {0, 1, 2}}};
  e.knobs = gemm_wgmma_knobs();
  e.dtypes = {Float(16), BFloat(16)};
  return e;
}

} // namespace

GemmWgmmaTiles gemm_wgmma_default_tiles(int64_t M, int64_t N, int64_t K, DataType out) {
  static const ShapeParams defaults = wgmma_gemm_entry("gemm_wgmma", "").default_shape;
  ShapeParams p = defaults;
  p["M"] = M;
  p["N"] = N;
  p["K"] = K;
  return gemm_wgmma_tiles_from_knobs(p, out);
}

ScheduleEntry gemm_wgmma_entry() {
  ScheduleEntry e = wgmma_gemm_entry(
      "gemm_wgmma", "GEMM on Hopper Tensor Cores (wgmma.mma_async, sm_90a), fp16 or bf16 "
                    "in, fp32 out (C16=1: out in the input type); 128x256 blocks "
                    "of 2 warpgroups rasterized in groups of 8, K step 64 through 4 TMA stages of "
                    "128-byte swizzled shared tiles; "
                    "BM, BN, BK, S (stages), G (rasterization group), SW "
                    "(swizzle: 128, 64, 32 or 0) override the tiles; TMA=1 (the default) fills "
                    "swizzled, pipelined tiles with TMA bulk copies on an mbarrier ring, TMA=0 "
                    "with cp.async; WS=1 (the default) issues the TMA copies from a producer "
                    "warpgroup of their own (warp roles, setmaxnreg), WS=0 from a consumer "
                    "thread; SK splits K into that many parts (0: the tiles' choice, "
                    "which splits grids under half a wave), added by a second kernel; P=1 "
                    "makes it persistent: PB blocks (0: 132, the SMs of an H100) walk the "
                    "tiles in the grouped order, the TMA ring running across them (P=0, the "
                    "default: where the tiles make 1 to 8 waves; P=2: never); PP=1 gives it "
                    "ping-pong consumers: two warpgroups each computing whole tiles (128x128 "
                    "unless BM, BN say) in turn, one storing while the other computes (PP=0, "
                    "the default: for a float32 C where K <= 1024 and 128x128 tiles make 2 "
                    "waves or more, through the deepest ring that fits; PP=2: never); TS=1 "
                    "stores C by TMA through a shared staging tile (TS=0, the default: from "
                    "registers); LW=2..8 splits each tile of a persistent kernel's last, partial "
                    "round into up to that many parts of K on the blocks it leaves idle, the "
                    "first part adding the others' sums in order (LW=0, the default: persistent "
                    "with LW=8 where that saves 4% of the rounds or more, as at "
                    "4096x11008x4096; LW=1: never); "
                    "CL=1 launches "
                    "clusters of 2 blocks along M that multicast B's tile by TMA, CL=2 along N "
                    "multicasting A's (0, the default: none), CS=4 or 8 makes those clusters of 4 or "
                    "8 blocks; C16=1 "
                    "rounds the float32 sum once as it is stored");
  e.default_shape["C16"] = 0;
  e.nonnegative.push_back("C16");
  e.choices["C16"] = {0, 1}; // C float32, or in A's type
  e.build = [](const ShapeParams &p, DataType in) {
    const DataType out = p.at("C16") ? in : Float(32);
    return gemm_wgmma(p.at("M"), p.at("N"), p.at("K"), gemm_wgmma_tiles_from_knobs(p, out), in,
                      out);
  };
  return e;
}

ScheduleEntry gemm_bias_gelu_entry() {
  ScheduleEntry e = wgmma_gemm_entry(
      "gemm_bias_gelu",
      "C = GELU(A x B + bias), A, B, bias (per column) and C of one type (float16 or "
      "bfloat16), one kernel: gemm_wgmma's schedule (sm_90a, same knobs) with bias and GELU "
      "(erf form) applied to the float32 accumulators in registers before the store");
  e.build = [](const ShapeParams &p, DataType in) {
    GemmWgmmaTiles t = gemm_wgmma_tiles_from_knobs(p, in);
    if (!p.at("SK")) // the epilogue is in the wgmma kernel's store: K whole
      t.split_k = 1;
    return gemm_wgmma_fused(p.at("M"), p.at("N"), p.at("K"), t, in, in, bias_gelu_epilogue(in));
  };
  return e;
}

} // namespace tessel
