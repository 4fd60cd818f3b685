#include "schedules/GemmTc.h"

#include "compiler/lower/LaunchLimits.h"
#include "compiler/support/Error.h"
#include "runtime/TuningDb.h"
#include "schedules/GemmMma.h"

#include <llvm/ADT/StringExtras.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <tuple>

namespace tessel {

namespace {

bool fits_shared_memory(const GemmWmmaTiles &t);

// The measured winners of gemm_mma and gemm_wmma shipped with tessel (shipped_tuning_records:
// `tessel_bench --tune` on an H100, 2026-11-23), per shape the fastest of those whose tiles fit
// a block off Hopper. The records name the GPU; gemm_tc has no target to key them on off Hopper
// (where it runs gemm_wgmma), so they are taken on any GPU as the best measurement there is.
// Another GPU wants its own `tessel tune`.
const std::vector<GemmTcMeasured> &tuned() {
  static const std::vector<GemmTcMeasured> table = [] {
    std::map<std::tuple<int64_t, int64_t, int64_t>, std::pair<double, GemmTcMeasured>> best;
    for (const TuningRecord &r : shipped_tuning_records()) {
      bool mma = r.schedule == "gemm_mma";
      if ((!mma && r.schedule != "gemm_wmma") || !r.ok())
        continue;
      auto knob = [&](const char *k) { return int(r.config.at(k)); };
      GemmTcConfig c{.tiles = {.block_row_warps = knob("BRW"), .block_col_warps = knob("BCW"),
                               .warp_row_tiles = knob("WRT"), .warp_col_tiles = knob("WCT"),
                               .chunk = knob("CHUNK"), .stages = knob("S"),
                               .raster_group = knob("G")},
                     .ptx_mma = mma};
      if (!fits_shared_memory(c.tiles))
        continue;
      int64_t M = r.shape.at("M"), N = r.shape.at("N"), K = r.shape.at("K");
      auto it = best.find({M, N, K});
      if (it == best.end() || r.median_ms < it->second.first)
        best[{M, N, K}] = {r.median_ms, GemmTcMeasured{M, N, K, c}};
    }
    std::vector<GemmTcMeasured> out;
    for (auto &[shape, entry] : best)
      out.push_back(entry.second);
    return out;
  }();
  return table;
}

// This path runs off Hopper: the tiles must fit the shared memory of an sm_80 block (163 KiB,
// the most of any GPU before Hopper), even where they were measured on an H100 (227 KiB): the
// 4096^3 winner's 204 KiB would not launch on an A100.
bool fits_shared_memory(const GemmWmmaTiles &t) {
  return gemm_wmma_shared_bytes(t) <= max_shared_bytes_per_block("sm_80");
}

bool fits(const GemmWmmaTiles &t, int64_t M, int64_t N, int64_t K) {
  return M % t.block_m() == 0 && N % t.block_n() == 0 && K % t.block_k() == 0 &&
         fits_shared_memory(t);
}

} // namespace

const std::vector<GemmTcMeasured> &gemm_tc_measured() { return tuned(); }

std::string to_string(const GemmWmmaTiles &t) {
  return "brw=" + std::to_string(t.block_row_warps) + " bcw=" + std::to_string(t.block_col_warps) +
         " wrt=" + std::to_string(t.warp_row_tiles) + " wct=" + std::to_string(t.warp_col_tiles) +
         " chunk=" + std::to_string(t.chunk) + " stages=" + std::to_string(t.stages) +
         " raster=" + std::to_string(t.raster_group);
}

std::string to_string(const GemmTcConfig &c) {
  return std::string(c.ptx_mma ? "mma " : "wmma ") + to_string(c.tiles);
}

std::vector<GemmTcConfig> gemm_tc_candidates(int64_t M, int64_t N, int64_t K) {
  std::vector<GemmTcConfig> out;
  for (bool ptx_mma : {false, true})
    for (auto [brw, bcw] : {std::pair{2, 4}, {4, 2}, {2, 2}})
      for (auto [wrt, wct] : {std::pair{4, 2}, {2, 4}, {4, 4}})
        for (int chunk : {2, 4})
          for (int stages : {2, 3, 4})
            for (int raster : {0, 8}) {
              GemmWmmaTiles t{.block_row_warps = brw, .block_col_warps = bcw,
                              .warp_row_tiles = wrt, .warp_col_tiles = wct, .chunk = chunk,
                              .stages = stages};
              t.raster_group = raster;
              if (fits(t, M, N, K))
                out.push_back({t, ptx_mma});
            }
  return out;
}

GemmTcConfig gemm_tc_config(int64_t M, int64_t N, int64_t K) {
  const GemmTcMeasured *best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const GemmTcMeasured &t : tuned()) {
    if (!fits(t.config.tiles, M, N, K))
      continue;
    double d = std::abs(std::log2(double(M) / t.M)) + std::abs(std::log2(double(N) / t.N)) +
               std::abs(std::log2(double(K) / t.K));
    if (d < best_distance) {
      best_distance = d;
      best = &t;
    }
  }
  if (best)
    return best->config;
  GemmTcConfig c{gemm_wmma_tiles(M, N, K)};
  if (K / c.tiles.block_k() > 1)
    c.tiles.stages = 3;
  return c;
}

ScheduledProgram gemm_tc(int64_t M, int64_t N, int64_t K, const GemmTcConfig &config,
                         DataType in, DataType out) {
  return config.ptx_mma || out != Float(32) ? gemm_mma(M, N, K, config.tiles, in, out)
                                            : gemm_wmma(M, N, K, config.tiles, in);
}

ScheduledProgram gemm_tc(int64_t M, int64_t N, int64_t K, DataType in, DataType out) {
  // On a Hopper GPU the wgmma path, which measured 0.90-0.99x cuBLAS (1.29x at 1024^3) where the
  // best mma.sync configuration measured 0.49x (bench/RESULTS.md), wherever its tiles fit (any
  // M and K and N from 32: it pads what its copies and blocks cannot take).
  if (hopper_gpu() && N >= 32)
    return gemm_wgmma(M, N, K, in, out);
  return gemm_tc(M, N, K, gemm_tc_config(M, N, K), in, out);
}

ScheduleEntry gemm_tc_entry() {
  ScheduleEntry e;
  e.name = "gemm_tc";
  e.description = "tuned Tensor Core GEMM, fp16 or bf16 in, fp32 out: on Hopper gemm_wgmma, elsewhere "
                  "gemm_mma / gemm_wmma with cp.async-pipelined shared tiles, rasterized blocks "
                  "and tiles measured per shape; knobs BM, BN, BK, S, G, SK, P, PP, CL "
                  "(gemm_wgmma's; 0: the schedule's choice) make it gemm_wgmma with those "
                  "tiles and that form on any GPU";
  e.default_shape = {{"M", 4096}, {"N", 4096}, {"K", 4096}, {"BM", 0}, {"BN", 0}, {"BK", 0},
                     {"S", 0},    {"G", 0},    {"SK", 0},   {"P", 0},  {"PP", 0}, {"CL", 0}};
  e.nonnegative = {"BM", "BN", "BK", "S", "G", "SK", "P", "PP", "CL"};
  e.choices = {{"P", {0, 1, 2}}, {"PP", {0, 1, 2}}, {"CL", {0, 1, 2}}};
  e.knobs = gemm_wgmma_knobs();
  e.dtypes = {Float(16), BFloat(16)};
  e.build = [](const ShapeParams &p, DataType in) {
    const int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
    std::vector<std::string> set;
    for (const char *k : {"BM", "BN", "BK", "S", "G", "SK", "P", "PP", "CL"})
      if (p.count(k) && p.at(k))
        set.push_back(k);
    if (set.empty())
      return gemm_tc(M, N, K, in);
    // The knobs are the Hopper kernel's tiles: with any of them set (by hand or by a tuning
    // record of an sm_90 GPU) gemm_tc is gemm_wgmma, whatever GPU this process sees, so that
    // `compile --arch sm_90` and `export` build what was tuned; on an older GPU its compile is
    // refused naming wgmma's sm_90a.
    user_check(N >= 32, "gemm_tc")
        << "the knobs " << llvm::join(set, ", ") << " choose the tiles of gemm_tc's Hopper kernel "
        << "(gemm_wgmma), which needs N >= 32, got N=" << N << ": leave them 0";
    // gemm_wgmma's defaults (rasterization, swizzle, TMA) with the knobs given.
    ShapeParams w = find_schedule("gemm_wgmma").default_shape;
    for (const auto &[k, v] : p)
      if (v || !w.count(k))
        w[k] = v;
    return gemm_wgmma(M, N, K, gemm_wgmma_tiles_from_knobs(w), in);
  };
  return e;
}

} // namespace tessel
