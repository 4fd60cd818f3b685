#include "bench/VendorLibraries.h"

#include "compiler/support/Error.h"

#include <algorithm>
#include <cmath>

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

#define CHECK_CUBLAS(call)                                                                         \
  do {                                                                                             \
    cublasStatus_t st_ = (call);                                                                   \
    user_check(st_ == CUBLAS_STATUS_SUCCESS, "cuBLAS")                                            \
        << #call << " failed: " << cublasGetStatusString(st_);                                     \
  } while (0)

#define CHECK_CUDNN(call)                                                                          \
  do {                                                                                             \
    cudnnStatus_t st_ = (call);                                                                    \
    user_check(st_ == CUDNN_STATUS_SUCCESS, "cuDNN") << #call << " failed: "                      \
                                                     << cudnnGetErrorString(st_);                  \
  } while (0)

CublasGemm::CublasGemm() {
  cublasHandle_t h;
  CHECK_CUBLAS(cublasCreate(&h));
  handle_ = h;
}

CublasGemm::~CublasGemm() { cublasDestroy(static_cast<cublasHandle_t>(handle_)); }

void CublasGemm::run(const DeviceArray &A, const DeviceArray &B, DeviceArray &C, int64_t M,
                     int64_t N, int64_t K) {
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major C = A * B is column-major C^T = B^T * A^T.
  CHECK_CUBLAS(cublasGemmEx(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_N, CUBLAS_OP_N, int(N),
                            int(M), int(K), &alpha, reinterpret_cast<const void *>(B.data()),
                            CUDA_R_16F, int(N), reinterpret_cast<const void *>(A.data()),
                            CUDA_R_16F, int(K), &beta, reinterpret_cast<void *>(C.data()),
                            CUDA_R_32F, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

struct CudnnConv::Impl {
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo{};
  DeviceArray workspace;
  // run_bias_relu's: the bias descriptor (float16, or float32 once cuDNN refused float16) and
  // the ReLU; created at its first call.
  cudnnTensorDescriptor_t bias = nullptr;
  cudnnActivationDescriptor_t relu = nullptr;
  bool bias_float32 = false;
  DeviceArray fused_workspace;
};

CudnnConv::CudnnConv(const ConvShape &s) : impl_(std::make_unique<Impl>()) {
  Impl &d = *impl_;
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
  algo_name_ = "algo " + std::to_string(int(d.algo));
  size_t bytes = 0;
  CHECK_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(d.handle, d.x, d.w, d.conv, d.y, d.algo, &bytes));
  d.workspace = DeviceArray(UInt(8), {int64_t(std::max<size_t>(bytes, 1))});
}

CudnnConv::~CudnnConv() {
  Impl &d = *impl_;
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

void CudnnConv::run(const DeviceArray &x, const DeviceArray &w, DeviceArray &y) {
  Impl &d = *impl_;
  const float alpha = 1.0f, beta = 0.0f;
  CHECK_CUDNN(cudnnConvolutionForward(
      d.handle, &alpha, d.x, reinterpret_cast<const void *>(x.data()), d.w,
      reinterpret_cast<const void *>(w.data()), d.conv, d.algo,
      reinterpret_cast<void *>(d.workspace.data()), size_t(d.workspace.bytes()), &beta, d.y,
      reinterpret_cast<void *>(y.data())));
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
