// The 8-bit float types float8_e4m3 and float8_e5m2: their names, every encoding, rounding from
// double (to nearest even, saturating, as cuda_fp8.h's __NV_SATFINITE conversions), the casts of
// the IR on the executor against the float64 reference, and their CUDA compiled by NVRTC.
#include "TestUtil.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Float8.h"
#include "runtime/Nvrtc.h"
#include "runtime/interp/Executor.h"
#include "runtime/interp/ResultCheck.h"

#include "SassUtil.h"

#include <gtest/gtest.h>

#if __has_include(<cuda_fp8.h>)
#include <cuda_fp8.h>
#define TESSEL_HAVE_CUDA_FP8 1
#endif

#include <cmath>
#include <random>

using namespace tessel;
using tessel::test::expect_error;

TEST(Float8, TypeNamesAndSizes) {
  EXPECT_EQ(Float8E4M3().str(), "float8_e4m3");
  EXPECT_EQ(Float8E5M2(4).str(), "float8_e5m2x4");
  EXPECT_EQ(DataType::parse("float8_e4m3"), Float8E4M3());
  EXPECT_EQ(DataType::parse("float8_e5m2x16"), Float8E5M2(16));
  EXPECT_EQ(Float8E4M3().bytes(), 1);
  EXPECT_EQ(Float8E5M2(16).bytes(), 16);
  EXPECT_TRUE(Float8E4M3().is_float() && Float8E4M3().is_float8());
  EXPECT_FALSE(Float(16).is_float8() || BFloat(16).is_float8() || UInt(8).is_float8());
  EXPECT_NE(Float8E4M3(), Float8E5M2());
  EXPECT_EQ(Float8E4M3().significand_bits(), 4);
  EXPECT_EQ(Float8E5M2().significand_bits(), 3);
  EXPECT_EQ(Float8E4M3().max_finite(), 448.0);
  EXPECT_EQ(Float8E5M2().max_finite(), 57344.0);
  EXPECT_EQ(Float8E4M3().min_normal_exponent(), -6);
  EXPECT_EQ(Float8E5M2().min_normal_exponent(), -14);
  expect_error([] { DataType::parse("float8_e3m4"); }, {"float8_e4m3, float8_e5m2"});
}

// Every code decodes to a value that encodes back to it; the NaNs stay NaN, e5m2's infinities
// saturate to its largest finite value (the conversions are __NV_SATFINITE).
TEST(Float8, EveryCodeRoundTrips) {
  for (const Float8Format *f : {&kE4M3, &kE5M2}) {
    int nans = 0, infs = 0;
    for (int c = 0; c < 256; ++c) {
      const double v = float8_value(uint8_t(c), *f);
      if (std::isnan(v)) {
        ++nans;
        EXPECT_TRUE(std::isnan(float8_value(float8_bits(v, *f), *f))) << c;
        continue;
      }
      if (std::isinf(v)) {
        ++infs;
        EXPECT_EQ(float8_bits(v, *f), (c & 0x80) | 0x7b) << c;
        continue;
      }
      EXPECT_EQ(float8_bits(v, *f), c) << "code " << c << " value " << v;
      EXPECT_EQ(round_to_float8(v, *f), v) << c;
      EXPECT_LE(std::fabs(v), f->max_finite);
    }
    EXPECT_EQ(nans, f == &kE4M3 ? 2 : 6); // e4m3: S.1111.111; e5m2: S.11111.{01,10,11}
    EXPECT_EQ(infs, f == &kE4M3 ? 0 : 2);
  }
}

TEST(Float8, KnownValues) {
  EXPECT_EQ(float8_value(0x7e, kE4M3), 448.0);          // largest finite
  EXPECT_EQ(float8_value(0xfe, kE4M3), -448.0);
  EXPECT_EQ(float8_value(0x38, kE4M3), 1.0);            // exponent 7 = bias
  EXPECT_EQ(float8_value(0x08, kE4M3), 0x1p-6);         // smallest normal
  EXPECT_EQ(float8_value(0x07, kE4M3), 7 * 0x1p-9);     // largest subnormal
  EXPECT_EQ(float8_value(0x01, kE4M3), 0x1p-9);         // smallest subnormal
  EXPECT_TRUE(std::isnan(float8_value(0x7f, kE4M3)));
  EXPECT_EQ(float8_value(0x78, kE4M3), 256.0);          // not an infinity in e4m3
  EXPECT_EQ(float8_value(0x7b, kE5M2), 57344.0);
  EXPECT_EQ(float8_value(0x3c, kE5M2), 1.0);
  EXPECT_EQ(float8_value(0x04, kE5M2), 0x1p-14);
  EXPECT_EQ(float8_value(0x01, kE5M2), 0x1p-16);
  EXPECT_EQ(float8_value(0x03, kE5M2), 3 * 0x1p-16);
  EXPECT_EQ(float8_value(0x7c, kE5M2), INFINITY);
  EXPECT_EQ(float8_value(0xfc, kE5M2), -INFINITY);
  EXPECT_TRUE(std::signbit(float8_value(0x80, kE4M3)) && float8_value(0x80, kE4M3) == 0.0);
}

TEST(Float8, RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(round_to_e4m3(1.0625), 1.0);     // halfway 1 .. 1.125: the even one
  EXPECT_EQ(round_to_e4m3(1.1875), 1.25);    // halfway 1.125 .. 1.25: the even one
  EXPECT_EQ(round_to_e4m3(1.0625 + 0x1p-20), 1.125);
  EXPECT_EQ(round_to_e4m3(449.0), 448.0);
  EXPECT_EQ(round_to_e4m3(464.0), 448.0);    // max + half an ulp
  EXPECT_EQ(round_to_e4m3(1e30), 448.0);
  EXPECT_EQ(round_to_e4m3(INFINITY), 448.0);
  EXPECT_EQ(round_to_e4m3(-INFINITY), -448.0);
  EXPECT_TRUE(std::isnan(round_to_e4m3(NAN)));
  EXPECT_EQ(round_to_e4m3(0x1p-10), 0.0);    // half the smallest subnormal: even (zero)
  EXPECT_EQ(round_to_e4m3(3 * 0x1p-11), 0x1p-9);
  EXPECT_EQ(round_to_e4m3(5 * 0x1p-10), 2 * 0x1p-9); // 2.5 quanta: even
  EXPECT_TRUE(std::signbit(round_to_e4m3(-0x1p-12)));
  EXPECT_EQ(round_to_e5m2(61440.0), 57344.0);
  EXPECT_EQ(round_to_e5m2(1e9), 57344.0);
  EXPECT_EQ(round_to_e5m2(-INFINITY), -57344.0);
  EXPECT_EQ(round_to_e5m2(1.125), 1.0);      // halfway 1 .. 1.25: even
  EXPECT_EQ(round_to_e5m2(1.375), 1.5);
  EXPECT_EQ(round_to_e5m2(0x1p-17), 0.0);
  EXPECT_EQ(round_to_e5m2(3 * 0x1p-18), 0x1p-16);
}

#ifdef TESSEL_HAVE_CUDA_FP8
// Against cuda_fp8.h's own host conversion (__nv_cvt_double_to_fp8 with __NV_SATFINITE, what
// the __nv_fp8_* constructors call) on random doubles over every binade, exact ties included.
TEST(Float8, MatchesCudaFp8Conversions) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> expo(-20, 18);
  for (int i = 0; i < 200000; ++i) {
    double x = std::ldexp(mant(rng), expo(rng)) * (i % 2 ? -1 : 1);
    if (i % 5 == 0) { // ties: a value of the format plus half its quantum
      const Float8Format &f = i % 10 == 0 ? kE4M3 : kE5M2;
      const double v = float8_value(uint8_t(rng() % 256), f);
      if (!std::isfinite(v))
        continue;
      int e;
      std::frexp(v, &e);
      x = v + std::ldexp(1.0, std::max(e - 1, f.min_exponent) - f.mantissa_bits - 1);
    }
    ASSERT_EQ(float8_bits(x, kE4M3), __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E4M3))
        << std::hexfloat << x;
    ASSERT_EQ(float8_bits(x, kE5M2), __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E5M2))
        << std::hexfloat << x;
  }
  for (int c = 0; c < 256; ++c) // decoding, through cuda_fp8.h's (exact) half conversion
    for (auto [f, interpretation] : {std::pair{&kE4M3, __NV_E4M3}, std::pair{&kE5M2, __NV_E5M2}}) {
      __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(c), interpretation);
      const double v = float8_value(uint8_t(c), *f), cuda = double(__half2float(__half(h)));
      EXPECT_TRUE(std::isnan(v) ? std::isnan(cuda) : cuda == v) << c << ": " << v << " " << cuda;
    }
}
#endif

namespace {

// y = float32(float8(x)), z = float8(float16(x)) in the other format, an elementwise kernel.
struct CastKernel {
  Tensor x, q, y, z;
};

CastKernel cast_kernel(int64_t n, DataType f8, DataType other) {
  CastKernel k;
  k.x = placeholder({n}, Float(32), "x");
  k.q = compute({n}, [&](Var i) { return k.x(i).astype(f8); }, "q");
  k.y = compute({n}, [&](Var i) { return k.q(i).astype(Float(32)) * 2.0f; }, "y");
  k.z = compute({n}, [&](Var i) { return k.x(i).astype(Float(16)).astype(other); }, "z");
  return k;
}

LoweredModule lower_elementwise(const Tensor &out, const std::vector<Tensor> &args,
                                const std::vector<Tensor> &inlined = {}) {
  Schedule s = create_schedule({out});
  for (const Tensor &t : inlined)
    s[t].compute_inline();
  auto [o, i] = s[out].split(s[out].op_axis(0), 128);
  s[out].bind(o, thread_axis("blockIdx.x"));
  s[out].bind(i, thread_axis("threadIdx.x"));
  return lower(s, args);
}

} // namespace

// The executor rounds casts to float8 as the reference does (and the GPU), saturating; the
// generated CUDA uses cuda_fp8.h's types and compiles for sm_90.
TEST(Float8, CastsOnTheExecutorAndInCuda) {
  for (DataType f8 : {Float8E4M3(), Float8E5M2()}) {
    SCOPED_TRACE(f8.str());
    const DataType other = f8 == Float8E4M3() ? Float8E5M2() : Float8E4M3();
    CastKernel k = cast_kernel(256, f8, other);
    // Values over the whole range, beyond the largest finite one, and ties.
    std::vector<double> xs(256);
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> mant(-2.0, 2.0);
    std::uniform_int_distribution<int> expo(-18, 17);
    for (double &v : xs)
      v = double(float(std::ldexp(mant(rng), expo(rng))));
    xs[0] = 1e6, xs[1] = -1e6, xs[2] = 1.0625, xs[3] = 0x1p-10, xs[4] = 464.0;
    HostTensor hx{Float(32), {256}, xs};
    for (const Tensor &out : {k.y, k.z}) {
      LoweredModule m = lower_elementwise(out, {k.x, out}, out == k.y ? std::vector{k.q}
                                                                       : std::vector<Tensor>{});
      interp::HostBuffer X = interp::HostBuffer::from_doubles(Float(32), xs);
      interp::HostBuffer O(out.dtype(), 256);
      interp::execute(m, {&X, &O});
      std::vector<double> ref = evaluate_reference(out, {{k.x, hx}});
      for (size_t i = 0; i < xs.size(); ++i)
        ASSERT_EQ(O.get(i), ref[i]) << out.name() << "[" << i << "], x = " << xs[i];
      std::string src = codegen_cuda(m);
      EXPECT_NE(src.find("#include <cuda_fp8.h>"), std::string::npos);
      EXPECT_NE(src.find(out == k.y ? f8 == Float8E4M3() ? "__nv_fp8_e4m3(" : "__nv_fp8_e5m2("
                                    : f8 == Float8E4M3() ? "__nv_fp8_e5m2(" : "__nv_fp8_e4m3("),
                std::string::npos)
          << src;
      CompileOptions o;
      o.arch = "sm_90";
      EXPECT_FALSE(nvrtc_compile(src, nvrtc_options(o), "float8_" + out.name() + ".cu")
                       .cubin.empty());
    }
    // Saturation as stored: 1e6 becomes the largest finite value, twice.
    LoweredModule m = lower_elementwise(k.y, {k.x, k.y}, {k.q});
    interp::HostBuffer X = interp::HostBuffer::from_doubles(Float(32), xs);
    interp::HostBuffer O(Float(32), 256);
    interp::execute(m, {&X, &O});
    EXPECT_EQ(O.get(0), 2 * f8.max_finite());
    EXPECT_EQ(O.get(1), -2 * f8.max_finite());
  }
  // The executor keeps float8 buffers as their codes.
  interp::HostBuffer b = interp::HostBuffer::from_doubles(Float8E4M3(), {1.0, -448.0, 1e9});
  const auto *codes = reinterpret_cast<const uint8_t *>(b.data());
  EXPECT_EQ(codes[0], 0x38);
  EXPECT_EQ(codes[1], 0xfe);
  EXPECT_EQ(codes[2], 0x7e); // saturated
  EXPECT_EQ(b.get(2), 448.0);
}

// float8 is a storage type: arithmetic in it is refused with what to do.
TEST(Float8, ArithmeticIsRefusedInCuda) {
  Tensor a = placeholder({128}, Float8E4M3(), "a");
  Tensor c = compute({128}, [&](Var i) { return a(i) + a(i); }, "c");
  expect_error([&] { codegen_cuda(lower_elementwise(c, {a, c})); },
               {"float8 types are for storage", "cast them to float32 first"});
}
