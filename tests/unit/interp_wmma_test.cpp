// WMMA intrinsics executed per warp on per-warp fragments.
#include "interp_kernels.h"

#include "compiler/support/Error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace tessel;
using namespace tessel::interp;
using namespace tessel::interp_test;
using ::testing::AllOf;
using ::testing::HasSubstr;

namespace {


struct WmmaGemm {
  int m = 16, n = 16, k = 16;
  int warps = 1;         ///< warp w computes columns [w*n, w*n + n)
  int K = 16;            ///< the reduction length, a multiple of k
  bool b_col_major = false;
  DataType acc = Float(32);
  bool only_half_warp_mma = false;
  DataType a_type = Float(16); ///< anything but float16 is a mistake the executor reports

  int N() const { return warps * n; }

  /// C (m x N) = A (m x K, row-major) * B (K x N; stored N x K when b_col_major).
  LoweredFunc build() const {
    const DataType f16 = Float(16);
    Buffer A = flat("A", a_type, int64_t(m) * K), B = flat("B", f16, int64_t(K) * N()),
           C = flat("C", acc, int64_t(m) * N());
    // Two A tiles, alternating, so that tile indices other than 0 are exercised.
    Buffer fa = flat("a_frag", f16, 2 * m * k, "wmma.matrix_a"),
           fb = flat("b_frag", f16, k * n, "wmma.matrix_b"),
           fc = flat("c_frag", acc, m * n, "wmma.accumulator");
    Axes ax;
    Expr w = ax.ty;
    Var ks("ks");
    Expr a_tile = floormod(Expr(ks), 2);
    Expr b_ptr = b_col_major ? address_of(B, w * n * K + ks * k)
                             : address_of(B, ks * k * N() + w * n);
    Expr b_ld = b_col_major ? Expr(K) : Expr(N());
    Stmt mma = call(intrinsic::wmma_mma_sync,
                    {data_var(fc), 0, data_var(fa), a_tile, data_var(fb), 0, data_var(fc), 0});
    if (only_half_warp_mma)
      mma = IfThenElse::make(Expr(ax.tx) < 16, mma);
    Stmt step = Seq::make(
        {call(intrinsic::wmma_load_matrix_sync,
              {data_var(fa), m, n, k, a_tile, address_of(A, ks * k), K, StringImm::make("row_major")}),
         call(intrinsic::wmma_load_matrix_sync,
              {data_var(fb), m, n, k, 0, b_ptr, b_ld,
               StringImm::make(b_col_major ? "col_major" : "row_major")}),
         mma});
    Stmt body = Seq::make(
        {call(intrinsic::wmma_fill_fragment, {data_var(fc), m, n, k, 0, make_zero(acc)}),
         loop(ks, K / k, step),
         call(intrinsic::wmma_store_matrix_sync,
              {data_var(fc), m, n, k, 0, address_of(C, w * n), N(), StringImm::make("row_major")})});
    LoweredFunc f;
    f.name = "wmma_gemm";
    f.args = {A, B, C};
    f.arg_shapes = {{m, K}, {K, N()}, {m, N()}};
    f.launch = launch(1, 1, 32, warps);
    f.body = ax.bind_all(f.launch, allocate(fa, allocate(fb, allocate(fc, body))));
    return f;
  }

  /// Runs on random data and checks against a double reference of the fp16-rounded inputs,
  /// with |err| <= (steps + 1) * eps(acc) * sum |a b|: one rounding of the accumulator per mma.
  void run_and_check(unsigned seed) const {
    auto a = random_values(size_t(m) * K, seed, -2, 2), b = random_values(size_t(K) * N(), seed + 1, -2, 2);
    HostBuffer A = HostBuffer::from_doubles(Float(16), a);
    HostBuffer Bh = HostBuffer::from_doubles(Float(16), b); // logical K x N, row-major
    auto hb = Bh.to_doubles();
    HostBuffer B = Bh;
    if (b_col_major)
      for (int kk = 0; kk < K; ++kk)
        for (int j = 0; j < N(); ++j)
          B.set(size_t(j) * K + kk, hb[size_t(kk) * N() + j]);
    HostBuffer C = HostBuffer::zeros(acc, size_t(m) * N());
    execute(build(), {&A, &B, &C});
    auto ha = A.to_doubles();
    auto ref = gemm_reference(ha, hb, m, N(), K);
    double eps = acc.bits() == 16 ? 0x1p-11 : 0x1p-24;
    auto got = C.to_doubles();
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < N(); ++j) {
        double mag = 0;
        for (int kk = 0; kk < K; ++kk)
          mag += std::fabs(ha[size_t(i) * K + kk] * hb[size_t(kk) * N() + j]);
        ASSERT_NEAR(got[size_t(i) * N() + j], ref[size_t(i) * N() + j], (K / k + 1) * eps * mag)
            << "C[" << i << "," << j << "]";
      }
  }
};

} // namespace

TEST(InterpWmma, OneWarp16x16x16) { WmmaGemm{}.run_and_check(1); }

TEST(InterpWmma, TwoWarpsTwoKStepsColMajorB) {
  WmmaGemm g;
  g.warps = 2;
  g.K = 32;
  g.b_col_major = true;
  g.run_and_check(2);
}

TEST(InterpWmma, Shape32x8x16) {
  WmmaGemm g;
  g.m = 32, g.n = 8, g.k = 16, g.warps = 2, g.K = 48;
  g.run_and_check(3);
}

TEST(InterpWmma, Shape8x32x16ColMajor) {
  WmmaGemm g;
  g.m = 8, g.n = 32, g.k = 16, g.K = 32, g.b_col_major = true;
  g.run_and_check(4);
}

TEST(InterpWmma, Fp16Accumulator) {
  WmmaGemm g;
  g.acc = Float(16);
  g.K = 32;
  g.run_and_check(5);
}

TEST(InterpWmma, CalledByHalfAWarpIsAnError) {
  WmmaGemm g;
  g.only_half_warp_mma = true;
  HostBuffer A = HostBuffer::zeros(Float(16), 256), B = HostBuffer::zeros(Float(16), 256),
             C = HostBuffer::zeros(Float(32), 256);
  try {
    execute(g.build(), {&A, &B, &C});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_THAT(std::string(e.what()),
                AllOf(HasSubstr("wmma_mma_sync is called by only 16 of the 32 threads of warp 0"),
                      HasSubstr("block (0,0,0)"), HasSubstr("thread (16,0,0) does not call it")));
  }
}

// Two warps store their accumulators over the same shared tile with no barrier between.
TEST(InterpWmma, WarpsStoringOneSharedTileRace) {
  Buffer out = flat("out", Float(32), 256), s = flat("C_shared", Float(32), 256, "shared"),
         fc = flat("c_frag", Float(32), 256, "wmma.accumulator");
  Axes ax;
  Stmt body = Seq::make(
      {call(intrinsic::wmma_fill_fragment, {data_var(fc), 16, 16, 16, 0, Expr(1.0f)}),
       call(intrinsic::wmma_store_matrix_sync,
            {data_var(fc), 16, 16, 16, 0, address_of(s, 0), 16, StringImm::make("row_major")})});
  LoweredFunc f{"race", {out}, {{256}}, Stmt(), launch(1, 1, 32, 2), {}};
  f.body = ax.bind_all(f.launch, allocate(s, allocate(fc, body)));
  HostBuffer o = HostBuffer::zeros(Float(32), 256);
  try {
    execute(f, {&o});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_THAT(std::string(e.what()),
                AllOf(HasSubstr("data race (write/write) on shared buffer 'C_shared'[0]"),
                      HasSubstr("warp 0 (thread (0,0,0)..thread (31,0,0)"),
                      HasSubstr("warp 1 (thread (0,1,0)..thread (31,1,0)")));
  }
}

TEST(InterpWmma, FragmentTypeMustMatchPointer) {
  WmmaGemm g;
  g.a_type = Float(32); // loading float32 into a float16 fragment: a codegen bug
  HostBuffer A = HostBuffer::zeros(Float(32), 256), B = HostBuffer::zeros(Float(16), 256),
             C = HostBuffer::zeros(Float(32), 256);
  try {
    execute(g.build(), {&A, &B, &C});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_THAT(std::string(e.what()),
                HasSubstr("fragment 'a_frag' holds float16 but buffer 'A' holds float32"));
  }
}
