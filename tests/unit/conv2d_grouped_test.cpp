// conv2d_grouped: grouped and depthwise convolutions on CUDA cores. On the CPU executor against
// a direct convolution written here on the NHWC / K x R x S x C/G arrays (exact on dyadic data)
// and against the float64 reference of the definition; the registers the sum stays in; NVRTC;
// errors; on a GPU (skipped without one) against the float64 reference.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "runtime/Device.h"
#include "runtime/Nvrtc.h"
#include "runtime/interp/Executor.h"
#include "schedules/Conv2dGrouped.h"

#include <gtest/gtest.h>


using namespace tessel;
using tessel::test::dyadic_values;
using tessel::test::expect_error;

namespace {

// "" when y equals the direct grouped convolution everywhere, else the first difference.
std::string direct_mismatch(const Conv2dTcShape &sh, int groups) {
  ScheduledProgram p = conv2d_grouped(sh, groups);
  const int N = sh.batch, H = sh.height, W = sh.width, C = sh.in_channels, K = sh.out_channels,
            R = sh.kernel, P = sh.out_height(), Q = sh.out_width(), Cg = C / groups,
            Kg = K / groups;
  std::vector<double> x = dyadic_values(size_t(N) * H * W * C, 1),
                      w = dyadic_values(size_t(K) * R * R * Cg, 2);
  interp::HostBuffer bx = interp::HostBuffer::from_doubles(sh.in_dtype, x);
  interp::HostBuffer bw = interp::HostBuffer::from_doubles(sh.in_dtype, w);
  interp::HostBuffer by =
      interp::HostBuffer::from_doubles(Float(32), std::vector<double>(size_t(N) * P * Q * K, NAN));
  interp::execute(lower(p.schedule, p.args), {&bx, &bw, &by});
  for (int n = 0; n < N; ++n)
    for (int oh = 0; oh < P; ++oh)
      for (int ow = 0; ow < Q; ++ow)
        for (int k = 0; k < K; ++k) {
          double ref = 0;
          for (int r = 0; r < R; ++r)
            for (int s = 0; s < R; ++s)
              for (int c = 0; c < Cg; ++c) {
                int h = oh * sh.stride + r * sh.dilation - sh.pad,
                    ww = ow * sh.stride + s * sh.dilation - sh.pad;
                if (h >= 0 && h < H && ww >= 0 && ww < W)
                  ref += x[((size_t(n) * H + h) * W + ww) * C + k / Kg * Cg + c] *
                         w[((size_t(k) * R + r) * R + s) * Cg + c];
              }
          double got = by.get(((size_t(n) * P + oh) * Q + ow) * K + k);
          if (got != ref)
            return "y[" + std::to_string(n) + ", " + std::to_string(oh) + ", " +
                   std::to_string(ow) + ", " + std::to_string(k) + "] = " + std::to_string(got) +
                   ", expected " + std::to_string(ref);
        }
  return "";
}

} // namespace

TEST(Conv2dGrouped, MatchesDirectConvolution) {
  // Depthwise 3x3 (MobileNet), with a channel multiplier of 2, strided; grouped (ResNeXt's 32
  // groups, smaller); dilated with asymmetric padding; one group (an ordinary conv).
  EXPECT_EQ(direct_mismatch({.batch = 2, .height = 8, .width = 8, .in_channels = 16,
                             .out_channels = 16, .kernel = 3, .pad = 1},
                            16),
            "");
  EXPECT_EQ(direct_mismatch({.batch = 2, .height = 9, .width = 9, .in_channels = 8,
                             .out_channels = 16, .kernel = 3, .pad = 1, .stride = 2},
                            8),
            "");
  EXPECT_EQ(direct_mismatch({.batch = 1, .height = 6, .width = 6, .in_channels = 32,
                             .out_channels = 32, .kernel = 3, .pad = 1},
                            4),
            "");
  EXPECT_EQ(direct_mismatch({.batch = 1, .height = 10, .width = 10, .in_channels = 12,
                             .out_channels = 8, .kernel = 3, .pad = 2, .dilation = 2,
                             .pad_end = 1},
                            4),
            "");
  EXPECT_EQ(direct_mismatch({.batch = 2, .height = 5, .width = 5, .in_channels = 8,
                             .out_channels = 8, .kernel = 1, .pad = 0, .in_dtype = BFloat(16)},
                            1),
            "");
}

TEST(Conv2dGrouped, ReferenceAndNarrowOutput) {
  Conv2dTcShape sh{.batch = 2, .height = 7, .width = 7, .in_channels = 16, .out_channels = 16,
                   .kernel = 3, .pad = 1, .out_dtype = Float(16)};
  ScheduledProgram p = conv2d_grouped(sh, 16);
  CheckResult r = check_on_cpu(p.schedule, p.args, p.num_inputs, 11);
  EXPECT_TRUE(r.compare.ok) << r.str();
  // The sum stays in a register and is stored (rounded) once.
  std::string cuda = codegen_cuda(lower(p.schedule, p.args));
  EXPECT_NE(cuda.find("float y_acc[1];"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("= __float2half_rn(y_acc[0]);"), std::string::npos) << cuda;
  CompileOptions o;
  o.arch = "sm_80";
  CompiledKernel k = nvrtc_compile(cuda, nvrtc_options(o), "grouped.cu");
  ASSERT_EQ(k.kernels.size(), 1u) << k.log;
  EXPECT_EQ(k.kernels[0].stack_bytes, 0) << k.log;
}

TEST(Conv2dGrouped, Errors) {
  Conv2dTcShape sh{.batch = 1, .height = 8, .width = 8, .in_channels = 16, .out_channels = 16};
  expect_error([&] { conv2d_grouped(sh, 3); },
               {"conv2d_grouped", "3 groups must divide", "C=16", "K=16"});
  expect_error([&] { conv2d_grouped(sh, 0); }, {"0 groups must divide"});
  Conv2dTcShape big = sh;
  big.kernel = 5;
  big.dilation = 3;
  expect_error([&] { conv2d_grouped(big, 16); }, {"dilated to 13", "larger than the padded"});
  Conv2dTcShape f32 = sh;
  f32.in_dtype = Float(32);
  expect_error([&] { conv2d_grouped(f32, 16); }, {"float16 or bfloat16, got float32"});
}

TEST(Conv2dGroupedGpu, MatchesReference) {
  if (!Device::available())
    GTEST_SKIP() << Device::unavailable_reason();
  for (int groups : {64, 8}) {
    Conv2dTcShape sh{.batch = 8, .height = 28, .width = 28, .in_channels = 64,
                     .out_channels = 64, .kernel = 3, .pad = 1, .stride = groups == 8 ? 2 : 1};
    ScheduledProgram p = conv2d_grouped(sh, groups);
    CheckResult r = check_on_gpu(p.schedule, p.args, p.num_inputs, TimeOptions{});
    EXPECT_TRUE(r.compare.ok) << r.str();
  }
}
