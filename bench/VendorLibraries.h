// The vendor's kernels for the same problems as ours: cuBLAS GEMM and cuDNN convolution.
#pragma once

#include "runtime/DeviceArray.h"

#include <memory>
#include <string>
#include <vector>

namespace tessel::bench {

/// max |ours - vendor| / (1 + |vendor|) over all elements of a float32 result.
double max_rel_error(const DeviceArray &ours, const std::vector<float> &vendor);

/// C (M x N, float32) = A (M x K, float16) * B (K x N, float16), all row major, with
/// cublasGemmEx and float32 compute.
class CublasGemm {
public:
  CublasGemm();
  ~CublasGemm();
  void run(const DeviceArray &A, const DeviceArray &B, DeviceArray &C, int64_t M, int64_t N,
           int64_t K);

private:
  void *handle_ = nullptr;
};

struct ConvShape {
  int n, h, w, c, k, r, s, pad;
  int stride = 1;
};

/// NHWC float16 convolution (symmetric padding, `stride` along H and W) with float32
/// accumulation, the fastest algorithm cuDNN finds; output NHWC float16 (cuDNN's legacy API
/// wants one type for x, w and y).
class CudnnConv {
public:
  CudnnConv(const ConvShape &shape);
  ~CudnnConv();
  /// x: N x H x W x C, w: K x R x S x C, y: N x P x Q x K (P = H, Q = W at stride 1 with
  /// "same" padding).
  void run(const DeviceArray &x, const DeviceArray &w, DeviceArray &y);
  /// y = ReLU(conv(x, w) + bias) in one call, cudnnConvolutionBiasActivationForward (implicit
  /// precomputed GEMM, the algorithm cuDNN supports a ReLU with); bias: K float16 values, or,
  /// where cuDNN refuses a float16 bias, `bias32` (the same values in float32).
  void run_bias_relu(const DeviceArray &x, const DeviceArray &w, const DeviceArray &bias16,
                     const DeviceArray &bias32, DeviceArray &y);
  const std::string &algorithm() const { return algo_name_; }

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string algo_name_;
};

} // namespace tessel::bench
