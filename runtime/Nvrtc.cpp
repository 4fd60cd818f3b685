#include "runtime/Nvrtc.h"

#include "compiler/support/Error.h"
#include "runtime/Device.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Regex.h>

#include <nvrtc.h>

#include <atomic>
#include <cstdlib>
#include <sstream>

namespace tessel {

namespace {

std::atomic<int64_t> invocations{0};

// NVRTC calls other than compile fail only on misuse or resource exhaustion: tessel's bug.
void check_nvrtc(nvrtcResult r, const char *call) {
  internal_check(r == NVRTC_SUCCESS) << call << " failed: " << nvrtcGetErrorString(r);
}

std::string numbered_listing(const std::string &source) {
  std::ostringstream os;
  llvm::SmallVector<llvm::StringRef, 64> lines;
  llvm::StringRef(source).rtrim('\n').split(lines, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string num = std::to_string(i + 1);
    os << std::string(num.size() < 4 ? 4 - num.size() : 0, ' ') << num << "  " << lines[i].str()
       << "\n";
  }
  return os.str();
}

std::string program_log(nvrtcProgram prog) {
  size_t size = 0;
  check_nvrtc(nvrtcGetProgramLogSize(prog, &size), "nvrtcGetProgramLogSize");
  std::string log(size, '\0');
  if (size)
    check_nvrtc(nvrtcGetProgramLog(prog, log.data()), "nvrtcGetProgramLog");
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
    log.pop_back();
  return log;
}

// Destroys the program on every path out, errors included.
struct ProgramGuard {
  nvrtcProgram prog = nullptr;
  ~ProgramGuard() {
    if (prog)
      nvrtcDestroyProgram(&prog);
  }
};

} // namespace

const KernelStats *CompiledKernel::stats(const std::string &name) const {
  for (const KernelStats &k : kernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

std::string cuda_include_dir() {
  if (const char *env = std::getenv("TESSEL_CUDA_INCLUDE"); env && *env)
    return env;
  return TESSEL_CUDA_INCLUDE_DIR;
}

std::vector<std::string> nvrtc_options(const CompileOptions &options) {
  std::string arch = options.arch;
  if (arch.empty()) {
    user_check(Device::available(), "nvrtc")
        << "no target architecture given and no GPU to take it from ("
        << Device::unavailable_reason() << "); set CompileOptions::arch, e.g. \"sm_90\"";
    arch = Device::get().arch();
  }
  std::vector<std::string> opts = {"--gpu-architecture=" + arch, "-std=c++17",
                                   "--include-path=" + cuda_include_dir(),
                                   // ptxas' report of registers, shared memory and spills goes
                                   // to the program log; KernelStats is parsed from it.
                                   "--ptxas-options=-v"};
  // NVRTC >= 12.9 reuses cubins from the driver's compute cache when a driver is present, and a
  // reused cubin comes with no ptxas report. KernelCache is tessel's cache (and keeps the log),
  // so NVRTC's is turned off: every NVRTC run really compiles and reports.
  if (nvrtc_version() >= 12090)
    opts.push_back("--no-cache");
  opts.insert(opts.end(), options.extra.begin(), options.extra.end());
  return opts;
}

int nvrtc_version() {
  int major = 0, minor = 0;
  check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return major * 1000 + minor * 10;
}

int64_t nvrtc_invocation_count() { return invocations.load(); }

CompiledKernel nvrtc_compile(const std::string &source, const std::vector<std::string> &options,
                             const std::string &program_name) {
  ProgramGuard guard;
  check_nvrtc(nvrtcCreateProgram(&guard.prog, source.c_str(), program_name.c_str(), 0, nullptr,
                                 nullptr),
              "nvrtcCreateProgram");
  std::vector<const char *> argv;
  for (const std::string &o : options)
    argv.push_back(o.c_str());
  ++invocations;
  nvrtcResult r = nvrtcCompileProgram(guard.prog, static_cast<int>(argv.size()), argv.data());
  std::string log = program_log(guard.prog);
  if (r != NVRTC_SUCCESS) {
    std::ostringstream opts;
    for (const std::string &o : options)
      opts << " " << o;
    user_error("nvrtc") << "compiling " << program_name << " failed ("
                        << nvrtcGetErrorString(r) << ")\n--- NVRTC log ---\n"
                        << log << "\n--- options ---\n" << opts.str() << "\n--- source ---\n"
                        << numbered_listing(source);
  }
  CompiledKernel out;
  for (const std::string &o : options)
    if (llvm::StringRef(o).startswith("--gpu-architecture="))
      out.arch = o.substr(std::string("--gpu-architecture=").size());
  size_t size = 0;
  check_nvrtc(nvrtcGetCUBINSize(guard.prog, &size), "nvrtcGetCUBINSize");
  // An architecture given as compute_XX yields PTX, not a cubin.
  user_check(size > 0, "nvrtc") << "NVRTC produced no cubin for " << out.arch
                                << "; give a real architecture (sm_XX), not a virtual one";
  out.cubin.resize(size);
  check_nvrtc(nvrtcGetCUBIN(guard.prog, out.cubin.data()), "nvrtcGetCUBIN");
  out.log = std::move(log);
  out.kernels = parse_ptxas_report(out.log);
  return out;
}

std::vector<KernelStats> parse_ptxas_report(const std::string &log) {
  // ptxas -v prints, per entry:
  //   ptxas info    : Compiling entry function 'k' for 'sm_90'
  //   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  //   ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem
  // The order of fields in the "Used" line differs between versions; match each on its own.
  static const llvm::Regex entry("Compiling entry function '([^']+)'");
  static const llvm::Regex props("Function properties for ([^ ]+)");
  static const llvm::Regex regs("Used ([0-9]+) registers");
  static const llvm::Regex smem("([0-9]+) bytes smem");
  static const llvm::Regex stack("([0-9]+) bytes stack frame");
  static const llvm::Regex stores("([0-9]+) bytes spill stores");
  static const llvm::Regex loads("([0-9]+) bytes spill loads");
  std::vector<KernelStats> out;
  llvm::SmallVector<llvm::StringRef, 32> lines;
  llvm::StringRef(log).split(lines, '\n');
  auto number = [](const llvm::Regex &re, llvm::StringRef line, int64_t &field) {
    llvm::SmallVector<llvm::StringRef, 2> m;
    if (re.match(line, &m))
      m[1].getAsInteger(10, field);
  };
  // Non-inlined device functions get their own "Function properties" block; their stack and
  // spill lines must not overwrite the entry's.
  bool in_entry_properties = false;
  for (llvm::StringRef line : lines) {
    llvm::SmallVector<llvm::StringRef, 2> m;
    if (entry.match(line, &m)) {
      out.push_back(KernelStats{m[1].str()});
      in_entry_properties = false;
      continue;
    }
    if (out.empty())
      continue;
    KernelStats &k = out.back();
    if (props.match(line, &m)) {
      in_entry_properties = m[1] == k.name;
      continue;
    }
    if (in_entry_properties) {
      number(stack, line, k.stack_bytes);
      number(stores, line, k.spill_store_bytes);
      number(loads, line, k.spill_load_bytes);
    }
    int64_t r = k.registers;
    number(regs, line, r);
    k.registers = static_cast<int>(r);
    number(smem, line, k.static_shared_bytes);
  }
  return out;
}

} // namespace tessel
