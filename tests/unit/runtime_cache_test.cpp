// The kernel cache (runtime/KernelCache.h). Needs no GPU: these run in CI.
#include "TempDir.h"

#include "compiler/support/Error.h"
#include "runtime/KernelCache.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>

#include <gtest/gtest.h>

#include <cstdlib>

#include <sys/stat.h>
#include <unistd.h>

using namespace tessel;
using tessel::test::expect_success_in_processes;
using tessel::test::TempDir;

namespace {

const char *kScale = R"(
extern "C" __global__ void scale(float *x, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] *= s;
}
)";

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

namespace {

const char *kOffset = R"(
extern "C" __global__ void offset(float *x, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] += s;
}
)";

std::string read_file(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  return buf ? (*buf)->getBuffer().str() : "";
}

void write_file(const std::string &path, const std::string &bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  os << bytes;
}

// Whether a fresh cache over `dir` finds the kernel on disk (no NVRTC call).
bool disk_hit(const std::string &dir, const char *source) {
  KernelCache cache(dir);
  int64_t before = nvrtc_invocation_count();
  cache.compile(source, kSm90);
  return nvrtc_invocation_count() == before;
}

} // namespace

// A damaged entry (a byte of the cubin flipped, or the file cut short) fails its checksum: it is
// compiled again, never loaded, and the rewritten entry is good.
TEST(RuntimeKernelCache, EntryFailingItsChecksumIsRebuilt) {
  TempDir dir;
  std::string path = dir.path() + "/" + KernelCache::key(kScale, nvrtc_options(kSm90)) + ".tkc";
  KernelCache(dir.path()).compile(kScale, kSm90);
  const std::string good = read_file(path);
  ASSERT_GT(good.size(), 100u);

  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x20;
  write_file(path, flipped);
  EXPECT_FALSE(disk_hit(dir.path(), kScale));
  EXPECT_TRUE(disk_hit(dir.path(), kScale)) << "rewritten whole";

  write_file(path, good.substr(0, good.size() - 7));
  EXPECT_FALSE(disk_hit(dir.path(), kScale));
  EXPECT_TRUE(disk_hit(dir.path(), kScale));
}

// An entry copied under another kernel's name (a foreign file) is not that kernel's cubin.
TEST(RuntimeKernelCache, EntryUnderAnotherKeysNameIsNotLoaded) {
  TempDir dir;
  KernelCache(dir.path()).compile(kScale, kSm90);
  std::string scale = dir.path() + "/" + KernelCache::key(kScale, nvrtc_options(kSm90)) + ".tkc";
  std::string offset = dir.path() + "/" + KernelCache::key(kOffset, nvrtc_options(kSm90)) + ".tkc";
  write_file(offset, read_file(scale));
  KernelCache cache(dir.path());
  CompiledKernel k = cache.compile(kOffset, kSm90);
  EXPECT_EQ(cache.counters().misses, 1);
  EXPECT_NE(k.stats("offset"), nullptr) << "the offset kernel, not the planted scale one";
}

TEST(RuntimeKernelCache, DirectoryIsCreatedPrivateAndAWritableOneIsRefused) {
  TempDir dir;
  std::string sub = dir.path() + "/kernels";
  KernelCache(sub).compile(kScale, kSm90);
  struct stat st;
  ASSERT_EQ(::stat(sub.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  std::string open = dir.path() + "/open";
  ASSERT_FALSE(llvm::sys::fs::create_directory(open));
  ::chmod(open.c_str(), 0777);
  KernelCache cache(open);
  int64_t before = nvrtc_invocation_count();
  cache.compile(kScale, kSm90); // still compiles, in memory only
  EXPECT_EQ(nvrtc_invocation_count(), before + 1);
  std::error_code ec;
  EXPECT_EQ(llvm::sys::fs::directory_iterator(open, ec), llvm::sys::fs::directory_iterator())
      << "nothing written to a directory other users can write";
}

// Processes compiling the same kernels into one directory at once (MPI ranks on a shared file
// system): every entry ends up whole and loadable, no temporaries are left.
TEST(RuntimeKernelCache, ConcurrentProcessesLeaveWholeEntries) {
  TempDir dir;
  constexpr int kProcesses = 4;
  expect_success_in_processes(kProcesses, [&](int p) {
    KernelCache cache(dir.path());
    cache.compile(p % 2 ? kScale : kOffset, kSm90);
    cache.compile(p % 2 ? kOffset : kScale, kSm90);
  });
  std::vector<std::string> files = dir.files();
  EXPECT_EQ(files.size(), 2u) << "two entries, no temporaries";
  EXPECT_TRUE(disk_hit(dir.path(), kScale));
  EXPECT_TRUE(disk_hit(dir.path(), kOffset));
}

// Only a regular file of the current user that no one else can write is loaded (issue 24):
// in a sticky directory like /tmp any user can create the entry of the next kernel, with a
// valid checksum, and tessel ran its cubin; a FIFO hung the read and /dev/zero fed it forever.
// Each is compiled again instead, and the entry rewritten as the user's own.
TEST(RuntimeKernelCache, EntryNotAPrivateRegularFileOfTheUserIsNotLoaded) {
  TempDir dir;
  const std::string path = dir.path() + "/" + KernelCache::key(kScale, nvrtc_options(kSm90)) + ".tkc";
  KernelCache(dir.path()).compile(kScale, kSm90);
  ASSERT_TRUE(disk_hit(dir.path(), kScale));

  ASSERT_EQ(::chmod(path.c_str(), 0620), 0);
  EXPECT_FALSE(disk_hit(dir.path(), kScale)) << "writable by the group";
  EXPECT_TRUE(disk_hit(dir.path(), kScale)) << "rewritten private";

  if (::geteuid() == 0) { // chown needs root (CI runs as root)
    ASSERT_EQ(::chown(path.c_str(), 4242, 4242), 0);
    EXPECT_FALSE(disk_hit(dir.path(), kScale)) << "another user's entry";
    EXPECT_TRUE(disk_hit(dir.path(), kScale));
  }

  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_FALSE(disk_hit(dir.path(), kScale)) << "a FIFO: neither read nor waited on";
  EXPECT_TRUE(disk_hit(dir.path(), kScale)) << "replaced by a regular file";

  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::symlink("/dev/zero", path.c_str()), 0);
  EXPECT_FALSE(disk_hit(dir.path(), kScale)) << "a link to a device";
  EXPECT_TRUE(disk_hit(dir.path(), kScale));
}
