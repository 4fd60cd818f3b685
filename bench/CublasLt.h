// cuBLASLt's matmul for the benchmark's GEMM rows, the algorithm chosen by timing: every
// algorithm its heuristic offers for the problem (up to 32; for fp8 with and without fast
// accumulation) runs on the caller's buffers and the fastest is kept, as an application that
// autotunes cuBLASLt would do.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>

namespace tessel::bench {

/// The element types the benchmark asks cuBLASLt for.
enum class LtType { f16, bf16, e4m3, f32 };

/// How A and B are scaled (fp8 only): none; one float32 each (per tensor); or blocks, A one
/// float32 per 1 x 128 (row, 128 of K), B one per 128 x 128 (DeepSeek-V3's recipe).
enum class LtScaling { none, tensor, block };

/// Where the operands are. A is M x K row major (K contiguous). B is N x K (K contiguous:
/// `b_k_contiguous`, the fp8 "TN" GEMM) or K x N (N contiguous). D is M x N row major. Scales
/// are device float32: per tensor one each; block-scaled in the layouts cuBLASLt reads (the fp8
/// rows lay them out and check cuBLASLt against float64 before any timing).
struct LtOperands {
  CUdeviceptr a = 0, b = 0, d = 0, scale_a = 0, scale_b = 0;
};

/// D[i, j] = sum_k sa * A[i, k] * sb * B[j, k] (or B[k, j]), float32 compute, D rounded once.
class CublasLtGemm {
public:
  CublasLtGemm(int64_t M, int64_t N, int64_t K, LtType ab, LtType d, LtScaling scaling,
               bool b_k_contiguous);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm &) = delete;
  CublasLtGemm &operator=(const CublasLtGemm &) = delete;

  /// Runs the heuristic's first algorithm (no search): for checking the operands' layout.
  void run_first(const LtOperands &ops);
  /// Times every algorithm the heuristic returns on `ops` (a few launches each) and keeps the
  /// fastest; a tessel::Error when cuBLASLt offers none that runs.
  void choose(const LtOperands &ops);
  /// The chosen algorithm (choose() first).
  void run(const LtOperands &ops);
  /// "cuBLASLt algo 66 tile 13 stages 20 fast-accum (fastest of 17)" after choose().
  const std::string &choice() const { return choice_; }
  /// Algorithms the heuristic offered (over both accumulation modes) and how many ran.
  int offered() const { return offered_; }

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string choice_;
  int offered_ = 0;
};

} // namespace tessel::bench
