#include "bench/VendorLibraries.h"

#include "bench/CudnnGraph.h"
#include "bench/VendorStatus.h"
#include "runtime/Half.h"
#include "runtime/Timer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>

#include <cublas_v2.h>
#include <cudnn.h>

namespace tessel::bench {

double max_rel_error(const DeviceArray &ours, const std::vector<float> &vendor) {
  std::vector<float> got(ours.numel());
  ours.copy_to_host(got.data(), ours.bytes());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, double(std::fabs(got[i] - vendor[i])) / (1.0 + std::fabs(vendor[i])));
  return worst;
}

CublasGemm::CublasGemm() {
  cublasHandle_t h;
  CHECK_CUBLAS(cublasCreate(&h));
  handle_ = h;
}

CublasGemm::~CublasGemm() { cublasDestroy(static_cast<cublasHandle_t>(handle_)); }

void CublasGemm::run(const DeviceArray &A, const DeviceArray &B, DeviceArray &C, int64_t M,
                     int64_t N, int64_t K) {
  const float alpha = 1.0f, beta = 0.0f;
  user_check(A.dtype() == B.dtype() && (A.dtype() == Float(16) || A.dtype() == BFloat(16)),
             "cuBLAS")
      << "CublasGemm takes float16 or bfloat16 A and B of one type, got " << A.dtype() << " and "
      << B.dtype();
  const cudaDataType in = A.dtype() == BFloat(16) ? CUDA_R_16BF : CUDA_R_16F;
  // Row-major C = A * B is column-major C^T = B^T * A^T.
  CHECK_CUBLAS(cublasGemmEx(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_N, CUBLAS_OP_N, int(N),
                            int(M), int(K), &alpha, reinterpret_cast<const void *>(B.data()),
                            in, int(N), reinterpret_cast<const void *>(A.data()),
                            in, int(K), &beta, reinterpret_cast<void *>(C.data()),
                            CUDA_R_32F, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

struct CudnnConv::Impl {
  ConvShape shape;
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  // The legacy choice: cudnnFindConvolutionForwardAlgorithm's first, with tensor-op math.
  cudnnConvolutionFwdAlgo_t algo{};
  DeviceArray workspace;
  // find_best()'s choice: a legacy algorithm and math type, or a graph plan.
  bool have_best = false;
  cudnnConvolutionFwdAlgo_t best_algo{};
  cudnnMathType_t best_math = CUDNN_TENSOR_OP_MATH;
  std::unique_ptr<CudnnGraphConv> graph;
  CudnnPlan best_plan;
  DeviceArray best_workspace;
  // run_bias_relu's: the bias descriptor (float16, or float32 once cuDNN refused float16) and
  // the ReLU; created at its first call.
  cudnnTensorDescriptor_t bias = nullptr;
  cudnnActivationDescriptor_t relu = nullptr;
  bool bias_float32 = false;
  DeviceArray fused_workspace;

  void forward(const DeviceArray &dx, const DeviceArray &dw, DeviceArray &dy,
               cudnnConvolutionFwdAlgo_t a, cudnnMathType_t math, const DeviceArray &ws) {
    const float alpha = 1.0f, beta = 0.0f;
    CHECK_CUDNN(cudnnSetConvolutionMathType(conv, math));
    CHECK_CUDNN(cudnnConvolutionForward(
        handle, &alpha, x, reinterpret_cast<const void *>(dx.data()), w,
        reinterpret_cast<const void *>(dw.data()), conv, a,
        reinterpret_cast<void *>(ws.data()), size_t(ws.bytes()), &beta, y,
        reinterpret_cast<void *>(dy.data())));
  }
};

CudnnConv::CudnnConv(const ConvShape &s) : impl_(std::make_unique<Impl>()) {
  Impl &d = *impl_;
  d.shape = s;
  CHECK_CUDNN(cudnnCreate(&d.handle));
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&d.x));
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&d.y));
  CHECK_CUDNN(cudnnCreateFilterDescriptor(&d.w));
  CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&d.conv));
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, s.n, s.c, s.h, s.w));
  CHECK_CUDNN(cudnnSetFilter4dDescriptor(d.w, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, s.k, s.c, s.r, s.s));
  CHECK_CUDNN(cudnnSetConvolution2dDescriptor(d.conv, s.pad, s.pad, s.stride, s.stride, 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CHECK_CUDNN(cudnnSetConvolutionMathType(d.conv, CUDNN_TENSOR_OP_MATH));
  int n, c, h, w;
  CHECK_CUDNN(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &n, &c, &h, &w));
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, n, c, h, w));
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int found = 0;
  CHECK_CUDNN(cudnnFindConvolutionForwardAlgorithm(d.handle, d.x, d.w, d.conv, d.y,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf));
  user_check(found > 0 && perf[0].status == CUDNN_STATUS_SUCCESS, "cuDNN")
      << "no convolution algorithm found";
  d.algo = perf[0].algo;
  legacy_name_ = "algo " + std::to_string(int(d.algo));
  algo_name_ = "legacy " + legacy_name_;
  size_t bytes = 0;
  CHECK_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(d.handle, d.x, d.w, d.conv, d.y, d.algo, &bytes));
  d.workspace = DeviceArray(UInt(8), {int64_t(std::max<size_t>(bytes, 1))});
}

CudnnConv::~CudnnConv() {
  Impl &d = *impl_;
  d.best_plan = {};
  d.graph.reset();
  if (d.relu)
    cudnnDestroyActivationDescriptor(d.relu);
  if (d.bias)
    cudnnDestroyTensorDescriptor(d.bias);
  cudnnDestroyConvolutionDescriptor(d.conv);
  cudnnDestroyFilterDescriptor(d.w);
  cudnnDestroyTensorDescriptor(d.y);
  cudnnDestroyTensorDescriptor(d.x);
  cudnnDestroy(d.handle);
}

namespace {

// One way cuDNN can run the convolution, for find_best() to time.
struct ConvCandidate {
  std::string name;
  int64_t workspace = 0;
  std::function<void()> run;
  // What it is: a legacy algorithm and math type, or a graph plan.
  cudnnConvolutionFwdAlgo_t algo{};
  cudnnMathType_t math = CUDNN_TENSOR_OP_MATH;
  std::shared_ptr<CudnnPlan> plan;
  double ms = INFINITY;
};

std::vector<float> halves_of(const DeviceArray &a) {
  std::vector<uint16_t> h(a.numel());
  a.copy_to_host(h.data(), a.bytes());
  return halves_to_floats(h);
}

// Worst |got - want| / (1 + |want|).
double worst_error(const std::vector<float> &got, const std::vector<float> &want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double e = std::fabs(double(got[i]) - want[i]) / (1.0 + std::fabs(want[i]));
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

const char *math_name(cudnnMathType_t m) {
  switch (m) {
  case CUDNN_DEFAULT_MATH: return "default-math";
  case CUDNN_TENSOR_OP_MATH: return "tensor-op";
  case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op-allow-conversion";
  case CUDNN_FMA_MATH: return "fma";
  }
  return "math?";
}

} // namespace

void CudnnConv::find_best(const DeviceArray &x, const DeviceArray &w, DeviceArray &y) {
  Impl &d = *impl_;
  // The reference every candidate must match: the legacy choice's output.
  d.forward(x, w, y, d.algo, CUDNN_TENSOR_OP_MATH, d.workspace);
  const std::vector<float> want = halves_of(y);

  DeviceArray ws(UInt(8), {kCudnnWorkspaceLimit});
  std::vector<ConvCandidate> cands;
  std::ostringstream log;

  // The legacy API, every algorithm, timed by cuDNN itself with the whole limit to use.
  cudnnConvolutionFwdAlgoPerf_t perf[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int found = 0;
  CHECK_CUDNN(cudnnSetConvolutionMathType(d.conv, CUDNN_TENSOR_OP_MATH));
  CHECK_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(
      d.handle, d.x, reinterpret_cast<const void *>(x.data()), d.w,
      reinterpret_cast<const void *>(w.data()), d.conv, d.y, reinterpret_cast<void *>(y.data()),
      2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf, reinterpret_cast<void *>(ws.data()),
      size_t(ws.bytes())));
  for (int i = 0; i < found; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || int64_t(perf[i].memory) > kCudnnWorkspaceLimit)
      continue;
    const cudnnConvolutionFwdAlgo_t a = perf[i].algo;
    const cudnnMathType_t m = perf[i].mathType;
    cands.push_back({"legacy algo " + std::to_string(int(a)) + " " + math_name(m),
                     int64_t(perf[i].memory), [&, a, m] { d.forward(x, w, y, a, m, ws); }, a, m,
                     nullptr});
  }
  // The backend API's engine configurations.
  std::string graph_note;
  try {
    d.graph = std::make_unique<CudnnGraphConv>(d.handle, d.shape);
    for (CudnnPlan &p : d.graph->plans(kCudnnWorkspaceLimit, graph_note)) {
      auto plan = std::make_shared<CudnnPlan>(std::move(p));
      cands.push_back({plan->name, plan->workspace,
                       [&, plan] {
                         d.graph->execute(*plan, x.data(), w.data(), y.data(), ws.data());
                       },
                       {}, CUDNN_TENSOR_OP_MATH, plan});
    }
  } catch (const Error &e) {
    graph_note = std::string("graph API unavailable: ") + e.what();
  }
  log << "cuDNN candidates for " << d.shape.n << "x" << d.shape.h << "x" << d.shape.w << " "
      << d.shape.c << "->" << d.shape.k << " " << d.shape.r << "x" << d.shape.s << " stride "
      << d.shape.stride << ": " << found << " legacy results, " << graph_note << "\n";

  // A few launches each to rank them; bench times the winner as it times everything.
  const TimeOptions quick{.number = 3, .repeat = 7, .warmup = 1, .flush_l2 = false};
  for (ConvCandidate &c : cands) {
    try {
      c.ms = time_launches(c.run, quick).median_ms;
    } catch (const Error &e) {
      c.ms = INFINITY; // offered, but refused to run: never chosen
      log << "  " << c.name << ": failed: " << e.what() << "\n";
    }
  }
  std::stable_sort(cands.begin(), cands.end(),
                   [](const ConvCandidate &a, const ConvCandidate &b) { return a.ms < b.ms; });
  // The fastest whose output matches the reference (cuDNN rounds to fp16 either way).
  const ConvCandidate *best = nullptr;
  for (const ConvCandidate &c : cands) {
    if (!std::isfinite(c.ms))
      break;
    y.poison();
    c.run();
    double err = worst_error(halves_of(y), want);
    if (err <= 2e-3) {
      best = &c;
      break;
    }
    log << "  " << c.name << ": " << c.ms << " ms but its output differs from the legacy "
        << "choice's by " << err << ": passed over\n";
  }
  for (const ConvCandidate &c : cands)
    if (std::isfinite(c.ms))
      log << "  " << (&c == best ? "* " : "  ") << c.name << ": " << c.ms << " ms, workspace "
          << c.workspace << " B\n";
  search_log_ = log.str();
  user_check(best, "cuDNN") << "no candidate convolution ran and matched:\n" << search_log_;

  // Keep the winner, with a workspace of its own size.
  d.have_best = true;
  algo_name_ = best->name;
  d.best_workspace = DeviceArray(UInt(8), {std::max<int64_t>(best->workspace, 1)});
  d.best_algo = best->algo;
  d.best_math = best->math;
  if (best->plan)
    d.best_plan = *best->plan;
}

void CudnnConv::run(const DeviceArray &x, const DeviceArray &w, DeviceArray &y) {
  Impl &d = *impl_;
  if (!d.have_best)
    return run_legacy(x, w, y);
  if (d.best_plan.desc)
    d.graph->execute(d.best_plan, x.data(), w.data(), y.data(), d.best_workspace.data());
  else
    d.forward(x, w, y, d.best_algo, d.best_math, d.best_workspace);
}

void CudnnConv::run_legacy(const DeviceArray &x, const DeviceArray &w, DeviceArray &y) {
  Impl &d = *impl_;
  d.forward(x, w, y, d.algo, CUDNN_TENSOR_OP_MATH, d.workspace);
}

void CudnnConv::run_bias_relu(const DeviceArray &x, const DeviceArray &w,
                              const DeviceArray &bias16, const DeviceArray &bias32,
                              DeviceArray &y) {
  Impl &d = *impl_;
  const cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  if (!d.relu) {
    CHECK_CUDNN(cudnnCreateActivationDescriptor(&d.relu));
    CHECK_CUDNN(cudnnSetActivationDescriptor(d.relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN,
                                             0.0));
    CHECK_CUDNN(cudnnCreateTensorDescriptor(&d.bias));
    size_t bytes = 0;
    CHECK_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(d.handle, d.x, d.w, d.conv, d.y, algo,
                                                        &bytes));
    d.fused_workspace = DeviceArray(UInt(8), {int64_t(std::max<size_t>(bytes, 1))});
  }
  const float alpha1 = 1.0f, alpha2 = 0.0f;
  auto call = [&] {
    CHECK_CUDNN(cudnnSetConvolutionMathType(d.conv, CUDNN_TENSOR_OP_MATH));
    int k = int(bias16.numel());
    CHECK_CUDNN(cudnnSetTensor4dDescriptor(d.bias, CUDNN_TENSOR_NCHW,
                                           d.bias_float32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_HALF, 1,
                                           k, 1, 1));
    const DeviceArray &b = d.bias_float32 ? bias32 : bias16;
    return cudnnConvolutionBiasActivationForward(
        d.handle, &alpha1, d.x, reinterpret_cast<const void *>(x.data()), d.w,
        reinterpret_cast<const void *>(w.data()), d.conv, algo,
        reinterpret_cast<void *>(d.fused_workspace.data()), size_t(d.fused_workspace.bytes()),
        &alpha2, d.y, reinterpret_cast<const void *>(y.data()), d.bias,
        reinterpret_cast<const void *>(b.data()), d.relu, d.y, reinterpret_cast<void *>(y.data()));
  };
  cudnnStatus_t st = call();
  if (st != CUDNN_STATUS_SUCCESS && !d.bias_float32) {
    d.bias_float32 = true;
    st = call();
  }
  user_check(st == CUDNN_STATUS_SUCCESS, "cuDNN")
      << "cudnnConvolutionBiasActivationForward failed: " << cudnnGetErrorString(st);
}

} // namespace tessel::bench
