// One forward convolution as a cuDNN graph (the backend API of cuDNN 8 and 9, which PyTorch
// and cudnn-frontend use): the execution plans of every engine configuration cuDNN offers for
// it, to be timed by the caller. Only CudnnConv (VendorLibraries.cpp) uses it.
#pragma once

#include "bench/VendorLibraries.h"

#include <cudnn.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace tessel::bench {

/// A finalized execution plan: one engine configuration of the convolution's graph.
struct CudnnPlan {
  /// "eng34 k2=1 k3=0 k19=1 (heuristic A)": the engine's global index, its knob choices
  /// (cudnnBackendKnobType_t = value) and where the configuration came from.
  std::string name;
  int64_t workspace = 0;
  std::shared_ptr<void> desc;   // the plan's cudnnBackendDescriptor_t
  std::shared_ptr<void> config; // its engine configuration, alive as long as the plan
};

/// The convolution of `shape` on NHWC / KRSC float16 tensors, y NHWC float16, float32
/// accumulation, as one graph of one operation.
class CudnnGraphConv {
public:
  CudnnGraphConv(cudnnHandle_t handle, const ConvShape &shape);
  ~CudnnGraphConv();
  CudnnGraphConv(const CudnnGraphConv &) = delete;
  CudnnGraphConv &operator=(const CudnnGraphConv &) = delete;

  /// The plans of the engine configurations of heuristics modes A, B and FALLBACK (those a
  /// mode returns), then of every engine of the graph with its default knobs; each finalized
  /// (configurations cuDNN cannot build for this GPU are skipped), duplicates dropped, and
  /// those needing over `max_workspace` bytes or reducing in reduced precision left out and
  /// counted in `skipped`.
  std::vector<CudnnPlan> plans(int64_t max_workspace, std::string &skipped);

  /// Runs `plan` on x, w, y (device pointers) with `workspace` (plan.workspace bytes or more).
  void execute(const CudnnPlan &plan, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y,
               CUdeviceptr workspace) const;

private:
  cudnnHandle_t handle_;
  std::shared_ptr<void> graph_; // the operation graph (and, held by it, its tensors)
  std::vector<std::shared_ptr<void>> keep_;
  mutable std::shared_ptr<void> pack_; // the variant pack of the last pointers executed
  mutable std::array<CUdeviceptr, 4> pack_key_{};
};

} // namespace tessel::bench
