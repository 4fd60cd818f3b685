#include "runtime/Tuner.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/lower/Lower.h"
#include "compiler/support/Error.h"
#include "runtime/Build.h"
#include "runtime/Check.h"
#include "runtime/CudaDriver.h"
#include "runtime/Device.h"
#include "runtime/DeviceArray.h"
#include "runtime/KernelCache.h"
#include "runtime/interp/Executor.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FormatVariadic.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <thread>

namespace tessel {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string clock_str(double s) {
  long t = std::lround(s);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

// A failure as one line of a record: its first line, shortened.
std::string one_line(const std::string &what, const std::string &kind) {
  std::string first = what.substr(0, what.find('\n'));
  if (first.size() > 300)
    first = first.substr(0, 297) + "...";
  return kind + ": " + first;
}

ShapeParams config_of(const ScheduleEntry &e, const ShapeParams &candidate) {
  ShapeParams c;
  for (const auto &[k, values] : e.knobs)
    c[k] = candidate.at(k);
  return c;
}

struct Candidate {
  size_t index = 0;
  ShapeParams shape;
  std::optional<ScheduledProgram> program;
  LoweredModule lowered;
  std::string error; ///< refused while building, lowering or compiling
};

// NVRTC on `jobs` threads (the kernel cache is thread-safe): build() then finds each in memory.
void compile_all(std::vector<Candidate> &cands, const std::string &arch, int jobs) {
  std::atomic<size_t> next{0};
  unsigned n = jobs > 0 ? unsigned(jobs) : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::min<size_t>(n, cands.size()); ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < cands.size();) {
        Candidate &c = cands[i];
        if (!c.error.empty())
          continue;
        try {
          CompileOptions o;
          o.arch = target_arch(c.lowered, arch);
          KernelCache::global().compile(codegen_cuda(c.lowered), o, c.lowered.funcs[0].name + ".cu");
        } catch (const Error &e) {
          c.error = one_line(e.what(), "refused (compile)");
        }
      }
    });
  for (std::thread &t : pool)
    t.join();
}

// The arguments the problem was made for, and a candidate's: the same types and shapes.
std::string argument_mismatch(const ScheduledProgram &a, const ScheduledProgram &b) {
  if (a.args.size() != b.args.size() || a.num_inputs != b.num_inputs)
    return "it takes other arguments than the schedule's default";
  for (size_t i = 0; i < a.args.size(); ++i)
    if (a.args[i].dtype() != b.args[i].dtype() ||
        constant_shape(a.args[i]) != constant_shape(b.args[i]))
      return "argument " + std::to_string(i) + " ('" + b.args[i].name() +
             "') differs from the schedule default's";
  return "";
}

// Runs candidates on one target and keeps the inputs there across them.
class Runner {
public:
  Runner(const CheckProblem &p, bool cpu) : problem_(p), cpu_(cpu) {
    if (cpu_) {
      host_ = input_buffers(p);
      return;
    }
    for (size_t i = 0; i < p.inputs.size(); ++i)
      device_.push_back(device_array(p.inputs[i], p.input_strides[i]));
    device_.emplace_back(p.out_dtype, p.out_shape);
  }

  /// Checks (and on the GPU times) one candidate; fills the record's outcome.
  void measure(const LoweredModule &lowered, const TimeOptions &timing, TuningRecord &r) {
    size_t elements = 1;
    for (int64_t e : problem_.out_shape)
      elements *= size_t(e);
    interp::HostBuffer out(problem_.out_dtype, elements);
    if (cpu_) {
      std::vector<interp::HostBuffer> bufs = host_;
      bufs.push_back(interp::HostBuffer::from_doubles(problem_.out_dtype,
                                                      std::vector<double>(elements, std::nan(""))));
      std::vector<interp::HostBuffer *> ptrs;
      for (interp::HostBuffer &b : bufs)
        ptrs.push_back(&b);
      Clock::time_point t0 = Clock::now();
      interp::execute(lowered, ptrs);
      double ms = seconds_since(t0) * 1e3;
      CheckResult c = check_output(problem_, bufs.back());
      if (!c.compare.ok) {
        r.check = one_line(c.compare.str(), "mismatch");
        return;
      }
      r.median_ms = r.min_ms = r.max_ms = ms;
      r.check = "ok";
      return;
    }
    Module m = build(lowered, Target{});
    std::vector<const DeviceArray *> ptrs;
    for (const DeviceArray &a : device_)
      ptrs.push_back(&a);
    device_.back().poison();
    m.run(ptrs);
    device_.back().copy_to_host(out.data(), device_.back().bytes());
    CheckResult c = check_output(problem_, out);
    if (!c.compare.ok) {
      r.check = one_line(c.compare.str(), "mismatch");
      return;
    }
    TimeResult t = m.time(ptrs, timing);
    r.median_ms = t.median_ms;
    r.min_ms = t.min_ms;
    r.max_ms = t.max_ms;
    r.check = "ok";
  }

private:
  const CheckProblem &problem_;
  bool cpu_;
  std::vector<interp::HostBuffer> host_;
  std::vector<DeviceArray> device_;
};

} // namespace

std::vector<ShapeParams> tuning_candidates(const ScheduleEntry &entry, const ShapeParams &fixed,
                                           int64_t trials) {
  ShapeParams base = resolve_shape(entry, fixed);
  std::vector<std::pair<std::string, std::vector<int64_t>>> axes;
  for (const auto &[k, values] : entry.knobs)
    if (!fixed.count(k) && !values.empty())
      axes.push_back({k, values});
  std::vector<ShapeParams> out = {base};
  // The grid, last knob fastest.
  std::vector<size_t> at(axes.size(), 0);
  for (bool more = !axes.empty(); more;) {
    ShapeParams c = base;
    for (size_t a = 0; a < axes.size(); ++a)
      c[axes[a].first] = axes[a].second[at[a]];
    if (c != base)
      out.push_back(std::move(c));
    more = false;
    for (size_t a = axes.size(); a-- > 0;) {
      if (++at[a] < axes[a].second.size()) {
        more = true;
        break;
      }
      at[a] = 0;
    }
  }
  if (trials > 0 && size_t(trials) < out.size()) {
    // The default, then trials - 1 spread evenly over the rest.
    std::vector<ShapeParams> some = {out[0]};
    const size_t rest = out.size() - 1;
    for (int64_t j = 0; j + 1 < trials; ++j)
      some.push_back(out[1 + size_t(j) * rest / size_t(trials - 1)]);
    out = std::move(some);
  }
  return out;
}

void describe_target(TuningRecord &r, bool cpu) {
  r.cuda = nvrtc_version();
  r.tessel_version = tessel_version();
  if (cpu) {
    r.device = "cpu-executor";
    r.arch = "cpu";
    r.driver = 0;
    return;
  }
  Device &d = Device::get();
  r.device = d.name();
  r.arch = d.arch();
  r.driver = CudaDriver::instance().version();
}

std::vector<bool> measured_candidates(const TuningDb &db, const ScheduleEntry &entry,
                                      const std::vector<ShapeParams> &candidates,
                                      const std::string &dtype, bool cpu) {
  TuningRecord target;
  describe_target(target, cpu);
  std::vector<TuningRecord> records = db.load();
  std::vector<bool> done(candidates.size(), false);
  for (size_t i = 0; i < candidates.size(); ++i) {
    ShapeParams problem = problem_shape(entry, candidates[i]);
    ShapeParams config = config_of(entry, candidates[i]);
    for (const TuningRecord &r : records)
      if (r.schedule == entry.name && r.shape == problem && r.dtype == dtype &&
          r.device == target.device && r.arch == target.arch && r.config == config) {
        done[i] = true;
        break;
      }
  }
  return done;
}

TuneSummary tune(const TuneOptions &o) {
  const ScheduleEntry &e = find_schedule(o.schedule);
  if (e.knobs.empty()) {
    std::vector<std::string> tunable;
    for (const auto &[name, entry] : schedule_registry())
      if (!entry.knobs.empty())
        tunable.push_back(name);
    user_error("tune") << "schedule '" << e.name << "' declares no tuning knobs; the ones that "
                       << "do: " << llvm::join(tunable, ", ");
  }
  DataType dtype = o.dtype.value_or(e.dtypes.at(0));
  user_check(std::find(e.dtypes.begin(), e.dtypes.end(), dtype) != e.dtypes.end(), "tune")
      << "schedule '" << e.name << "' does not take " << dtype;
  user_check(o.cpu || Device::available(), "tune")
      << "no GPU: " << Device::unavailable_reason()
      << "; --cpu checks the candidates on the CPU executor instead (give a small shape)";
  user_check(o.ranks >= 1 && o.rank >= 0 && o.rank < o.ranks, "tune")
      << "rank " << o.rank << " of " << o.ranks;

  const Clock::time_point start = Clock::now();
  std::vector<ShapeParams> all = tuning_candidates(e, o.shape, o.trials);
  TuningDb db(o.db_path);
  if (o.write_db) // before anything is measured, not after the first candidate
    db.check_writable();
  std::vector<bool> done = o.done ? *o.done : measured_candidates(db, e, all, dtype.str(), o.cpu);
  user_check(done.size() == all.size(), "tune") << "the measured set does not match the candidates";
  TuningRecord target;
  describe_target(target, o.cpu);

  TuneSummary summary;
  summary.total = all.size();
  std::vector<Candidate> cands;
  for (size_t i = 0; i < all.size(); ++i) {
    summary.resumed += done[i];
    if (!done[i] && i % size_t(o.ranks) == size_t(o.rank))
      cands.push_back({i, all[i], std::nullopt, {}, ""});
  }
  summary.mine = cands.size();
  const ShapeParams problem = problem_shape(e, all[0]);
  llvm::raw_ostream *log = o.progress;
  // Each message is written whole: under mpirun the ranks' lines share one stream.
  auto say = [&](const std::string &line) {
    if (log) {
      *log << line;
      log->flush();
    }
  };
  {
    std::string line = "tune " + e.name + " " + params_string(problem) + " " + dtype.str() + " on " +
                       target.device + " (" + target.arch + "): " + std::to_string(all.size()) +
                       " candidates, " + std::to_string(summary.resumed) + " already in " +
                       db.path();
    if (o.ranks > 1)
      line += "; rank " + std::to_string(o.rank) + " of " + std::to_string(o.ranks) + " takes " +
              std::to_string(cands.size());
    say(line + "\n");
  }

  // Build and lower every candidate (a refusal is a record too), then compile them all at once.
  std::optional<ScheduledProgram> reference_program;
  for (Candidate &c : cands) {
    try {
      c.program = e.build(c.shape, dtype);
      LowerOptions lo;
      lo.name = e.name;
      c.lowered = lower(c.program->schedule, c.program->args, lo);
      if (!reference_program)
        reference_program = c.program;
      else if (std::string why = argument_mismatch(*reference_program, *c.program); !why.empty())
        c.error = "refused: " + why;
    } catch (const Error &err) {
      c.error = one_line(err.what(), "refused");
    }
  }
  if (!o.cpu && reference_program)
    compile_all(cands, Device::get().arch(), o.jobs);
  if (!cands.empty())
    say("built " + std::to_string(cands.size()) + " candidates in " +
        clock_str(seconds_since(start)) + "\n");
  std::optional<CheckProblem> problem_data;
  if (reference_program)
    user_check(reference_program->args.size() == reference_program->num_inputs + 1, "tune")
        << "the tuner checks and times programs of one output; this one has "
        << reference_program->args.size() - reference_program->num_inputs
        << " (leave out the extra outputs, e.g. attention's LSE=0, to tune it)";
  if (reference_program)
    problem_data = make_check_problem(reference_program->args, reference_program->num_inputs,
                                      /*seed=*/1, o.cpu ? 0 : o.samples,
                                      reference_program->given_inputs);
  std::optional<Runner> runner;
  if (problem_data)
    runner.emplace(*problem_data, o.cpu);

  std::optional<TuningRecord> best = db.best(e.name, problem, dtype.str(), target.arch, false);
  const Clock::time_point measure_start = Clock::now();
  for (size_t n = 0; n < cands.size(); ++n) {
    if (o.stop && o.stop->load()) {
      summary.interrupted = true;
      break;
    }
    if (o.time_budget_s > 0 && seconds_since(start) > o.time_budget_s) {
      summary.out_of_time = true;
      break;
    }
    Candidate &c = cands[n];
    TuningRecord r = target;
    r.schedule = e.name;
    r.shape = problem;
    r.dtype = dtype.str();
    r.config = config_of(e, c.shape);
    if (!c.error.empty()) {
      r.check = c.error;
    } else {
      try {
        runner->measure(c.lowered, o.timing, r);
      } catch (const Error &err) {
        r.check = one_line(err.what(), "failed");
      }
    }
    if (o.write_db)
      db.append(r);
    if (r.ok()) {
      ++summary.measured;
      if (!best || r.median_ms < best->median_ms)
        best = r;
    } else {
      ++summary.failed;
    }
    summary.records.push_back(r);
    double spent = seconds_since(measure_start);
    double left = spent / double(n + 1) * double(cands.size() - n - 1);
    std::string line = "[" + std::to_string(n + 1) + "/" + std::to_string(cands.size()) + "] " +
                       r.config_str() + ": " +
                       (r.ok() ? llvm::formatv("{0:F4} ms", r.median_ms).str() : r.check);
    if (best)
      line += llvm::formatv(" | best {0:F4} ms {1}", best->median_ms, best->config_str()).str();
    say(line + " | " + clock_str(seconds_since(start)) + " elapsed, about " + clock_str(left) +
        " left\n");
  }
  if (summary.interrupted || summary.out_of_time)
    say(std::string("stopped (") + (summary.interrupted ? "interrupted" : "time budget spent") +
        ") after " + std::to_string(summary.records.size()) + " of " +
        std::to_string(cands.size()) + " candidates; the same command resumes\n");
  if (best)
    say("best " + e.name + " " + params_string(problem) + ": " + best->config_str() +
        llvm::formatv(", median {0:F4} ms\n", best->median_ms).str());
  return summary;
}

} // namespace tessel
