// The seed tutorial's conv2d, tensorized with WMMA: its lowered IR keeps fragments as fragments,
// and the CPU executor (GPU semantics, Tensor Core intrinsics per warp) matches a float64
// reference at a small shape.
#include "compiler/tessel.h"
#include "compiler/codegen/CodeGenCUDA.h"
#include "runtime/Nvrtc.h"
#include "runtime/interp/Executor.h"
#include "schedules/Conv2dTensorCoreTutorial.h"

#include "SassUtil.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

using namespace tessel;

namespace {

// The smallest shape the tutorial's tiling divides: 8 batch blocks (2 per warp x 4 warps), 8
// output channel blocks (4 per warp x 2 warps), 2 input channel blocks (one chunk). Smaller
// batches leave warps of the block without batch blocks (ThreadExtents guards them).
Conv2dTutorialShape small_shape(int batch = 128) {
  Conv2dTutorialShape s;
  s.batch = batch;
  s.height = 2;
  s.width = 2;
  s.in_channels = 32;
  s.out_channels = 128;
  return s;
}

} // namespace

TEST(ConvTutorial, TensorizedIrUsesWmmaOnFragments) {
  ScheduledProgram p = conv2d_tensorcore_tutorial({}, {.tensorize = true});
  std::string ir = to_string(lower(p.schedule, p.args));
  for (const char *call : {"@wmma_fill_fragment(Conv.wmma.accumulator", "@wmma_load_matrix_sync(Apad.shared.wmma.matrix_a",
                           "@wmma_load_matrix_sync(W.shared.wmma.matrix_b", "@wmma_mma_sync(Conv.wmma.accumulator",
                           "@wmma_store_matrix_sync(Conv.wmma.accumulator"})
    EXPECT_NE(ir.find(call), std::string::npos) << call << " missing in\n" << ir;
  // No scalar access to fragment-scoped storage is left.
  for (const char *frag : {"Apad.shared.wmma.matrix_a[", "W.shared.wmma.matrix_b[",
                           "Conv.wmma.accumulator["})
    EXPECT_EQ(ir.find(frag), std::string::npos) << frag << " accessed as an array in\n" << ir;
  for (const char *alloc : {"allocate(Conv.wmma.accumulator, float32, [2048]), storage_scope = wmma.accumulator",
                            "allocate(Apad.shared, float16, [12288]), storage_scope = shared",
                            "allocate(W.shared, float16, [12288]), storage_scope = shared",
                            "allocate(Apad.shared.wmma.matrix_a, float16, [512])",
                            "allocate(W.shared.wmma.matrix_b, float16, [1024])"})
    EXPECT_NE(ir.find(alloc), std::string::npos) << alloc << " missing in\n" << ir;
}

class ConvTutorialBatch : public ::testing::TestWithParam<int> {};

// At batch 32 and 64 the convolution's warps along the batch (threadIdx.y) are fewer than the
// shared-memory copies': the block launches the copies' threads, the rest of the convolution's
// are guarded (TVM runs the tutorial's schedule at these batches too).
TEST_P(ConvTutorialBatch, CpuExecutorMatchesReferenceAtSmallShape) {
  Conv2dTutorialShape sh = small_shape(GetParam());
  ScheduledProgram p = conv2d_tensorcore_tutorial(sh, {.tensorize = true});
  LoweredModule m = lower(p.schedule, p.args);
  const int B = 16, N = sh.batch / B, H = sh.height, W = sh.width, IC = sh.in_channels / B,
            OC = sh.out_channels / B, K = sh.kernel;
  // Small dyadic values: every product and partial sum is exact in fp32, so the result must
  // equal the float64 reference exactly.
  std::mt19937_64 rng(3);
  auto values = [&](size_t n) {
    std::vector<double> v(n);
    for (double &x : v)
      x = (int(rng() % 17) - 8) / 8.0;
    return v;
  };
  std::vector<double> a = values(size_t(N) * H * W * IC * B * B);
  std::vector<double> w = values(size_t(K) * K * IC * OC * B * B);
  interp::HostBuffer A = interp::HostBuffer::from_doubles(Float(16), a);
  interp::HostBuffer Wb = interp::HostBuffer::from_doubles(Float(16), w);
  size_t out_n = size_t(N) * H * W * OC * B * B;
  interp::HostBuffer C = interp::HostBuffer::from_doubles(Float(32), std::vector<double>(out_n, NAN));
  auto t0 = std::chrono::steady_clock::now();
  interp::execute(m.funcs[0], {&A, &Wb, &C});
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "  CPU executor: " << secs << " s\n";
  std::vector<double> c = C.to_doubles();
  auto A_at = [&](int n, int h, int x, int ic, int nn, int ii) -> double {
    if (h < 0 || h >= H || x < 0 || x >= W)
      return 0.0;
    return a[(((((size_t(n) * H + h) * W + x) * IC + ic) * B + nn) * B + ii)];
  };
  for (int n = 0; n < N; ++n)
    for (int h = 0; h < H; ++h)
      for (int x = 0; x < W; ++x)
        for (int o = 0; o < OC; ++o)
          for (int nn = 0; nn < B; ++nn)
            for (int oo = 0; oo < B; ++oo) {
              double ref = 0;
              for (int ic = 0; ic < IC; ++ic)
                for (int kh = 0; kh < K; ++kh)
                  for (int kw = 0; kw < K; ++kw)
                    for (int ii = 0; ii < B; ++ii)
                      ref += A_at(n, h + kh - sh.pad, x + kw - sh.pad, ic, nn, ii) *
                             w[(((((size_t(kh) * K + kw) * IC + ic) * OC + o) * B + ii) * B + oo)];
              size_t idx = (((((size_t(n) * H + h) * W + x) * OC + o) * B + nn) * B + oo);
              ASSERT_EQ(c[idx], ref) << "Conv[" << n << ", " << h << ", " << x << ", " << o << ", "
                                     << nn << ", " << oo << "]";
            }
}

INSTANTIATE_TEST_SUITE_P(Batches, ConvTutorialBatch, ::testing::Values(32, 64, 128),
                         [](const auto &info) { return "batch" + std::to_string(info.param); });

// The tutorial's kernel compiles for Ampere and Hopper and uses the Tensor Cores (HMMA).
TEST(ConvTutorial, CompilesToHmmaForSm80AndSm90) {
  ScheduledProgram p = conv2d_tensorcore_tutorial({}, {.tensorize = true});
  std::string src = codegen_cuda(lower(p.schedule, p.args));
  EXPECT_NE(src.find("nvcuda::wmma::mma_sync("), std::string::npos) << src;
  if (!tessel::test::compiles_for_sm80_and_sm90(src, "conv2d_tensorcore", {"HMMA"}))
    GTEST_SKIP() << tessel::test::kNoCuobjdump;
}
