// From a naive GEMM to Tensor Cores, one schedule at a time.
//
// C[i, j] = sum_k float(A[i, k]) * float(B[k, j]) with fp16 A and B and an fp32 C, scheduled
// three ways (all in schedules/):
//   1. gemm_naive:  one thread per output, every operand read from global memory K times.
//   2. gemm_shared: 64x64 tiles per block; A and B tiles staged through shared memory and
//                   reused 64 times; each thread accumulates 4x4 outputs in registers.
//   3. gemm_wmma:   the same idea one level up: 128x128 tiles per block, 8 warps each owning a
//                   64x32 tile held as 4x2 Tensor Core fragments. The fragment loops are first
//                   shown as plain loops over wmma.* buffers, then replaced by tensorize with
//                   WMMA calls (fill, load, mma, store), as in TVM's TensorCore tutorial.
// The program prints the lowered IR of each step and the CUDA source of the last; on a GPU it
// then runs all three on the same random data, checks them against a float64 reference and
// prints their times.
//
//   ./build/tutorials/gemm_tensorcore                 # 1024 x 1024 x 1024
//   ./build/tutorials/gemm_tensorcore 4096 4096 4096  # M N K (multiples of 16)
//   ./build/tutorials/gemm_tensorcore --quiet         # only the checks and the times
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Device.h"
#include "runtime/Half.h"
#include "schedules/Gemm.h"
#include "schedules/GemmWmma.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>

using namespace tessel;

namespace {

void print_ir(const char *title, const ScheduledProgram &p) {
  std::cout << "// ---- " << title << " ----\n" << lower(p.schedule, p.args) << "\n";
}

// Sampled outputs against float64 sums of the same fp16 inputs. fp32 accumulation of K products
// errs by at most about K * 2^-24 of the sum of their magnitudes; we allow four times that.
bool check(const char *name, int64_t M, int64_t N, int64_t K, const std::vector<uint16_t> &a,
           const std::vector<uint16_t> &b, const std::vector<float> &c) {
  std::mt19937_64 rng(7);
  double worst = 0, tolerance = 4.0 * double(K) * std::ldexp(1.0, -24);
  int bad = 0;
  const int samples = 2000;
  for (int s = 0; s < samples; ++s) {
    int64_t i = int64_t(rng() % M), j = int64_t(rng() % N);
    double ref = 0, mag = 0;
    for (int64_t k = 0; k < K; ++k) {
      double p = double(half_to_float(a[i * K + k])) * half_to_float(b[k * N + j]);
      ref += p;
      mag += std::fabs(p);
    }
    double err = std::fabs(c[i * N + j] - ref) / std::max(mag, 1e-30);
    worst = std::max(worst, err);
    if (!(err <= tolerance) && bad++ < 5)
      std::cout << "  " << name << ": C[" << i << ", " << j << "] = " << c[i * N + j]
                << ", expected " << ref << "\n";
  }
  std::cout << name << ": " << samples << " sampled outputs, worst error " << worst
            << " of sum |a*b| (tolerance " << tolerance << "): " << (bad ? "FAILED" : "ok")
            << "\n";
  return bad == 0;
}

// Builds, runs, checks and times one schedule on the GPU.
bool run_on_gpu(const char *name, const ScheduledProgram &p, int64_t M, int64_t N, int64_t K,
                const std::vector<uint16_t> &ha, const std::vector<uint16_t> &hb, bool quiet) {
  Module m = build(p.schedule, p.args, Target::cuda());
  if (!quiet && std::strcmp(name, "gemm_wmma") == 0)
    for (const KernelStats &k : m.compiled().kernels)
      std::cout << "kernel " << k.name << ": " << k.registers << " registers, "
                << k.static_shared_bytes << " bytes shared, spills " << k.spill_store_bytes << "/"
                << k.spill_load_bytes << " bytes\n";
  DeviceArray a(Float(16), {M, K}), b(Float(16), {K, N}), c(Float(32), {M, N});
  a.copy_from_host(ha.data(), a.bytes());
  b.copy_from_host(hb.data(), b.bytes());
  c.poison();
  m.run({&a, &b, &c});
  std::vector<float> hc(c.numel());
  c.copy_to_host(hc.data(), c.bytes());
  bool ok = check(name, M, N, K, ha, hb, hc);
  TimeResult t = m.time({&a, &b, &c}, {.number = 10, .repeat = 30});
  std::cout << name << ": " << t.median_ms << " ms (median of 30 x 10 launches), "
            << p.flops / (t.median_ms * 1e9) << " TFLOP/s\n";
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  bool quiet = false;
  std::vector<int64_t> shape;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quiet") == 0)
      quiet = true;
    else
      shape.push_back(std::atoll(argv[i]));
  }
  if (shape.empty())
    shape = {1024, 1024, 1024};
  if (shape.size() != 3) {
    std::cerr << "usage: gemm_tensorcore [--quiet] [M N K]\n";
    return 2;
  }
  const int64_t M = shape[0], N = shape[1], K = shape[2];
  try {
    // Every step computes the same definition (schedules/Gemm.h, gemm_definition) in fp16.
    ScheduledProgram naive = gemm_naive(M, N, K, Float(16));
    ScheduledProgram shared = gemm_shared(M, N, K, Float(16));
    GemmWmmaTiles tiles = gemm_wmma_tiles(M, N, K);
    ScheduledProgram wmma = gemm_wmma(M, N, K, tiles);
    std::cout << "gemm " << M << "x" << N << "x" << K << "; gemm_wmma tiles: block "
              << tiles.block_m() << "x" << tiles.block_n() << ", " << tiles.block_row_warps << "x"
              << tiles.block_col_warps << " warps of " << tiles.warp_row_tiles << "x"
              << tiles.warp_col_tiles << " fragments, K step " << tiles.block_k() << "\n";
    if (!quiet) {
      print_ir("1. naive: one thread per output", naive);
      print_ir("2. shared-memory tiles, 4x4 outputs per thread", shared);
      GemmWmmaTiles plain = tiles;
      plain.tensorize = false;
      print_ir("3. Tensor Core schedule before tensorize: plain loops over wmma.* buffers",
               gemm_wmma(M, N, K, plain));
      print_ir("4. after tensorize: WMMA calls", wmma);
    }

    if (!Device::available()) {
      if (!quiet) {
        Module m = build(wmma.schedule, wmma.args, Target::cuda("sm_90"));
        std::cout << "// ---- CUDA source (sm_90) ----\n" << m.source() << "\n";
      }
      std::cout << "no GPU (" << Device::unavailable_reason() << "): skipping the run\n";
      return 0;
    }
    if (!quiet) {
      Module m = build(wmma.schedule, wmma.args, Target::cuda());
      std::cout << "// ---- CUDA source ----\n" << m.source() << "\n";
    }
    std::vector<uint16_t> ha = random_halves(size_t(M * K), 1), hb = random_halves(size_t(K * N), 2);
    bool ok = true;
    ok &= run_on_gpu("gemm_naive", naive, M, N, K, ha, hb, quiet);
    ok &= run_on_gpu("gemm_shared", shared, M, N, K, ha, hb, quiet);
    ok &= run_on_gpu("gemm_wmma", wmma, M, N, K, ha, hb, quiet);
    return ok ? 0 : 1;
  } catch (const Error &e) {
    std::cerr << "tessel: error: " << e.what() << "\n";
    return 1;
  }
}
