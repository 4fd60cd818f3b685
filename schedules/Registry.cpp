#include "schedules/Registry.h"

#include "compiler/support/Error.h"
#include "schedules/Attention.h"
#include "schedules/Conv2dGrouped.h"
#include "schedules/Conv2dTc.h"
#include "schedules/Conv2dTensorCoreTutorial.h"
#include "schedules/Gemm.h"
#include "schedules/GemmFp8.h"
#include "schedules/GemmMma.h"
#include "schedules/GemmTc.h"
#include "schedules/GemmWgmma.h"
#include "schedules/GemmWmma.h"
#include "schedules/Normalization.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringRef.h>

#include <algorithm>
#include <cstdint>

namespace tessel {

const std::map<std::string, ScheduleEntry> &schedule_registry() {
  static const std::map<std::string, ScheduleEntry> registry = [] {
    std::map<std::string, ScheduleEntry> r;
    for (ScheduleEntry e : {gemm_naive_entry(), gemm_shared_entry(), gemm_wmma_entry(),
                            gemm_tc_entry(), gemm_mma_entry(), gemm_wgmma_entry(),
                            gemm_fp8_entry(), gemm_bias_gelu_entry(),
                            conv2d_tensorcore_tutorial_entry(), conv2d_wgmma_entry(),
                            conv2d_bias_relu_entry(), conv2d_tc_entry(), conv2d_grouped_entry(),
                            softmax_entry(), layernorm_entry(), attention_entry(),
                            attention_varlen_entry(), attention_decode_entry()})
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

std::string shape_value_problem(const ScheduleEntry &entry, const std::string &key,
                                int64_t value) {
  auto it = entry.default_shape.find(key);
  if (it == entry.default_shape.end()) {
    std::string keys;
    for (const auto &[k, v] : entry.default_shape)
      keys += (keys.empty() ? "" : ", ") + k;
    return "schedule '" + entry.name + "' has no shape parameter '" + key +
           "'; its parameters are: " + keys;
  }
  bool may_be_zero = std::find(entry.nonnegative.begin(), entry.nonnegative.end(), key) !=
                     entry.nonnegative.end();
  if (value < 0 || (value == 0 && !may_be_zero) || value > kMaxShapeValue)
    return "shape parameter " + key + " must be " +
           (may_be_zero ? "from 0" : "from 1") + " to " + std::to_string(kMaxShapeValue) +
           " (indices are 32-bit integers), got " + std::to_string(value);
  if (auto c = entry.choices.find(key); c != entry.choices.end() &&
                                        std::find(c->second.begin(), c->second.end(), value) ==
                                            c->second.end()) {
    std::vector<std::string> values;
    for (int64_t v : c->second)
      values.push_back(std::to_string(v));
    return "shape parameter " + key + " of schedule '" + entry.name + "' must be one of " +
           llvm::join(values, ", ") + ", got " + std::to_string(value);
  }
  return "";
}

int64_t knob_or_zero(const ShapeParams &p, const std::string &key) {
  auto it = p.find(key);
  return it == p.end() ? int64_t(0) : it->second;
}

ShapeParams resolve_shape(const ScheduleEntry &entry, const ShapeParams &overrides) {
  ShapeParams shape = entry.default_shape;
  for (const auto &[k, v] : overrides) {
    std::string problem = shape_value_problem(entry, k, v);
    user_check(problem.empty(), "schedules") << problem;
    shape[k] = v;
  }
  return shape;
}

ShapeParams parse_shape(const std::string &text) {
  ShapeParams out;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  llvm::StringRef(text).split(parts, ',', -1, /*KeepEmpty=*/true);
  for (llvm::StringRef p : parts) {
    auto [key, value] = p.split('=');
    int64_t v = 0;
    user_check(!key.trim().empty() && p.contains('='), "--shape")
        << "cannot read '" << p.str() << "' in '" << text
        << "'; write NAME=INTEGER, e.g. M=1000,N=1000,K=64";
    user_check(!value.trim().getAsInteger(10, v), "--shape")
        << "cannot read '" << p.str() << "': " << key.trim().str()
        << " must be a decimal integer, at most " << kMaxShapeValue;
    user_check(out.emplace(key.trim().str(), v).second, "--shape")
        << key.trim().str() << " is given twice in '" << text << "'; give each parameter once";
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
