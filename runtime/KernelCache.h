// A cache of compiled kernels, in memory and on disk, so that a kernel built once is never
// handed to NVRTC again: not in this process, and not in the next one.
//
// The key is the SHA-1 of the source, the full NVRTC option list and NVRTC's version; a file
// <dir>/<key>.tkc holds the key, the cubin and NVRTC's log, and a checksum of them: a truncated,
// damaged or foreign file is skipped with a warning and rebuilt, never loaded. Files are written
// whole under a temporary name and renamed, so concurrent processes (MPI ranks on a shared file
// system) never see half a file. The directory is $TESSEL_CACHE_DIR, else $XDG_CACHE_HOME/tessel,
// else ~/.cache/tessel; TESSEL_CACHE_DIR=off keeps the cache in memory. It is created 0700; one
// that other users can write is refused (the cache then stays in memory) with a warning saying
// why: they could plant cubins that tessel would run.
#pragma once

#include "runtime/Nvrtc.h"

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tessel {

class KernelCache {
public:
  /// A cache that stores files under `disk_dir`; an empty `disk_dir` keeps it in memory only.
  explicit KernelCache(std::string disk_dir);

  /// The process-wide cache, in the directory default_dir() names.
  static KernelCache &global();
  /// The directory from the environment (see above); empty when TESSEL_CACHE_DIR=off.
  static std::string default_dir();

  /// The compiled kernel for `source` under `options`: from memory, else from disk, else from
  /// NVRTC (and then stored in both). Throws tessel::Error when NVRTC fails; failures are not
  /// cached.
  CompiledKernel compile(const std::string &source, const CompileOptions &options = {},
                         const std::string &program_name = "tessel_kernel.cu");

  /// The cache key of `source` compiled with exactly `nvrtc_options` (40 hex digits).
  static std::string key(const std::string &source, const std::vector<std::string> &nvrtc_options);

  const std::string &disk_dir() const { return disk_dir_; }
  /// Turns the disk level off or on (the directory stays as given).
  void set_disk_enabled(bool enabled) { disk_enabled_ = enabled; }
  bool disk_enabled() const { return disk_enabled_ && !disk_dir_.empty(); }
  /// Forgets what is in memory (files on disk stay).
  void clear_memory();

  struct Counters {
    int64_t memory_hits = 0, disk_hits = 0, misses = 0;
  };
  Counters counters() const;

private:
  std::string path_of(const std::string &key) const;
  bool load(const std::string &key, CompiledKernel &out) const;
  void store(const std::string &key, const CompiledKernel &k) const;

  bool disk_usable() const; ///< the directory is private (checked once)

  std::string disk_dir_;
  bool disk_enabled_ = true;
  mutable std::once_flag disk_checked_;
  mutable bool disk_refused_ = false;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, CompiledKernel> memory_;
  Counters counters_;
};

} // namespace tessel
