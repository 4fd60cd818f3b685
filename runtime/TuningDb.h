// The tuning database: what `tessel tune` measured, kept across runs and processes.
//
// A JSON Lines file, one record per line (llvm::json): the schedule, the problem's shape
// parameters, the input type, where it ran (GPU name, SM arch, driver and CUDA versions, tessel's
// version), the knob values tried, the median time and spread, and the check's outcome. Each
// line carries a checksum of the rest ("sum"): a truncated, corrupt or foreign line is skipped
// with a warning, never used. Appends take an exclusive lock on the file and write one whole
// line, so several processes (or MPI ranks on a shared file system) can append at once.
//
// The file is $TESSEL_TUNING_DB, else $XDG_CACHE_HOME/tessel/tuning.jsonl, else
// ~/.cache/tessel/tuning.jsonl; TESSEL_TUNING_DB=off reads no file (the shipped records only).
// The directory is created 0700; a directory that other users can write, or a file that is not
// a regular one of the current user's, private, is refused (others could plant records), with
// a message saying so (runtime/PrivateFiles.h).
#pragma once

#include "schedules/Registry.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

struct TuningRecord {
  std::string schedule;
  ShapeParams shape;  ///< the problem's parameters (the entry's shape without its knobs)
  std::string dtype;  ///< the input type, as DataType::str()
  ShapeParams config; ///< the knob values
  std::string device; ///< the GPU's name, or "cpu-executor"
  std::string arch;   ///< "sm_90", or "cpu"
  int driver = 0, cuda = 0;
  std::string tessel_version;
  double median_ms = NAN, min_ms = NAN, max_ms = NAN;
  std::string check; ///< "ok", or what went wrong ("mismatch: ...", "refused: ...")
  /// Where the record was read from ("FILE:LINE", or shipped with tessel); not stored.
  std::string origin;

  bool ok() const { return check == "ok"; }
  /// "BM=128,BN=256,S=4".
  std::string config_str() const;
};

class TuningDb {
public:
  /// The database at `path`; empty: default_path().
  explicit TuningDb(std::string path = "");
  static std::string default_path();
  const std::string &path() const { return path_; }

  /// Every valid record, in file order; each skipped line is described in `warnings` (or on
  /// standard error when it is null).
  std::vector<TuningRecord> load(std::vector<std::string> *warnings = nullptr) const;
  /// Appends `r` as one line (creating the file and its directory), on a line of its own.
  void append(const TuningRecord &r) const;
  /// tessel::Error unless append() can write here (what it checks before writing); creates the
  /// file and its directory. For a search to fail before it measures anything.
  void check_writable() const;
  /// The fastest record that checked ok for this schedule, shape, type and arch: the
  /// database's, else (with `shipped`) one of shipped_tuning_records().
  std::optional<TuningRecord> best(const std::string &schedule, const ShapeParams &shape,
                                   const std::string &dtype, const std::string &arch,
                                   bool shipped = true) const;

  /// One record as its line (with its checksum), and back (nothing when the line is not a
  /// valid record: bad JSON, a missing field, a checksum that does not match).
  static std::string to_line(const TuningRecord &r);
  static std::optional<TuningRecord> from_line(const std::string &line, std::string *why);

private:
  std::string path_;
};

/// The records shipped with tessel (runtime/TuningDefaults.cpp): measured winners, used where
/// the user's database has none for the same schedule, shape, type and arch.
const std::vector<TuningRecord> &shipped_tuning_records();

/// The version of tessel the records name.
const char *tessel_version();

/// `shape` with the knobs of the best record for it (on `arch`) filled in where `shape` leaves
/// them at the entry's defaults; says which record at TESSEL_LOG_LEVEL=info. Without a record,
/// `shape` unchanged (the schedule's own heuristics).
ShapeParams apply_tuning(const ScheduleEntry &entry, const ShapeParams &shape,
                         const ShapeParams &explicit_params, DataType dtype,
                         const std::string &arch, const TuningDb &db = TuningDb());

/// A registered schedule built at `overrides` (resolve_shape), with the knobs of the best
/// record for `arch` filled in where `overrides` leaves them (apply_tuning); empty `arch` (no
/// GPU to key on): the schedule's own choices. What `tessel run` and `tessel_bench` build.
/// `shape_used`, when given, receives the parameters it was built with.
ScheduledProgram build_tuned(const ScheduleEntry &entry, const ShapeParams &overrides,
                             DataType dtype, const std::string &arch,
                             ShapeParams *shape_used = nullptr, const TuningDb &db = TuningDb());

/// The arch records are looked up under: the GPU's ("sm_90"), or empty without one.
std::string tuning_arch();

} // namespace tessel
