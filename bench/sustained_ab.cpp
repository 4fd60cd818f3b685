// Variants of one schedule (knob sets) timed in turns after the GPU has been held busy for a
// few seconds, at the clocks it sustains under its power limit. A kernel timed on a cool GPU
// (`tessel run`: a few hundred launches after an idle compile) runs at boost clocks: on the H100
// gemm_wgmma 4096x4096x1024 took 0.0593 ms in the first second of load and 0.0662 after, where
// tessel_bench (the vendor's search, then turns) meets it (bench/RESULTS.md, 2026-11-27).
//
//   sustained_ab SCHEDULE SHAPE VARIANT [VARIANT...]   (on a GPU)
//     SHAPE: M=..,N=..,K=..[,KNOB=V]; VARIANT: KNOB=V[,KNOB=V] added to it, or "-" for none
//   e.g. sustained_ab gemm_wgmma M=4096,N=4096,K=1024 - PP=2 PP=1,CL=1
#include "runtime/Build.h"
#include "runtime/DeviceArray.h"
#include "runtime/Half.h"
#include "runtime/Timer.h"
#include "runtime/interp/Reference.h"
#include "schedules/Registry.h"

#include <algorithm>
#include <random>
#include <cstdio>
#include <string>
#include <vector>

using namespace tessel;

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: sustained_ab SCHEDULE SHAPE VARIANT [VARIANT...]\n");
    return 2;
  }
  try {
    const ScheduleEntry &e = find_schedule(argv[1]);
    struct Variant {
      std::string name;
      Module module;
      std::vector<double> ms;
    };
    std::vector<Variant> vs;
    ShapeParams base = parse_shape(argv[2]);
    for (int i = 3; i < argc; ++i) {
      ShapeParams shape = base;
      if (std::string(argv[i]) != "-")
        for (const auto &[k, v] : parse_shape(argv[i]))
          shape[k] = v;
      try {
        ScheduledProgram p = e.build(resolve_shape(e, shape), e.dtypes.front());
        vs.push_back({argv[i], build(p.schedule, p.args), {}});
      } catch (const Error &err) {
        std::printf("%-40s not built: %s\n", argv[i], err.what());
      }
    }
    // The arguments: random inputs (16-bit: halves in [-1, 1]; 8-bit: finite e4m3 bytes;
    // 32-bit: floats in [0.5, 1], e.g. scales), the output poisoned.
    ScheduledProgram p0 = e.build(resolve_shape(e, base), e.dtypes.front());
    std::vector<DeviceArray> arrays;
    std::vector<const DeviceArray *> args;
    for (size_t i = 0; i < p0.args.size(); ++i) {
      arrays.emplace_back(p0.args[i].dtype(), constant_shape(p0.args[i]));
    }
    for (size_t i = 0; i < arrays.size(); ++i) {
      DeviceArray &a = arrays[i];
      std::mt19937 rng(unsigned(1 + i));
      if (i + 1 == arrays.size()) {
        a.poison();
      } else if (a.dtype().bits() == 16) {
        std::vector<uint16_t> h = random_halves(size_t(a.numel()), 1 + i);
        a.copy_from_host(h.data(), a.bytes());
      } else if (a.dtype().bits() == 8) {
        std::vector<uint8_t> h(size_t(a.numel()));
        for (uint8_t &x : h)
          x = uint8_t(rng() % 0x7f) | uint8_t(rng() & 0x80); // never 0x7f / 0xff (NaN)
        a.copy_from_host(h.data(), a.bytes());
      } else {
        std::uniform_real_distribution<float> d(0.5f, 1.0f);
        std::vector<float> h(size_t(a.numel()));
        for (float &x : h)
          x = d(rng);
        a.copy_from_host(h.data(), a.bytes());
      }
      args.push_back(&a);
    }
    const TimeOptions t{.number = 10, .repeat = 30, .warmup = 3, .flush_l2 = false};
    // Hold the GPU busy for 3 seconds first.
    TimeOptions hold = t;
    hold.hold_seconds = 3;
    (void)vs[0].module.time(args, hold);
    const int rounds = 8;
    for (int r = 0; r < rounds; ++r)
      for (Variant &v : vs)
        v.ms.push_back(v.module.time(args, t).median_ms);
    for (Variant &v : vs) {
      std::vector<double> s = v.ms;
      std::sort(s.begin(), s.end());
      std::printf("%-40s median of %d rounds %.4f ms (min %.4f, max %.4f)\n", v.name.c_str(),
                  rounds, s[s.size() / 2], s.front(), s.back());
    }
  } catch (const Error &err) {
    std::fprintf(stderr, "%s\n", err.what());
    return 1;
  }
  return 0;
}
