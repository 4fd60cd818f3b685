// How to optimize convolution using TensorCores: TVM's tutorial in tessel.
//
// The algorithm and schedule are in schedules/Conv2dTensorCoreTutorial.cpp, ported statement
// for statement from the tutorial. This program prints the lowered IR before and after the four
// tensorize calls (as the tutorial does), the CUDA source, and then, on a GPU, runs the kernel
// on random data, checks it against a float64 reference and times it.
//
//   ./build/tutorials/conv2d_tensorcore              # the tutorial's shape (batch 256, 14 x 14)
//   ./build/tutorials/conv2d_tensorcore --quiet      # only the check and the time
//   ./build/tutorials/conv2d_tensorcore --batch 32   # any batch that is a multiple of 16
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Device.h"
#include "runtime/Half.h"
#include "schedules/Conv2dTensorCoreTutorial.h"

#include <llvm/Support/CommandLine.h>

#include <cmath>
#include <iostream>
#include <random>

using namespace tessel;

namespace {

// Checks sampled outputs against a direct float64 convolution of the same (fp16) inputs.
// fp32 accumulation of K = 9 * in_channels products: the error stays below K * 2^-24 times the
// sum of the products' magnitudes; we allow 2e-4 of that sum.
bool check(const Conv2dTutorialShape &sh, const std::vector<uint16_t> &a,
           const std::vector<uint16_t> &w, const std::vector<float> &out) {
  const int B = 16, N = sh.batch / B, H = sh.height, W = sh.width, IC = sh.in_channels / B,
            OC = sh.out_channels / B, K = sh.kernel, P = sh.pad;
  auto A_at = [&](int n, int h, int x, int ic, int nn, int ii) -> double {
    if (h < 0 || h >= H || x < 0 || x >= W)
      return 0.0;
    return half_to_float(a[(((((size_t(n) * H + h) * W + x) * IC + ic) * B + nn) * B + ii)]);
  };
  auto W_at = [&](int kh, int kw, int ic, int o, int ii, int oo) -> double {
    return half_to_float(w[(((((size_t(kh) * K + kw) * IC + ic) * OC + o) * B + ii) * B + oo)]);
  };
  std::mt19937_64 rng(7);
  double worst = 0;
  int bad = 0;
  const int samples = 2000;
  for (int s = 0; s < samples; ++s) {
    int n = rng() % N, h = rng() % H, x = rng() % W, o = rng() % OC, nn = rng() % B, oo = rng() % B;
    double ref = 0, mag = 0;
    for (int ic = 0; ic < IC; ++ic)
      for (int kh = 0; kh < K; ++kh)
        for (int kw = 0; kw < K; ++kw)
          for (int ii = 0; ii < B; ++ii) {
            double p = A_at(n, h + kh - P, x + kw - P, ic, nn, ii) * W_at(kh, kw, ic, o, ii, oo);
            ref += p;
            mag += std::fabs(p);
          }
    double got = out[(((((size_t(n) * H + h) * W + x) * OC + o) * B + nn) * B + oo)];
    double err = std::fabs(got - ref) / std::max(mag, 1e-30);
    worst = std::max(worst, err);
    if (!(err <= 2e-4) && bad++ < 5)
      std::cout << "  mismatch at [" << n << ", " << h << ", " << x << ", " << o << ", " << nn
                << ", " << oo << "]: got " << got << ", expected " << ref << "\n";
  }
  std::cout << "check: " << samples << " sampled outputs vs float64 reference, worst error "
            << worst << " of the products' magnitude (tolerance 2e-4): "
            << (bad ? "FAILED" : "ok") << "\n";
  return bad == 0;
}

} // namespace

int main(int argc, char **argv) {
  Conv2dTutorialShape shape; // batch 256, 14x14, 256 -> 512 channels, 3x3, pad 1
  llvm::cl::OptionCategory options("tutorial options");
  llvm::cl::opt<bool> quiet("quiet", llvm::cl::desc("print only the check and the time"),
                            llvm::cl::cat(options));
  llvm::cl::opt<int> batch("batch", llvm::cl::desc("the batch (a multiple of 16)"),
                           llvm::cl::init(shape.batch), llvm::cl::cat(options));
  llvm::cl::opt<int> size("size", llvm::cl::desc("the image's height and width"),
                          llvm::cl::init(shape.height), llvm::cl::cat(options));
  llvm::cl::HideUnrelatedOptions(options);
  llvm::cl::ParseCommandLineOptions(argc, argv, "TVM's Tensor Core conv2d tutorial in tessel\n");
  shape.batch = batch;
  shape.height = shape.width = size;
  try {
    if (!quiet) {
      ScheduledProgram before = conv2d_tensorcore_tutorial(shape, {.tensorize = false});
      std::cout << "// ---- lowered IR before tensorize ----\n"
                << lower(before.schedule, before.args) << "\n";
    }
    ScheduledProgram p = conv2d_tensorcore_tutorial(shape, {.tensorize = true});
    LoweredModule lowered = lower(p.schedule, p.args);
    if (!quiet)
      std::cout << "// ---- lowered IR after tensorize ----\n" << lowered << "\n";

    if (!Device::available()) {
      std::cout << "no GPU (" << Device::unavailable_reason()
                << "): lowered only; compiling for sm_90 to show the CUDA source\n";
      Module m = build(lowered, Target::cuda("sm_90"));
      if (!quiet)
        std::cout << m.source();
      return 0;
    }
    Module m = build(lowered, Target::cuda());
    if (!quiet)
      std::cout << "// ---- CUDA source ----\n" << m.source() << "\n";
    for (const KernelStats &k : m.compiled().kernels)
      std::cout << "kernel " << k.name << ": " << k.registers << " registers, "
                << k.static_shared_bytes << " bytes shared, spills " << k.spill_store_bytes
                << "/" << k.spill_load_bytes << " bytes\n";

    const Tensor &A = p.args[0], &W = p.args[1], &Conv = p.args[2];
    auto shape_of = [](const Tensor &t) {
      std::vector<int64_t> s;
      for (const Expr &e : t.shape())
        s.push_back(*as_const_int(e));
      return s;
    };
    DeviceArray a(A.dtype(), shape_of(A)), w(W.dtype(), shape_of(W)), c(Conv.dtype(), shape_of(Conv));
    std::vector<uint16_t> ha = random_halves(a.numel(), 1), hw = random_halves(w.numel(), 2);
    a.copy_from_host(ha.data(), a.bytes());
    w.copy_from_host(hw.data(), w.bytes());
    c.poison();
    m.run({&a, &w, &c});
    std::vector<float> out(c.numel());
    c.copy_to_host(out.data(), c.bytes());
    bool ok = check(shape, ha, hw, out);

    TimeResult t = m.time({&a, &w, &c}, {.number = 10, .repeat = 30});
    std::cout << "conv2d with tensor core: " << t.median_ms << " ms (median of 30 x 10 launches; min "
              << t.min_ms << ", max " << t.max_ms << "), " << p.flops / (t.median_ms * 1e9)
              << " TFLOP/s\n";
    return ok ? 0 : 1;
  } catch (const Error &e) {
    std::cerr << "tessel: error: " << e.what() << "\n";
    return 1;
  }
}
