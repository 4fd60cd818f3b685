// The vendor's kernels for the same problems as ours: cuBLAS GEMM and cuDNN convolution.
#pragma once

#include "runtime/DeviceArray.h"

#include <memory>
#include <string>
#include <vector>

namespace tessel::bench {

/// max |ours - vendor| / (1 + |vendor|) over all elements of a float32 result.
double max_rel_error(const DeviceArray &ours, const std::vector<float> &vendor);

/// C (M x N, float32) = A (M x K) * B (K x N), all row major, A and B both float16 or both
/// bfloat16 (their DeviceArray's dtype says which), with cublasGemmEx, float32 compute and
/// cuBLAS's default algorithm choice.
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

/// The most workspace any cuDNN candidate may use (1 GiB): far above what the fast
/// convolutions ask, so that none is left out for want of it.
inline constexpr int64_t kCudnnWorkspaceLimit = int64_t(1) << 30;

/// NHWC float16 convolution (symmetric padding, `stride` along H and W) with float32
/// accumulation; output NHWC float16 (cuDNN's legacy API wants one type for x, w and y).
///
/// Two choices of how: the legacy one (what bench used until issue 25: the first result of
/// cudnnFindConvolutionForwardAlgorithm, tensor-op math), made at construction; and cuDNN's
/// best, made by find_best(): every candidate below is timed on the caller's arrays and the
/// fastest whose output matches the legacy choice's is kept:
///   - every algorithm cudnnFindConvolutionForwardAlgorithmEx returns as runnable with
///     kCudnnWorkspaceLimit of workspace, each with the math type it reports;
///   - every execution plan of the backend (graph) API's engine configurations: heuristics
///     modes A, B and FALLBACK and each engine with its default knobs (CudnnGraphConv),
///     without those over kCudnnWorkspaceLimit or reducing in fp16.
/// This is what PyTorch's torch.backends.cudnn.benchmark does (heuristics, then the timed
/// fastest), over a superset of its candidates.
class CudnnConv {
public:
  CudnnConv(const ConvShape &shape);
  ~CudnnConv();
  /// Times every candidate on x, w, y (y is overwritten) and keeps the fastest correct one
  /// for run(). A log of the candidates' times goes to search_log().
  void find_best(const DeviceArray &x, const DeviceArray &w, DeviceArray &y);
  /// x: N x H x W x C, w: K x R x S x C, y: N x P x Q x K (P = H, Q = W at stride 1 with
  /// "same" padding). cuDNN's best once find_best() ran, the legacy choice before.
  void run(const DeviceArray &x, const DeviceArray &w, DeviceArray &y);
  /// The legacy choice, always.
  void run_legacy(const DeviceArray &x, const DeviceArray &w, DeviceArray &y);
  /// y = ReLU(conv(x, w) + bias) in one call, cudnnConvolutionBiasActivationForward (implicit
  /// precomputed GEMM, the algorithm cuDNN supports a ReLU with); bias: K float16 values, or,
  /// where cuDNN refuses a float16 bias, `bias32` (the same values in float32).
  void run_bias_relu(const DeviceArray &x, const DeviceArray &w, const DeviceArray &bias16,
                     const DeviceArray &bias32, DeviceArray &y);
  /// What run() runs: "eng34 k2=1 k3=0 (heuristic A)", "legacy algo 1 tensor-op", ...
  const std::string &algorithm() const { return algo_name_; }
  /// The legacy choice: "algo 1".
  const std::string &legacy_algorithm() const { return legacy_name_; }
  /// find_best()'s candidates, fastest first, a line each with its time.
  const std::string &search_log() const { return search_log_; }

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string algo_name_, legacy_name_, search_log_;
};

} // namespace tessel::bench
