#include "bench/Tune.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/lower/Lower.h"
#include "runtime/Build.h"
#include "runtime/Device.h"
#include "runtime/Half.h"
#include "runtime/KernelCache.h"
#include "schedules/Conv2dTc.h"
#include "schedules/GemmTc.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <thread>

namespace tessel::bench {

namespace {

// Timing of one candidate: fewer launches than the table's (the search runs many of them).
TimeOptions tune_timing() { return {.number = 5, .repeat = 15, .warmup = 2, .flush_l2 = false}; }

struct Candidate {
  std::string params;
  LoweredModule lowered;
  std::string error; ///< lowering or compilation failed
};

// Compiles every candidate's CUDA with NVRTC on all cores (the kernel cache is thread-safe), so
// that build() afterwards finds them in memory.
void compile_all(std::vector<Candidate> &cands, const std::string &arch) {
  std::vector<std::string> sources(cands.size());
  for (size_t i = 0; i < cands.size(); ++i)
    if (cands[i].error.empty())
      sources[i] = codegen_cuda(cands[i].lowered);
  std::atomic<size_t> next{0};
  unsigned n = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  std::vector<std::string> errors(cands.size());
  for (unsigned t = 0; t < n; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < cands.size();) {
        if (sources[i].empty())
          continue;
        try {
          CompileOptions o;
          o.arch = target_arch(cands[i].lowered, arch);
          KernelCache::global().compile(sources[i], o, cands[i].lowered.funcs[0].name + ".cu");
        } catch (const Error &e) {
          errors[i] = e.what();
        }
      }
    });
  for (std::thread &t : pool)
    t.join();
  for (size_t i = 0; i < cands.size(); ++i)
    if (!errors[i].empty())
      cands[i].error = errors[i];
}

// Runs, checks and times each candidate; logs each; prints the best.
void measure(const std::string &kind, const std::string &shape, double flops, double vendor_ms,
             std::vector<Candidate> &cands, double tolerance,
             const std::function<double(Module &)> &run_and_check,
             const std::function<TimeResult(Module &)> &time, std::ostream &csv) {
  std::printf("tune %s %s: %zu candidates; vendor %.4f ms (%.1f TFLOP/s)\n", kind.c_str(),
              shape.c_str(), cands.size(), vendor_ms, flops / (vendor_ms * 1e9));
  const Candidate *best = nullptr;
  double best_ms = INFINITY;
  for (Candidate &c : cands) {
    double ms = NAN, err = NAN;
    std::string note = c.error;
    if (note.empty()) {
      try {
        Module m = build(c.lowered, Target::cuda());
        err = run_and_check(m);
        if (err <= tolerance) {
          ms = time(m).median_ms;
          note = "ok";
        } else {
          note = "MISMATCH";
        }
      } catch (const Error &e) {
        note = e.what();
      }
    }
    note = note.substr(0, note.find('\n'));
    std::printf("  %-58s %9.4f ms %7.1f TF/s  err %.2e  %s\n", c.params.c_str(), ms,
                flops / (ms * 1e9), err, note.c_str());
    csv << kind << ",\"" << shape << "\",\"" << c.params << "\"," << ms << ","
        << flops / (ms * 1e9) << "," << vendor_ms << "," << err << ",\"" << note << "\"\n";
    if (note == "ok" && ms < best_ms) {
      best_ms = ms;
      best = &c;
    }
  }
  std::fflush(stdout);
  if (best)
    std::printf("best %s %s: %s  %.4f ms, %.1f TFLOP/s, %.3f x vendor\n", kind.c_str(),
                shape.c_str(), best->params.c_str(), best_ms, flops / (best_ms * 1e9),
                vendor_ms / best_ms);
}

} // namespace

void tune_gemm(int64_t M, int64_t N, int64_t K, CublasGemm &cublas, std::ostream &csv) {
  std::string shape = std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
  DeviceArray A(Float(16), {M, K}), B(Float(16), {K, N}), C(Float(32), {M, N}),
      Cv(Float(32), {M, N});
  std::vector<uint16_t> ha = random_halves(M * K, 11), hb = random_halves(K * N, 12);
  A.copy_from_host(ha.data(), A.bytes());
  B.copy_from_host(hb.data(), B.bytes());
  cublas.run(A, B, Cv, M, N, K);
  std::vector<float> vendor(Cv.numel());
  Cv.copy_to_host(vendor.data(), Cv.bytes());
  double vendor_ms = time_launches([&] { cublas.run(A, B, Cv, M, N, K); }, tune_timing()).median_ms;

  std::vector<Candidate> cands;
  for (const GemmTcConfig &config : gemm_tc_candidates(M, N, K)) {
    Candidate c{to_string(config), {}, {}};
    try {
      ScheduledProgram p = gemm_tc(M, N, K, config);
      c.lowered = lower(p.schedule, p.args);
    } catch (const Error &e) {
      c.error = e.what();
    }
    cands.push_back(std::move(c));
  }
  // On a Hopper GPU, gemm_tc's wgmma path too.
  if (hopper_gpu())
    for (const GemmWgmmaTiles &t : gemm_wgmma_candidates(M, N, K)) {
      Candidate c{to_string(t), {}, {}};
      try {
        ScheduledProgram p = gemm_wgmma(M, N, K, t);
        c.lowered = lower(p.schedule, p.args);
      } catch (const Error &e) {
        c.error = e.what();
      }
      cands.push_back(std::move(c));
    }
  compile_all(cands, Device::get(0).arch());
  measure("gemm", shape, 2.0 * M * N * K, vendor_ms, cands, 1e-3,
          [&](Module &m) {
            C.poison();
            m.run({&A, &B, &C});
            return max_rel_error(C, vendor);
          },
          [&](Module &m) { return m.time({&A, &B, &C}, tune_timing()); }, csv);
}

void tune_conv(const ConvShape &s, std::ostream &csv) {
  Conv2dTcShape sh{.batch = s.n, .height = s.h, .width = s.w, .in_channels = s.c,
                   .out_channels = s.k, .kernel = s.r, .pad = s.pad};
  std::string shape = std::to_string(s.n) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w) +
                      " " + std::to_string(s.c) + "->" + std::to_string(s.k) + " " +
                      std::to_string(s.r) + "x" + std::to_string(s.s);
  CudnnConv cudnn(s);
  DeviceArray dx(Float(16), {s.n, s.h, s.w, s.c}), dw(Float(16), {s.k, s.r, s.s, s.c}),
      dy(Float(16), {s.n, s.h, s.w, s.k});
  std::vector<uint16_t> x = random_halves(dx.numel(), 13), w = random_halves(dw.numel(), 14);
  dx.copy_from_host(x.data(), dx.bytes());
  dw.copy_from_host(w.data(), dw.bytes());
  cudnn.find_best(dx, dw, dy); // the candidates are checked against cuDNN's best
  cudnn.run(dx, dw, dy);
  std::vector<uint16_t> yh(dy.numel());
  dy.copy_to_host(yh.data(), dy.bytes());
  std::vector<float> vendor(yh.size());
  for (size_t i = 0; i < yh.size(); ++i)
    vendor[i] = half_to_float(yh[i]);
  double vendor_ms = time_launches([&] { cudnn.run(dx, dw, dy); }, tune_timing()).median_ms;
  DeviceArray y(Float(32), {sh.gemm_m(), sh.gemm_n()});

  // gemm_tc's tilings of the implicit GEMM (its K step must divide C, one filter tap), on the
  // WMMA path conv2d_tc takes, without rasterization.
  std::vector<Candidate> cands;
  for (const GemmTcConfig &config : gemm_tc_candidates(sh.gemm_m(), sh.gemm_n(), s.c)) {
    const GemmWmmaTiles &g = config.tiles;
    if (config.ptx_mma || g.raster_group)
      continue;
    Conv2dTcTiles t{.block_row_warps = g.block_row_warps, .block_col_warps = g.block_col_warps,
                    .warp_row_tiles = g.warp_row_tiles, .warp_col_tiles = g.warp_col_tiles,
                    .chunk = g.chunk, .stages = g.stages};
    Candidate c{to_string(g), {}, {}};
    try {
      ScheduledProgram p = conv2d_tc(sh, t);
      c.lowered = lower(p.schedule, p.args);
    } catch (const Error &e) {
      c.error = e.what();
    }
    cands.push_back(std::move(c));
  }
  compile_all(cands, Device::get(0).arch());
  // cuDNN rounds its output to fp16 (relative 2^-11); ours stays fp32.
  measure("conv", shape, sh.flops(), vendor_ms, cands, 2e-3,
          [&](Module &m) {
            y.poison();
            m.run({&dx, &dw, &y});
            return max_rel_error(y, vendor);
          },
          [&](Module &m) { return m.time({&dx, &dw, &y}, tune_timing()); }, csv);
}

} // namespace tessel::bench
