// The kernel cache (runtime/KernelCache.h). Needs no GPU: these run in CI.
#include "compiler/support/Error.h"
#include "runtime/KernelCache.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>

#include <gtest/gtest.h>

#include <cstdlib>

using namespace tessel;

namespace {

const char *kScale = R"(
extern "C" __global__ void scale(float *x, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] *= s;
}
)";

// A fresh directory, removed with everything in it at the end of the test.
class TempDir {
public:
  TempDir() {
    std::error_code ec = llvm::sys::fs::createUniqueDirectory("tessel-cache-test", path_);
    EXPECT_FALSE(ec) << ec.message();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path_); }
  std::string path() const { return std::string(path_.str()); }
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

const CompileOptions kSm90{"sm_90", {}};

} // namespace

TEST(RuntimeKernelCache, SecondCompileDoesNotCallNvrtc) {
  KernelCache cache("");
  int64_t before = nvrtc_invocation_count();
  CompiledKernel a = cache.compile(kScale, kSm90);
  EXPECT_EQ(nvrtc_invocation_count(), before + 1);
  CompiledKernel b = cache.compile(kScale, kSm90);
  EXPECT_EQ(nvrtc_invocation_count(), before + 1);
  EXPECT_EQ(a.cubin, b.cubin);
  EXPECT_EQ(cache.counters().memory_hits, 1);
  EXPECT_EQ(cache.counters().misses, 1);
}

TEST(RuntimeKernelCache, DiskRoundTripInTempDir) {
  TempDir dir;
  CompiledKernel first;
  {
    KernelCache cache(dir.path());
    first = cache.compile(kScale, kSm90);
  }
  ASSERT_NE(first.stats("scale"), nullptr) << "log of " << first.log.size() << " bytes:\n" << first.log;
  std::vector<std::string> files = dir.files();
  ASSERT_EQ(files.size(), 1u) << "one file, no temporaries left behind";
  EXPECT_EQ(files[0], KernelCache::key(kScale, nvrtc_options(kSm90)) + ".tkc");

  // A new cache (as in a new process) reads the file instead of calling NVRTC.
  KernelCache cache(dir.path());
  int64_t before = nvrtc_invocation_count();
  CompiledKernel again = cache.compile(kScale, kSm90);
  EXPECT_EQ(nvrtc_invocation_count(), before);
  EXPECT_EQ(cache.counters().disk_hits, 1);
  EXPECT_EQ(again.cubin, first.cubin);
  EXPECT_EQ(again.log, first.log);
  EXPECT_EQ(again.arch, "sm_90");
  ASSERT_NE(again.stats("scale"), nullptr) << again.log;
  EXPECT_EQ(again.stats("scale")->registers, first.stats("scale")->registers);
}

TEST(RuntimeKernelCache, DamagedFileIsAMissAndIsRewritten) {
  TempDir dir;
  std::string key = KernelCache::key(kScale, nvrtc_options(kSm90));
  std::string path = dir.path() + "/" + key + ".tkc";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << "TESSELK1 truncated";
  }
  KernelCache cache(dir.path());
  int64_t before = nvrtc_invocation_count();
  CompiledKernel k = cache.compile(kScale, kSm90);
  EXPECT_EQ(nvrtc_invocation_count(), before + 1);
  auto buf = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(bool(buf));
  EXPECT_GT((*buf)->getBufferSize(), k.cubin.size());
}

TEST(RuntimeKernelCache, DiskCanBeDisabled) {
  TempDir dir;
  KernelCache cache(dir.path());
  cache.set_disk_enabled(false);
  cache.compile(kScale, kSm90);
  EXPECT_TRUE(dir.files().empty());
}

TEST(RuntimeKernelCache, KeyDependsOnSourceAndOptions) {
  std::vector<std::string> o90 = nvrtc_options(kSm90);
  std::vector<std::string> o80 = nvrtc_options(CompileOptions{"sm_80", {}});
  std::vector<std::string> fast = nvrtc_options(CompileOptions{"sm_90", {"--use_fast_math"}});
  std::string k = KernelCache::key(kScale, o90);
  EXPECT_EQ(k.size(), 40u);
  EXPECT_EQ(k, KernelCache::key(kScale, o90));
  EXPECT_NE(k, KernelCache::key(kScale, o80));
  EXPECT_NE(k, KernelCache::key(kScale, fast));
  EXPECT_NE(k, KernelCache::key(std::string(kScale) + " ", o90));
  // Text moved between source and options must not collide.
  EXPECT_NE(KernelCache::key("ab", {"c"}), KernelCache::key("a", {"bc"}));

  KernelCache cache("");
  int64_t before = nvrtc_invocation_count();
  CompiledKernel a = cache.compile(kScale, kSm90);
  CompiledKernel b = cache.compile(kScale, CompileOptions{"sm_80", {}});
  EXPECT_EQ(nvrtc_invocation_count(), before + 2);
  EXPECT_EQ(b.arch, "sm_80");
}

TEST(RuntimeKernelCache, CompileErrorsAreNotCached) {
  KernelCache cache("");
  int64_t before = nvrtc_invocation_count();
  EXPECT_THROW(cache.compile("this is not CUDA", kSm90), Error);
  EXPECT_THROW(cache.compile("this is not CUDA", kSm90), Error);
  EXPECT_EQ(nvrtc_invocation_count(), before + 2);
}

TEST(RuntimeKernelCache, DefaultDirectoryFromEnvironment) {
  const char *old = std::getenv("TESSEL_CACHE_DIR");
  std::string saved = old ? old : "";
  const char *old_xdg = std::getenv("XDG_CACHE_HOME");
  std::string saved_xdg = old_xdg ? old_xdg : "";
  setenv("TESSEL_CACHE_DIR", "off", 1);
  EXPECT_EQ(KernelCache::default_dir(), "");
  setenv("TESSEL_CACHE_DIR", "/tmp/tessel-elsewhere", 1);
  EXPECT_EQ(KernelCache::default_dir(), "/tmp/tessel-elsewhere");
  unsetenv("TESSEL_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(KernelCache::default_dir(), "/tmp/xdg/tessel");
  unsetenv("XDG_CACHE_HOME");
  if (old_xdg)
    setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
  if (old)
    setenv("TESSEL_CACHE_DIR", saved.c_str(), 1);
  EXPECT_FALSE(KernelCache("").disk_enabled());
}
