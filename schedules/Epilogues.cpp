#include "schedules/Epilogues.h"

#include "compiler/ir/IROperator.h"
#include "compiler/support/Error.h"

namespace tessel {

namespace {

void check_bias(DataType bias, const char *what) {
  user_check(bias == Float(16) || bias == BFloat(16) || bias == Float(32), what)
      << "the bias must be float16, bfloat16 or float32, got " << bias;
}

Expr widened(const Expr &v) { return v.type() == Float(32) ? v : v.astype(Float(32)); }

} // namespace

WgmmaEpilogue bias_relu_epilogue(DataType bias) {
  check_bias(bias, "bias_relu_epilogue");
  return {"bias_relu", {bias}, [](Expr acc, const std::vector<Expr> &c) {
            return max(acc + widened(c.at(0)), make_zero(Float(32)));
          }};
}

WgmmaEpilogue bias_gelu_epilogue(DataType bias) {
  check_bias(bias, "bias_gelu_epilogue");
  return {"bias_gelu", {bias}, [](Expr acc, const std::vector<Expr> &c) {
            Expr x = acc + widened(c.at(0));
            const Expr half = make_const(Float(32), 0.5), one = make_const(Float(32), 1.0);
            return half * x * (one + erf(x * make_const(Float(32), 0.70710678118654752)));
          }};
}

} // namespace tessel
