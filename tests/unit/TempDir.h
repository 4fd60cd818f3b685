// A fresh private directory for a test, and work spread over forked processes.
#pragma once

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tessel::test {

/// A fresh directory (mode 0700, as tessel's private directories must be), removed with
/// everything in it at the end of the test.
class TempDir {
public:
  explicit TempDir(const char *prefix = "tessel-test") {
    std::error_code ec = llvm::sys::fs::createUniqueDirectory(prefix, path_);
    EXPECT_FALSE(ec) << ec.message();
    ::chmod(path_.c_str(), 0700);
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path_); }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  /// The directory, or `name` inside it.
  std::string path(const std::string &name = "") const {
    llvm::SmallString<128> p(path_);
    if (!name.empty())
      llvm::sys::path::append(p, name);
    return std::string(p.str());
  }
  /// The names of the entries directly inside.
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(path_, ec), end; !ec && it != end; it.increment(ec))
      out.push_back(std::string(llvm::sys::path::filename(it->path())));
    return out;
  }

private:
  llvm::SmallString<128> path_;
};

/// Runs `body(p)` in `processes` forked children at once (p = 0, 1, ...) and expects each to
/// return without throwing.
inline void expect_success_in_processes(int processes, const std::function<void(int)> &body) {
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        body(p);
      } catch (...) {
        status = 1;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

} // namespace tessel::test
