#include "runtime/interp/ResultCheck.h"

#include "compiler/support/Error.h"
#include "runtime/Float8.h"
#include "runtime/Half.h"

#include <cmath>
#include <random>
#include <sstream>

namespace tessel {

HostTensor random_tensor(const Tensor &t, uint64_t seed, double lo, double hi) {
  user_check(t.defined(), "random_tensor") << "the tensor is undefined";
  user_check(lo < hi, "random_tensor") << "'" << t.name() << "': empty range [" << lo << ", " << hi << ")";
  HostTensor h{t.dtype(), constant_shape(t), {}};
  const DataType dt = h.dtype;
  user_check(dt.is_scalar() && !dt.is_handle(), "random_tensor")
      << "'" << t.name() << "': no random values of type " << dt;
  h.values.resize(size_t(h.num_elements()));
  std::mt19937_64 rng(seed);
  if (dt.is_bool()) { // the only non-zero bool is true, which tests nothing: random 0/1 instead
    std::bernoulli_distribution d;
    for (double &v : h.values)
      v = d(rng);
    return h;
  }
  if (dt.is_float()) {
    std::uniform_real_distribution<double> d(lo, hi);
    auto draw = [&]() -> double {
      double x = d(rng);
      if (dt.is_bfloat())
        return bfloat16_to_float(float_to_bfloat16(float(x)));
      if (dt.is_float8())
        return dt.code() == DataType::Float8E4M3 ? round_to_e4m3(x) : round_to_e5m2(x);
      switch (dt.bits()) {
      case 16:
        return half_to_float(float_to_half(float(x)));
      case 32:
        return float(x);
      default:
        return x;
      }
    };
    for (double &v : h.values) {
      // Redraw zeros; a range that rounds to zero almost always is a mistake.
      int tries = 0;
      do {
        v = draw();
        user_check(++tries < 1000, "random_tensor")
            << "'" << t.name() << "': [" << lo << ", " << hi << ") rounds to zero in " << dt;
      } while (v == 0);
    }
    return h;
  }
  // Integers in [ceil(lo), floor(hi)] (inclusive: the default [-1, 1] gives -1 and 1).
  double ilo = std::max(std::ceil(lo), double(dt.min_int()));
  double ihi = std::min(std::floor(hi), double(dt.max_int()));
  user_check(ilo <= ihi && !(ilo == 0 && ihi == 0), "random_tensor")
      << "'" << t.name() << "': [" << lo << ", " << hi << "] holds no non-zero " << dt;
  std::uniform_int_distribution<int64_t> d{int64_t(ilo), ihi >= 0x1p63 ? INT64_MAX : int64_t(ihi)};
  for (double &v : h.values) {
    int64_t x;
    do
      x = d(rng);
    while (x == 0);
    v = double(x);
  }
  return h;
}

// Why these numbers. Only the kernel's float rounding separates it from the float64 reference:
//  - The stored result is rounded to `out`: relative error <= u_out (u = 2^-precision), and an
//    accumulation error can move it across a rounding boundary, one ulp = 2 u_out: rel = 2 u_out.
//  - Accumulating K terms in `out` (the definitions here accumulate in their output type) errs by
//    at most ~K u Σ|x_i| in the worst case; rounding errors behave as random, so the probabilistic
//    bound λ sqrt(K) u Σ|x_i| (Higham & Mary 2019) holds with high probability, and tree or
//    blocked orders (split-K, tensor-core fragments) only do better; accumulators that truncate
//    (tensor cores are not IEEE round-to-nearest inside an MMA) bias the error to ~K u/2 |sum|,
//    still inside the bound below for random data. With random_tensor's inputs in
//    [-1, 1], a term (a product of two inputs) averages |x| ~ 1/4, so Σ|x_i| ~ K/4. λ = 2: the
//    bound is already pessimistic (it sums |x_i| where the actual error follows partial sums that
//    cancel), and λ = 2 leaves room over thousands of outputs while a missing or doubled term
//    (~1/4 on average) is still far outside it for K up to a few thousand in fp32.
//  - A product of two `in` values is exact in `out` when 2 p_in <= p_out (fp16 or bf16 into fp32);
//    otherwise each is rounded once more, one more step in the sum.
// Cancellation makes |ref| much smaller than Σ|x_i|, so the accumulation part is absolute.
// Measured with sequential accumulation on random data (reference_test): the bound is ~7x the
// worst error for K = 64 (fp32 and fp16) and ~40x for K = 2304 (fp32), and a dropped term fails.
Tolerance tolerance_for(DataType out, DataType in, int64_t reduction_length) {
  user_check(reduction_length >= 0, "tolerance_for")
      << "reduction length must be non-negative, got " << reduction_length;
  if (!out.is_float())
    return {}; // integer arithmetic is exact and wraps the same way everywhere
  const double u = std::ldexp(1.0, -out.significand_bits());
  const int p_in = in.is_float() ? in.significand_bits() : in.bits();
  const double k = double(std::max<int64_t>(reduction_length, 1));
  const double steps = k + (2 * p_in <= out.significand_bits() ? 0 : 1);
  const double lambda = 2.0, mean_term = 0.25;
  Tolerance tol;
  tol.rel = 2 * u;
  tol.abs = reduction_length > 1 ? lambda * std::sqrt(steps) * u * k * mean_term : 0.0;
  return tol;
}

CompareResult compare(const std::vector<double> &ref, llvm::function_ref<double(size_t)> got,
                      size_t n, Tolerance tol, llvm::ArrayRef<double> magnitudes) {
  user_check(ref.size() == n, "compare")
      << "the reference has " << ref.size() << " values but " << n << " were given";
  user_check(tol.magnitude == 0 || magnitudes.size() == n, "compare")
      << "the tolerance follows the elements' magnitudes, but " << magnitudes.size()
      << " magnitudes were given for " << n << " values";
  CompareResult r;
  r.count = n;
  r.tolerance = tol;
  double worst_ratio = -1;
  for (size_t i = 0; i < n; ++i) {
    const double e = ref[i], g = got(i);
    double err;
    if (std::isnan(e) || std::isnan(g))
      err = std::isnan(e) && std::isnan(g) ? 0 : INFINITY;
    else if (e == g) // also equal infinities
      err = 0;
    else
      err = std::fabs(g - e);
    double allowed = tol.abs + tol.rel * std::fabs(e);
    if (tol.magnitude != 0)
      allowed += tol.magnitude * magnitudes[i];
    // An exact match passes whatever the allowance; where either side is infinite the
    // allowance is inf or NaN, so only an exact match passes.
    const bool infinite = std::isinf(e) || std::isinf(g);
    const bool bad = err != 0 && (infinite || !(err <= allowed));
    r.num_mismatches += bad;
    r.max_abs_error = std::max(r.max_abs_error, err);
    if (e != 0 && !std::isnan(e))
      r.max_rel_error = std::max(r.max_rel_error, err / std::fabs(e));
    const double ratio = allowed > 0 ? err / allowed : (err > 0 ? INFINITY : 0);
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      r.worst_index = i;
      r.worst_expected = e;
      r.worst_got = g;
    }
  }
  r.ok = r.num_mismatches == 0;
  return r;
}

CompareResult compare_16bit(const std::vector<double> &ref, const uint16_t *bits, size_t n,
                            DataType dtype, Tolerance tol) {
  user_check(dtype.is_scalar() && (dtype.is_float16() || dtype.is_bfloat()), "compare_16bit")
      << "the values must be float16 or bfloat16, not " << dtype;
  if (dtype.is_bfloat())
    return compare(ref, [bits](size_t i) { return double(bfloat16_to_float(bits[i])); }, n, tol);
  return compare(ref, [bits](size_t i) { return double(half_to_float(bits[i])); }, n, tol);
}

std::string CompareResult::str() const {
  std::ostringstream os;
  os.precision(9);
  os << (ok ? "ok: " : "MISMATCH: ") << num_mismatches << " of " << count
     << " elements outside |got - ref| <= " << tolerance.abs << " + ";
  if (tolerance.magnitude != 0)
    os << tolerance.magnitude << " M + ";
  os << tolerance.rel << " |ref|" << (tolerance.magnitude != 0 ? " (M: the terms' magnitude)" : "")
     << "; max abs error " << max_abs_error << ", max rel error " << max_rel_error;
  if (count)
    os << "; worst [" << worst_index << "]: got " << worst_got << ", expected " << worst_expected;
  return os.str();
}

} // namespace tessel
