// Named, ready-made schedules that tools, tests and benchmarks can look up.
//
// Each entry builds its compute definition and schedule for a given shape and says which tensors
// are the kernel's arguments.
#pragma once

#include "compiler/schedule/Schedule.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tessel {

/// Shape parameters by name, e.g. {"M", 1024}, {"N", 1024}, {"K", 1024}; a schedule may take
/// integer tuning knobs the same way (gemm_wmma's G, its blocks' rasterization group).
using ShapeParams = std::map<std::string, int64_t>;

struct ScheduledProgram {
  Schedule schedule;
  /// The kernel's arguments in call order: inputs first, then outputs.
  std::vector<Tensor> args;
  size_t num_inputs = 0;
  /// Floating-point operations of one run (2 per multiply-add), for TFLOP/s.
  double flops = 0;
  /// The values of inputs a random draw cannot make (sequence offsets), by argument index:
  /// row-major, exact in the input's type, as many as its shape holds. Checks, `tessel run`
  /// and the tuner give them; every other input is drawn at random.
  std::map<size_t, std::vector<double>> given_inputs = {};
};

struct ScheduleEntry {
  std::string name;
  std::string description;
  ShapeParams default_shape;
  /// Shape parameters that may be 0 (a padding); the others must be positive.
  std::vector<std::string> nonnegative;
  /// Parameters that take only these values (a flag: 0 or 1; a swizzle: 0, 32, 64 or 128).
  std::map<std::string, std::vector<int64_t>> choices;
  /// The input element types it supports; the first is the default.
  std::vector<DataType> dtypes;
  /// Tuning knobs: parameters of default_shape that choose how, not what (tiles, stages; 0 is
  /// the schedule's own choice), with the values `tessel tune` tries for each.
  std::map<std::string, std::vector<int64_t>> knobs;
  /// Builds the program; `shape` has every key of default_shape, `dtype` is one of dtypes.
  std::function<ScheduledProgram(const ShapeParams &shape, DataType dtype)> build;
};

/// All registered schedules, by name.
const std::map<std::string, ScheduleEntry> &schedule_registry();

/// The entry called `name`; tessel::Error listing the known names otherwise.
const ScheduleEntry &find_schedule(const std::string &name);

/// The largest value of a shape parameter or knob: extents and indices are 32-bit integers.
inline constexpr int64_t kMaxShapeValue = INT32_MAX;

/// Empty when `value` may be `entry`'s parameter `key` (a key of its default shape; from 1, or
/// from 0 for its `nonnegative` ones, to kMaxShapeValue; one of its `choices`, if it has
/// them); else why not, as a sentence. What
/// resolve_shape checks of each override, and tuning records of each knob.
std::string shape_value_problem(const ScheduleEntry &entry, const std::string &key,
                                int64_t value);

/// `p[key]`, or 0 where `p` does not hold it (a knob left to the schedule's choice).
int64_t knob_or_zero(const ShapeParams &p, const std::string &key);

/// The entry's default shape with `overrides` applied; an unknown key or a value out of range
/// (shape_value_problem) is a tessel::Error.
ShapeParams resolve_shape(const ScheduleEntry &entry, const ShapeParams &overrides);

/// `shape` without the entry's knobs: the problem's own parameters (a tuning record's key).
ShapeParams problem_shape(const ScheduleEntry &entry, const ShapeParams &shape);

/// "K=64,M=1000,N=1000": the parameters as --shape takes them (keys in order).
std::string params_string(const ShapeParams &params);

/// Parses "M=1000,N=1000,K=64" into shape parameters; tessel::Error for an empty part, a value
/// that is not a 64-bit decimal integer, or a parameter given twice.
ShapeParams parse_shape(const std::string &text);

} // namespace tessel
