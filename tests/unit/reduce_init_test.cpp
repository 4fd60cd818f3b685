// Reductions that start from an initial value (TVM's init): C = sum_k A B onto C0, a row max
// from a floor, each lowered serially, across threads and rfactored, on the executor against
// float64; the reference itself against a direct computation; the user's mistakes.
#include "TestUtil.h"

#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "runtime/interp/Reference.h"

#include <gtest/gtest.h>

using namespace tessel;

// C(i, j) = C0(i, j) + sum_k A(i, k) B(k, j): the float64 reference is that sum, and a kernel
// of blocks and threads computes it.
TEST(ReduceInit, GemmOntoAnInitialValue) {
  const int64_t M = 32, N = 48, K = 40;
  Tensor A = placeholder({M, K}, Float(32), "A"), B = placeholder({K, N}, Float(32), "B");
  Tensor C0 = placeholder({M, N}, Float(32), "C0");
  IterVar k = reduce_axis({0, K}, "k");
  Tensor C = compute(
      {M, N}, [&](Var i, Var j) { return sum(A(i, k) * B(k, j), {k}, Expr(), C0(i, j)); }, "C");
  HostTensor a = random_tensor(A, 1), b = random_tensor(B, 2), c0 = random_tensor(C0, 3);
  std::vector<double> ref = evaluate_reference(C, {{A, a}, {B, b}, {C0, c0}});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double want = c0.values[size_t(i * N + j)];
      for (int64_t kk = 0; kk < K; ++kk)
        want += a.values[size_t(i * K + kk)] * b.values[size_t(kk * N + j)];
      ASSERT_NEAR(ref[size_t(i * N + j)], want, 1e-12) << i << ", " << j;
    }
  Schedule s = create_schedule({C});
  auto [i, j] = s[C].axes<2>();
  s[C].bind(i, thread_axis("blockIdx.x")).bind(j, thread_axis("threadIdx.x"));
  CheckResult r = check_on_cpu(s, {A, B, C0, C}, 3);
  EXPECT_TRUE(r.compare.ok) << r.str();
  const std::string ir = to_string(lower(s, {A, B, C0, C}));
  EXPECT_NE(ir.find("C[blockIdx.x * 48 + threadIdx.x] = C0[blockIdx.x * 48 + threadIdx.x]\n"),
            std::string::npos)
      << ir;
}

// A row max from a floor and a row sum onto a bias, the reduction across threads (the init
// combined once, after the threads' values) and rfactored (the partials from the identity,
// their reduction from the init).
TEST(ReduceInit, AcrossThreadsAndRfactored) {
  Tensor X = placeholder({8, 300}, Float(32), "X"), bias = placeholder({8}, Float(32), "bias");
  for (bool use_max : {false, true})
    for (bool rfactor : {false, true}) {
      SCOPED_TRACE(std::string(use_max ? "max" : "sum") + (rfactor ? ", rfactored" : ""));
      IterVar k = reduce_axis({0, 300}, "k");
      Tensor R = compute(
          {8},
          [&](Var i) {
            return use_max ? max(X(i, k), {k}, Expr(), bias(i) + 0.5f)
                           : sum(X(i, k), {k}, Expr(), bias(i));
          },
          "R");
      Schedule s = create_schedule({R});
      auto [ko, ki] = s[R].split(s[R].reduce_axis()[0], 64);
      (void)ko;
      s[R].bind(s[R].op_axis()[0], thread_axis("blockIdx.x"));
      if (rfactor) {
        Tensor RF = s.rfactor(R, ki);
        IterVar tx = s[R].reduce_axis()[0];
        s[R].bind(tx, thread_axis("threadIdx.x"));
        s[RF].compute_at(s[R], tx).set_scope("local");
      } else {
        s[R].bind(ki, thread_axis("threadIdx.x"));
      }
      CheckResult r = check_on_cpu(s, {X, bias, R}, 2);
      EXPECT_TRUE(r.compare.ok) << r.str();
    }
}

TEST(ReduceInit, MistakesAreClearErrors) {
  Tensor A = placeholder({16, 16}, Float(32), "A");
  Tensor H = placeholder({16}, Float(16), "H");
  IterVar k = reduce_axis({0, 16}, "k");
  test::expect_error(
      [&] { compute({16}, [&](Var i) { return sum(A(i, k), {k}, Expr(), A(i, k)); }, "R"); },
      {"sum", "the initial value reads the reduce axis 'k'", "output's indices"});
  test::expect_error(
      [&] { compute({16}, [&](Var i) { return sum(A(i, k), {k}, Expr(), H(i)); }, "R"); },
      {"the initial value is float16", "source is float32", "cast it"});
}
