// Disassembling a cubin with cuobjdump, for tests that check which instructions were emitted.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

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

} // namespace tessel::test
