#include "bench/CudnnGraph.h"

#include "bench/VendorStatus.h"

#include <algorithm>
#include <array>
#include <set>

namespace tessel::bench {

namespace {

using Desc = std::shared_ptr<void>;

Desc make(cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d = nullptr;
  CHECK_CUDNN(cudnnBackendCreateDescriptor(type, &d));
  return Desc(d, [](void *p) { cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t(p)); });
}

cudnnBackendDescriptor_t raw(const Desc &d) { return cudnnBackendDescriptor_t(d.get()); }

template <typename T>
void set(const Desc &d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
         const T *values, int64_t count = 1) {
  CHECK_CUDNN(cudnnBackendSetAttribute(raw(d), name, type, count, values));
}

void set_desc(const Desc &d, cudnnBackendAttributeName_t name, const Desc &value) {
  cudnnBackendDescriptor_t v = raw(value);
  set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &v);
}

// A float16 tensor of logical dimensions N, C, H, W (or K, C, R, S) stored channels last.
Desc tensor(int64_t uid, int64_t n, int64_t c, int64_t h, int64_t w) {
  Desc t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t dims[4] = {n, c, h, w}, strides[4] = {h * w * c, 1, w * c, c}, align = 16;
  const cudnnDataType_t half = CUDNN_DATA_HALF;
  set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &half);
  set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims, 4);
  set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides, 4);
  set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid);
  set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &align);
  CHECK_CUDNN(cudnnBackendFinalize(raw(t)));
  return t;
}

constexpr int64_t kX = 'x', kW = 'w', kY = 'y';

// Descriptors of `type` to be filled by cudnnBackendGetAttribute (it wants them created).
std::vector<Desc> make_n(cudnnBackendDescriptorType_t type, int64_t n) {
  std::vector<Desc> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(make(type));
  return v;
}

std::vector<cudnnBackendDescriptor_t> raws(const std::vector<Desc> &v) {
  std::vector<cudnnBackendDescriptor_t> r;
  for (const Desc &d : v)
    r.push_back(raw(d));
  return r;
}

// "eng34 k2=1 k3=0": the engine of a configuration and its knob choices. Empty (and no
// `reduced`) when cuDNN will not say.
std::string config_name(const Desc &cfg, bool &reduced_precision) {
  reduced_precision = false;
  Desc engine = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = raw(engine);
  int64_t n = 0;
  if (cudnnBackendGetAttribute(raw(cfg), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               1, &n, &e) != CUDNN_STATUS_SUCCESS)
    return "";
  int64_t index = -1;
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                               &index) != CUDNN_STATUS_SUCCESS)
    return "";
  std::string name = "eng" + std::to_string(index);
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS)
    for (int64_t i = 0; i < n; ++i)
      reduced_precision |= notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
  constexpr int64_t kMaxKnobs = 32;
  std::vector<Desc> choices = make_n(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, kMaxKnobs);
  std::vector<cudnnBackendDescriptor_t> c = raws(choices);
  if (cudnnBackendGetAttribute(raw(cfg), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, kMaxKnobs, &n, c.data()) !=
      CUDNN_STATUS_SUCCESS)
    return name;
  std::vector<std::pair<int, int64_t>> knobs;
  for (int64_t i = 0; i < std::min(n, kMaxKnobs); ++i) {
    cudnnBackendKnobType_t type;
    int64_t value = 0, got = 0;
    if (cudnnBackendGetAttribute(c[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1,
                                 &got, &type) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(c[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1,
                                 &got, &value) == CUDNN_STATUS_SUCCESS)
      knobs.push_back({int(type), value});
  }
  std::sort(knobs.begin(), knobs.end());
  for (auto [type, value] : knobs)
    name += " k" + std::to_string(type) + "=" + std::to_string(value);
  return name;
}

} // namespace

CudnnGraphConv::CudnnGraphConv(cudnnHandle_t handle, const ConvShape &s) : handle_(handle) {
  const int64_t P = (s.h + 2 * s.pad - s.r) / s.stride + 1,
                Q = (s.w + 2 * s.pad - s.s) / s.stride + 1;
  Desc x = tensor(kX, s.n, s.c, s.h, s.w), w = tensor(kW, s.k, s.c, s.r, s.s),
       y = tensor(kY, s.n, s.k, P, Q);
  Desc conv = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t accumulate = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2, ones[2] = {1, 1}, strides[2] = {s.stride, s.stride},
                pads[2] = {s.pad, s.pad};
  set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &accumulate);
  set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode);
  set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &dims);
  set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, ones, 2);
  set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, strides, 2);
  set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, pads, 2);
  set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, pads, 2);
  CHECK_CUDNN(cudnnBackendFinalize(raw(conv)));

  Desc op = make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const float alpha = 1.0f, beta = 0.0f;
  set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
  set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
  set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y);
  set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, &alpha);
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, &beta);
  CHECK_CUDNN(cudnnBackendFinalize(raw(op)));

  graph_ = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set_desc(graph_, CUDNN_ATTR_OPERATIONGRAPH_OPS, op);
  set(graph_, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle_);
  CHECK_CUDNN(cudnnBackendFinalize(raw(graph_)));
  keep_ = {x, w, y, conv, op};
}

CudnnGraphConv::~CudnnGraphConv() = default;

std::vector<CudnnPlan> CudnnGraphConv::plans(int64_t max_workspace, std::string &skipped) {
  // The configurations, tagged with where they came from.
  std::vector<std::pair<Desc, std::string>> configs;
  for (auto [mode, label] : {std::pair{CUDNN_HEUR_MODE_A, "heuristic A"},
                             std::pair{CUDNN_HEUR_MODE_B, "heuristic B"},
                             std::pair{CUDNN_HEUR_MODE_FALLBACK, "fallback"}}) {
    Desc heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph_);
    set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
    // A mode may not serve this graph (mode B is for some graphs only): it adds nothing.
    if (cudnnBackendFinalize(raw(heur)) != CUDNN_STATUS_SUCCESS)
      continue;
    int64_t count = 0;
    if (cudnnBackendGetAttribute(raw(heur), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr) !=
            CUDNN_STATUS_SUCCESS ||
        count <= 0)
      continue;
    std::vector<Desc> cfgs = make_n(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, count);
    std::vector<cudnnBackendDescriptor_t> r = raws(cfgs);
    int64_t got = 0;
    CHECK_CUDNN(cudnnBackendGetAttribute(raw(heur), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, r.data()));
    for (int64_t i = 0; i < std::min(got, count); ++i)
      configs.push_back({cfgs[i], label});
    keep_.push_back(heur);
  }
  // Every engine the graph has, with its default knobs: what the heuristics may rank low.
  int64_t engines = 0, got = 0;
  CHECK_CUDNN(cudnnBackendGetAttribute(raw(graph_), CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                                       CUDNN_TYPE_INT64, 1, &got, &engines));
  for (int64_t i = 0; i < engines; ++i) {
    Desc engine = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    set_desc(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, graph_);
    set(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, &i);
    if (cudnnBackendFinalize(raw(engine)) != CUDNN_STATUS_SUCCESS)
      continue; // the engine does not support this graph
    Desc cfg = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    set_desc(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, engine);
    if (cudnnBackendFinalize(raw(cfg)) != CUDNN_STATUS_SUCCESS)
      continue;
    configs.push_back({cfg, "engine default knobs"});
    keep_.push_back(engine);
  }

  std::vector<CudnnPlan> out;
  std::set<std::string> seen;
  int not_built = 0, too_big = 0, reduced = 0;
  for (auto &[cfg, label] : configs) {
    bool reduced_precision = false;
    std::string name = config_name(cfg, reduced_precision);
    if (!name.empty() && !seen.insert(name).second)
      continue; // the same engine and knobs from another source
    if (reduced_precision) { // an fp16 reduction is not the problem ours solves
      ++reduced;
      continue;
    }
    Desc plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle_);
    set_desc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg);
    if (cudnnBackendFinalize(raw(plan)) != CUDNN_STATUS_SUCCESS) {
      ++not_built;
      continue;
    }
    int64_t ws = 0;
    CHECK_CUDNN(cudnnBackendGetAttribute(raw(plan), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                         CUDNN_TYPE_INT64, 1, &got, &ws));
    if (ws > max_workspace) {
      ++too_big;
      continue;
    }
    out.push_back({(name.empty() ? std::string("eng?") : name) + " (" + label + ")", ws, plan, cfg});
  }
  skipped = std::to_string(configs.size()) + " configurations: " + std::to_string(out.size()) +
            " plans, " + std::to_string(not_built) + " not buildable, " +
            std::to_string(too_big) + " over the workspace limit, " + std::to_string(reduced) +
            " reduced-precision, the rest duplicates";
  return out;
}

void CudnnGraphConv::execute(const CudnnPlan &plan, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y,
                             CUdeviceptr workspace) const {
  // One variant pack per set of pointers, not one per launch: at batch 1 the kernels take
  // microseconds, as long as building a pack.
  const std::array<CUdeviceptr, 4> key = {x, w, y, workspace};
  if (pack_ && pack_key_ == key) {
    CHECK_CUDNN(cudnnBackendExecute(handle_, cudnnBackendDescriptor_t(plan.desc.get()),
                                    raw(pack_)));
    return;
  }
  Desc pack = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const int64_t uids[3] = {kX, kW, kY};
  void *ptrs[3] = {reinterpret_cast<void *>(x), reinterpret_cast<void *>(w),
                   reinterpret_cast<void *>(y)};
  void *ws = reinterpret_cast<void *>(workspace);
  set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids, 3);
  set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs, 3);
  set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &ws);
  CHECK_CUDNN(cudnnBackendFinalize(raw(pack)));
  pack_ = pack;
  pack_key_ = key;
  CHECK_CUDNN(cudnnBackendExecute(handle_, cudnnBackendDescriptor_t(plan.desc.get()), raw(pack)));
}

} // namespace tessel::bench
