#include "bench/CublasLt.h"

#include "bench/VendorStatus.h"
#include "runtime/DeviceArray.h"
#include "runtime/Timer.h"

#include <cublasLt.h>

#include <cmath>
#include <vector>

namespace tessel::bench {

namespace {

cudaDataType to_cuda(LtType t) {
  switch (t) {
  case LtType::f16: return CUDA_R_16F;
  case LtType::bf16: return CUDA_R_16BF;
  case LtType::e4m3: return CUDA_R_8F_E4M3;
  case LtType::f32: return CUDA_R_32F;
  }
  return CUDA_R_32F;
}

// The heuristic's workspace allowance: far above what its Hopper GEMMs ask for (cuBLAS suggests
// 32 MiB on Hopper), so that no algorithm is left out for want of workspace.
constexpr size_t kWorkspaceBytes = size_t(256) << 20;
constexpr int kMaxAlgorithms = 32;

struct Candidate {
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
  bool fast_accum = false;
};

uint32_t algo_attr(const cublasLtMatmulAlgo_t &algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  // Some attributes are 16-bit; read into a zeroed 32-bit value.
  uint32_t v = 0;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) !=
      CUBLAS_STATUS_SUCCESS)
    return 0;
  return v;
}

} // namespace

struct CublasLtGemm::Impl {
  cublasLtHandle_t handle = nullptr;
  // [0]: the default accumulation; [1]: fast accumulation (fp8 only; null otherwise).
  cublasLtMatmulDesc_t op[2] = {nullptr, nullptr};
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  LtScaling scaling = LtScaling::none;
  bool fp8 = false;
  std::string shape;
  std::vector<Candidate> candidates; // found at the first launch, with the real scale pointers
  Candidate chosen{};
  bool has_chosen = false;
  DeviceArray workspace;

  void set_scales(cublasLtMatmulDesc_t desc, const LtOperands &ops) {
    if (scaling == LtScaling::none)
      return;
    // cuBLASLt's A is our B and its B our A (column major: D^T = B * A^T), so the scales swap.
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                &ops.scale_b, sizeof(ops.scale_b)));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                &ops.scale_a, sizeof(ops.scale_a)));
  }

  // Up to kMaxAlgorithms of the heuristic's algorithms per accumulation mode.
  void find_candidates(const LtOperands &ops) {
    if (!candidates.empty())
      return;
    cublasLtMatmulPreference_t pref;
    CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = kWorkspaceBytes, most = 0;
    CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    for (int mode = 0; mode < (fp8 ? 2 : 1); ++mode) {
      set_scales(op[mode], ops);
      cublasLtMatmulHeuristicResult_t results[kMaxAlgorithms] = {};
      int returned = 0;
      cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, op[mode], a, b, d, d, pref,
                                                         kMaxAlgorithms, results, &returned);
      // Fast accumulation may be refused (block scaling has none): that mode offers nothing.
      if (mode == 1 && st != CUBLAS_STATUS_SUCCESS)
        continue;
      if (st != CUBLAS_STATUS_SUCCESS)
        cublasLtMatmulPreferenceDestroy(pref);
      CHECK_CUBLAS(st);
      for (int i = 0; i < returned; ++i)
        if (results[i].state == CUBLAS_STATUS_SUCCESS) {
          candidates.push_back({results[i].algo, results[i].workspaceSize, mode == 1});
          most = std::max(most, results[i].workspaceSize);
        }
    }
    cublasLtMatmulPreferenceDestroy(pref);
    user_check(!candidates.empty(), "cuBLASLt")
        << "cublasLtMatmulAlgoGetHeuristic offers no algorithm for the GEMM " << shape;
    workspace = DeviceArray(UInt(8), {int64_t(std::max<size_t>(most, 1))});
  }

  void launch(const Candidate &c, const LtOperands &ops) {
    cublasLtMatmulDesc_t desc = op[c.fast_accum ? 1 : 0];
    set_scales(desc, ops);
    const float alpha = 1.0f, beta = 0.0f;
    CHECK_CUBLAS(cublasLtMatmul(handle, desc, &alpha, reinterpret_cast<const void *>(ops.b), a,
                                reinterpret_cast<const void *>(ops.a), b, &beta,
                                reinterpret_cast<const void *>(ops.d), d,
                                reinterpret_cast<void *>(ops.d), d, &c.algo,
                                reinterpret_cast<void *>(workspace.data()), c.workspace, nullptr));
  }
};

CublasLtGemm::CublasLtGemm(int64_t M, int64_t N, int64_t K, LtType ab, LtType dt,
                           LtScaling scaling, bool b_k_contiguous)
    : impl_(std::make_unique<Impl>()) {
  Impl &s = *impl_;
  s.scaling = scaling;
  CHECK_CUBLAS(cublasLtCreate(&s.handle));
  const bool fp8 = ab == LtType::e4m3;
  user_check(fp8 || scaling == LtScaling::none, "cuBLASLt") << "scales are for fp8 operands";
  // Row-major D (M x N) is column-major D^T (N x M) = op(B') * A', with B' our B and A' our A
  // seen column major: A is K x M (ld K), untransposed; B is K x N (ld K) transposed when it is
  // K-contiguous (the fp8 "TN" form Hopper requires), else N x K (ld N) untransposed.
  CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&s.a, to_cuda(ab), b_k_contiguous ? K : N,
                                          b_k_contiguous ? N : K, b_k_contiguous ? K : N));
  CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&s.b, to_cuda(ab), K, M, K));
  CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&s.d, to_cuda(dt), N, M, N));
  s.fp8 = fp8;
  s.shape = std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
  for (int mode = 0; mode < (fp8 ? 2 : 1); ++mode) {
    cublasLtMatmulDesc_t &desc = s.op[mode];
    CHECK_CUBLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = b_k_contiguous ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (fp8) {
      const int8_t fast = int8_t(mode);
      CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast,
                                                  sizeof(fast)));
    }
    if (scaling == LtScaling::block) {
      // cuBLASLt's A (our B, the weights): one scale per 128 x 128; its B (our A): per 1 x 128.
      const int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
                    b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode,
                                                  sizeof(a_mode)));
      CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode,
                                                  sizeof(b_mode)));
    }
  }
}

CublasLtGemm::~CublasLtGemm() {
  Impl &s = *impl_;
  for (cublasLtMatmulDesc_t d : s.op)
    if (d)
      cublasLtMatmulDescDestroy(d);
  for (cublasLtMatrixLayout_t l : {s.a, s.b, s.d})
    if (l)
      cublasLtMatrixLayoutDestroy(l);
  if (s.handle)
    cublasLtDestroy(s.handle);
}

void CublasLtGemm::run_first(const LtOperands &ops) {
  impl_->find_candidates(ops);
  impl_->launch(impl_->candidates[0], ops);
}

void CublasLtGemm::choose(const LtOperands &ops) {
  Impl &s = *impl_;
  s.find_candidates(ops);
  offered_ = int(s.candidates.size());
  // A few launches each: enough to rank them; bench times the winner as it times everything.
  const TimeOptions quick{.number = 3, .repeat = 7, .warmup = 1, .flush_l2 = false};
  double best = INFINITY;
  int ran = 0;
  std::string failures;
  for (const Candidate &c : s.candidates) {
    double ms = INFINITY;
    try {
      ms = time_launches([&] { s.launch(c, ops); }, quick).median_ms;
      ++ran;
    } catch (const Error &e) {
      failures = e.what(); // an algorithm the heuristic offered but the launch refused
      continue;
    }
    if (ms < best) {
      best = ms;
      s.chosen = c;
      s.has_chosen = true;
    }
  }
  user_check(s.has_chosen, "cuBLASLt") << "none of the " << s.candidates.size()
                                       << " algorithms offered ran; the last error: " << failures;
  const cublasLtMatmulAlgo_t &a = s.chosen.algo;
  choice_ = "cuBLASLt algo " + std::to_string(algo_attr(a, CUBLASLT_ALGO_CONFIG_ID)) + " tile " +
            std::to_string(algo_attr(a, CUBLASLT_ALGO_CONFIG_TILE_ID)) + " stages " +
            std::to_string(algo_attr(a, CUBLASLT_ALGO_CONFIG_STAGES_ID)) + " splitK " +
            std::to_string(algo_attr(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) +
            (s.chosen.fast_accum ? " fast-accum" : "") + " (fastest of " + std::to_string(ran) +
            " timed)";
}

void CublasLtGemm::run(const LtOperands &ops) {
  user_check(impl_->has_chosen, "cuBLASLt") << "run() before choose()";
  impl_->launch(impl_->chosen, ops);
}

} // namespace tessel::bench
