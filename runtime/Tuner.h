// `tessel tune`: a registered schedule's knobs searched on the GPU (or checked on the CPU
// executor), every candidate recorded in the tuning database (runtime/TuningDb.h).
//
//   TuneOptions o;
//   o.schedule = "gemm_tc";
//   o.shape = {{"M", 4096}, {"N", 4096}, {"K", 4096}};
//   TuneSummary s = tune(o);   // prints progress; appends one record per candidate
//
// The candidates are the cartesian product of the entry's knob values (ScheduleEntry::knobs)
// with the knobs the user fixed left out, the schedule's own choice (every knob at its default)
// first. On the GPU every candidate is lowered, compiled with NVRTC on all cores at once, run
// on the same random inputs and checked against the float64 reference at sampled outputs, then
// timed (median of CUDA-event measurements). In CPU mode each is run on the CPU executor
// against the full reference instead, and the executor's time recorded (arch "cpu"): a check
// of the search and of the database, not a measurement of the GPU.
//
// Candidates already in the database for the same schedule, problem, type, device and arch are
// skipped, so an interrupted search (SIGINT, --time-budget) resumes where it stopped. Across
// processes (MPI ranks) each takes every ranks-th candidate; one of them writes the database.
#pragma once

#include "runtime/Timer.h"
#include "runtime/TuningDb.h"

#include <llvm/Support/raw_ostream.h>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

struct TuneOptions {
  std::string schedule;
  /// Shape parameters given by the user: the problem's, and any knob fixed by hand (not tuned).
  ShapeParams shape;
  /// The input type; empty: the schedule's first.
  std::optional<DataType> dtype;
  /// Check candidates on the CPU executor (give small shapes) instead of timing them on the GPU.
  bool cpu = false;
  /// At most this many candidates (0: all); the schedule's own choice is always among them.
  int64_t trials = 0;
  /// No new candidate is started after this many seconds (0: no limit).
  double time_budget_s = 0;
  /// The database; empty: TuningDb::default_path().
  std::string db_path;
  /// Outputs compared with the reference per candidate on the GPU (the reference of a large
  /// output in full would take the CPU minutes per shape).
  size_t samples = 4096;
  TimeOptions timing{.number = 10, .repeat = 20, .warmup = 3};
  /// Threads compiling with NVRTC; 0: every core.
  int jobs = 0;
  /// This process takes the candidates i with i % ranks == rank (MPI ranks).
  int rank = 0, ranks = 1;
  /// Append each record to the database as it is measured (else only return it: the MPI rank
  /// that writes gathers the others' records).
  bool write_db = true;
  /// Candidates (indices into tuning_candidates()) to skip as already measured; empty: read
  /// from the database.
  std::optional<std::vector<bool>> done;
  /// Progress lines; null: none.
  llvm::raw_ostream *progress = &llvm::errs();
  /// Set (e.g. by a SIGINT handler) to stop before the next candidate.
  const std::atomic<bool> *stop = nullptr;
};

struct TuneSummary {
  size_t total = 0;   ///< candidates
  size_t resumed = 0; ///< skipped: already in the database
  size_t mine = 0;    ///< this process's share, not already measured
  size_t measured = 0, failed = 0;
  bool interrupted = false, out_of_time = false;
  std::vector<TuningRecord> records; ///< this process's new records
};

/// The candidates for `entry` with the parameters in `fixed` held: the default configuration
/// first, then the knob grid; with `trials` > 0, that many (the default and an evenly spread
/// subset of the grid, the same on every run and every rank).
std::vector<ShapeParams> tuning_candidates(const ScheduleEntry &entry, const ShapeParams &fixed,
                                           int64_t trials = 0);

/// The device and arch records of this run carry: the GPU's, or "cpu-executor" / "cpu".
void describe_target(TuningRecord &r, bool cpu);

/// Which of `candidates` the database already has a record of (any outcome) for this target.
std::vector<bool> measured_candidates(const TuningDb &db, const ScheduleEntry &entry,
                                      const std::vector<ShapeParams> &candidates,
                                      const std::string &dtype, bool cpu);

TuneSummary tune(const TuneOptions &options);

} // namespace tessel
