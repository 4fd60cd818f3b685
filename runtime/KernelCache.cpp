#include "runtime/KernelCache.h"

#include "compiler/support/Error.h"
#include "compiler/support/Log.h"
#include "runtime/PrivateFiles.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/Endian.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/SHA1.h>
#include <llvm/Support/raw_ostream.h>

#include <atomic>
#include <optional>
#include <cstdlib>

namespace tessel {

namespace {

// File layout: the magic, then key, arch, log and cubin, each as a little-endian u64 size and
// bytes, then the SHA-1 of everything before it. A file whose checksum does not match (truncated
// or damaged), or whose key is not its name's (copied from elsewhere), is skipped with a warning
// and rebuilt. A new layout gets a new magic; files of an older one are rebuilt silently.
constexpr llvm::StringLiteral kMagic("TESSELK2");
constexpr size_t kChecksumBytes = 20;

void write_field(llvm::raw_ostream &os, llvm::StringRef s) {
  char size[8];
  llvm::support::endian::write64le(size, s.size());
  os.write(size, 8);
  os << s;
}

bool read_field(llvm::StringRef &in, std::string &out) {
  if (in.size() < 8)
    return false;
  uint64_t size = llvm::support::endian::read64le(in.data());
  in = in.drop_front(8);
  if (in.size() < size)
    return false;
  out = in.take_front(size).str();
  in = in.drop_front(size);
  return true;
}

// A cache that cannot write still works from memory; say so once rather than on every kernel.
void warn_unwritable(const std::string &what, const std::error_code &ec) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    llvm::errs() << "tessel: warning: kernel cache not written (" << what << ": " << ec.message()
                 << "); set TESSEL_CACHE_DIR to a writable directory or to 'off'\n";
}

void warn_skipped(const std::string &file, const std::string &why) {
  log_message(LogLevel::Warning, "kernel cache entry " + file + " skipped (" + why +
                                     "); the kernel is compiled again and the entry rewritten");
}

} // namespace

KernelCache::KernelCache(std::string disk_dir) : disk_dir_(std::move(disk_dir)) {}

std::string KernelCache::default_dir() {
  if (const char *env = std::getenv("TESSEL_CACHE_DIR"); env && *env) {
    if (llvm::StringRef(env) == "off")
      return "";
    return env;
  }
  llvm::SmallString<256> dir;
  if (!llvm::sys::path::cache_directory(dir))
    return "";
  llvm::sys::path::append(dir, "tessel");
  return std::string(dir.str());
}

KernelCache &KernelCache::global() {
  static KernelCache cache(default_dir());
  return cache;
}

std::string KernelCache::key(const std::string &source, const std::vector<std::string> &options) {
  llvm::SHA1 sha;
  // Each part is followed by a NUL so that moving text between parts changes the key.
  auto add = [&](llvm::StringRef s) {
    sha.update(s);
    sha.update(llvm::StringRef("\0", 1));
  };
  add(source);
  for (const std::string &o : options)
    add(o);
  add("nvrtc " + std::to_string(nvrtc_version()));
  return llvm::toHex(sha.final(), /*LowerCase=*/true);
}

std::string KernelCache::path_of(const std::string &key) const {
  llvm::SmallString<256> p(disk_dir_);
  llvm::sys::path::append(p, key + ".tkc");
  return std::string(p.str());
}

bool KernelCache::disk_usable() const {
  std::call_once(disk_checked_, [this] {
    std::string why = prepare_private_directory(disk_dir_);
    if (why.empty())
      return;
    disk_refused_ = true;
    log_message(LogLevel::Warning, "kernel cache: " + why +
                                       "; compiled kernels are kept in memory only (or set "
                                       "TESSEL_CACHE_DIR to a private directory, or 'off')");
  });
  return !disk_refused_;
}

bool KernelCache::load(const std::string &key, CompiledKernel &out) const {
  const std::string file = path_of(key);
  std::string refused;
  std::optional<std::string> contents = read_private_file(file, refused);
  if (!contents) {
    if (!refused.empty()) // another user's, a FIFO, a device: never loaded
      warn_skipped(file, "not loaded: " + refused);
    return false; // else not cached
  }
  llvm::StringRef all = *contents;
  if (!all.startswith(kMagic))
    return false; // another layout (an older tessel): rebuilt and replaced without a word
  if (all.size() < kMagic.size() + kChecksumBytes) {
    warn_skipped(file, "truncated");
    return false;
  }
  llvm::StringRef body = all.drop_back(kChecksumBytes);
  auto digest = llvm::SHA1::hash(llvm::arrayRefFromStringRef(body));
  if (llvm::StringRef(reinterpret_cast<const char *>(digest.data()), digest.size()) !=
      all.take_back(kChecksumBytes)) {
    warn_skipped(file, "checksum mismatch: truncated or damaged");
    return false;
  }
  llvm::StringRef in = body.drop_front(kMagic.size());
  CompiledKernel k;
  std::string stored_key;
  if (!read_field(in, stored_key) || !read_field(in, k.arch) || !read_field(in, k.log) ||
      !read_field(in, k.cubin) || !in.empty() || k.cubin.empty()) {
    warn_skipped(file, "malformed");
    return false;
  }
  if (stored_key != key) {
    warn_skipped(file, "it holds the kernel of key " + stored_key + ", not its name's");
    return false;
  }
  k.kernels = parse_ptxas_report(k.log);
  out = std::move(k);
  return true;
}

void KernelCache::store(const std::string &key, const CompiledKernel &k) const {
  // Write a unique temporary, then rename it over the final name: readers (other processes
  // too) see either no file or a whole one, and of concurrent writers of one key one wins whole.
  int fd = -1;
  llvm::SmallString<256> tmp;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(path_of(key) + ".%%%%%%%%.tmp", fd, tmp,
                                                           llvm::sys::fs::OF_None, 0600))
    return warn_unwritable(path_of(key), ec);
  {
    std::string body;
    llvm::raw_string_ostream bs(body);
    bs << kMagic;
    write_field(bs, key);
    write_field(bs, k.arch);
    write_field(bs, k.log);
    write_field(bs, k.cubin);
    bs.flush();
    auto digest = llvm::SHA1::hash(llvm::arrayRefFromStringRef(body));
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << body;
    os.write(reinterpret_cast<const char *>(digest.data()), digest.size());
    os.close();
    if (os.has_error()) {
      std::error_code ec = os.error();
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return warn_unwritable(std::string(tmp.str()), ec);
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path_of(key))) {
    llvm::sys::fs::remove(tmp);
    warn_unwritable(path_of(key), ec);
  }
}

CompiledKernel KernelCache::compile(const std::string &source, const CompileOptions &options,
                                    const std::string &program_name) {
  std::vector<std::string> opts = nvrtc_options(options);
  std::string k = key(source, opts);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = memory_.find(k); it != memory_.end()) {
      ++counters_.memory_hits;
      return it->second;
    }
  }
  // Disk reads and NVRTC run outside the lock so that independent kernels build in parallel.
  CompiledKernel result;
  const bool disk = disk_enabled() && disk_usable();
  bool from_disk = disk && load(k, result);
  if (!from_disk) {
    result = nvrtc_compile(source, opts, program_name);
    if (disk)
      store(k, result);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++(from_disk ? counters_.disk_hits : counters_.misses);
  memory_.emplace(k, result);
  return result;
}

void KernelCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.clear();
}

KernelCache::Counters KernelCache::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

} // namespace tessel
