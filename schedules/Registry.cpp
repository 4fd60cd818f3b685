#include "schedules/Registry.h"

#include "compiler/support/Error.h"
#include "schedules/Conv2dGrouped.h"
#include "schedules/Conv2dTc.h"
#include "schedules/Conv2dTensorCoreTutorial.h"
#include "schedules/Gemm.h"
#include "schedules/GemmMma.h"
#include "schedules/GemmTc.h"
#include "schedules/GemmWgmma.h"
#include "schedules/GemmWmma.h"
#include "schedules/Normalization.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringRef.h>

#include <algorithm>

namespace tessel {

const std::map<std::string, ScheduleEntry> &schedule_registry() {
  static const std::map<std::string, ScheduleEntry> registry = [] {
    std::map<std::string, ScheduleEntry> r;
    for (ScheduleEntry e : {gemm_naive_entry(), gemm_shared_entry(), gemm_wmma_entry(),
                            gemm_tc_entry(), gemm_mma_entry(), gemm_wgmma_entry(),
                            gemm_bias_gelu_entry(), conv2d_tensorcore_tutorial_entry(),
                            conv2d_wgmma_entry(), conv2d_bias_relu_entry(), conv2d_tc_entry(),
                            conv2d_grouped_entry(), softmax_entry(), layernorm_entry()})
      r.emplace(e.name, std::move(e));
    return r;
  }();
  return registry;
}

const ScheduleEntry &find_schedule(const std::string &name) {
  const auto &reg = schedule_registry();
  auto it = reg.find(name);
  if (it == reg.end()) {
    std::string names;
    for (const auto &[n, e] : reg)
      names += (names.empty() ? "" : ", ") + n;
    user_error("schedules") << "no schedule named '" << name << "'; the registered ones are: "
                            << names;
  }
  return it->second;
}

ShapeParams resolve_shape(const ScheduleEntry &entry, const ShapeParams &overrides) {
  ShapeParams shape = entry.default_shape;
  for (const auto &[k, v] : overrides) {
    auto it = shape.find(k);
    if (it == shape.end()) {
      std::string keys;
      for (const auto &[kk, vv] : entry.default_shape)
        keys += (keys.empty() ? "" : ", ") + kk;
      user_error("schedules") << "schedule '" << entry.name << "' has no shape parameter '" << k
                              << "'; its parameters are: " << keys;
    }
    bool may_be_zero = std::find(entry.nonnegative.begin(), entry.nonnegative.end(), k) !=
                       entry.nonnegative.end();
    user_check(v > 0 || (may_be_zero && v == 0), "schedules")
        << "shape parameter " << k << " must be " << (may_be_zero ? "non-negative" : "positive")
        << ", got " << v;
    it->second = v;
  }
  return shape;
}

ShapeParams parse_shape(const std::string &text) {
  ShapeParams out;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  llvm::StringRef(text).split(parts, ',', -1, false);
  for (llvm::StringRef p : parts) {
    auto [key, value] = p.split('=');
    int64_t v = 0;
    user_check(!key.trim().empty() && !value.trim().getAsInteger(10, v), "--shape")
        << "cannot read '" << p.str() << "'; write NAME=INTEGER, e.g. M=1000,N=1000,K=64";
    out[key.trim().str()] = v;
  }
  return out;
}

std::string params_string(const ShapeParams &params) {
  std::string s;
  for (const auto &[k, v] : params)
    s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

ShapeParams problem_shape(const ScheduleEntry &entry, const ShapeParams &shape) {
  ShapeParams out;
  for (const auto &[k, v] : shape)
    if (!entry.knobs.count(k))
      out[k] = v;
  return out;
}

} // namespace tessel
