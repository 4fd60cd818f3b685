// How to optimize convolution using TensorCores: TVM's tutorial
// (https://tvm.apache.org/docs/tutorials/optimize/opt_conv_tensorcore.html) in tessel, statement
// for statement.
//
// The first part of this file is the tutorial's algorithm and schedule, in its order, as a
// function of the shape. The second is the program, which does what the tutorial's script does
// with them: prints the lowered IR before and after the four tensorize calls, the CUDA source,
// and then, on a GPU, runs the kernel on random data, checks it against a float64 reference and
// times it.
//
// One definition serves everyone: schedules/Conv2dTensorCoreTutorial.cpp compiles the first part
// into the library (it includes this file with TESSEL_CONV2D_TUTORIAL_DEFINITION defined), so
// the registered schedule `conv2d_tensorcore_tutorial` (tessel lower / run), the tests and the
// bench use exactly this schedule; this program is the second part, linked against it.
//
//   ./build/tutorials/conv2d_tensorcore              # the tutorial's shape (batch 256, 14 x 14)
//   ./build/tutorials/conv2d_tensorcore --quiet      # only the check and the time
//   ./build/tutorials/conv2d_tensorcore --batch 32   # any batch that is a multiple of 16
#ifdef TESSEL_CONV2D_TUTORIAL_DEFINITION
#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"
#include "schedules/Conv2dTensorCoreTutorial.h"
#include "schedules/WmmaIntrinsics.h"

namespace tessel {

ScheduledProgram conv2d_tensorcore_tutorial(const Conv2dTutorialShape &sh,
                                            const Conv2dTutorialOptions &options) {
  // The sizes of inputs and filters
  const int batch_size = sh.batch, height = sh.height, width = sh.width;
  const int in_channels = sh.in_channels, out_channels = sh.out_channels;
  const int kernel_h = sh.kernel, kernel_w = sh.kernel, pad_h = sh.pad, pad_w = sh.pad;
  const int stride_h = sh.stride, stride_w = sh.stride;

  // TensorCore shape
  const int block_size = 16;

  user_check(batch_size % block_size == 0 && in_channels % block_size == 0 &&
                 out_channels % block_size == 0,
             "conv2d_tensorcore_tutorial")
      << "batch, in_channels and out_channels must be multiples of " << block_size << ", got "
      << batch_size << ", " << in_channels << ", " << out_channels;
  user_check(stride_h == 1 && stride_w == 1, "conv2d_tensorcore_tutorial")
      << "the tutorial uses stride 1";
  // The tutorial's output is height x width (a 3 x 3 kernel, padding 1); here any kernel and pad.
  const int out_height = height + 2 * pad_h - kernel_h + 1;
  const int out_width = width + 2 * pad_w - kernel_w + 1;

  // Input feature map: (N, H, W, IC, n, ic)
  std::vector<Expr> data_shape = {batch_size / block_size, height, width,
                                  in_channels / block_size, block_size, block_size};
  // Kernel: (H, W, IC, OC, ic, oc)
  std::vector<Expr> kernel_shape = {kernel_h, kernel_w, in_channels / block_size,
                                    out_channels / block_size, block_size, block_size};
  // Output feature map: (N, H, W, OC, n, oc)
  std::vector<Expr> output_shape = {batch_size / block_size, out_height, out_width,
                                    out_channels / block_size, block_size, block_size};

  // Reduction axes
  IterVar kh = reduce_axis({0, kernel_h}, "kh");
  IterVar kw = reduce_axis({0, kernel_w}, "kw");
  IterVar ic = reduce_axis({0, in_channels / block_size}, "ic");
  IterVar ii = reduce_axis({0, block_size}, "ii");

  // Algorithm
  Tensor A = placeholder(data_shape, Float(16), "A");
  Tensor W = placeholder(kernel_shape, Float(16), "W");
  Tensor Apad = compute(
      {batch_size / block_size, height + 2 * pad_h, width + 2 * pad_w, in_channels / block_size,
       block_size, block_size},
      [&](Var n, Var h, Var w, Var i, Var nn, Var iii) {
        return if_then_else(all(h >= pad_h, h - pad_h < height, w >= pad_w, w - pad_w < width),
                            A(n, h - pad_h, w - pad_w, i, nn, iii), make_const(Float(16), 0));
      },
      "Apad", {"n", "h", "w", "i", "nn", "ii"});
  Tensor Conv = compute(
      output_shape,
      [&](Var n, Var h, Var w, Var o, Var nn, Var oo) {
        return sum(Apad(n, h * stride_h + kh, w * stride_w + kw, ic, nn, ii).astype(Float(32)) *
                       W(kh, kw, ic, o, ii, oo).astype(Float(32)),
                   {ic, kh, kw, ii});
      },
      "Conv", {"n", "h", "w", "o", "nn", "oo"});

  Schedule s = create_schedule({Conv});
  s[Apad].compute_inline();

  // Designate the memory hierarchy
  Tensor AS = s.cache_read(Apad, "shared", {Conv});
  Tensor WS = s.cache_read(W, "shared", {Conv});
  Tensor AF = s.cache_read(AS, "wmma.matrix_a", {Conv});
  Tensor WF = s.cache_read(WS, "wmma.matrix_b", {Conv});
  Tensor ConvF = s.cache_write(Conv, "wmma.accumulator");

  // The tensor intrinsics (the tutorial's intrin_wmma_load_matrix, intrin_wmma_gemm and
  // intrin_wmma_store_matrix) are wmma_load_matrix, wmma_gemm and wmma_store_matrix:
  // schedules/WmmaIntrinsics.cpp declares them the same way, a compute and its replacement.

  // Define tiling sizes
  const int block_row_warps = 4;
  const int block_col_warps = 2;
  const int warp_row_tiles = 2;
  const int warp_col_tiles = 4;
  const int warp_size = 32;
  const int chunk = 2;

  IterVar block_x = thread_axis("blockIdx.x");
  IterVar block_y = thread_axis("blockIdx.y");
  IterVar block_z = thread_axis("blockIdx.z");
  IterVar thread_x = thread_axis("threadIdx.x");
  IterVar thread_y = thread_axis("threadIdx.y");
  IterVar thread_z = thread_axis("threadIdx.z");

  auto [nc, hc, wc, oc, nnc, ooc] = s[Conv].axes<6>();
  IterVar block_k = s[Conv].fuse(hc, wc);
  s[Conv].bind(block_k, block_z);
  auto [nc1, nci] = s[Conv].split(nc, warp_row_tiles);
  auto [block_i, nc2] = s[Conv].split(nc1, block_row_warps);
  auto [oc1, oci] = s[Conv].split(oc, warp_col_tiles);
  auto [block_j, oc2] = s[Conv].split(oc1, block_col_warps);
  s[Conv].reorder({block_k, block_i, block_j, nc2, oc2, nci, oci, nnc, ooc});
  s[Conv].bind(block_i, block_x);
  s[Conv].bind(block_j, block_y);
  s[Conv].bind(nc2, thread_y);
  s[Conv].bind(oc2, thread_z);

  // Schedule local computation
  s[ConvF].compute_at(s[Conv], oc2);
  auto [n, h, w, o, nnf, oof] = s[ConvF].axes<6>();
  auto [ko, ki] = s[ConvF].split(ic, chunk);
  s[ConvF].reorder({ko, kh, ki, kw, n, o, nnf, oof, ii});

  // Move intermediate computation into each output compute tile
  s[AF].compute_at(s[ConvF], kw);
  s[WF].compute_at(s[ConvF], kw);

  // Schedule for A's share memory
  s[AS].compute_at(s[ConvF], kh);
  {
    auto [n, h, w, i, nn, ii] = s[AS].axes<6>();
    auto [tx, xo] = s[AS].split_nparts(n, block_row_warps);
    auto [ty, yo] = s[AS].split_nparts(xo, block_col_warps);
    IterVar t = s[AS].fuse(nn, ii);
    auto [to, ti] = s[AS].split(t, warp_size);
    s[AS].bind(tx, thread_y);
    s[AS].bind(ty, thread_z);
    s[AS].bind(ti, thread_x);
  }

  // Schedule for W's share memory
  s[WS].compute_at(s[ConvF], kh);
  {
    auto [kh, kw, ic, o, ii, oo] = s[WS].axes<6>();
    auto [tx, xo] = s[WS].split_nparts(o, block_row_warps);
    auto [ty, yo] = s[WS].split_nparts(xo, block_col_warps);
    IterVar t = s[WS].fuse(ii, oo);
    auto [to, ti] = s[WS].split_nparts(t, warp_size);
    s[WS].bind(tx, thread_y);
    s[WS].bind(ty, thread_z);
    s[WS].bind(to, thread_x);
    s[WS].vectorize(ti);
  }
  // print(tvm.lower(s, [A, W, Conv], simple_mode=True)): main() below.

  // Lowering computation to intrinsics
  if (options.tensorize) {
    s[AF].tensorize(s[AF].op_axis(-2), wmma_load_matrix("wmma.matrix_a"));
    s[WF].tensorize(s[WF].op_axis(-2), wmma_load_matrix("wmma.matrix_b"));
    s[Conv].tensorize(nnc, wmma_store_matrix());
    s[ConvF].tensorize(nnf, wmma_gemm());
  }

  ScheduledProgram p;
  p.schedule = s;
  p.args = {A, W, Conv};
  p.num_inputs = 2;
  p.flops = 2.0 * batch_size * out_height * out_width * out_channels * in_channels * kernel_h *
            kernel_w;
  return p;
}

} // namespace tessel

#else // the program
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Device.h"
#include "runtime/Half.h"
#include "schedules/Conv2dTensorCoreTutorial.h" // conv2d_tensorcore_tutorial(): the part above

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

#endif // TESSEL_CONV2D_TUTORIAL_DEFINITION
