#include "runtime/Export.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/support/Error.h"
#include "runtime/Build.h"
#include "runtime/KernelCache.h"
#include "runtime/WriteFiles.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

namespace tessel {

namespace {

bool is_identifier(const std::string &s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
    return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// "sm_90a" -> (9, 0, exact).
struct ArchVersion {
  int major = 0, minor = 0;
  bool exact = false; ///< "a": that compute capability alone
};

ArchVersion arch_version(const std::string &arch) {
  ArchVersion v;
  std::string digits = arch.substr(3);
  if (!digits.empty() && digits.back() == 'a') {
    v.exact = true;
    digits.pop_back();
  }
  int cc = std::stoi(digits);
  v.major = cc / 10;
  v.minor = cc % 10;
  return v;
}

bool same_args(const ModuleParams &a, const ModuleParams &b) {
  if (a.args.size() != b.args.size())
    return false;
  for (size_t i = 0; i < a.args.size(); ++i)
    if (a.args[i].name != b.args[i].name || a.args[i].dtype != b.args[i].dtype ||
        a.args[i].shape != b.args[i].shape || a.args[i].strides != b.args[i].strides)
      return false;
  return true;
}

std::string join(const std::vector<std::string> &parts, const std::string &sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i)
    s += (i ? sep : "") + parts[i];
  return s;
}

template <typename T> std::string braces(const std::vector<T> &v, size_t size = 0) {
  std::string s = "{";
  for (size_t i = 0; i < std::max(v.size(), size); ++i)
    s += (i ? ", " : "") + (i < v.size() ? std::to_string(v[i]) : std::string("0"));
  return s + "}";
}

const char *tensor_map_type_name(CUtensorMapDataType t) {
  switch (t) {
  case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    return "CU_TENSOR_MAP_DATA_TYPE_FLOAT16";
  case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
    return "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16";
  case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    return "CU_TENSOR_MAP_DATA_TYPE_FLOAT32";
  case CU_TENSOR_MAP_DATA_TYPE_UINT8:
    return "CU_TENSOR_MAP_DATA_TYPE_UINT8";
  default:
    internal_error << "tensor map data type " << int(t) << " has no name here";
  }
}

const char *swizzle_name(CUtensorMapSwizzle s) {
  switch (s) {
  case CU_TENSOR_MAP_SWIZZLE_NONE:
    return "CU_TENSOR_MAP_SWIZZLE_NONE";
  case CU_TENSOR_MAP_SWIZZLE_32B:
    return "CU_TENSOR_MAP_SWIZZLE_32B";
  case CU_TENSOR_MAP_SWIZZLE_64B:
    return "CU_TENSOR_MAP_SWIZZLE_64B";
  case CU_TENSOR_MAP_SWIZZLE_128B:
    return "CU_TENSOR_MAP_SWIZZLE_128B";
  default:
    internal_error << "tensor map swizzle " << int(s) << " has no name here";
  }
}

// The C identifiers the header gives the arguments: their names, made identifiers and distinct
// from each other and from the launch functions' other parameters.
std::vector<std::string> argument_identifiers(const ModuleParams &p) {
  std::set<std::string> used = {"stream", "workspace", "args"};
  std::vector<std::string> out;
  for (size_t i = 0; i < p.args.size(); ++i) {
    std::string s = p.args[i].name;
    for (char &c : s)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
        c = '_';
    if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
      s = "arg" + std::to_string(i) + (s.empty() ? "" : "_" + s);
    while (used.count(s))
      s += "_";
    used.insert(s);
    out.push_back(s);
  }
  return out;
}

// `text` in lines of at most `width` characters (longer words alone), continuations indented.
std::vector<std::string> wrap(const std::string &text, size_t width,
                              const std::string &indent = "") {
  std::vector<std::string> lines;
  std::istringstream words(text);
  std::string word, line;
  bool fresh = true; // nothing on the line yet but the indent
  while (words >> word) {
    if (!fresh && line.size() + 1 + word.size() > width) {
      lines.push_back(line);
      line = indent;
      fresh = true;
    }
    line += (fresh ? "" : " ") + word;
    fresh = false;
  }
  if (!line.empty())
    lines.push_back(line);
  return lines;
}

// The cubin as a C array initializer, 20 bytes a line.
void emit_bytes(std::ostringstream &os, const std::string &bytes) {
  static const char *hex = "0123456789abcdef";
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i % 20 == 0)
      os << "\n   ";
    auto b = static_cast<unsigned char>(bytes[i]);
    os << " 0x" << hex[b >> 4] << hex[b & 15] << ",";
  }
  os << "\n";
}

} // namespace

std::vector<std::string> parse_arch_list(const std::string &text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string a;
  while (std::getline(in, a, ',')) {
    check_arch_name(a, "export");
    if (std::find(out.begin(), out.end(), a) == out.end())
      out.push_back(a);
  }
  user_check(!out.empty(), "export") << "no architecture given; e.g. --arch sm_80,sm_90a";
  return out;
}

std::vector<ExportedVariant> compile_for_export(const std::vector<ExportTarget> &targets) {
  user_check(!targets.empty(), "export") << "no architecture to export for";
  std::vector<ExportedVariant> out;
  for (const ExportTarget &t : targets) {
    user_check(!t.arch.empty(), "export") << "an empty architecture; give one, e.g. sm_80";
    ExportedVariant v;
    v.requested_arch = t.arch;
    v.lowered = t.lowered;
    try {
      v.arch = target_arch(t.lowered, t.arch);
      v.params = module_params(t.lowered);
      CompileOptions options;
      options.arch = v.arch;
      v.compiled = KernelCache::global().compile(codegen_cuda(t.lowered), options,
                                                 t.lowered.funcs.at(0).name + ".cu");
    } catch (const Error &e) {
      throw Error("export for " + t.arch + ": " + e.what());
    }
    auto same = std::find_if(out.begin(), out.end(),
                             [&](const ExportedVariant &o) { return o.arch == v.arch; });
    if (same != out.end())
      continue;
    if (!out.empty() && !same_args(out.front().params, v.params)) {
      auto describe = [](const ModuleParams &p) {
        std::vector<std::string> s;
        for (const ParamSpec &a : p.args)
          s.push_back(a.name + ": " + a.dtype.str() + " " + shape_str(a.shape));
        return join(s, ", ");
      };
      user_error("export") << "the module for " << v.requested_arch << " takes ("
                           << describe(v.params) << "), the one for "
                           << out.front().requested_arch << " ("
                           << describe(out.front().params)
                           << "); one header launches one signature: export them separately";
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::string export_header(const ExportOptions &o, const std::vector<ExportedVariant> &variants) {
  user_check(is_identifier(o.name), "export")
      << "'" << o.name << "' is not a C identifier (letters, digits and '_'); the header "
      << "declares " << o.name << "_launch: give another name";
  user_check(!variants.empty(), "export") << "nothing compiled to export";
  const std::string &N = o.name;
  const std::string D = N + "_detail";
  const ModuleParams &first = variants.front().params;
  const size_t num_args = first.args.size();
  std::vector<std::string> ids = argument_identifiers(first);
  const bool io_known = o.num_inputs <= num_args;

  size_t max_rank = 1, max_kernels = 1, max_maps = 1, max_workspaces = 0;
  int64_t workspace_bytes = 0;
  std::vector<size_t> alignment(num_args, 1);
  std::vector<std::string> alignment_reason(num_args);
  std::vector<std::string> arch_names;
  for (const ExportedVariant &v : variants) {
    arch_names.push_back(v.arch);
    max_kernels = std::max(max_kernels, v.lowered.funcs.size());
    max_workspaces = std::max(max_workspaces, v.params.workspaces.size());
    workspace_bytes = std::max(workspace_bytes, v.params.workspace_bytes);
    for (const LoweredFunc &f : v.lowered.funcs)
      max_maps = std::max(max_maps, f.tensor_maps.size());
    for (size_t a = 0; a < num_args; ++a)
      if (size_t(v.params.args[a].alignment) > alignment[a]) {
        alignment[a] = size_t(v.params.args[a].alignment);
        alignment_reason[a] = v.params.args[a].alignment_reason;
      }
  }
  for (const ParamSpec &s : first.args)
    max_rank = std::max(max_rank, s.shape.size());

  std::ostringstream h;
  // ---- The comment: what it is and how to use it -----------------------------------------
  h << "// " << N << ".h: generated by `tessel export`; do not edit.\n//\n";
  for (const std::string &line : o.description)
    for (const std::string &l : wrap(line, 96, "    "))
      h << "// " << l << "\n";
  if (!o.description.empty())
    h << "//\n";
  std::string params_decl, args_list; // for the launch functions' definitions
  for (size_t a = 0; a < num_args; ++a) {
    params_decl += "CUdeviceptr " + ids[a] + ", ";
    args_list += (a ? ", " : "") + ids[a];
  }
  // Prose, wrapped; `lines` verbatim.
  auto para = [&](const std::string &text) {
    for (const std::string &l : wrap(text, 96))
      h << "// " << l << "\n";
  };
  auto signature = [&](const std::string &head, const std::vector<std::string> &params) {
    std::string line = "//   " + head + "(";
    const size_t indent = line.size();
    for (size_t i = 0; i < params.size(); ++i) {
      std::string p = params[i] + (i + 1 < params.size() ? "," : ");");
      if (line.size() + 1 + p.size() > 100 && line.back() != '(') {
        h << line << "\n";
        line = "//" + std::string(indent - 2, ' ');
      } else if (line.back() != '(') {
        line += " ";
      }
      line += p;
    }
    h << line << "\n";
  };
  std::vector<std::string> ptr_params;
  for (size_t a = 0; a < num_args; ++a)
    ptr_params.push_back("CUdeviceptr " + ids[a]);
  para("Launches " + N + " with the CUDA driver API alone: include this header (C++17) and link "
       "with -lcuda.");
  h << "//\n";
  std::vector<std::string> plain = ptr_params, with_ws = ptr_params;
  plain.push_back("CUstream stream");
  with_ws.push_back("CUdeviceptr workspace");
  with_ws.push_back("CUstream stream");
  signature("CUresult " + N + "_launch", plain);
  signature("CUresult " + N + "_launch_with_workspace", with_ws);
  signature("CUresult " + N + "_launch_args",
            {"const CUdeviceptr *args", "CUdeviceptr workspace", "CUstream stream"});
  h << "//   const char *" << N << "_last_error(); // why this thread's last launch failed\n"
    << "//   void " << N << "_unload();             // unloads the cubins (no launch running)\n"
    << "//\n";
  para(std::string("Arguments: device memory of the current context's device, dense and "
                   "row-major unless strides (in elements) are given") +
       (io_known ? " (the inputs are read, the outputs written):" : ":"));
  for (size_t a = 0; a < num_args; ++a) {
    const ParamSpec &s = first.args[a];
    h << "//   " << ids[a];
    if (io_known)
      h << (a < o.num_inputs ? "  input " : "  output");
    h << "  " << s.dtype.str() << " " << shape_str(s.shape)
      << (s.strides.empty() ? "" : " strides " + shape_str(s.strides)) << ", " << s.bytes()
      << " bytes, aligned to " << alignment[a] << " bytes\n";
    if (!alignment_reason[a].empty())
      h << "//       (" << alignment_reason[a] << ")\n";
  }
  h << "//\n";
  para("Each launch takes the compute capability of the current context's device (which must be "
       "the stream's) and runs the cubin for it: sm_XY runs on X.Y and the later minors of X, "
       "sm_XYa on X.Y alone; the newest that runs is taken. No cubin for the device: "
       "CUDA_ERROR_NO_BINARY_FOR_GPU.");
  h << "// Cubins (" << join(arch_names, ", ") << "):\n";
  for (const ExportedVariant &v : variants) {
    h << "//   " << v.arch << " (asked for as " << v.requested_arch << "): "
      << v.lowered.funcs.size() << " kernel" << (v.lowered.funcs.size() > 1 ? "s" : "")
      << ", in order";
    if (v.params.workspace_bytes)
      h << "; workspace " << v.params.workspace_bytes << " bytes";
    h << "\n";
    for (const LoweredFunc &f : v.lowered.funcs) {
      const LaunchConfig &c = f.launch;
      std::ostringstream k;
      k << f.name << ": grid (" << c.grid[0] << ", " << c.grid[1] << ", " << c.grid[2]
        << "), block (" << c.block[0] << ", " << c.block[1] << ", " << c.block[2] << ")";
      if (c.dynamic_shared_bytes)
        k << ", " << c.dynamic_shared_bytes << " bytes of dynamic shared memory";
      if (!f.tensor_maps.empty()) {
        std::vector<std::string> over;
        for (const TensorMapParam &m : f.tensor_maps)
          over.push_back(size_t(m.arg) < num_args ? ids[size_t(m.arg)]
                                                  : v.params.workspaces[size_t(m.arg) - num_args].name);
        k << ", TMA maps over " << join(over, ", ");
      }
      for (const std::string &l : wrap(k.str(), 90, "  "))
        h << "//     " << l << "\n";
    }
  }
  h << "//\n";
  if (workspace_bytes == 0)
    para("Launches enqueue the kernels on `stream` and do not wait. Workspace: none (the "
         "`workspace` arguments are ignored).");
  else
    para("Launches enqueue the kernels on `stream` and do not wait. Workspace: " + N +
         "_launch allocates " + N + "_workspace_bytes stream-ordered for each launch "
         "(cuMemAllocAsync, cuMemFreeAsync on `stream`); " + N + "_launch_with_workspace takes "
         "the caller's instead: at least " + N + "_workspace_bytes of device memory, 256-byte "
         "aligned, zero before its first launch (flags that every launch leaves at zero), which "
         "the kernels use as scratch until they finish (one per stream launching at once).");
  para("Errors: the launch returns the CUresult of what failed (CUDA_ERROR_INVALID_VALUE for a "
       "null or misaligned pointer) and " + N + "_last_error() says what it was. The cubins are "
       "loaded at the first launch on a device of their kind (cuLibraryLoadData), kept until " +
       N + "_unload().");

  // ---- Declarations -------------------------------------------------------------------------
  h << "#pragma once\n\n#include <cuda.h>\n\n#include <cstddef>\n#include <cstdint>\n"
    << "#include <cstdio>\n#include <mutex>\n\n"
    << "#if !defined(CUDA_VERSION) || CUDA_VERSION < 12000\n"
    << "#error \"" << N << ".h needs the driver API of CUDA 12 or newer (cuLibraryLoadData, "
    << "cuTensorMapEncodeTiled)\"\n#endif\n\n";
  h << "// ---- What a launch takes ----\n"
    << "inline constexpr int " << N << "_num_args = " << num_args << ";\n";
  if (io_known)
    h << "inline constexpr int " << N << "_num_inputs = " << o.num_inputs
      << "; // the first ones; the others are outputs\n";
  for (size_t a = 0; a < num_args; ++a) {
    const ParamSpec &s = first.args[a];
    h << "// " << ids[a] << ": " << s.dtype.str() << " " << shape_str(s.shape)
      << (s.strides.empty() ? "" : " strides " + shape_str(s.strides)) << "\n"
      << "inline constexpr int64_t " << N << "_" << ids[a] << "_shape[] = "
      << braces(s.shape.empty() ? std::vector<int64_t>{1} : s.shape) << ";\n"
      << "inline constexpr size_t " << N << "_" << ids[a] << "_bytes = " << s.bytes() << ";\n"
      << "inline constexpr size_t " << N << "_" << ids[a] << "_alignment = " << alignment[a]
      << ";\n";
  }
  h << "// Bytes of device memory " << N
    << "_launch_with_workspace needs (256-byte aligned); 0: none.\n"
    << "inline constexpr size_t " << N << "_workspace_bytes = " << workspace_bytes << ";\n\n";
  h << "struct " << N << "_arg_info {\n"
    << "  const char *name;\n  const char *dtype; // \"float16\", \"bfloat16\", \"float32\", ...\n"
    << "  unsigned element_bytes;\n  int rank;\n  int64_t shape[" << max_rank << "];\n"
    << "  size_t bytes;\n  size_t alignment;\n  bool input;\n};\n"
    << "inline constexpr " << N << "_arg_info " << N << "_args[] = {\n";
  for (size_t a = 0; a < num_args; ++a) {
    const ParamSpec &s = first.args[a];
    h << "    {\"" << ids[a] << "\", \"" << s.dtype.str() << "\", " << s.dtype.bytes() << ", "
      << s.shape.size() << ", " << braces(s.shape, max_rank) << ", " << s.bytes() << ", "
      << alignment[a] << ", " << (io_known && a < o.num_inputs ? "true" : "false") << "},\n";
  }
  h << "};\n\n";

  // ---- The cubins and their launch tables ---------------------------------------------------
  h << "namespace " << D << " {\n\n"
    << "struct TensorMap {\n"
    << "  int param; // the kernel parameter it views: an argument, then the workspaces\n"
    << "  bool im2col;\n  CUtensorMapDataType type;\n  cuuint32_t rank;\n"
    << "  cuuint64_t dims[5];\n  cuuint64_t strides[4]; // bytes\n"
    << "  cuuint32_t box[5];     // im2col: channels per pixel, pixels per column\n"
    << "  cuuint32_t elem_strides[5];\n  CUtensorMapSwizzle swizzle;\n"
    << "  int lower[2], upper[2]; // im2col corners (W, H)\n};\n"
    << "struct Kernel {\n  const char *name;\n  unsigned grid[3], block[3];\n"
    << "  unsigned shared_bytes; // dynamic\n  int first_map, num_maps;\n};\n"
    << "struct Variant {\n  const char *arch;\n  int major, minor;\n"
    << "  bool exact; // sm_XYa: compute capability X.Y alone\n"
    << "  const unsigned char *cubin;\n  size_t cubin_bytes;\n  const Kernel *kernels;\n"
    << "  int num_kernels;\n  const TensorMap *maps;\n  const size_t *alignment; // per argument\n"
    << "  int num_workspaces;\n  const size_t *workspace_offsets;\n  size_t workspace_bytes;\n"
    << "};\n\n"
    << "inline constexpr int num_variants = " << variants.size() << ";\n"
    << "inline constexpr int max_kernels = " << max_kernels << ";\n"
    << "inline constexpr int max_params = " << num_args + max_workspaces << ";\n"
    << "inline constexpr int max_maps = " << max_maps << ";\n"
    << "inline constexpr const char *archs = \"" << join(arch_names, ", ") << "\";\n\n";
  for (size_t vi = 0; vi < variants.size(); ++vi) {
    const ExportedVariant &v = variants[vi];
    const std::string i = std::to_string(vi);
    h << "// " << v.arch << "\n"
      << "alignas(64) inline constexpr unsigned char cubin_" << i << "[" << v.compiled.cubin.size()
      << "] = {";
    emit_bytes(h, v.compiled.cubin);
    h << "};\n";
    std::vector<std::string> maps;
    h << "inline constexpr Kernel kernels_" << i << "[] = {\n";
    for (const LoweredFunc &f : v.lowered.funcs) {
      const LaunchConfig &c = f.launch;
      h << "    {\"" << f.name << "\", " << braces(std::vector<int64_t>(c.grid.begin(), c.grid.end()))
        << ", " << braces(std::vector<int64_t>(c.block.begin(), c.block.end())) << ", "
        << c.dynamic_shared_bytes << ", " << maps.size() << ", " << f.tensor_maps.size()
        << "},\n";
      for (const TensorMapParam &m : f.tensor_maps) {
        const DataType t = size_t(m.arg) < num_args
                               ? v.params.args[size_t(m.arg)].dtype
                               : v.params.workspaces.at(size_t(m.arg) - num_args).dtype;
        TensorMapEncoding e = tensor_map_encoding(m, t);
        std::ostringstream s;
        s << "    {" << m.arg << ", " << (e.im2col ? "true" : "false") << ", "
          << tensor_map_type_name(e.type) << ", " << e.dims.size() << ", " << braces(e.dims, 5)
          << ", " << braces(e.strides, 4) << ", " << braces(e.box, 5) << ", "
          << braces(e.elem_strides, 5) << ", " << swizzle_name(e.swizzle) << ", "
          << braces(e.lower_corner, 2) << ", " << braces(e.upper_corner, 2) << "}, // "
          << m.var.name() << " of " << f.name;
        maps.push_back(s.str());
      }
    }
    h << "};\n";
    if (!maps.empty())
      h << "inline constexpr TensorMap maps_" << i << "[] = {\n" << join(maps, "\n") << "\n};\n";
    std::vector<int64_t> align;
    for (const ParamSpec &s : v.params.args)
      align.push_back(s.alignment);
    h << "inline constexpr size_t alignment_" << i << "[] = " << braces(align) << ";\n";
    if (!v.params.workspaces.empty())
      h << "inline constexpr size_t workspace_offsets_" << i << "[] = "
        << braces(v.params.workspace_offsets) << ";\n";
    h << "\n";
  }
  h << "inline constexpr Variant variants[num_variants] = {\n";
  for (size_t vi = 0; vi < variants.size(); ++vi) {
    const ExportedVariant &v = variants[vi];
    const std::string i = std::to_string(vi);
    ArchVersion ver = arch_version(v.arch);
    bool has_maps = false;
    for (const LoweredFunc &f : v.lowered.funcs)
      has_maps = has_maps || !f.tensor_maps.empty();
    h << "    {\"" << v.arch << "\", " << ver.major << ", " << ver.minor << ", "
      << (ver.exact ? "true" : "false") << ", cubin_" << i << ", sizeof(cubin_" << i
      << "), kernels_" << i << ", " << v.lowered.funcs.size() << ", "
      << (has_maps ? "maps_" + i : std::string("nullptr")) << ", alignment_" << i << ", "
      << v.params.workspaces.size() << ", "
      << (v.params.workspaces.empty() ? std::string("nullptr") : "workspace_offsets_" + i)
      << ", " << v.params.workspace_bytes << "},\n";
  }
  h << "};\n\n";

  // ---- The launch ---------------------------------------------------------------------------
  h << R"HDR(inline constexpr size_t error_bytes = 1024;
inline char *error_buffer() {
  thread_local char buffer[error_bytes] = "";
  return buffer;
}

inline const char *error_name(CUresult r) {
  const char *name = nullptr;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
    name = "an unknown CUresult";
  return name;
}

// Records a failed driver call and returns its result.
inline CUresult failed(CUresult r, const char *call) {
  std::snprintf(error_buffer(), error_bytes, "@N@: %s failed: %s", call, error_name(r));
  return r;
}

struct State {
  std::mutex mutex;
  CUlibrary library[num_variants] = {};
  CUkernel kernels[num_variants][max_kernels] = {};
  // Bit d: the kernel's dynamic shared memory limit is raised on device d (< 64).
  unsigned long long raised[num_variants][max_kernels] = {};
};

inline State &state() {
  static State s;
  return s;
}

// The variant that runs on compute capability major.minor, or -1.
inline int pick(int major, int minor) {
  int best = -1;
  for (int i = 0; i < num_variants; ++i) {
    const Variant &v = variants[i];
    if (v.major != major || (v.exact ? v.minor != minor : v.minor > minor))
      continue;
    if (best < 0 || v.minor > variants[best].minor ||
        (v.minor == variants[best].minor && v.exact))
      best = i;
  }
  return best;
}

// Variant i's kernels, its cubin loaded (once) and their shared memory limits raised on `device`.
inline CUresult prepare(int i, CUdevice device, const CUkernel **kernels) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const Variant &v = variants[i];
  if (!s.library[i]) {
    CUlibrary library = nullptr;
    CUresult r = cuLibraryLoadData(&library, v.cubin, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (r != CUDA_SUCCESS)
      return failed(r, "cuLibraryLoadData (loading the cubin)");
    for (int k = 0; k < v.num_kernels; ++k)
      if ((r = cuLibraryGetKernel(&s.kernels[i][k], library, v.kernels[k].name)) != CUDA_SUCCESS) {
        cuLibraryUnload(library);
        return failed(r, "cuLibraryGetKernel");
      }
    s.library[i] = library;
  }
  for (int k = 0; k < v.num_kernels; ++k) {
    // Above 48 KiB of shared memory a kernel must opt in, per device.
    unsigned long long bit = device < 64 ? 1ull << device : 0;
    if (v.kernels[k].shared_bytes == 0 || (s.raised[i][k] & bit))
      continue;
    CUresult r = cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      int(v.kernels[k].shared_bytes), s.kernels[i][k], device);
    if (r != CUDA_SUCCESS) {
      std::snprintf(error_buffer(), error_bytes,
                    "@N@: kernel '%s' needs %u bytes of dynamic shared memory, which the device "
                    "refused (cuKernelSetAttribute: %s)",
                    v.kernels[k].name, v.kernels[k].shared_bytes, error_name(r));
      return r;
    }
    s.raised[i][k] |= bit;
  }
  *kernels = s.kernels[i];
  return CUDA_SUCCESS;
}

inline CUresult launch(const CUdeviceptr *args, CUdeviceptr workspace, CUstream stream) {
  error_buffer()[0] = '\0';
  if (!args) {
    std::snprintf(error_buffer(), error_bytes, "@N@: no arguments (a null array)");
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUdevice device = 0;
  CUresult r = cuCtxGetDevice(&device);
  if (r != CUDA_SUCCESS) {
    std::snprintf(error_buffer(), error_bytes,
                  "@N@: no current CUDA context (cuCtxGetDevice: %s); make one current first "
                  "(cudaSetDevice, cuCtxSetCurrent)",
                  error_name(r));
    return r;
  }
  int major = 0, minor = 0;
  if ((r = cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device)) !=
          CUDA_SUCCESS ||
      (r = cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)) !=
          CUDA_SUCCESS)
    return failed(r, "cuDeviceGetAttribute (compute capability)");
  const int vi = pick(major, minor);
  if (vi < 0) {
    std::snprintf(error_buffer(), error_bytes,
                  "@N@: no cubin runs on this device (compute capability %d.%d); the header has "
                  "%s: export it again with --arch sm_%d%d",
                  major, minor, archs, major, minor);
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  const Variant &v = variants[vi];
  for (int a = 0; a < @N@_num_args; ++a) {
    if (!args[a] && @N@_args[a].bytes) {
      std::snprintf(error_buffer(), error_bytes, "@N@: argument %d ('%s') is a null pointer", a,
                    @N@_args[a].name);
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (args[a] % v.alignment[a]) {
      std::snprintf(error_buffer(), error_bytes,
                    "@N@: argument %d ('%s') at 0x%llx is not aligned to %zu bytes, as the "
                    "%s kernels need",
                    a, @N@_args[a].name, static_cast<unsigned long long>(args[a]),
                    v.alignment[a], v.arch);
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (workspace % 256) {
    std::snprintf(error_buffer(), error_bytes,
                  "@N@: the workspace at 0x%llx is not aligned to 256 bytes",
                  static_cast<unsigned long long>(workspace));
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUkernel *kernels = nullptr;
  if ((r = prepare(vi, device, &kernels)) != CUDA_SUCCESS)
    return r;
  bool own = false;
  if (v.workspace_bytes && !workspace) {
    if ((r = cuMemAllocAsync(&workspace, v.workspace_bytes, stream)) != CUDA_SUCCESS)
      return failed(r, "cuMemAllocAsync (the workspace)");
    // Zero: the flags between blocks (a tile split over the last wave) start lowered.
    if ((r = cuMemsetD8Async(workspace, 0, v.workspace_bytes, stream)) != CUDA_SUCCESS) {
      cuMemFreeAsync(workspace, stream);
      return failed(r, "cuMemsetD8Async (the workspace)");
    }
    own = true;
  }
  CUdeviceptr params[max_params];
  int num_params = 0;
  for (int a = 0; a < @N@_num_args; ++a)
    params[num_params++] = args[a];
  for (int w = 0; w < v.num_workspaces; ++w)
    params[num_params++] = workspace + v.workspace_offsets[w];
  for (int k = 0; k < v.num_kernels && r == CUDA_SUCCESS; ++k) {
    const Kernel &kernel = v.kernels[k];
    CUtensorMap maps[max_maps]; // the type's own alignment: 64 bytes before CUDA 13, 128 since
    void *kernel_params[max_params + max_maps];
    int n = 0;
    for (int p = 0; p < num_params; ++p)
      kernel_params[n++] = &params[p];
    for (int m = 0; m < kernel.num_maps && r == CUDA_SUCCESS; ++m) {
      const TensorMap &t = v.maps[kernel.first_map + m];
      void *address = reinterpret_cast<void *>(params[t.param]);
      r = t.im2col
              ? cuTensorMapEncodeIm2col(&maps[m], t.type, t.rank, address, t.dims, t.strides,
                                        t.lower, t.upper, t.box[0], t.box[1], t.elem_strides,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, t.swizzle,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
              : cuTensorMapEncodeTiled(&maps[m], t.type, t.rank, address, t.dims, t.strides,
                                       t.box, t.elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                       t.swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      if (r != CUDA_SUCCESS)
        failed(r, t.im2col ? "cuTensorMapEncodeIm2col" : "cuTensorMapEncodeTiled");
      kernel_params[n++] = &maps[m];
    }
    if (r != CUDA_SUCCESS)
      break;
    r = cuLaunchKernel(reinterpret_cast<CUfunction>(kernels[k]), kernel.grid[0], kernel.grid[1],
                       kernel.grid[2], kernel.block[0], kernel.block[1], kernel.block[2],
                       kernel.shared_bytes, stream, kernel_params, nullptr);
    if (r != CUDA_SUCCESS)
      std::snprintf(error_buffer(), error_bytes, "@N@: cuLaunchKernel of kernel '%s' failed: %s",
                    kernel.name, error_name(r));
  }
  if (own) {
    CUresult f = cuMemFreeAsync(workspace, stream);
    if (r == CUDA_SUCCESS && f != CUDA_SUCCESS)
      r = failed(f, "cuMemFreeAsync (the workspace)");
  }
  return r;
}

} // namespace @D@

/// Why the last launch on this thread failed ("" after a success).
inline const char *@N@_last_error() { return @D@::error_buffer(); }

/// args: @N@_num_args device pointers in the order above; workspace: 0 (the launch allocates
/// one if the cubin needs it) or at least @N@_workspace_bytes, 256-byte aligned.
inline CUresult @N@_launch_args(const CUdeviceptr *args, CUdeviceptr workspace, CUstream stream) {
  return @D@::launch(args, workspace, stream);
}

inline CUresult @N@_launch(@PARAMS@CUstream stream) {
  const CUdeviceptr args[] = {@ARGS@};
  return @D@::launch(args, 0, stream);
}

inline CUresult @N@_launch_with_workspace(@PARAMS@CUdeviceptr workspace, CUstream stream) {
  const CUdeviceptr args[] = {@ARGS@};
  return @D@::launch(args, workspace, stream);
}

/// Unloads the cubins loaded so far; no launch of @N@ may be running or start meanwhile.
inline void @N@_unload() {
  @D@::State &s = @D@::state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (int i = 0; i < @D@::num_variants; ++i) {
    if (s.library[i])
      cuLibraryUnload(s.library[i]);
    s.library[i] = nullptr;
    for (int k = 0; k < @D@::max_kernels; ++k)
      s.raised[i][k] = 0;
  }
}
)HDR";
  std::string out = h.str();
  auto replace_all = [&](const std::string &from, const std::string &to) {
    for (size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size()))
      out.replace(at, from.size(), to);
  };
  replace_all("@PARAMS@", params_decl);
  replace_all("@ARGS@", args_list);
  replace_all("@D@", D);
  replace_all("@N@", N);
  return out;
}

std::vector<std::string> write_export(const std::string &dir, const ExportOptions &options,
                                      const std::vector<ExportedVariant> &variants) {
  user_check(!dir.empty(), "export") << "no output directory given (-o DIR)";
  std::vector<OutputFile> files;
  auto add = [&](const std::string &file, const std::string &bytes) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, file);
    files.push_back({path.str().str(), bytes});
  };
  for (const ExportedVariant &v : variants)
    add(options.name + "." + v.arch + ".cubin", v.compiled.cubin);
  add(options.name + ".h", export_header(options, variants));
  write_files(files, "export", dir);
  std::vector<std::string> written;
  for (const OutputFile &f : files)
    written.push_back(f.path);
  return written;
}

} // namespace tessel
