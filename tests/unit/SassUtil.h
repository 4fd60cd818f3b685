// Disassembling a cubin with cuobjdump, for tests that check which instructions were emitted.
#pragma once

#include "runtime/Build.h"
#include "runtime/Nvrtc.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace tessel::test {

/// cuobjdump from $CUOBJDUMP, the CUDA toolkit or PATH (.ci/run installs it from PyPI with
/// nvdisasm, which `cuobjdump -sass` needs); empty when there is none.
inline std::string cuobjdump_path() {
  if (const char *env = std::getenv("CUOBJDUMP"))
    return env;
  for (const char *p : {"/usr/local/cuda/bin/cuobjdump", "/usr/bin/cuobjdump"})
    if (std::filesystem::exists(p))
      return p;
  return std::system("command -v cuobjdump > /dev/null 2>&1") == 0 ? "cuobjdump" : "";
}

/// NVRTC for sm_90 (sm_90a where `m` uses wgmma: target_arch) of `source`, the CUDA of `m`.
inline CompiledKernel compile_for_sm90(const LoweredModule &m, const std::string &source,
                                       const std::string &file) {
  CompileOptions o;
  o.arch = target_arch(m, "sm_90");
  return nvrtc_compile(source, nvrtc_options(o), file);
}

/// `cuobjdump -sass` of `cubin` (with its error output), or nothing without cuobjdump.
inline std::optional<std::string> sass_of(const std::string &cubin, const std::string &tag) {
  std::string tool = cuobjdump_path();
  if (tool.empty())
    return std::nullopt;
  auto path = std::filesystem::temp_directory_path() /
              ("tessel_" + tag + "_" + std::to_string(::getpid()) + ".cubin");
  std::ofstream(path, std::ios::binary).write(cubin.data(), std::streamsize(cubin.size()));
  std::string out;
  if (FILE *f = popen((tool + " -sass " + path.string() + " 2>&1").c_str(), "r")) {
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, f))
      out.append(buf, n);
    pclose(f);
  }
  std::filesystem::remove(path);
  return out;
}

/// Compiles `source` with NVRTC for sm_80 and for sm_90 (each must give a cubin) and, when
/// cuobjdump is there, checks that each one's SASS has every string of `has` and none of
/// `lacks`. Returns false when no SASS could be read, so that the caller skips, saying what went
/// unchecked.
inline bool compiles_for_sm80_and_sm90(const std::string &source, const std::string &tag,
                                       const std::vector<std::string> &has,
                                       const std::vector<std::string> &lacks = {}) {
  bool disassembled = false;
  for (const char *arch : {"sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    CompileOptions o;
    o.arch = arch;
    CompiledKernel k = nvrtc_compile(source, nvrtc_options(o), tag + ".cu");
    EXPECT_FALSE(k.cubin.empty());
    std::optional<std::string> sass = sass_of(k.cubin, tag + "_" + arch);
    if (!sass)
      continue;
    disassembled = true;
    for (const std::string &insn : has)
      EXPECT_NE(sass->find(insn), std::string::npos)
          << insn << " missing:\n" << sass->substr(0, 4000);
    for (const std::string &insn : lacks)
      EXPECT_EQ(sass->find(insn), std::string::npos)
          << insn << " present:\n" << sass->substr(0, 4000);
  }
  return disassembled;
}

inline constexpr const char *kNoCuobjdump =
    "NVRTC compiled for sm_80 and sm_90, but there is no cuobjdump (PATH, /usr/local/cuda/bin, "
    "$CUOBJDUMP) to check the SASS";

} // namespace tessel::test
