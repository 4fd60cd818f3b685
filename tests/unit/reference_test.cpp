// The float64 reference evaluator against hand-written loops, its rounding and integer
// semantics, its errors, and the tolerance and comparison helpers.
#include "runtime/interp/ResultCheck.h"

#include "TestUtil.h"
#include "compiler/te/Compute.h"
#include "runtime/Half.h"
#include "runtime/interp/Magnitude.h"
#include "schedules/Conv2dTensorCoreTutorial.h"
#include "schedules/Gemm.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

using namespace tessel;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<double> gemm_loop(const HostTensor &a, const HostTensor &b, int64_t M, int64_t N,
                              int64_t K) {
  std::vector<double> c(size_t(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += a.values[size_t(i * K + k)] * b.values[size_t(k * N + j)];
      c[size_t(i * N + j)] = s;
    }
  return c;
}

} // namespace

TEST(Reference, GemmMatchesTripleLoop) {
  const int64_t M = 24, N = 40, K = 56;
  GemmTensors g = gemm_definition(M, N, K, Float(16));
  HostTensor a = random_tensor(g.A, 1), b = random_tensor(g.B, 2);
  std::vector<double> ref = evaluate_reference(g.C, {{g.A, a}, {g.B, b}});
  // Same summation order, all in double: equal to the last bit.
  EXPECT_EQ(ref, gemm_loop(a, b, M, N, K));
}

TEST(Reference, Gemm128IsFast) {
  const int64_t n = 128;
  GemmTensors g = gemm_definition(n, n, n, Float(16));
  HostTensor a = random_tensor(g.A, 3), b = random_tensor(g.B, 4);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<double> ref = evaluate_reference(g.C, {{g.A, a}, {g.B, b}});
  double s = seconds_since(t0);
  std::printf("[ reference ] 128^3 GEMM: %.3f s\n", s);
  EXPECT_EQ(ref, gemm_loop(a, b, n, n, n));
}

// The seed tutorial's definition (NHWCnc, padding through if_then_else in Apad) against a
// direct convolution that pads by testing the input coordinates.
TEST(Reference, PaddedConvMatchesDirectConvolution) {
  Conv2dTutorialShape sh;
  sh.batch = 16, sh.height = 8, sh.width = 8, sh.in_channels = 32, sh.out_channels = 32;
  ScheduledProgram p = conv2d_tensorcore_tutorial(sh);
  const Tensor &A = p.args[0], &W = p.args[1], &Conv = p.args[2];
  HostTensor a = random_tensor(A, 5), w = random_tensor(W, 6);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<double> ref = evaluate_reference(Conv, {{A, a}, {W, w}});
  double s = seconds_since(t0);
  std::printf("[ reference ] conv 16x8x8x32->32, 3x3 pad 1: %.3f s\n", s);

  const int B = 16, NB = sh.batch / B, H = sh.height, Wd = sh.width, IC = sh.in_channels / B,
            OC = sh.out_channels / B, R = sh.kernel, P = sh.pad;
  auto at = [](const HostTensor &t, std::initializer_list<int64_t> idx) {
    int64_t off = 0, d = 0;
    for (int64_t i : idx)
      off = off * t.shape[size_t(d++)] + i;
    return t.values[size_t(off)];
  };
  ASSERT_EQ(ref.size(), size_t(NB * H * Wd * OC * B * B));
  size_t x = 0;
  for (int n = 0; n < NB; ++n)
    for (int h = 0; h < H; ++h)
      for (int wo = 0; wo < Wd; ++wo)
        for (int o = 0; o < OC; ++o)
          for (int nn = 0; nn < B; ++nn)
            for (int oo = 0; oo < B; ++oo, ++x) {
              double s = 0;
              for (int ic = 0; ic < IC; ++ic)
                for (int kh = 0; kh < R; ++kh)
                  for (int kw = 0; kw < R; ++kw)
                    for (int ii = 0; ii < B; ++ii) {
                      int y = h + kh - P, z = wo + kw - P;
                      if (y < 0 || y >= H || z < 0 || z >= Wd)
                        continue;
                      s += at(a, {n, y, z, ic, nn, ii}) * at(w, {kh, kw, ic, o, ii, oo});
                    }
              ASSERT_NEAR(ref[x], s, 1e-12 * (1 + std::fabs(s))) << "element " << x;
            }
}

TEST(Reference, MaxMinReductionsWithWhere) {
  const int M = 6, K = 10;
  Tensor A = placeholder({M, K}, Float(32), "A");
  IterVar k = reduce_axis({0, K}, "k");
  // Max over even k only; min over the entries below 0.25; max where nothing qualifies gives
  // the identity, -inf.
  Tensor Mx = compute({M}, [&](Var i) { return max(A(i, k), {k}, floormod(Expr(k), 2) == 0); }, "Mx");
  Tensor Mn = compute({M}, [&](Var i) { return min(A(i, k), {k}, A(i, k) < 0.25f); }, "Mn");
  Tensor None = compute({M}, [&](Var i) { return max(A(i, k), {k}, Expr(k) > K); }, "None");
  HostTensor a = random_tensor(A, 7);
  std::vector<double> mx = evaluate_reference(Mx, {{A, a}}), mn = evaluate_reference(Mn, {{A, a}}),
                      none = evaluate_reference(None, {{A, a}});
  for (int i = 0; i < M; ++i) {
    double emx = -INFINITY, emn = INFINITY;
    for (int kk = 0; kk < K; ++kk) {
      double v = a.values[size_t(i * K + kk)];
      if (kk % 2 == 0)
        emx = std::max(emx, v);
      if (v < 0.25)
        emn = std::min(emn, v);
    }
    EXPECT_EQ(mx[size_t(i)], emx);
    EXPECT_EQ(mn[size_t(i)], emn);
    EXPECT_EQ(none[size_t(i)], -INFINITY);
  }
}

TEST(Reference, IntegerMaxWithWhereAndWrappingSum) {
  Tensor A = placeholder({4}, Int(8), "A");
  IterVar k = reduce_axis({0, 4}, "k");
  Tensor Mx = compute({1}, [&](Var) { return max(A(k), {k}, A(k) < 100); }, "Mx");
  Tensor S = compute({1}, [&](Var) { return sum(A(k), {k}); }, "S");
  HostTensor a{Int(8), {4}, {120, 99, -5, 100}};
  EXPECT_EQ(evaluate_reference(Mx, {{A, a}}), std::vector<double>{99});
  // int8: 120 + 99 - 5 + 100 = 314 wraps to 58.
  EXPECT_EQ(evaluate_reference(S, {{A, a}}), std::vector<double>{58});
}

// A cast to float16 rounds (the values really pass through float16), to nearest even; the
// float64 arithmetic around it does not.
TEST(Reference, CastsRoundToTheTargetType) {
  Tensor A = placeholder({5}, Float(32), "A");
  Tensor H = compute({5}, [&](Var i) { return cast(Float(16), A(i)); }, "H");
  Tensor R = compute({5}, [&](Var i) { return cast(Float(32), H(i)) - A(i); }, "R");
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10 (even: 1); 1 + 3 * 2^-11 ties up to 1 + 2^-9;
  // 70000 overflows to inf; 2^-25 ties to zero; 0.1 rounds to the nearest half.
  HostTensor a{Float(32), {5}, {1 + 0x1p-11, 1 + 3 * 0x1p-11, 70000, 0x1p-25, double(0.1f)}};
  std::vector<double> h = evaluate_reference(H, {{A, a}});
  EXPECT_EQ(h, (std::vector<double>{1, 1 + 0x1p-9, INFINITY, 0, double(half_to_float(float_to_half(0.1f)))}));
  std::vector<double> r = evaluate_reference(R, {{A, a}});
  EXPECT_EQ(r[0], -0x1p-11);

  // float16 arithmetic is done in double, so a cast of its result to float32 must still round:
  // 1024 + 2^-14 is a tie in float32 and goes to even, 1024.
  Tensor X = placeholder({1}, Float(16), "X"), Y = placeholder({1}, Float(16), "Y");
  Tensor Z = compute({1}, [&](Var i) { return cast(Float(32), X(i) + Y(i)); }, "Z");
  HostTensor x{Float(16), {1}, {1024}}, y{Float(16), {1}, {0x1p-14}};
  EXPECT_EQ(evaluate_reference(Z, {{X, x}, {Y, y}}), std::vector<double>{1024});

  // bfloat16, float32 and integer casts.
  Tensor D = placeholder({3}, Float(64), "D");
  Tensor F = compute({3}, [&](Var i) { return cast(Float(32), D(i)); }, "F");
  Tensor Bf = compute({3}, [&](Var i) { return cast(BFloat(16), D(i)); }, "Bf");
  Tensor I8 = compute({3}, [&](Var i) { return cast(Int(8), D(i)); }, "I8");
  HostTensor d{Float(64), {3}, {0.1, 1 + 0x1p-8, -300.7}};
  EXPECT_EQ(evaluate_reference(F, {{D, d}}), (std::vector<double>{double(0.1f), 1 + 0x1p-8, double(-300.7f)}));
  EXPECT_EQ(evaluate_reference(Bf, {{D, d}})[1], 1.0); // a tie, to even
  // C truncates -300.7 to -300, which wraps to -44 in int8.
  EXPECT_EQ(evaluate_reference(I8, {{D, d}}), (std::vector<double>{0, 1, -44}));
}

TEST(Reference, IntegerDivisionAndWrapping) {
  Tensor A = placeholder({4}, Int(32), "A");
  auto eval = [&](auto f) {
    Tensor T = compute({4}, [&](Var i) { return f(A(i)); }, "T");
    return evaluate_reference(T, {{A, HostTensor{Int(32), {4}, {7, -7, 2147483647, -2147483648.0}}}});
  };
  EXPECT_EQ(eval([](Expr x) { return floordiv(x, 2); })[1], -4);
  EXPECT_EQ(eval([](Expr x) { return floormod(x, 3); })[1], 2);
  EXPECT_EQ(eval([](Expr x) { return truncdiv(x, 2); })[1], -3);
  EXPECT_EQ(eval([](Expr x) { return truncmod(x, 3); })[1], -1);
  EXPECT_EQ(eval([](Expr x) { return x + 1; })[2], -2147483648.0);
  EXPECT_EQ(eval([](Expr x) { return x * 2; })[3], 0);
  EXPECT_EQ(eval([](Expr x) { return select(x > 0, x, -x); }), (std::vector<double>{7, 7, 2147483647, -2147483648.0}));
  test::expect_error([&] { eval([](Expr x) { return truncdiv(x, x - 7); }); }, {"'T'", "division by zero"});
}

TEST(Reference, LetAndIntermediateComputes) {
  Tensor A = placeholder({3, 4}, Float(32), "A");
  Tensor B = compute({3, 4}, [&](Var i, Var j) { return A(i, j) * 2.0f; }, "B");
  Var t("t", Float(32));
  Tensor C = compute({4, 3}, [&](Var j, Var i) { return Let::make(t, B(i, j) + 1.0f, t * t); }, "C");
  HostTensor a = random_tensor(A, 8);
  std::vector<double> c = evaluate_reference(C, {{A, a}});
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) {
      double v = a.values[size_t(i * 4 + j)] * 2 + 1;
      EXPECT_EQ(c[size_t(j * 3 + i)], v * v);
    }
}

// Indices with negative coefficients, constants and casts take the proven-in-range path; the
// values must be those of the index arithmetic.
TEST(Reference, AffineIndexForms) {
  Tensor A = placeholder({8, 20}, Float(32), "A");
  Tensor B = compute({8, 9}, [&](Var i, Var j) {
    return A(7 - i, cast(Int(32), cast(Int(64), j) * 2 + 1)) + A(i, 19 - j - j);
  }, "B");
  HostTensor a = random_tensor(A, 16);
  std::vector<double> b = evaluate_reference(B, {{A, a}});
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 9; ++j)
      EXPECT_EQ(b[size_t(i * 9 + j)], a.values[size_t((7 - i) * 20 + 2 * j + 1)] +
                                          a.values[size_t(i * 20 + 19 - 2 * j)]);
}

TEST(Reference, OutOfRangeReadIsAnErrorNamingTensorAndIndex) {
  Tensor A = placeholder({8}, Float(32), "A");
  Tensor B = compute({8}, [&](Var i) { return A(i + 1); }, "B");
  HostTensor a = random_tensor(A, 9);
  test::expect_error([&] { evaluate_reference(B, {{A, a}}); }, {"'B' reads 'A' at [8]", "shape [8]"});
  // Select evaluates both sides, so its guard does not help; if_then_else's does.
  Tensor S = compute({8}, [&](Var i) { return select(i < 7, A(i + 1), 0.0f); }, "S");
  test::expect_error([&] { evaluate_reference(S, {{A, a}}); }, {"'S' reads 'A' at [8]"});
  Tensor G = compute({8}, [&](Var i) { return if_then_else(i < 7, A(i + 1), 0.0f); }, "G");
  EXPECT_EQ(evaluate_reference(G, {{A, a}})[7], 0.0);
  // A reduction index that runs past the end.
  IterVar k = reduce_axis({0, 3}, "k");
  Tensor R = compute({8}, [&](Var i) { return sum(A(i + k), {k}); }, "R");
  test::expect_error([&] { evaluate_reference(R, {{A, a}}); }, {"'R' reads 'A' at [8]"});
}

// A float sum of two loads whose indices are linear in the last reduce axis runs as a strided
// dot product: grouped heads (h / 2, not affine), a reversed and a strided index, two reduce
// axes (the outer walked one by one), a computed operand, the magnitudes' |x| |y|. Each must be
// what the textbook loop gives, to the last bit (same order, all in double); reads past the end
// and wrapped indices are still reported as the element-by-element evaluation reports them.
TEST(Reference, DotProductsOverTheLastAxis) {
  const int64_t H = 4, S = 6, D = 16;
  Tensor Q = placeholder({H, S, D}, Float(16), "Q");
  Tensor K = placeholder({H / 2, 2 * S + 1, D}, BFloat(16), "K");
  IterVar d = reduce_axis({0, D}, "d");
  Tensor Sc = compute({H, S, S}, [&](Var h, Var i, Var j) {
    Expr key = K(h / 2, 2 * j + 1, int(D - 1) - Expr(d)).astype(Float(32));
    return sum(Q(h, i, d).astype(Float(32)) * key, {d});
  }, "Sc");
  HostTensor q = random_tensor(Q, 21), k = random_tensor(K, 22);
  std::vector<double> sc = evaluate_reference(Sc, {{Q, q}, {K, k}});
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j) {
        double e = 0;
        for (int64_t dd = 0; dd < D; ++dd)
          e += q.values[size_t((h * S + i) * D + dd)] *
               k.values[size_t(((h / 2) * (2 * S + 1) + 2 * j + 1) * D + D - 1 - dd)];
        EXPECT_EQ(sc[size_t((h * S + i) * S + j)], e) << h << " " << i << " " << j;
      }

  // Two reduce axes; the second operand a computed tensor (exact: a cast), read transposed.
  IterVar r = reduce_axis({0, 3}, "r"), c = reduce_axis({0, 5}, "c");
  Tensor A = placeholder({4, 3, 5}, Float(32), "A"), B = placeholder({5, 3}, Float(16), "B");
  Tensor Bh = compute({3, 5}, [&](Var x, Var y) { return B(y, x).astype(Float(32)); }, "Bh");
  Tensor R = compute({4}, [&](Var i) { return sum(A(i, r, c) * Bh(r, c), {r, c}); }, "R");
  HostTensor a = random_tensor(A, 23), b = random_tensor(B, 24);
  std::vector<double> rr = evaluate_reference(R, {{A, a}, {B, b}});
  Tensor Rm = magnitude_of(R);
  std::vector<double> rm = evaluate_reference(Rm, {{A, a}, {B, b}});
  for (int64_t i = 0; i < 4; ++i) {
    double e = 0, m = 0;
    for (int64_t x = 0; x < 3; ++x)
      for (int64_t y = 0; y < 5; ++y) {
        double u = a.values[size_t((i * 3 + x) * 5 + y)], v = b.values[size_t(y * 3 + x)];
        e += u * v;
        m += std::fabs(u) * std::fabs(v);
      }
    EXPECT_EQ(rr[size_t(i)], e) << i;
    EXPECT_EQ(rm[size_t(i)], m) << i;
  }

  // Past the end at the run's far end, and an int8 index that wraps inside the run.
  Tensor X = placeholder({8}, Float(32), "X");
  HostTensor x = random_tensor(X, 25);
  IterVar kk = reduce_axis({0, 3}, "kk");
  Tensor P = compute({8}, [&](Var i) { return sum(X(i + kk) * X(kk), {kk}); }, "P");
  test::expect_error([&] { evaluate_reference(P, {{X, x}}); }, {"'P' reads 'X' at [8]"});
  IterVar w = reduce_axis({0, 40}, "w");
  Tensor Y = placeholder({256}, Float(32), "Y");
  Tensor Wr = compute({1}, [&](Var) {
    return sum(Y(cast(Int(8), w * 4 + 100)) * Y(w), {w});
  }, "Wr");
  test::expect_error([&] { evaluate_reference(Wr, {{Y, random_tensor(Y, 26)}}); },
                     {"'Wr' reads 'Y' at [-128]"});
}

TEST(Reference, InputMistakesAreErrors) {
  Tensor A = placeholder({2, 2}, Float(16), "A");
  Tensor B = compute({2, 2}, [&](Var i, Var j) { return A(i, j); }, "B");
  test::expect_error([&] { evaluate_reference(B, std::vector<TensorBinding>{}); },
                     {"no input given for placeholder 'A'"});
  HostTensor wrong_shape{Float(16), {4}, {1, 2, 3, 4}};
  test::expect_error([&] { evaluate_reference(B, {{A, wrong_shape}}); }, {"'A' has shape [4]"});
  HostTensor not_half{Float(16), {2, 2}, {1, 2, 0.1, 4}};
  test::expect_error([&] { evaluate_reference(B, {{A, not_half}}); }, {"element 2", "not a float16 value"});
  HostTensor a = random_tensor(A, 10);
  test::expect_error([&] { evaluate_reference(B, {{B, a}}); }, {"placeholders only", "'B'"});
}

TEST(Reference, RandomTensorsAreRepresentableAndNonZero) {
  for (DataType t : {Float(16), BFloat(16), Float(32), Float(64)}) {
    Tensor A = placeholder({64, 33}, t, "A");
    HostTensor h = random_tensor(A, 11);
    EXPECT_EQ(h.dtype, t);
    EXPECT_EQ(h.shape, (std::vector<int64_t>{64, 33}));
    ASSERT_EQ(h.values.size(), size_t(64 * 33));
    for (double v : h.values) {
      EXPECT_NE(v, 0.0);
      EXPECT_LE(std::fabs(v), 1.0);
      double back = t.is_float16() ? double(half_to_float(float_to_half(float(v))))
                    : t.is_bfloat() ? double(bfloat16_to_float(float_to_bfloat16(float(v))))
                    : t.bits() == 32 ? double(float(v))
                                     : v;
      EXPECT_EQ(back, v);
    }
    EXPECT_EQ(random_tensor(A, 11).values, h.values) << "same seed, same values";
    EXPECT_NE(random_tensor(A, 12).values, h.values);
  }
  Tensor I = placeholder({1000}, Int(32), "I");
  HostTensor ih = random_tensor(I, 13, -3, 3);
  for (double v : ih.values) {
    EXPECT_NE(v, 0.0);
    EXPECT_EQ(std::floor(v), v);
    EXPECT_GE(v, -3);
    EXPECT_LE(v, 3);
  }
  test::expect_error([&] { random_tensor(I, 1, -0.5, 0.5); }, {"no non-zero int32"});
}

// Simulated kernels: fp32 (and fp16) accumulation in sequential order passes the tolerance;
// dropping one term does not.
TEST(Reference, ToleranceAcceptsRoundingAndRejectsAMissingTerm) {
  for (auto [acc, K] : {std::pair{Float(32), 2304}, std::pair{Float(32), 64}, std::pair{Float(16), 64}}) {
    const int64_t M = 64, N = 64;
    GemmTensors g = gemm_definition(M, N, K, Float(16));
    HostTensor a = random_tensor(g.A, 14), b = random_tensor(g.B, 15);
    std::vector<double> ref = evaluate_reference(g.C, {{g.A, a}, {g.B, b}});
    auto round = [&](double x) {
      return acc.is_float16() ? double(half_to_float(float_to_half(float(x)))) : double(float(x));
    };
    std::vector<float> got(size_t(M * N)), dropped(size_t(M * N));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0, d = 0;
        for (int64_t k = 0; k < K; ++k) {
          double prod = a.values[size_t(i * K + k)] * b.values[size_t(k * N + j)];
          s = round(s + prod);
          if (k != (i + j) % K)
            d = round(d + prod);
        }
        got[size_t(i * N + j)] = float(s);
        dropped[size_t(i * N + j)] = float(d);
      }
    Tolerance tol = tolerance_for(acc, Float(16), K);
    CompareResult ok = compare(ref, got.data(), got.size(), tol);
    EXPECT_TRUE(ok.ok) << acc << " K=" << K << ": " << ok.str();
    CompareResult bad = compare(ref, dropped.data(), dropped.size(), tol);
    EXPECT_FALSE(bad.ok) << acc << " K=" << K << ": " << bad.str();
    EXPECT_GT(bad.num_mismatches, size_t(M * N / 4)) << bad.str();
  }
  EXPECT_EQ(tolerance_for(Int(32), Int(8), 100).abs, 0.0);
}

TEST(Reference, CompareReportsTheWorstElement) {
  std::vector<double> ref = {1, 2, 3, 4};
  std::vector<double> got = {1, 2.001, 3, NAN};
  CompareResult r = compare(ref, got.data(), got.size(), Tolerance{1e-2, 0});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.num_mismatches, 1u);
  EXPECT_EQ(r.worst_index, 3u);
  EXPECT_NE(r.str().find("worst [3]"), std::string::npos) << r.str();
  std::vector<uint16_t> halves = {float_to_half(1), float_to_half(2), float_to_half(3), float_to_half(4)};
  EXPECT_TRUE(compare_16bit(ref, halves.data(), halves.size(), Float(16), Tolerance{}).ok);
}
