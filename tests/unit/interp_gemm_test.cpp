// The executor runs GEMM kernels of several schedules and matches a double reference.
#include "interp_kernels.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

using namespace tessel;
using namespace tessel::interp;
using namespace tessel::interp_test;

namespace {

/// One thread per output, 16x16 threads per block, guarded for sizes that do not divide.
/// `in` is the input type; products are cast to float32 and accumulated in a local float32.
LoweredFunc naive_gemm(int M, int N, int K, DataType in) {
  const DataType f32 = Float(32);
  Buffer A = flat("A", in, int64_t(M) * K), B = flat("B", in, int64_t(K) * N),
         C = flat("C", f32, int64_t(M) * N), acc = flat("acc", f32, 1, "local");
  Axes ax;
  Expr i = Expr(ax.by) * 16 + ax.ty, j = Expr(ax.bx) * 16 + ax.tx;
  Var k("k");
  Stmt update = st(acc, 0, ld(acc, 0) + cast(f32, ld(A, i * K + k)) * cast(f32, ld(B, k * N + j)));
  Stmt body = allocate(acc, Seq::make({st(acc, 0, make_zero(f32)), loop(k, K, update),
                                       st(C, i * N + j, ld(acc, 0))}));
  LoweredFunc f;
  f.name = "naive_gemm";
  f.args = {A, B, C};
  f.arg_shapes = {{M, K}, {K, N}, {M, N}};
  f.launch = launch((N + 15) / 16, (M + 15) / 16, 16, 16);
  f.body = ax.bind_all(f.launch, IfThenElse::make(i < M && j < N, body));
  return f;
}

} // namespace

TEST(InterpGemm, NaiveGuardedMatchesReference) {
  const int M = 50, N = 40, K = 30;
  auto a = random_values(M * K, 1), b = random_values(K * N, 2);
  HostBuffer A = HostBuffer::from_doubles(Float(32), a), B = HostBuffer::from_doubles(Float(32), b);
  HostBuffer C = HostBuffer::zeros(Float(32), M * N);
  execute(naive_gemm(M, N, K, Float(32)), {&A, &B, &C});
  auto ref = gemm_reference(A.to_doubles(), B.to_doubles(), M, N, K);
  auto got = C.to_doubles();
  for (size_t x = 0; x < ref.size(); ++x)
    ASSERT_NEAR(got[x], ref[x], 1e-5) << "element " << x;
}

// fp16 inputs, fp32 accumulation. Each product of two halves is exact in fp32, so the only
// error is fp32 rounding of the K partial sums: |err| <= K * 2^-24 * sum_k |a_k b_k|.
TEST(InterpGemm, Fp16InputsFp32AccumulationWithinStatedTolerance) {
  const int M = 32, N = 48, K = 64;
  auto a = random_values(M * K, 3, -2, 2), b = random_values(K * N, 4, -2, 2);
  HostBuffer A = HostBuffer::from_doubles(Float(16), a), B = HostBuffer::from_doubles(Float(16), b);
  HostBuffer C = HostBuffer::zeros(Float(32), M * N);
  execute(naive_gemm(M, N, K, Float(16)), {&A, &B, &C});
  auto ha = A.to_doubles(), hb = B.to_doubles(); // the fp16-rounded inputs
  auto ref = gemm_reference(ha, hb, M, N, K);
  auto got = C.to_doubles();
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double mag = 0;
      for (int k = 0; k < K; ++k)
        mag += std::fabs(ha[i * K + k] * hb[k * N + j]);
      ASSERT_NEAR(got[i * N + j], ref[i * N + j], K * 0x1p-24 * mag) << i << "," << j;
    }
  // And the inputs really were rounded to half: 2 decimal digits of precision lost.
  EXPECT_NE(ha[0], a[0]);
  EXPECT_NEAR(ha[0], a[0], 0x1p-10);
}

TEST(InterpGemm, SharedTiled128CubedMatchesReferenceUnderOneSecond) {
  const int M = 128, N = 128, K = 128;
  auto a = random_values(M * K, 5), b = random_values(K * N, 6);
  HostBuffer A = HostBuffer::from_doubles(Float(32), a), B = HostBuffer::from_doubles(Float(32), b);
  HostBuffer C = HostBuffer::zeros(Float(32), M * N);
  LoweredFunc f = tiled_gemm(M, N, K);
  EXPECT_EQ(f.launch.grid[0] * f.launch.grid[1], 16);
  EXPECT_EQ(f.launch.threads_per_block(), 256);
  auto start = std::chrono::steady_clock::now();
  execute(f, {&A, &B, &C});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("seconds", std::to_string(seconds));
  std::printf("[ timing   ] tiled 128^3 GEMM, 16 blocks x 256 threads: %.3f s\n", seconds);
  auto ref = gemm_reference(A.to_doubles(), B.to_doubles(), M, N, K);
  auto got = C.to_doubles();
  for (size_t x = 0; x < ref.size(); ++x)
    ASSERT_NEAR(got[x], ref[x], 1e-4) << "element " << x;
}
