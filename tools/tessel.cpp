// tessel: the command-line driver over the registry of named schedules (schedules/Registry.h).
//
//   tessel list                                   registered schedules, shapes, dtypes
//   tessel lower NAME [--shape K=V,...] [--dtype T] [--print-after=STEP|all] [--remarks]
//   tessel cuda NAME [--shape ...] [--dtype T]    the CUDA C++ source
//   tessel compile NAME [--arch sm_90] [-o f.cubin]   NVRTC; registers, shared memory, spills
//                                                 (run and compile: --cuda f.cu compiles a hand
//                                                 edit of `tessel cuda`'s output instead)
//   tessel interpret NAME [--shape ...]           CPU executor vs float64 reference
//   tessel run NAME [--shape ...] [--no-check] [--number N] [--repeat R]
//                                                 GPU vs float64 reference, timed: R
//                                                 measurements of N launches each
//   tessel tune NAME [--shape ...] [--trials N] [--time-budget S] [--cpu] [--db FILE]
//                                                 search the schedule's knobs, append every
//                                                 candidate to the tuning database
//   tessel export NAME [--shape ...] [--dtype T] --arch sm_80,sm_90a -o DIR [--name N]
//                                                 ahead of time: DIR/N.h, a header that embeds
//                                                 the cubins and launches them with the CUDA
//                                                 driver API alone, and DIR/N.<arch>.cubin
//
// run, compile, lower, cuda and interpret build a schedule with the knobs of the fastest record
// in the tuning database for the shape (runtime/TuningDb.h; TESSEL_LOG_LEVEL=info says which),
// where --shape does not set them.
//
// Exit codes: 0 success, 1 a tessel::Error (the user's mistake; printed as "tessel: error: ...")
// or a result outside the tolerance, 2 a command-line mistake, 3 an internal error.
#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/lower/Lower.h"
#include "compiler/support/Error.h"
#include "runtime/Build.h"
#include "runtime/Check.h"
#include "runtime/Device.h"
#include "runtime/DeviceArray.h"
#include "runtime/Export.h"
#include "runtime/Half.h"
#include "runtime/KernelCache.h"
#include "runtime/Timer.h"
#include "runtime/TuningDb.h"
#include "runtime/WriteFiles.h"
#include "runtime/interp/Executor.h"
#include "schedules/Registry.h"
#include "tools/TuneCommand.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Format.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace cl = llvm::cl;
using namespace tessel;

namespace {

cl::OptionCategory tessel_category("tessel options");

cl::SubCommand list_cmd("list", "List the registered schedules with their default shapes and dtypes");
cl::SubCommand lower_cmd("lower", "Print the lowered IR of a registered schedule");
cl::SubCommand cuda_cmd("cuda", "Print the CUDA C++ source of a registered schedule");
cl::SubCommand compile_cmd("compile", "Compile a registered schedule with NVRTC and print its "
                                      "registers, shared memory and spills");
cl::SubCommand run_cmd("run", "Run a registered schedule on the GPU on random inputs, check it "
                              "against a float64 reference and time it");
cl::SubCommand interpret_cmd("interpret", "Run a registered schedule on the CPU executor (GPU "
                                          "semantics) on random inputs and check it against a "
                                          "float64 reference; give small shapes");
cl::SubCommand tune_cmd("tune", "Search a registered schedule's tuning knobs on the GPU (or the CPU "
                                "executor with --cpu) and record every candidate in the tuning "
                                "database");
cl::SubCommand export_cmd("export", "Compile a registered schedule ahead of time for the given "
                                    "architectures: its cubins and a self-contained C++ header "
                                    "that launches them with the CUDA driver API alone");

// Options shared by every subcommand that builds a schedule. cl::sub may be given several times.
cl::opt<std::string> schedule_name(cl::Positional, cl::Required, cl::desc("<schedule>"),
                                   cl::sub(lower_cmd), cl::sub(cuda_cmd), cl::sub(compile_cmd),
                                   cl::sub(run_cmd), cl::sub(interpret_cmd), cl::sub(tune_cmd),
                                   cl::sub(export_cmd), cl::cat(tessel_category));
cl::opt<std::string> shape_opt("shape", cl::desc("Shape parameters, e.g. M=1000,N=1000,K=64"),
                               cl::value_desc("K=V,..."), cl::sub(lower_cmd), cl::sub(cuda_cmd),
                               cl::sub(compile_cmd), cl::sub(run_cmd), cl::sub(interpret_cmd),
                               cl::sub(tune_cmd), cl::sub(export_cmd), cl::cat(tessel_category));
cl::opt<std::string> dtype_opt("dtype", cl::desc("Input element type (default: the schedule's first)"),
                               cl::value_desc("float16|float32|..."), cl::sub(lower_cmd),
                               cl::sub(cuda_cmd), cl::sub(compile_cmd), cl::sub(run_cmd),
                               cl::sub(interpret_cmd), cl::sub(tune_cmd), cl::sub(export_cmd),
                               cl::cat(tessel_category));

// tessel tune.
cl::opt<int64_t> trials_opt("trials", cl::desc("At most N candidates: the schedule's default and "
                                               "an even spread of its knob grid (default: all)"),
                            cl::value_desc("N"), cl::init(0), cl::sub(tune_cmd),
                            cl::cat(tessel_category));
cl::opt<double> budget_opt("time-budget", cl::desc("Start no candidate after S seconds; the same "
                                                   "command resumes (default: no limit)"),
                           cl::value_desc("S"), cl::init(0), cl::sub(tune_cmd),
                           cl::cat(tessel_category));
cl::opt<bool> cpu_opt("cpu", cl::desc("Check each candidate on the CPU executor at a small shape "
                                      "instead of timing it on the GPU (records arch 'cpu')"),
                      cl::sub(tune_cmd), cl::cat(tessel_category));
cl::opt<std::string> db_opt("db", cl::desc("The tuning database (default: $TESSEL_TUNING_DB, else "
                                           "~/.cache/tessel/tuning.jsonl)"),
                            cl::value_desc("file.jsonl"), cl::sub(tune_cmd),
                            cl::cat(tessel_category));
cl::opt<int> jobs_opt("j", cl::desc("Threads compiling candidates with NVRTC (default: every core)"),
                      cl::value_desc("N"), cl::init(0), cl::sub(tune_cmd),
                      cl::cat(tessel_category));

// The description names the steps; main() fills it in from lowering_steps().
cl::list<std::string> print_after_opt("print-after", cl::CommaSeparated, cl::value_desc("step|all"),
                                      cl::sub(lower_cmd), cl::cat(tessel_category));
cl::opt<bool> remarks_opt("remarks",
                          cl::desc("List what became of each vectorize, unroll and pipeline "
                                   "request: applied, or not and why"),
                          cl::sub(lower_cmd), cl::cat(tessel_category));

cl::opt<bool> no_check_opt("no-check",
                           cl::desc("Only time the kernel: skip the float64 reference, which is "
                                    "slow on the CPU for large shapes"),
                           cl::sub(run_cmd), cl::cat(tessel_category));

cl::opt<std::string> cuda_file_opt(
    "cuda",
    cl::desc("Compile this CUDA file instead of the generated source (a hand edit of `tessel "
             "cuda`'s output for the same shape and knobs: the kernels' names, parameters and "
             "launches stay the generated ones), to measure a transformation before writing it"),
    cl::value_desc("file.cu"), cl::sub(run_cmd), cl::sub(compile_cmd), cl::cat(tessel_category));

// tessel run's timing, TimeOptions' defaults unless given: R measurements of N launches each,
// after TimeOptions' warm-up launches. Under compute-sanitizer every launch is slow: give 1 and 1.
// (cl::desc keeps a StringRef: the descriptions must outlive the options.)
const std::string number_desc =
    "Launches per timed measurement (default: " + std::to_string(TimeOptions{}.number) + ")";
const std::string repeat_desc = "Timed measurements; the statistics are over them (default: " +
                                std::to_string(TimeOptions{}.repeat) + ")";
cl::opt<int> number_opt("number", cl::desc(number_desc), cl::value_desc("N"),
                        cl::init(TimeOptions{}.number), cl::sub(run_cmd), cl::cat(tessel_category));
cl::opt<int> repeat_opt("repeat", cl::desc(repeat_desc), cl::value_desc("R"),
                        cl::init(TimeOptions{}.repeat), cl::sub(run_cmd), cl::cat(tessel_category));
cl::opt<double> hold_opt(
    "hold",
    cl::desc("Launch for this many seconds before timing, so that the times are at the clocks "
             "the GPU sustains under load, as tessel_bench meets it (default 0: a cool GPU's "
             "boost clocks, up to 10% faster on a large GEMM)"),
    cl::value_desc("SECONDS"), cl::init(0.0), cl::sub(run_cmd), cl::cat(tessel_category));

cl::opt<std::string> arch_opt("arch", cl::desc("Target architecture (default: the GPU's)"),
                              cl::value_desc("sm_XX"), cl::sub(compile_cmd),
                              cl::cat(tessel_category));
cl::opt<std::string> output_opt("o", cl::desc("Write the cubin to this file"),
                                cl::value_desc("file.cubin"), cl::sub(compile_cmd),
                                cl::cat(tessel_category));

// tessel export.
cl::list<std::string> export_arch_opt("arch", cl::CommaSeparated, cl::OneOrMore,
                                      cl::desc("Architectures to compile for, e.g. sm_80,sm_90a "
                                               "(sm_90a: Hopper's wgmma)"),
                                      cl::value_desc("sm_XX,..."), cl::sub(export_cmd),
                                      cl::cat(tessel_category));
cl::opt<std::string> export_dir_opt("o", cl::Required,
                                    cl::desc("Directory to write NAME.h and the cubins into"),
                                    cl::value_desc("dir"), cl::sub(export_cmd),
                                    cl::cat(tessel_category));
cl::opt<std::string> export_name_opt("name", cl::desc("Name of the header and prefix of what it "
                                                      "declares (default: the schedule's)"),
                                     cl::value_desc("N"), cl::sub(export_cmd),
                                     cl::cat(tessel_category));

// The selected schedule built at the requested shape and dtype.
struct Selected {
  const ScheduleEntry *entry;
  ShapeParams shape;
  DataType dtype;
  ScheduledProgram program;
};

// The input type asked for, checked against the entry's.
DataType selected_dtype(const ScheduleEntry &e) {
  DataType dtype = e.dtypes.at(0);
  if (!dtype_opt.empty()) {
    dtype = DataType::parse(dtype_opt);
    if (std::find(e.dtypes.begin(), e.dtypes.end(), dtype) == e.dtypes.end()) {
      std::vector<std::string> names;
      for (const DataType &t : e.dtypes)
        names.push_back(t.str());
      user_error("--dtype") << "schedule '" << e.name << "' does not support " << dtype
                            << "; it supports: " << llvm::join(names, ", ");
    }
  }
  return dtype;
}

// The schedule at the requested shape and dtype, its knobs from the tuning database's best
// record for `arch` where --shape leaves them (none: the schedule's own choices).
Selected select_schedule(const std::string &arch) {
  const ScheduleEntry &e = find_schedule(schedule_name);
  ShapeParams overrides = shape_opt.empty() ? ShapeParams{} : parse_shape(shape_opt);
  DataType dtype = selected_dtype(e);
  ShapeParams shape;
  ScheduledProgram p = build_tuned(e, overrides, dtype, arch, &shape);
  return {&e, shape, dtype, std::move(p)};
}

Selected select_schedule() { return select_schedule(tuning_arch()); }

// The kernel is named after the schedule so that CUDA source and cubin symbols are readable.
LowerOptions named_after(const Selected &sel, LowerOptions options = {}) {
  options.name = sel.entry->name;
  return options;
}

LoweredModule lower_selected(const Selected &sel, const LowerOptions &base = {}) {
  return lower(sel.program.schedule, sel.program.args, named_after(sel, base));
}

int cmd_list() {
  llvm::raw_ostream &os = llvm::outs();
  for (const auto &[name, e] : schedule_registry()) {
    std::vector<std::string> dtypes;
    for (const DataType &t : e.dtypes)
      dtypes.push_back(t.str());
    os << name << "\n    " << e.description << "\n    shape: "
       << params_string(problem_shape(e, e.default_shape)) << "\n";
    if (!e.knobs.empty()) {
      // Each knob's default, and the values `tessel tune` tries.
      std::vector<std::string> knobs;
      for (const auto &[k, values] : e.knobs) {
        std::vector<std::string> vs;
        for (int64_t v : values)
          vs.push_back(std::to_string(v));
        knobs.push_back(k + "=" + std::to_string(e.default_shape.at(k)) + " {" +
                        llvm::join(vs, ",") + "}");
      }
      os << "    knobs: " << llvm::join(knobs, " ") << "\n";
    }
    os << "    dtypes: " << llvm::join(dtypes, ", ") << "\n";
  }
  return 0;
}

int cmd_lower() {
  Selected sel = select_schedule();
  LowerOptions options;
  options.print_after.assign(print_after_opt.begin(), print_after_opt.end());
  options.print_remarks = remarks_opt;
  // Steps and remarks print to stdout with the result, so that one pipe (e.g. into FileCheck)
  // sees them all.
  options.print_stream = &llvm::outs();
  LoweredModule m = lower_selected(sel, options);
  // Set the result apart from what was printed before it (by the options or the environment).
  const char *env = std::getenv("TESSEL_PRINT_AFTER");
  if (!options.print_after.empty() || options.print_remarks || (env && *env))
    llvm::outs() << "// ---- lowered module ----\n";
  llvm::outs() << to_string(m);
  return 0;
}

// The target of run and compile: the GPU's architecture, and --cuda's source if given.
Target selected_target() {
  Target t = Target::cuda();
  if (cuda_file_opt.empty())
    return t;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(cuda_file_opt.getValue());
  user_check(bool(file), "--cuda") << "cannot read '" << cuda_file_opt.getValue()
                                   << "': " << (file ? "" : file.getError().message());
  t.source = (*file)->getBuffer().str();
  return t;
}

int cmd_cuda() {
  Selected sel = select_schedule();
  llvm::outs() << codegen_cuda(lower_selected(sel));
  return 0;
}

int cmd_compile() {
  user_check(!arch_opt.getNumOccurrences() || !arch_opt.empty(), "compile")
      << "--arch needs an architecture, e.g. --arch sm_90";
  if (!arch_opt.empty()) // before anything is built: not an NVRTC error over the whole source
    check_arch_name(arch_opt, "compile");
  user_check(!output_opt.getNumOccurrences() || !output_opt.empty(), "compile")
      << "-o needs a file name (or - for standard output)";
  Selected sel = select_schedule(arch_opt.empty() ? tuning_arch() : arch_opt.getValue());
  LoweredModule lowered = lower_selected(sel);
  std::string source = selected_target().source;
  if (source.empty())
    source = codegen_cuda(lowered);
  CompileOptions options;
  user_check(!arch_opt.empty() || Device::available(), "compile")
      << "no GPU to take the target architecture from (" << Device::unavailable_reason()
      << "); pass --arch, e.g. --arch sm_90";
  options.arch = target_arch(lowered, arch_opt);
  CompiledKernel k = KernelCache::global().compile(source, options, sel.entry->name + ".cu");

  // -o -: the cubin is standard output, and the report goes to standard error.
  const bool cubin_to_stdout = output_opt == "-";
  llvm::raw_ostream &os = cubin_to_stdout ? llvm::errs() : llvm::outs();
  os << sel.entry->name << " (" << params_string(sel.shape) << ", " << sel.dtype << ") for "
     << k.arch << ": cubin " << k.cubin.size() << " bytes\n";
  for (const KernelStats &s : k.kernels)
    os << "  kernel " << s.name << ": " << s.registers << " registers, "
       << s.static_shared_bytes << " bytes static shared memory, " << s.stack_bytes
       << " bytes stack, spills " << s.spill_store_bytes << " bytes stored / "
       << s.spill_load_bytes << " bytes loaded\n";
  for (const LoweredFunc &f : lowered.funcs)
    if (f.launch.dynamic_shared_bytes)
      os << "  kernel " << f.name << ": " << f.launch.dynamic_shared_bytes
         << " bytes dynamic shared memory at launch\n";

  if (cubin_to_stdout) {
    llvm::outs() << k.cubin; // a failed write is reported by main
  } else if (!output_opt.empty()) {
    write_files({{output_opt, k.cubin}}, "compile");
    os << "wrote " << output_opt << "\n";
  }
  return 0;
}

// Prints the check's outcome; a result outside the tolerance is an error (exit 1).
int report_check(const Selected &sel, const CheckResult &r, const std::string &where) {
  llvm::outs() << sel.entry->name << " (" << params_string(sel.shape) << ", " << sel.dtype << ") "
               << where << ": " << r.str() << "\n";
  if (r.compare.ok)
    return 0;
  llvm::outs().flush();
  llvm::errs() << "tessel: error: the output of '" << sel.entry->name
               << "' differs from the float64 reference beyond the tolerance\n";
  return 1;
}

// The CPU executor interprets every thread of the grid: give small shapes (--shape).
int cmd_interpret() {
  Selected sel = select_schedule("cpu"); // records of `tessel tune --cpu`
  const ScheduledProgram &p = sel.program;
  return report_check(sel,
                      check_on_cpu(p.schedule, p.args,
                                   make_check_problem(p.args, p.num_inputs, 1, 0, p.given_inputs)),
                      "on the CPU executor vs float64 reference");
}

// Uniform values in [-1, 1) in `t`'s type written straight into a device array (float16,
// bfloat16, float32), drawn by threads from counter-based streams; nullopt for other types. A
// time-only run of a large problem (a key/value cache of gigabytes) then skips random_tensor's
// float64 host copy.
std::optional<DeviceArray> fast_random_device_array(const Tensor &t, uint64_t seed) {
  const DataType dt = t.dtype();
  const bool half = dt == Float(16), bf16 = dt == BFloat(16), f32 = dt == Float(32);
  if (!half && !bf16 && !f32)
    return std::nullopt;
  DeviceArray a(dt, constant_shape(t), t.strides());
  const size_t n = size_t(a.numel()), bytes = size_t(dt.bytes());
  std::vector<std::byte> host(n * bytes);
  auto fill = [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) {
      uint64_t z = (seed << 40) + i + 0x9E3779B97F4A7C15ull; // splitmix64 of the index
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      float v = float(double(z >> 11) * 0x1.0p-52 - 1.0);
      if (f32) {
        std::memcpy(&host[i * 4], &v, 4);
      } else {
        uint16_t h = half ? float_to_half(v) : float_to_bfloat16(v);
        std::memcpy(&host[i * 2], &h, 2);
      }
    }
  };
  const size_t workers = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 32);
  std::vector<std::thread> pool;
  for (size_t w = 0; w < workers; ++w)
    pool.emplace_back(fill, n * w / workers, n * (w + 1) / workers);
  for (std::thread &th : pool)
    th.join();
  a.copy_from_host(host.data(), int64_t(host.size()));
  return a;
}

// Random inputs on the device for a time-only run (--no-check).
std::vector<DeviceArray> random_device_args(const ScheduledProgram &p) {
  std::vector<DeviceArray> arrays;
  for (size_t i = 0; i < p.args.size(); ++i) {
    const Tensor &t = p.args[i];
    if (i >= p.num_inputs)
      arrays.emplace_back(t.dtype(), constant_shape(t));
    else if (auto given = p.given_inputs.find(i); given != p.given_inputs.end())
      arrays.push_back(device_array(HostTensor{t.dtype(), constant_shape(t), given->second},
                                    t.strides()));
    else if (std::optional<DeviceArray> a = fast_random_device_array(t, i + 1))
      arrays.push_back(std::move(*a));
    else
      arrays.push_back(device_array(random_tensor(t, i + 1), t.strides()));
  }
  return arrays;
}

// --number, --repeat and --hold, checked before anything is built or launched.
TimeOptions run_timing() {
  user_check(number_opt >= 1, "run")
      << "--number must be at least 1 (launches per measurement), got " << number_opt.getValue();
  user_check(repeat_opt >= 1, "run")
      << "--repeat must be at least 1 (measurements), got " << repeat_opt.getValue();
  user_check(hold_opt >= 0, "run")
      << "--hold must be 0 or more seconds of launches before timing, got " << hold_opt.getValue();
  TimeOptions t;
  t.number = number_opt;
  t.repeat = repeat_opt;
  t.hold_seconds = hold_opt;
  return t;
}

int cmd_run() {
  TimeOptions timing = run_timing();
  Selected sel = select_schedule();
  const ScheduledProgram &p = sel.program;
  user_check(Device::available(), "run")
      << "no GPU: " << Device::unavailable_reason()
      << " ('tessel interpret' checks a schedule on the CPU instead)";
  auto print_time = [&](const TimeResult &t) {
    llvm::outs() << sel.entry->name << " on " << Device::get().name() << ": " << t.str();
    if (p.flops > 0 && t.median_ms > 0)
      llvm::outs() << ", " << llvm::format("%.2f", p.flops / (t.median_ms * 1e9)) << " TFLOP/s";
    llvm::outs() << "\n";
  };
  if (no_check_opt) {
    Module m = build(lower_selected(sel), selected_target());
    std::vector<DeviceArray> arrays = random_device_args(p);
    std::vector<const DeviceArray *> ptrs;
    for (const DeviceArray &a : arrays)
      ptrs.push_back(&a);
    print_time(m.time(ptrs, timing));
    llvm::outs() << "not checked (--no-check)\n";
    return 0;
  }
  // The reference runs one float64 multiply-add at a time on one core: say so before a long wait.
  if (p.flops > 2e10)
    llvm::errs() << "tessel: note: the float64 reference of this shape (" << llvm::format("%.0f", p.flops / 1e9)
                 << " GFLOP) takes a long time on the CPU; --no-check only times the kernel\n";
  CheckResult r =
      check_on_gpu(p.schedule, p.args, make_check_problem(p.args, p.num_inputs, 1, 0, p.given_inputs),
                   timing, selected_target(), named_after(sel));
  if (r.time)
    print_time(*r.time);
  return report_check(sel, r, "on the GPU vs float64 reference");
}

int cmd_tune() {
  const ScheduleEntry &e = find_schedule(schedule_name);
  TuneOptions o;
  o.schedule = e.name;
  o.shape = shape_opt.empty() ? ShapeParams{} : parse_shape(shape_opt);
  o.dtype = selected_dtype(e);
  o.cpu = cpu_opt;
  user_check(trials_opt >= 0, "tune") << "--trials must be 0 (all) or more, got " << trials_opt.getValue();
  user_check(budget_opt >= 0, "tune") << "--time-budget must be 0 (none) or more seconds, got "
                                      << budget_opt.getValue();
  o.trials = trials_opt;
  o.time_budget_s = budget_opt;
  o.db_path = db_opt;
  o.jobs = jobs_opt;
  return run_tune_command(std::move(o));
}

// The schedule lowered for each --arch (with the knobs of that GPU's tuning records), compiled
// and written out by runtime/Export.h.
int cmd_export() {
  std::vector<ExportTarget> targets;
  ExportOptions options;
  options.name = export_name_opt.empty() ? schedule_name.getValue() : export_name_opt.getValue();
  std::string command = "tessel export " + schedule_name.getValue();
  if (!shape_opt.empty())
    command += " --shape " + shape_opt.getValue();
  if (!dtype_opt.empty())
    command += " --dtype " + dtype_opt.getValue();
  std::vector<std::string> archs =
      parse_arch_list(llvm::join(export_arch_opt.begin(), export_arch_opt.end(), ","));
  command += " --arch " + llvm::join(archs, ",");
  for (const std::string &arch : archs) {
    // Tuning records are per GPU ("sm_90"), whatever the target's suffix.
    Selected sel = select_schedule(arch.back() == 'a' ? arch.substr(0, arch.size() - 1) : arch);
    if (targets.empty()) {
      options.description.push_back(sel.entry->name + ": " + sel.entry->description);
      options.num_inputs = sel.program.num_inputs;
    }
    options.description.push_back("for " + arch + ": " + params_string(sel.shape) + ", " +
                                  sel.dtype.str());
    targets.push_back({arch, lower_selected(sel)});
  }
  options.description.push_back(command);
  for (const std::string &path : write_export(export_dir_opt, options, compile_for_export(targets)))
    llvm::outs() << "wrote " << path << "\n";
  return 0;
}

// A failed write to standard output (a full disk, a closed pipe) is an error of the command, not
// LLVM's abort when the stream is destroyed at exit with its error unchecked.
int finish_output(int status) {
  llvm::outs().flush();
  if (llvm::outs().has_error()) {
    std::error_code ec = llvm::outs().error();
    llvm::outs().clear_error();
    llvm::errs() << "tessel: error: writing to standard output failed: " << ec.message() << "\n";
    status = status ? status : 1;
  }
  if (llvm::errs().has_error()) { // nowhere left to say so
    llvm::errs().clear_error();
    status = status ? status : 1;
  }
  return status;
}

int dispatch() {
  if (list_cmd)
    return cmd_list();
  if (lower_cmd)
    return cmd_lower();
  if (cuda_cmd)
    return cmd_cuda();
  if (compile_cmd)
    return cmd_compile();
  if (run_cmd)
    return cmd_run();
  if (interpret_cmd)
    return cmd_interpret();
  if (tune_cmd)
    return cmd_tune();
  if (export_cmd)
    return cmd_export();
  llvm::errs() << "tessel: error: no subcommand given; run 'tessel --help' for the list\n";
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    int v = nvrtc_version();
    os << "tessel, built with LLVM " << LLVM_VERSION_STRING << ", NVRTC " << v / 1000 << "."
       << v % 1000 / 10 << "\n";
  });
  cl::HideUnrelatedOptions(tessel_category, *cl::TopLevelSubCommand);
  for (cl::SubCommand *sub :
       {&lower_cmd, &cuda_cmd, &compile_cmd, &run_cmd, &interpret_cmd, &tune_cmd, &export_cmd})
    cl::HideUnrelatedOptions(tessel_category, *sub);
  static const std::string print_after_desc =
      "Print the IR after these lowering steps, or after all of them: " +
      llvm::join(lowering_steps(), ", ");
  print_after_opt.setDescription(print_after_desc);
  // With an error stream given, a command-line mistake returns false instead of exiting 1, so
  // that it can exit 2 and stay apart from tessel::Error's 1.
  if (!cl::ParseCommandLineOptions(argc, argv,
                                   "tessel: a tensor-expression compiler for CUDA\n\n"
                                   "  Run 'tessel SUBCOMMAND --help' for a subcommand's options.\n",
                                   &llvm::errs()))
    return 2;
  int status = 0;
  try {
    status = dispatch();
  } catch (const Error &e) {
    llvm::outs().flush();
    llvm::errs() << "tessel: error: " << e.what() << "\n";
    status = 1;
  } catch (const InternalError &e) {
    llvm::outs().flush();
    llvm::errs() << "tessel: " << e.what() << "\n";
    status = 3;
  } catch (const std::bad_alloc &) {
    llvm::outs().flush();
    llvm::errs() << "tessel: error: out of host memory; give a smaller shape (--shape)\n";
    status = 1;
  } catch (const std::exception &e) {
    // Anything else escaping the compiler is a bug too; say so rather than abort.
    llvm::outs().flush();
    llvm::errs() << "tessel: internal error: " << e.what()
                 << "\n  (this is a bug in tessel; please report it with the command line)\n";
    status = 3;
  }
  return finish_output(status);
}
