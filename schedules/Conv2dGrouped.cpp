#include "schedules/Conv2dGrouped.h"

#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"

namespace tessel {

ScheduledProgram conv2d_grouped(const Conv2dTcShape &sh, int groups) {
  const int N = sh.batch, H = sh.height, W = sh.width, C = sh.in_channels, K = sh.out_channels;
  const int R = sh.kernel, P = sh.out_height(), Q = sh.out_width();
  user_check(N > 0 && H > 0 && W > 0 && C > 0 && K > 0 && R > 0 && sh.stride > 0 &&
                 sh.dilation > 0 && sh.pad >= 0 && sh.pad_after() >= 0,
             "conv2d_grouped")
      << "N=" << N << ", H=" << H << ", W=" << W << ", C=" << C << ", K=" << K << ", R=" << R
      << ", stride=" << sh.stride << ", dilation=" << sh.dilation
      << " must be positive and the padding non-negative";
  user_check(groups > 0 && C % groups == 0 && K % groups == 0, "conv2d_grouped")
      << groups << " groups must divide the input channels C=" << C
      << " and the output channels K=" << K << " (groups = C is depthwise)";
  user_check(P > 0 && Q > 0, "conv2d_grouped")
      << "the " << R << "x" << R << " filter (dilated to " << sh.span()
      << ") is larger than the padded input " << H + sh.pad + sh.pad_after() << "x"
      << W + sh.pad + sh.pad_after();
  user_check(sh.in_dtype == Float(16) || sh.in_dtype == BFloat(16), "conv2d_grouped")
      << "x and w must be float16 or bfloat16, got " << sh.in_dtype;
  const int Cg = C / groups, Kg = K / groups;

  Tensor x = placeholder({N, H, W, C}, sh.in_dtype, "x");
  Tensor w = placeholder({K, R, R, Cg}, sh.in_dtype, "w");
  IterVar r = reduce_axis({0, R}, "r"), s = reduce_axis({0, R}, "s"), c = reduce_axis({0, Cg}, "c");
  const bool padded = sh.pad > 0 || sh.pad_after() > 0;
  Tensor y = compute(
      {N, P, Q, K},
      [&](Var n, Var p, Var q, Var k) {
        Expr h = p * sh.stride + r.var() * sh.dilation - sh.pad;
        Expr ww = q * sh.stride + s.var() * sh.dilation - sh.pad;
        Expr v = x(n, h, ww, floordiv(k, Kg) * Cg + c.var());
        if (padded)
          v = if_then_else(all(h >= 0, h < H, ww >= 0, ww < W), v, make_const(sh.in_dtype, 0));
        Expr acc = sum(v.astype(Float(32)) * w(k, r.var(), s.var(), c.var()).astype(Float(32)),
                       {r, s, c});
        return acc;
      },
      sh.out_dtype == Float(32) ? "y" : "y_acc", {"n", "p", "q", "k"});
  Tensor out = y;
  if (sh.out_dtype != Float(32))
    out = compute(
        {N, P, Q, K}, [&](Var n, Var p, Var q, Var k) { return y(n, p, q, k).astype(sh.out_dtype); },
        "y", {"n", "p", "q", "k"});

  Schedule sched = create_schedule({out});
  // One output a thread, k fastest; the sum in a register, stored (and rounded) once.
  Tensor acc = out == y ? sched.cache_write(y, "local") : y;
  if (out != y)
    sched[y].set_scope("local");
  Stage so = sched[out];
  auto [n, p, q, k] = so.axes<4>();
  IterVar f = so.fuse(so.fuse(so.fuse(n, p), q), k);
  auto [b, t] = so.split(f, 256);
  so.bind(b, thread_axis("blockIdx.x"));
  so.bind(t, thread_axis("threadIdx.x"));
  sched[acc].compute_at(so, t);

  ScheduledProgram prog;
  prog.schedule = sched;
  prog.args = {x, w, out};
  prog.num_inputs = 2;
  prog.flops = 2.0 * double(N) * P * Q * K * R * R * Cg;
  return prog;
}

ScheduleEntry conv2d_grouped_entry() {
  ScheduleEntry e;
  e.name = "conv2d_grouped";
  e.description = "grouped conv2d on CUDA cores (G groups; G = C: depthwise, as MobileNet's 3x3 "
                  "layers) on x NHWC, w K x R x S x C/G, y NPQK fp32; stride, dil(ation), zero "
                  "padding; one output a thread";
  e.default_shape = {{"N", 8},  {"H", 56},  {"W", 56},     {"C", 128}, {"K", 128},
                     {"R", 3},  {"pad", 1}, {"stride", 1}, {"dil", 1}, {"G", 128}};
  e.nonnegative = {"pad"};
  e.dtypes = {Float(16), BFloat(16)};
  e.build = [](const ShapeParams &p, DataType in) {
    Conv2dTcShape sh = conv2d_shape_of(p);
    sh.in_dtype = in;
    return conv2d_grouped(sh, int(p.at("G")));
  };
  return e;
}

} // namespace tessel
