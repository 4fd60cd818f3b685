// tessel against the vendor libraries, in one process on the same inputs.
//
// For each shape: our kernel and the vendor's best run on the same random data; our result is
// checked against the vendor's; both are timed with CUDA events (warm-up, median of 30
// measurements of 10 launches). Prints a table and writes CSV. The vendor's best (bench/README.md):
//   - GEMM fp16 / bf16 in, fp32 out: the faster of cublasGemmEx (cuBLAS's default choice) and
//     the fastest cuBLASLt algorithm of those its heuristic offers, each timed;
//   - fp8 (e4m3 in, bf16 out, per-tensor or block scales): the fastest cuBLASLt algorithm of
//     those its heuristic offers, with and without fast accumulation, each timed;
//   - conv (NHWC fp16): the fastest of every legacy algorithm and every backend-API engine
//     configuration cuDNN can run, each timed (CudnnConv::find_best); the legacy Find's choice,
//     bench's baseline before issue 25, is timed too and shown beside it.
// Convolutions get several rows: the seed tutorial's schedule (on relaid-out copies), conv2d_tc
// and conv2d_wgmma (on cuDNN's arrays themselves), the fused bias + ReLU.
//
//   ./build/bench/tessel_bench [--csv results.csv] [--only gemm|fp8|conv|norm] [--filter REGEX]
//                              [--schedule gemm_wmma] [--list]
//   ./build/bench/tessel_bench --tune [--only gemm|conv] [--tune-csv tune.csv]
#include "bench/BenchRow.h"
#include "bench/CublasLt.h"
#include "bench/Fp8Bench.h"
#include "bench/Tune.h"
#include "bench/VendorLibraries.h"
#include "compiler/te/Compute.h"
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Check.h"
#include "runtime/Device.h"
#include "runtime/Half.h"
#include "runtime/TuningDb.h"
#include "schedules/Conv2dTc.h"
#include "schedules/Conv2dTensorCoreTutorial.h"
#include "schedules/Registry.h"

#include <llvm/Support/CommandLine.h>
#include <llvm/Support/Regex.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>

using namespace tessel;
using bench::print_row;
using bench::Row;
using bench::timing;

static llvm::cl::opt<std::string> csv_path("csv", llvm::cl::desc("write the table as CSV here"),
                                           llvm::cl::init("bench_results.csv"));
static llvm::cl::opt<std::string> only(
    "only", llvm::cl::desc("gemm (fp16 and bf16), fp8, conv or norm: the rows of one kind"),
    llvm::cl::init(""));
static llvm::cl::opt<std::string> filter(
    "filter", llvm::cl::desc("run only the groups of rows whose label (--list) matches this "
                             "regular expression, e.g. 'fp8|bf16' or 'conv seed batch'"),
    llvm::cl::init(""));
static llvm::cl::opt<bool> list_groups(
    "list", llvm::cl::desc("print the labels of the groups of rows that would run, and exit "
                           "(needs no GPU)"));
static llvm::cl::opt<std::string> fp8_schedule(
    "fp8-schedule",
    llvm::cl::desc("our schedule for the per-tensor fp8 rows, NAME or NAME:P=V,... (default "
                   "gemm_fp8:SCALE=0,FAST=1: per-tensor scales, fast accumulation, against "
                   "cuBLASLt's fastest with or without its fast accumulation; rows say 'ours: "
                   "not built' where it is not registered)"),
    llvm::cl::init("gemm_fp8:SCALE=0,FAST=1"));
static llvm::cl::opt<std::string> fp8_block_schedule(
    "fp8-block-schedule",
    llvm::cl::desc("our schedule for the block-scaled fp8 rows, NAME or NAME:P=V,... (default "
                   "gemm_fp8:SCALE=1: 1x128 / 128x128 scales, promoted every 128 of K)"),
    llvm::cl::init("gemm_fp8:SCALE=1"));
static llvm::cl::opt<std::string> cudnn_log(
    "cudnn-log", llvm::cl::desc("where the cuDNN search writes every candidate's time"),
    llvm::cl::init("cudnn_search.txt"));
static llvm::cl::list<std::string> gemm_schedules(
    "schedule", llvm::cl::desc("GEMM schedules to run, NAME or NAME:P=V,... (default: gemm_tc, "
                               "which is gemm_wgmma on Hopper, gemm_mma, gemm_wmma)"));
static llvm::cl::opt<bool> tune(
    "tune", llvm::cl::desc("search the tiles of gemm_tc (4096^3, 8192^3; its wgmma path too on "
                           "a Hopper GPU) and conv2d_tc (the seed conv) instead of the table; "
                           "log every candidate"));
static llvm::cl::opt<std::string> tune_csv("tune-csv", llvm::cl::desc("the search's log as CSV"),
                                           llvm::cl::init("tune.csv"));

namespace {

// The vendor's best for a GEMM: cublasGemmEx (cuBLAS's own choice, bench's baseline before
// issue 25) and cuBLASLt's timed fastest on the same A, B; the faster one. Cached per problem:
// every schedule's row of a shape compares with the same figure.
struct VendorGemm {
  double ms = NAN, default_ms = NAN;
  std::string call, note;
  std::shared_ptr<bench::CublasLtGemm> lt; ///< cuBLASLt's choice where it is the faster
};

VendorGemm vendor_gemm(const DeviceArray &A, const DeviceArray &B, const DeviceArray &Cv, int64_t M,
                       int64_t N, int64_t K, bench::CublasGemm &cublas) {
  static std::map<std::string, VendorGemm> cache;
  const std::string key = A.dtype().str() + " " + std::to_string(M) + "x" + std::to_string(N) +
                          "x" + std::to_string(K);
  if (auto it = cache.find(key); it != cache.end())
    return it->second;
  VendorGemm v;
  DeviceArray Cv2(Float(32), {M, N});
  v.default_ms = time_launches([&] { cublas.run(A, B, Cv2, M, N, K); }, timing()).median_ms;
  v.ms = v.default_ms;
  v.call = "cublasGemmEx default";
  try {
    const bench::LtType in = A.dtype() == BFloat(16) ? bench::LtType::bf16 : bench::LtType::f16;
    auto lt = std::make_shared<bench::CublasLtGemm>(M, N, K, in, bench::LtType::f32,
                                                    bench::LtScaling::none, false);
    DeviceArray Clt(Float(32), {M, N});
    bench::LtOperands ops{A.data(), B.data(), Clt.data(), 0, 0};
    lt->choose(ops);
    Clt.poison();
    lt->run(ops);
    std::vector<float> want(M * N);
    Cv.copy_to_host(want.data(), Cv.bytes());
    if (double err = bench::max_rel_error(Clt, want); err > 1e-3) {
      v.note = "cuBLASLt's result differs from cublasGemmEx's by " + std::to_string(err) +
               ": not used; ";
    } else {
      double lt_ms = time_launches([&] { lt->run(ops); }, timing()).median_ms;
      if (lt_ms < v.ms) {
        v.ms = lt_ms;
        v.call = lt->choice();
        v.lt = lt;
      }
    }
  } catch (const Error &e) {
    v.note = std::string("cuBLASLt: ") + e.what() + "; ";
  }
  cache[key] = v;
  return v;
}

// `schedule` ("NAME" or "NAME:P=V,...") on A (M x K) and B (K x N) of type `in` (float16 or
// bfloat16), C float32, against the vendor's best on the same arrays.
Row bench_gemm(const std::string &schedule, int64_t M, int64_t N, int64_t K,
               bench::CublasGemm &cublas, DataType in = Float(16)) {
  const bench::ScheduleSpec spec = bench::ScheduleSpec::parse(schedule);
  Row r;
  r.kernel = "gemm";
  r.shape = std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
  r.ours_name = in == Float(16) ? schedule : schedule + " (" + in.str() + ")";
  r.flops = 2.0 * M * N * K;
  DeviceArray A(in, {M, K}), B(in, {K, N}), C(Float(32), {M, N}), Cv(Float(32), {M, N});
  std::vector<uint16_t> ha = random_halves(M * K, 1), hb = random_halves(K * N, 2);
  if (in == BFloat(16))
    for (std::vector<uint16_t> *h : {&ha, &hb})
      for (uint16_t &x : *h)
        x = float_to_bfloat16(half_to_float(x)); // the same values, rounded to bf16
  A.copy_from_host(ha.data(), A.bytes());
  B.copy_from_host(hb.data(), B.bytes());
  cublas.run(A, B, Cv, M, N, K);
  VendorGemm v = vendor_gemm(A, B, Cv, M, N, K, cublas);
  r.vendor_ms = v.ms;
  r.vendor_call = v.call;
  r.vendor_default_ms = v.default_ms;
  try {
    const ScheduleEntry &e = find_schedule(spec.name);
    // The best record of `tessel tune` for the shape, if any (TESSEL_LOG_LEVEL=info says which).
    ScheduledProgram p = build_tuned(e, spec.shape(M, N, K), in, tuning_arch());
    Module m = build(p.schedule, p.args);
    C.poison();
    // Ours on cuBLAS's own A and B, as raw device pointers on cuBLAS's (default) stream: the
    // launch an application holding those buffers would make (Module::launch, TensorView).
    std::vector<TensorView> args = {{A.data(), in, {M, K}}, {B.data(), in, {K, N}},
                                    {C.data(), Float(32), {M, N}}};
    m.launch(args, nullptr);
    // The vendor's choice again, in turns with ours (into a C of its own).
    DeviceArray Cturns(Float(32), {M, N});
    bench::LtOperands ops{A.data(), B.data(), Cturns.data(), 0, 0};
    time_in_turns(
        r, [&] { return m.time(args, timing()).median_ms; },
        [&] {
          return time_launches([&] {
                   if (v.lt)
                     v.lt->run(ops);
                   else
                     cublas.run(A, B, Cturns, M, N, K);
                 },
                 timing())
              .median_ms;
        });
    std::vector<float> vendor(M * N);
    Cv.copy_to_host(vendor.data(), Cv.bytes());
    double worst = bench::max_rel_error(C, vendor);
    r.max_err = worst;
    // Both accumulate K fp16 (bf16) products, exact in fp32, in fp32 in different orders.
    r.note = v.note + (worst <= 1e-3 ? "ok" : "MISMATCH");
  } catch (const Error &e) {
    r.note = v.note + "n/a: " + e.what();
  }
  return r;
}

// softmax / layernorm over R rows of C float16 against a device-to-device copy of x (the same
// bytes read and written): "vendor ms" is the copy's time, the ratio the fraction of the copy's
// speed (these kernels are memory-bound), the TF/s columns TB/s. Checked at 64 rows against
// float64 (the reference of 2^26 elements would take the CPU minutes).
Row bench_norm(const std::string &name, int64_t R, int64_t C) {
  Row r;
  r.kernel = "norm";
  r.shape = std::to_string(R) + "x" + std::to_string(C);
  r.ours_name = name;
  r.flops = 2.0 * 2.0 * double(R) * double(C); // bytes read + written
  try {
    const ScheduleEntry &e = find_schedule(name);
    ScheduledProgram small = e.build(resolve_shape(e, {{"R", 64}, {"C", C}}), Float(16));
    CheckResult c = check_on_gpu(small.schedule, small.args, small.num_inputs);
    r.max_err = c.compare.max_abs_error;
    r.note = c.compare.ok ? "ok" : "MISMATCH " + c.str();
    ScheduledProgram p = build_tuned(e, {{"R", R}, {"C", C}}, Float(16), tuning_arch());
    Module m = build(p.schedule, p.args);
    std::vector<DeviceArray> arrays;
    for (size_t i = 0; i < p.args.size(); ++i) {
      arrays.emplace_back(Float(16), constant_shape(p.args[i]));
      if (i < p.num_inputs) {
        std::vector<uint16_t> h = random_halves(size_t(arrays.back().numel()), 10 + i);
        arrays.back().copy_from_host(h.data(), arrays.back().bytes());
      }
    }
    std::vector<const DeviceArray *> ptrs;
    for (const DeviceArray &a : arrays)
      ptrs.push_back(&a);
    r.ours_ms = m.time(ptrs, timing()).median_ms;
    DeviceArray copy(Float(16), {R, C});
    r.vendor_ms = time_launches([&] { copy.copy_from(arrays[0]); }, timing()).median_ms;
  } catch (const Error &e) {
    r.note = std::string("n/a: ") + e.what();
  }
  return r;
}

// Our layout NHWCnc (blocks of 16 batch x 16 channels) <-> cuDNN's NHWC.
size_t nhwc(int n, int h, int w, int c, int H, int W, int C) {
  return ((size_t(n) * H + h) * W + w) * C + c;
}

// Worst |ours - cuDNN| / (1 + |cuDNN|) over the N x H x W x K outputs; `ours_at(n, h, w, k)` reads
// ours in its own layout. cuDNN rounds its output to fp16 (relative 2^-11); ours stays fp32.
template <typename F>
void compare_with_cudnn(Row &r, const DeviceArray &dy, int N, int H, int W, int K, F ours_at) {
  std::vector<uint16_t> vendor(dy.numel());
  dy.copy_to_host(vendor.data(), dy.bytes());
  double worst = 0;
  for (int n = 0; n < N; ++n)
    for (int h = 0; h < H; ++h)
      for (int ww = 0; ww < W; ++ww)
        for (int k = 0; k < K; ++k) {
          double v = half_to_float(vendor[nhwc(n, h, ww, k, H, W, K)]);
          worst = std::max(worst, std::fabs(double(ours_at(n, h, ww, k)) - v) / (1.0 + std::fabs(v)));
        }
  r.max_err = worst;
  r.note += worst <= 2e-3 ? "ok" : "MISMATCH";
}

// out[m, k] = ReLU(y[m, k] + bias[k]) in float16: the separate bias + ReLU kernel after cuDNN's
// convolution, written with tessel (8 halves a thread, 16-byte loads and stores).
ScheduledProgram bias_relu_kernel(int64_t M, int64_t K) {
  Tensor y = placeholder({M, K}, Float(16), "y"), bias = placeholder({K}, Float(16), "bias");
  Tensor out = compute(
      {M, K},
      [&](Var m, Var k) {
        Expr v = y(m, k).astype(Float(32)) + bias(k).astype(Float(32));
        return max(v, make_zero(Float(32))).astype(Float(16));
      },
      "out", {"m", "k"});
  Schedule s = create_schedule({out});
  Stage st = s[out];
  auto [m, k] = st.axes<2>();
  auto [ko, kv] = st.split(k, 8);
  IterVar f = st.fuse(m, ko);
  auto [bx, tx] = st.split(f, 256);
  st.bind(bx, thread_axis("blockIdx.x"));
  st.bind(tx, thread_axis("threadIdx.x"));
  st.vectorize(kv);
  ScheduledProgram p;
  p.schedule = s;
  p.args = {y, bias, out};
  p.num_inputs = 2;
  return p;
}

// conv + bias + ReLU, y float16: ours in one kernel (conv2d_bias_relu) against cuDNN's fused
// cudnnConvolutionBiasActivationForward and against cuDNN's convolution followed by a separate
// bias + ReLU kernel.
std::vector<Row> bench_bias_relu(const Conv2dTcShape &shape, const Row &base, const DeviceArray &dx,
                                 const DeviceArray &dw, bench::CudnnConv &cudnn) {
  const int64_t M = shape.gemm_m(), K = shape.out_channels;
  const int N = shape.batch, H = shape.out_height(), W = shape.out_width();
  std::vector<uint16_t> b16 = random_halves(size_t(K), 5);
  std::vector<float> b32(b16.size());
  for (size_t i = 0; i < b16.size(); ++i)
    b32[i] = half_to_float(b16[i]);
  DeviceArray bias16(Float(16), {K}), bias32(Float(32), {K});
  bias16.copy_from_host(b16.data(), bias16.bytes());
  bias32.copy_from_host(b32.data(), bias32.bytes());
  DeviceArray fused(Float(16), {N, H, W, K}), conv(Float(16), {N, H, W, K}),
      separate(Float(16), {M, K}), ours(Float(16), {M, K});
  Row fused_row = base, separate_row = base;
  fused_row.ours_name = separate_row.ours_name = "conv2d_bias_relu (y fp16)";
  fused_row.note = "vs cuDNN ConvolutionBiasActivationForward; ";
  separate_row.note = "vs cuDNN conv + bias/ReLU kernel; ";
  // The fused call takes one algorithm (implicit precomputed GEMM); the separate pair is
  // cuDNN's best convolution and our bias + ReLU kernel.
  fused_row.vendor_call = "cudnnConvolutionBiasActivationForward, implicit precomp GEMM";
  separate_row.vendor_call = base.vendor_call + " + tessel bias/ReLU kernel";
  fused_row.vendor_default_ms = separate_row.vendor_default_ms = NAN;
  try {
    cudnn.run_bias_relu(dx, dw, bias16, bias32, fused);
    fused_row.vendor_ms =
        time_launches([&] { cudnn.run_bias_relu(dx, dw, bias16, bias32, fused); }, timing())
            .median_ms;
    ScheduledProgram br = bias_relu_kernel(M, K);
    Module after = build(br.schedule, br.args);
    separate_row.vendor_ms = time_launches([&] {
                               cudnn.run(dx, dw, conv);
                               after.run({&conv, &bias16, &separate});
                             }, timing()).median_ms;
    Conv2dTcShape y16 = shape;
    y16.out_dtype = Float(16);
    ScheduledProgram p = conv2d_bias_relu(y16);
    Module m = build(p.schedule, p.args);
    ours.poison();
    m.run({&dx, &dw, &bias16, &ours});
    fused_row.ours_ms = separate_row.ours_ms = m.time({&dx, &dw, &bias16, &ours}, timing()).median_ms;
    std::vector<uint16_t> got(ours.numel());
    ours.copy_to_host(got.data(), ours.bytes());
    // Each row checks ours against its vendor's result (which checks the separate kernel too).
    for (auto [r, vendor] : {std::pair<Row *, DeviceArray *>{&fused_row, &fused},
                             std::pair<Row *, DeviceArray *>{&separate_row, &separate}})
      compare_with_cudnn(*r, *vendor, N, H, W, int(K), [&](int n, int h, int ww, int k) {
        return half_to_float(got[nhwc(n, h, ww, k, H, W, int(K))]);
      });
  } catch (const Error &e) {
    fused_row.note += std::string("n/a: ") + e.what();
    separate_row.note += std::string("n/a: ") + e.what();
  }
  return {fused_row, separate_row};
}

// `schedule` on `sh` with y of type `out`, on cuDNN's own arrays x, w (NHWC, KRSC): a row on top
// of `base`, y compared with cuDNN's `dy` (N x P x Q x K); ours and cuDNN's best (`cudnn`, which
// writes dy again) timed in turns.
Row bench_implicit_gemm(Row base, const std::string &name, Conv2dTcShape sh, DataType out,
                        const std::function<ScheduledProgram(const Conv2dTcShape &)> &schedule,
                        const DeviceArray &dx, const DeviceArray &dw, const DeviceArray &dy,
                        const std::function<void()> &cudnn) {
  Row row = std::move(base);
  row.ours_name = name;
  const int N = sh.batch, P = sh.out_height(), Q = sh.out_width(), K = sh.out_channels;
  try {
    sh.out_dtype = out;
    ScheduledProgram p = schedule(sh);
    Module m = build(p.schedule, p.args);
    // y is (N*P*Q) x K: the memory of N x P x Q x K, cuDNN's layout.
    DeviceArray y(out, {int64_t(N) * P * Q, K});
    y.poison();
    m.run({&dx, &dw, &y});
    time_in_turns(
        row, [&] { return m.time({&dx, &dw, &y}, timing()).median_ms; },
        [&] { return time_launches(cudnn, timing()).median_ms; });
    std::vector<float> got(y.numel());
    if (out == Float(32)) {
      y.copy_to_host(got.data(), y.bytes());
    } else {
      std::vector<uint16_t> halves(y.numel());
      y.copy_to_host(halves.data(), y.bytes());
      for (size_t i = 0; i < halves.size(); ++i)
        got[i] = half_to_float(halves[i]);
    }
    compare_with_cudnn(row, dy, N, P, Q, K, [&](int n, int h, int ww, int k) {
      return got[nhwc(n, h, ww, k, P, Q, K)];
    });
  } catch (const Error &e) {
    row.note += std::string("n/a: ") + e.what();
  }
  return row;
}

// cuDNN's figures for a conv row: its legacy choice (bench's baseline before issue 25) timed,
// then its best found (CudnnConv::find_best) and timed; dy holds the best's output, the
// reference our rows are checked against. Every candidate's time goes to --cudnn-log.
std::ofstream *cudnn_search_log = nullptr;

void time_cudnn(Row &r, bench::CudnnConv &cudnn, const DeviceArray &dx, const DeviceArray &dw,
                DeviceArray &dy) {
  cudnn.run_legacy(dx, dw, dy);
  r.vendor_default_ms =
      time_launches([&] { cudnn.run_legacy(dx, dw, dy); }, timing()).median_ms;
  cudnn.find_best(dx, dw, dy);
  cudnn.run(dx, dw, dy);
  r.vendor_ms = time_launches([&] { cudnn.run(dx, dw, dy); }, timing()).median_ms;
  r.vendor_call = "cuDNN " + cudnn.algorithm();
  std::printf("# cuDNN for %s: best %s %.4f ms; legacy Find's %s %.4f ms (%.2fx)\n",
              r.shape.c_str(), cudnn.algorithm().c_str(), r.vendor_ms,
              cudnn.legacy_algorithm().c_str(), r.vendor_default_ms,
              r.vendor_default_ms / r.vendor_ms);
  if (cudnn_search_log)
    *cudnn_search_log << r.shape << "\n" << cudnn.search_log() << "  legacy Find's "
                      << cudnn.legacy_algorithm() << ": " << r.vendor_default_ms
                      << " ms (full timing); best: " << r.vendor_ms << " ms\n\n"
                      << std::flush;
}

// The seed tutorial's schedule (NHWCnc: x and w relaid out on the host first) and conv2d_tc
// (cuDNN's own NHWC / KRSC arrays, as they are), each against cuDNN on the same data.
std::vector<Row> bench_conv(const std::string &label, const Conv2dTutorialShape &s) {
  Row r;
  r.kernel = "conv";
  r.shape = label;
  const int B = 16, N = s.batch, H = s.height, W = s.width, C = s.in_channels, K = s.out_channels,
            R = s.kernel;
  r.flops = 2.0 * N * H * W * K * C * R * R;
  bench::CudnnConv cudnn({N, H, W, C, K, R, R, s.pad});
  std::vector<uint16_t> x = random_halves(size_t(N) * H * W * C, 3);
  std::vector<uint16_t> w = random_halves(size_t(K) * R * R * C, 4);
  DeviceArray dx(Float(16), {N, H, W, C}), dw(Float(16), {K, R, R, C}), dy(Float(16), {N, H, W, K});
  dx.copy_from_host(x.data(), dx.bytes());
  dw.copy_from_host(w.data(), dw.bytes());
  time_cudnn(r, cudnn, dx, dw, dy);
  Row tc = r;

  r.ours_name = "conv2d_tensorcore_tutorial";
  try {
    ScheduledProgram p = conv2d_tensorcore_tutorial(s, {.tensorize = true});
    Module m = build(p.schedule, p.args);
    std::vector<uint16_t> a(x.size()), wt(w.size());
    for (int n = 0; n < N; ++n)
      for (int h = 0; h < H; ++h)
        for (int ww = 0; ww < W; ++ww)
          for (int c = 0; c < C; ++c)
            a[(((((size_t(n / B) * H + h) * W + ww) * (C / B) + c / B) * B + n % B) * B + c % B)] =
                x[nhwc(n, h, ww, c, H, W, C)];
    for (int k = 0; k < K; ++k)
      for (int kh = 0; kh < R; ++kh)
        for (int kw = 0; kw < R; ++kw)
          for (int c = 0; c < C; ++c)
            wt[(((((size_t(kh) * R + kw) * (C / B) + c / B) * (K / B) + k / B) * B + c % B) * B + k % B)] =
                w[((size_t(k) * R + kh) * R + kw) * C + c];
    DeviceArray da(Float(16), {N / B, H, W, C / B, B, B}), dwt(Float(16), {R, R, C / B, K / B, B, B});
    DeviceArray dc(Float(32), {N / B, H, W, K / B, B, B});
    da.copy_from_host(a.data(), da.bytes());
    dwt.copy_from_host(wt.data(), dwt.bytes());
    dc.poison();
    m.run({&da, &dwt, &dc});
    r.ours_ms = m.time({&da, &dwt, &dc}, timing()).median_ms;
    std::vector<float> ours(dc.numel());
    dc.copy_to_host(ours.data(), dc.bytes());
    compare_with_cudnn(r, dy, N, H, W, K, [&](int n, int h, int ww, int k) {
      return ours[(((((size_t(n / B) * H + h) * W + ww) * (K / B) + k / B) * B + n % B) * B + k % B)];
    });
  } catch (const Error &e) {
    r.note += std::string("n/a: ") + e.what();
  }

  // conv2d_tc and its Hopper path conv2d_wgmma, on cuDNN's own arrays.
  Conv2dTcShape shape{.batch = N, .height = H, .width = W, .in_channels = C, .out_channels = K,
                      .kernel = R, .pad = s.pad};
  auto implicit_gemm = [&](const std::string &name, DataType out,
                           ScheduledProgram (*schedule)(const Conv2dTcShape &)) {
    return bench_implicit_gemm(tc, name, shape, out, schedule, dx, dw, dy,
                               [&] { cudnn.run(dx, dw, dy); });
  };
  // conv2d_tc's WMMA path explicitly (on a Hopper GPU conv2d_tc(shape) is conv2d_wgmma).
  auto wmma = [](const Conv2dTcShape &sh) { return conv2d_tc(sh, conv2d_tc_tiles(sh)); };
  std::vector<Row> rows = {r, implicit_gemm("conv2d_tc", Float(32), wmma)};
  // The wgmma path twice: y float32 (as conv2d_tc), and y float16 as cuDNN writes it here (the
  // like-for-like row: the same bytes out).
  if (hopper_gpu()) {
    rows.push_back(implicit_gemm("conv2d_wgmma", Float(32), conv2d_wgmma));
    rows.push_back(implicit_gemm("conv2d_wgmma (y fp16)", Float(16), conv2d_wgmma));
    for (const Row &f : bench_bias_relu(shape, tc, dx, dw, cudnn))
      rows.push_back(f);
  }
  return rows;
}

// A strided conv (ResNet's downsampling 3x3, stride 2) on cuDNN's arrays: conv2d_tc's WMMA path
// (y float32) and conv2d_wgmma (y float16, as cuDNN writes it here) against cuDNN.
std::vector<Row> bench_conv_strided(const std::string &label, const Conv2dTcShape &s) {
  Row r;
  r.kernel = "conv";
  r.shape = label;
  const int N = s.batch, H = s.height, W = s.width, C = s.in_channels, K = s.out_channels,
            R = s.kernel, P = s.out_height(), Q = s.out_width();
  r.flops = s.flops();
  bench::CudnnConv cudnn({N, H, W, C, K, R, R, s.pad, s.stride});
  std::vector<uint16_t> x = random_halves(size_t(N) * H * W * C, 3);
  std::vector<uint16_t> w = random_halves(size_t(K) * R * R * C, 4);
  DeviceArray dx(Float(16), {N, H, W, C}), dw(Float(16), {K, R, R, C}), dy(Float(16), {N, P, Q, K});
  dx.copy_from_host(x.data(), dx.bytes());
  dw.copy_from_host(w.data(), dw.bytes());
  time_cudnn(r, cudnn, dx, dw, dy);
  std::vector<Row> rows;
  auto ours = [&](const std::string &name, DataType out,
                  const std::function<ScheduledProgram(const Conv2dTcShape &)> &schedule) {
    rows.push_back(bench_implicit_gemm(r, name, s, out, schedule, dx, dw, dy,
                                       [&] { cudnn.run(dx, dw, dy); }));
  };
  ours("conv2d_tc", Float(32), [](const Conv2dTcShape &sh) { return conv2d_tc(sh, conv2d_tc_tiles(sh)); });
  if (hopper_gpu())
    ours("conv2d_wgmma (y fp16)", Float(16), [](const Conv2dTcShape &sh) { return conv2d_wgmma(sh); });
  return rows;
}

// CSV field: quoted, inner quotes doubled.
std::string csv_field(const std::string &text) {
  std::string out = "\"";
  for (char c : text)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// A group of rows that share their vendor set-up (one shape): what --list prints and --filter
// and --only select.
struct Group {
  std::string label;
  std::function<std::vector<Row>()> run;
};

std::vector<Group> groups() {
  std::vector<Group> out;
  // One cuBLAS handle for every GEMM group, made at the first (on the GPU).
  auto cublas = std::make_shared<std::unique_ptr<bench::CublasGemm>>();
  auto handle = [cublas]() -> bench::CublasGemm & {
    if (!*cublas)
      *cublas = std::make_unique<bench::CublasGemm>();
    return **cublas;
  };
  auto label = [](std::initializer_list<int64_t> dims) {
    std::string s;
    for (int64_t d : dims) {
      if (!s.empty())
        s += "x";
      s += std::to_string(d);
    }
    return s;
  };

  std::vector<std::string> names(gemm_schedules.begin(), gemm_schedules.end());
  if (names.empty())
    for (const char *n : {"gemm_tc", "gemm_mma", "gemm_wmma"})
      if (schedule_registry().count(n))
        names.push_back(n);
  // The square and the skinny shapes, then (issue 13) ragged ones and an LLM's layers
  // (M x N x K: a batch of 16 or 128 tokens through 4096 x 4096, and an MLP's 11008).
  const int64_t shapes[][3] = {{1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096},
                               {8192, 8192, 8192}, {4096, 4096, 1024}, {8192, 1024, 4096},
                               {4095, 4095, 4095}, {1000, 1000, 1000}, {3000, 5000, 700},
                               {16, 4096, 4096},   {128, 4096, 4096},  {4096, 11008, 4096}};
  for (const std::string &name : names)
    for (const auto &sh : shapes)
      out.push_back({"gemm fp16 " + name + " " + label({sh[0], sh[1], sh[2]}),
                     [=] { return std::vector<Row>{bench_gemm(name, sh[0], sh[1], sh[2], handle())}; }});
  // bfloat16 in, float32 out, against cuBLAS's bf16 GEMMs (issue 25).
  std::vector<std::string> bf16_names(gemm_schedules.begin(), gemm_schedules.end());
  if (bf16_names.empty())
    bf16_names = {"gemm_tc"};
  const int64_t bf16_shapes[][3] = {{4096, 4096, 4096}, {8192, 8192, 8192}, {4096, 11008, 4096}};
  for (const std::string &name : bf16_names)
    for (const auto &sh : bf16_shapes)
      out.push_back({"gemm bf16 " + name + " " + label({sh[0], sh[1], sh[2]}), [=] {
                       return std::vector<Row>{
                           bench_gemm(name, sh[0], sh[1], sh[2], handle(), BFloat(16))};
                     }});

  // fp8 e4m3 in, bfloat16 out, per-tensor and block scales, against cuBLASLt (issue 25).
  const int64_t fp8_shapes[][3] = {{1024, 1024, 1024}, {4096, 4096, 4096}, {8192, 8192, 8192},
                                   {4096, 11008, 4096}};
  for (bool block : {false, true})
    for (const auto &sh : fp8_shapes)
      out.push_back({std::string("fp8 ") + (block ? "block " : "tensor ") +
                         label({sh[0], sh[1], sh[2]}),
                     [=] {
                       bench::ScheduleSpec ours =
                           bench::ScheduleSpec::parse(block ? fp8_block_schedule : fp8_schedule);
                       return std::vector<Row>{bench::bench_fp8(sh[0], sh[1], sh[2], block, ours)};
                     }});

  Conv2dTutorialShape seed;
  Conv2dTutorialShape res3{.batch = 256, .height = 28, .width = 28, .in_channels = 128, .out_channels = 128};
  Conv2dTutorialShape res5{.batch = 256, .height = 7, .width = 7, .in_channels = 512, .out_channels = 512};
  Conv2dTutorialShape seed1 = seed, seed8 = seed;
  seed1.batch = 1;
  seed8.batch = 8;
  for (auto &[name, s] : {std::pair<std::string, Conv2dTutorialShape>{"seed 256x14x14 256->512", seed},
                          {"resnet50 res3 256x28x28 128->128", res3},
                          {"resnet50 res5 256x7x7 512->512", res5},
                          {"seed batch 1 1x14x14 256->512", seed1},
                          {"seed batch 8 8x14x14 256->512", seed8}})
    out.push_back({"conv " + name, [name, s] { return bench_conv(name, s); }});
  // ResNet-50's downsampling 3x3 conv (res3's first block: stride 2, 56x56 -> 28x28).
  Conv2dTcShape down{.batch = 256, .height = 56, .width = 56, .in_channels = 128,
                     .out_channels = 128, .kernel = 3, .pad = 1, .stride = 2};
  const std::string down_label = "resnet50 3x3 stride 2 256x56x56 128->128";
  out.push_back({"conv " + down_label, [=] { return bench_conv_strided(down_label, down); }});

  for (const char *name : {"softmax", "layernorm"})
    for (int64_t C : {1024, 2048, 4096, 8192}) {
      const int64_t R = (int64_t(1) << 26) / C;
      out.push_back({std::string("norm ") + name + " " + label({R, C}),
                     [=] { return std::vector<Row>{bench_norm(name, R, C)}; }});
    }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "tessel vs cuBLAS / cuBLASLt / cuDNN, each the vendor's best (bench/README.md)\n");
  try {
    // Which groups: --only (a label's first word) and --filter (a regular expression).
    llvm::Regex re(filter);
    std::string re_error;
    user_check(filter.empty() || re.isValid(re_error), "bench")
        << "--filter '" << filter << "': " << re_error;
    std::vector<Group> chosen;
    for (Group &g : groups())
      if ((only.empty() || g.label.rfind(only + " ", 0) == 0) &&
          (filter.empty() || re.match(g.label)))
        chosen.push_back(std::move(g));
    if (list_groups) {
      for (const Group &g : chosen)
        std::printf("%s\n", g.label.c_str());
      return 0;
    }
    if (!Device::available()) {
      std::fprintf(stderr,
                   "tessel_bench: no GPU here (%s). It times kernels against cuBLAS, cuBLASLt and "
                   "cuDNN on a GPU: build it here, run it there (bench/gpu_session.sh pack, then "
                   "run bench). --list shows the rows it would run, --help its options.\n",
                   Device::unavailable_reason().c_str());
      return 2;
    }
    Device &gpu = Device::get(0);
    std::printf("device: %s (%s)\n", gpu.name().c_str(), gpu.arch().c_str());
    std::printf("%-6s %-28s %-20s %10s %10s %9s %9s %7s  %-9s %s\n", "kind", "shape", "ours",
                "ours ms", "vendor ms", "ours TF/s", "vend TF/s", "ratio", "max err", "check");
    if (tune) {
      std::ofstream csv(tune_csv);
      csv << "kind,shape,params,ms,tflops,vendor_ms,max_err,check\n";
      if (only.empty() || only == "gemm") {
        bench::CublasGemm cublas;
        for (int64_t n : {4096, 8192})
          bench::tune_gemm(n, n, n, cublas, csv);
      }
      if (only.empty() || only == "conv")
        bench::tune_conv({256, 14, 14, 256, 512, 3, 3, 1}, csv);
      std::printf("tuning log written to %s\n", tune_csv.c_str());
      return 0;
    }
    std::ofstream search_log(cudnn_log);
    cudnn_search_log = &search_log;
    std::vector<Row> rows;
    for (const Group &g : chosen)
      for (const Row &r : g.run()) {
        rows.push_back(r);
        print_row(r);
      }
    std::ofstream csv(csv_path);
    csv << "kind,shape,ours,ours_ms,vendor_ms,ours_tflops,vendor_tflops,ratio,max_err,check,"
           "vendor_call,vendor_default_ms\n";
    for (const Row &r : rows)
      csv << r.kernel << "," << csv_field(r.shape) << "," << csv_field(r.ours_name) << ","
          << r.ours_ms << "," << r.vendor_ms << "," << r.flops / (r.ours_ms * 1e9) << ","
          << r.flops / (r.vendor_ms * 1e9) << "," << r.vendor_ms / r.ours_ms << "," << r.max_err
          << "," << csv_field(r.note) << "," << csv_field(r.vendor_call) << ","
          << r.vendor_default_ms << "\n";
    std::printf("CSV written to %s; cuDNN's search to %s\n", csv_path.c_str(), cudnn_log.c_str());
  } catch (const Error &e) {
    std::fprintf(stderr, "tessel_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
