// The result check's tolerance follows the magnitudes of the terms (output_tolerance,
// magnitude_of): cancellation is not a mismatch, a missing or wrong term still is.
#include "TestUtil.h"

#include "compiler/tessel.h"
#include "runtime/Check.h"
#include "runtime/interp/Magnitude.h"
#include "runtime/interp/ResultCheck.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tessel;

namespace {

// One thread per element over 64-element blocks: the schedule every elementwise test runs.
Schedule elementwise_schedule(const Tensor &out) {
  Schedule s = create_schedule({out});
  auto [bx, tx] = s[out].split(s[out].axes<1>()[0], 64);
  s[out].bind(bx, thread_axis("blockIdx.x"));
  s[out].bind(tx, thread_axis("threadIdx.x"));
  return s;
}

} // namespace

// The magnitude of sum(a[i, k] * b[k]) is sum(|a[i, k]| |b[k]|); of exp(x), exp(x) (|x| + 1).
TEST(CheckTolerance, MagnitudeOfSumsProductsAndFunctions) {
  Tensor a = placeholder({3, 4}, Float(32), "a"), b = placeholder({4}, Float(32), "b");
  IterVar k = reduce_axis({0, 4}, "k");
  Tensor dot = compute({3}, [&](Var i) { return sum(a(i, k) * b(k), {k}); }, "dot");
  Tensor e = compute({3}, [&](Var i) { return exp(dot(i) - 1.0f); }, "e");
  HostTensor ha = random_tensor(a, 1), hb = random_tensor(b, 2);
  std::vector<double> md = evaluate_reference(magnitude_of(dot), {{a, ha}, {b, hb}});
  std::vector<double> me = evaluate_reference(magnitude_of(e), {{a, ha}, {b, hb}});
  std::vector<double> d = evaluate_reference(dot, {{a, ha}, {b, hb}});
  for (int i = 0; i < 3; ++i) {
    double m = 0;
    for (int j = 0; j < 4; ++j)
      m += std::fabs(ha.values[size_t(i) * 4 + j]) * std::fabs(hb.values[size_t(j)]);
    EXPECT_DOUBLE_EQ(md[size_t(i)], m);
    EXPECT_NEAR(me[size_t(i)], std::exp(d[size_t(i)] - 1) * (m + 1 + 1), 1e-12);
  }
}

// (x + 3) - 3 in float32 rounds x to the spacing of 3 (2^-22): on small x that is far more
// than x's own relative precision, so a tolerance relative to the result rejects a correct
// kernel; the magnitude (|x| + 6) accepts it.
TEST(CheckTolerance, CancellationIsNotAMismatch) {
  Tensor x = placeholder({4096}, Float(32), "x");
  Tensor y = compute({4096}, [&](Var i) { return (x(i) + 3.0f) - 3.0f; }, "y");
  CheckResult r = check_on_cpu(elementwise_schedule(y), {x, y}, 1, 5);
  EXPECT_TRUE(r.compare.ok) << r.str();
  // The relative part alone would have failed: some element errs by more than it allows.
  EXPECT_GT(r.compare.max_rel_error, output_tolerance(y).rel) << r.str();

  // Two float32 sums that nearly cancel, rounded to float16.
  Tensor a = placeholder({256, 64}, Float(16), "a"), b = placeholder({64}, Float(16), "b");
  IterVar k = reduce_axis({0, 64}, "k"), l = reduce_axis({0, 64}, "l");
  Tensor s1 = compute({256}, [&](Var i) { return sum(a(i, k).astype(Float(32)) * b(k).astype(Float(32)), {k}); }, "s1");
  Tensor s2 = compute({256}, [&](Var i) {
    return sum(a(i, l).astype(Float(32)) * (b(l).astype(Float(32)) * 1.0009765625f), {l});
  }, "s2");
  Tensor d = compute({256}, [&](Var i) { return (s1(i) - s2(i)).astype(Float(16)); }, "d");
  Schedule s = create_schedule({d});
  for (const Tensor &t : {s1, s2, d}) {
    auto [bx, tx] = s[t].split(s[t].axes<1>()[0], 64);
    s[t].bind(bx, thread_axis("blockIdx.x"));
    s[t].bind(tx, thread_axis("threadIdx.x"));
  }
  CheckResult r2 = check_on_cpu(s, {a, b, d}, 2, 6);
  EXPECT_TRUE(r2.compare.ok) << r2.str();
}

// A kernel that drops one term of a sum, or computes a constant wrong, is still a mismatch:
// the error (about one term, 1/4 on average) is far outside u sqrt(steps) times the magnitude.
TEST(CheckTolerance, RealErrorsAreStillMismatches) {
  for (DataType out : {Float(32), Float(16)}) {
    SCOPED_TRACE(out.str());
    const int K = 512;
    Tensor a = placeholder({64, K}, Float(16), "a"), b = placeholder({K, 64}, Float(16), "b");
    IterVar k = reduce_axis({0, K}, "k"), k2 = reduce_axis({0, K - 1}, "k2");
    auto product = [&](Var i, Var j, const IterVar &r) {
      return a(i, r).astype(Float(32)) * b(r, j).astype(Float(32));
    };
    Tensor acc = compute({64, 64}, [&](Var i, Var j) { return sum(product(i, j, k), {k}); }, "acc");
    Tensor c = compute({64, 64}, [&](Var i, Var j) { return acc(i, j).astype(out); }, "c");
    Tensor acc2 = compute({64, 64}, [&](Var i, Var j) { return sum(product(i, j, k2), {k2}); }, "acc2");
    Tensor dropped = compute({64, 64}, [&](Var i, Var j) { return acc2(i, j).astype(out); }, "dropped");
    HostTensor ha = random_tensor(a, 1), hb = random_tensor(b, 2);
    std::vector<double> ref = evaluate_reference(c, {{a, ha}, {b, hb}});
    std::vector<double> mags = evaluate_reference(magnitude_of(c), {{a, ha}, {b, hb}});
    std::vector<double> wrong = evaluate_reference(dropped, {{a, ha}, {b, hb}});
    Tolerance tol = output_tolerance(c);
    CompareResult r = compare(ref, wrong.data(), wrong.size(), tol, mags);
    EXPECT_FALSE(r.ok) << r.str();
    // Most elements are caught, not just a lucky few.
    EXPECT_GT(r.num_mismatches, wrong.size() * 9 / 10) << r.str();
    // The reference itself, and the reference with a rounding-sized error, are within it.
    EXPECT_TRUE(compare(ref, ref.data(), ref.size(), tol, mags).ok);
    std::vector<double> nudged = ref;
    for (size_t i = 0; i < nudged.size(); ++i)
      nudged[i] += (i % 2 ? 1 : -1) * 1e-7 * std::sqrt(double(K)) * mags[i];
    EXPECT_TRUE(compare(ref, nudged.data(), nudged.size(), tol, mags).ok);
  }
}

// Equal infinities match (a max over an empty range is -inf, and A - (-inf) is inf in the
// kernel and the reference alike), whatever their allowance (inf, or NaN from an infinite
// magnitude); an infinity of the other sign, or a finite value, does not.
TEST(CheckTolerance, EqualInfinitiesMatch) {
  const double inf = INFINITY;
  std::vector<double> ref{inf, -inf, 1.0}, mags{inf, NAN, 1.0};
  Tolerance tol{.rel = 1e-6, .abs = 1e-6, .magnitude = 1e-6};
  std::vector<double> same = ref, flipped{-inf, -inf, 1.0}, finite{1e30, -inf, 1.0};
  EXPECT_TRUE(compare(ref, same.data(), 3, tol, mags).ok);
  EXPECT_EQ(compare(ref, flipped.data(), 3, tol, mags).num_mismatches, 1u);
  EXPECT_EQ(compare(ref, finite.data(), 3, tol, mags).num_mismatches, 1u);
}

// A mask's -inf (attention's scores a query does not see) is exact: the magnitudes of the row
// max and of the probabilities 2^(s - max) stay finite, so a wrong probability is a mismatch
// (an infinite magnitude would accept anything).
TEST(CheckTolerance, MaskedInfinitiesPropagateNoError) {
  Tensor x = placeholder({64, 16}, Float(32), "x");
  auto masked = [&](Var i, const Expr &j) {
    return if_then_else(j <= floormod(i, 16), x(i, j), -INFINITY);
  };
  IterVar j1 = reduce_axis({0, 16}, "j1");
  Tensor m = compute({64}, [&](Var i) { return max(masked(i, j1), {j1}); }, "m");
  Tensor p = compute({64, 16}, [&](Var i, Var j) { return fast_exp2(masked(i, j) - m(i)); }, "p");
  HostTensor hx = random_tensor(x, 3);
  std::vector<double> ref = evaluate_reference(p, {{x, hx}});
  std::vector<double> mags = evaluate_reference(magnitude_of(p), {{x, hx}});
  for (size_t k = 0; k < mags.size(); ++k) {
    ASSERT_TRUE(std::isfinite(mags[k])) << "element " << k;
    EXPECT_EQ(ref[k] == 0, k % 16 > (k / 16) % 16) << "element " << k; // 0 where masked
  }
  Tolerance tol = output_tolerance(p);
  EXPECT_TRUE(compare(ref, ref.data(), ref.size(), tol, mags).ok);
  std::vector<double> wrong = ref;
  for (double &v : wrong)
    v *= 1.01;
  EXPECT_FALSE(compare(ref, wrong.data(), wrong.size(), tol, mags).ok);
}

// A shape whose buffers and float64 reference cannot fit in host memory is refused before
// anything is allocated (it was "internal error: std::bad_alloc ... this is a bug").
TEST(CheckOnCpu, ShapeLargerThanHostMemoryIsTheUsersError) {
  const int64_t n = int64_t(1) << 30; // 2^30 x 2^30 floats: 4 EB in float32 alone
  Tensor a = placeholder({n, n}, Float(32), "a");
  Tensor b = compute({n, n}, [&](Var i, Var j) { return a(i, j) * 2.0f; }, "b");
  Schedule s = create_schedule({b});
  tessel::test::expect_error([&] { check_on_cpu(s, {a, b}, 1); },
                             {"check_on_cpu: checking this shape", "GB of host memory",
                              "'b' alone", "more than this machine's", "give a smaller shape"});
}

// A program of two outputs (c = a + b, read by d = 2c, both arguments): the check compares
// each with its own reference and names it; a wrong element of the first fails the check, named.
TEST(CheckOnCpu, EveryOutputOfAProgramIsChecked) {
  Tensor a = placeholder({256}, Float(32), "a"), b = placeholder({256}, Float(32), "b");
  Tensor c = compute({256}, [&](Var i) { return a(i) + b(i); }, "c");
  Tensor d = compute({256}, [&](Var i) { return c(i) * 2.0f; }, "d");
  Schedule s = elementwise_schedule(d);
  s[c].compute_at(s[d], s[d].leaf_iter_vars()[1]);
  const std::vector<Tensor> args = {a, b, c, d};
  CheckResult r = check_on_cpu(s, args, 2);
  EXPECT_TRUE(r.compare.ok) << r.str();
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.outputs[0].first, "c");
  EXPECT_EQ(r.outputs[1].first, "d");
  EXPECT_NE(r.str().find("c: ok: 0 of 256"), std::string::npos) << r.str();
  EXPECT_NE(r.str().find("; d: ok: 0 of 256"), std::string::npos) << r.str();
  CheckProblem p = make_check_problem(args, 2, 1);
  ASSERT_EQ(p.earlier_outputs.size(), 1u);
  p.earlier_outputs[0].reference[7] += 1;
  CheckResult wrong = check_on_cpu(s, args, p);
  EXPECT_FALSE(wrong.compare.ok) << wrong.str();
  EXPECT_NE(wrong.str().find("c: "), std::string::npos) << wrong.str();
  EXPECT_TRUE(wrong.outputs[1].second.ok) << wrong.str();
}
