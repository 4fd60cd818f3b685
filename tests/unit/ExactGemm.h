// Running a GEMM kernel (A: M x K, B: K x N, fp16; C: M x N, fp32) on the CPU executor with
// inputs whose products and sums are exact, so the result must equal float64 exactly.
#pragma once

#include "compiler/lower/LoweredFunc.h"
#include "runtime/interp/Executor.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tessel::test {

/// Values k / 32 with k in [-64, 64] \ {0}: exact in float16, their products exact in float32,
/// and sums of a few hundred of them exact too.
inline std::vector<double> exact_gemm_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(-64, 64);
  std::vector<double> v(n);
  for (double &x : v) {
    int k = d(rng);
    x = (k == 0 ? 1 : k) / 32.0;
  }
  return v;
}

/// Runs the kernels of `m` on the executor; "" when every element of C equals the float64
/// product, else the first that does not. A is stored K x M when `a_transposed`, B N x K when
/// `b_transposed`. The inputs are of the kernels' argument type (float16 or bfloat16: the values
/// are exact in both).
inline std::string exact_gemm_mismatch(const LoweredModule &m, int64_t M, int64_t N, int64_t K,
                                       bool a_transposed = false, bool b_transposed = false) {
  const LoweredFunc &f = m.funcs.at(0);
  std::vector<double> a = exact_gemm_values(M * K, 1), b = exact_gemm_values(K * N, 2);
  auto at = [&](int64_t i, int64_t k) { return a_transposed ? a[k * M + i] : a[i * K + k]; };
  auto bt = [&](int64_t k, int64_t j) { return b_transposed ? b[j * K + k] : b[k * N + j]; };
  interp::HostBuffer A = interp::HostBuffer::from_doubles(f.args.at(0).dtype(), a);
  interp::HostBuffer B = interp::HostBuffer::from_doubles(f.args.at(1).dtype(), b);
  // Poisoned output: every element must be written.
  interp::HostBuffer C =
      interp::HostBuffer::from_doubles(Float(32), std::vector<double>(M * N, NAN));
  interp::execute(m, {&A, &B, &C});
  std::vector<double> c = C.to_doubles();
  // C's rows from B's rows (K x N, contiguous): each element still sums its terms in the order
  // of k.
  std::vector<double> bkn(static_cast<size_t>(K * N)), ref(static_cast<size_t>(N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j)
      bkn[size_t(k * N + j)] = bt(k, j);
  for (int64_t i = 0; i < M; ++i) {
    std::fill(ref.begin(), ref.end(), 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double x = at(i, k), *row = &bkn[size_t(k * N)];
      for (int64_t j = 0; j < N; ++j)
        ref[size_t(j)] += x * row[j];
    }
    for (int64_t j = 0; j < N; ++j)
      if (c[i * N + j] != ref[size_t(j)]) {
        std::ostringstream os;
        os << "C[" << i << ", " << j << "] = " << c[i * N + j] << ", expected " << ref[size_t(j)]
           << " (M=" << M << " N=" << N << " K=" << K << ")";
        return os.str();
      }
  }
  return "";
}

/// exact_gemm_mismatch of one kernel.
inline std::string exact_gemm_mismatch(const LoweredFunc &f, int64_t M, int64_t N, int64_t K,
                                       bool a_transposed = false, bool b_transposed = false) {
  LoweredModule m;
  m.funcs.push_back(f);
  return exact_gemm_mismatch(m, M, N, K, a_transposed, b_transposed);
}

} // namespace tessel::test
