// The tuning database (runtime/TuningDb.h) and the search that fills it (runtime/Tuner.h), in
// its CPU-executor mode. No GPU needed: these run in CI.
#include "TempDir.h"
#include "TestUtil.h"

#include "compiler/support/Error.h"
#include "runtime/Device.h"
#include "runtime/Tuner.h"
#include "runtime/TuningDb.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>

using namespace tessel;
using tessel::test::expect_error;
using tessel::test::expect_success_in_processes;
using tessel::test::TempDir;

namespace {

// gemm_wgmma at 64 x 128 x 64, `trials` candidates checked on the CPU executor, into
// t.jsonl in `dir`: the kernel's form fixed (P, PP, CL), the grid over its tiles.
TuneOptions small_cpu_tune(const TempDir &dir, int64_t trials) {
  TuneOptions o;
  o.schedule = "gemm_wgmma";
  o.shape = {{"M", 64}, {"N", 128}, {"K", 64}, {"P", 0}, {"PP", 0}, {"CL", 0}};
  o.cpu = true;
  o.trials = trials;
  o.db_path = dir.path("t.jsonl");
  return o;
}

TuningRecord record(const std::string &config_bm, double ms, const std::string &check = "ok",
                    const std::string &arch = "sm_90") {
  TuningRecord r;
  r.schedule = "gemm_wgmma";
  r.shape = {{"M", 4096}, {"N", 4096}, {"K", 4096}};
  r.dtype = "float16";
  r.config = {{"BM", std::stoll(config_bm)}, {"BN", 256}};
  r.device = "NVIDIA H100 80GB HBM3";
  r.arch = arch;
  r.driver = 13000;
  r.cuda = 13000;
  r.tessel_version = tessel_version();
  r.median_ms = ms;
  r.min_ms = ms * 0.99;
  r.max_ms = ms * 1.02;
  r.check = check;
  return r;
}

} // namespace

TEST(TuningDb, RecordRoundTripsThroughItsLine) {
  TuningRecord r = record("128", 0.4123);
  r.max_ms = NAN; // a missing measurement is null in JSON, NaN again when read
  std::string line = TuningDb::to_line(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  std::string why;
  std::optional<TuningRecord> back = TuningDb::from_line(line, &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->schedule, r.schedule);
  EXPECT_EQ(back->shape, r.shape);
  EXPECT_EQ(back->config, r.config);
  EXPECT_EQ(back->device, r.device);
  EXPECT_EQ(back->driver, 13000);
  EXPECT_DOUBLE_EQ(back->median_ms, 0.4123);
  EXPECT_TRUE(std::isnan(back->max_ms));
  EXPECT_EQ(back->config_str(), "BM=128,BN=256");
}

TEST(TuningDb, DamagedTruncatedAndForeignLinesAreSkippedWithAWarning) {
  TempDir dir;
  TuningDb db(dir.path("t.jsonl"));
  db.append(record("128", 0.5));
  std::string good = TuningDb::to_line(record("64", 0.3));
  std::string edited = good;
  edited.replace(edited.find("0.29999"), 3, "0.1"); // a faster time typed in by hand
  {
    std::ofstream f(db.path(), std::ios::app);
    f << good.substr(0, good.size() / 2) << "\n";         // truncated (a crash mid-write)
    f << edited << "\n";                                  // checksum no longer matches
    f << R"({"schedule":"gemm_wgmma","median_ms":0.01})" << "\n"; // no checksum: foreign
    f << "not json at all\n";
    f << good << "\n";
  }
  std::vector<std::string> warnings;
  std::vector<TuningRecord> rs = db.load(&warnings);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_DOUBLE_EQ(rs[0].median_ms, 0.5);
  EXPECT_DOUBLE_EQ(rs[1].median_ms, 0.3);
  EXPECT_EQ(rs[1].origin, db.path() + ":6");
  ASSERT_EQ(warnings.size(), 4u);
  EXPECT_NE(warnings[0].find(":2: skipped: not JSON"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find(":3: skipped: checksum mismatch"), std::string::npos) << warnings[1];
  EXPECT_NE(warnings[2].find(":4: skipped: no checksum"), std::string::npos) << warnings[2];
  EXPECT_NE(warnings[3].find(":5: skipped: not JSON"), std::string::npos) << warnings[3];
  // The hand-edited 0.1 ms is not the best: it was never loaded.
  EXPECT_DOUBLE_EQ(db.best("gemm_wgmma", record("1", 1).shape, "float16", "sm_90")->median_ms, 0.3);
}

TEST(TuningDb, ConcurrentProcessesAppendWholeLines) {
  TempDir dir;
  const std::string path = dir.path("shared.jsonl");
  constexpr int kProcesses = 6, kRecords = 40;
  expect_success_in_processes(kProcesses, [&](int p) {
    TuningDb db(path);
    for (int i = 0; i < kRecords; ++i) {
      TuningRecord r = record(std::to_string(p * 1000 + i), 1.0 + i);
      r.check = std::string(1000 + 37 * i, 'x'); // long lines: more than one page per write
      db.append(r);
    }
  });
  std::vector<std::string> warnings;
  std::vector<TuningRecord> rs = TuningDb(path).load(&warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  EXPECT_EQ(rs.size(), size_t(kProcesses * kRecords));
  std::set<int64_t> seen;
  for (const TuningRecord &r : rs)
    seen.insert(r.config.at("BM"));
  EXPECT_EQ(seen.size(), size_t(kProcesses * kRecords)) << "every record once";
}

TEST(TuningDb, DirectoryIsCreatedPrivateAndAWritableOneIsRefused) {
  TempDir dir;
  TuningDb db(dir.path("a/b/tuning.jsonl"));
  db.append(record("128", 0.5));
  struct stat st;
  ASSERT_EQ(::stat(dir.path("a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(db.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u) << "the file is private too";

  ::chmod(dir.path("a/b").c_str(), 0777);
  // Appending in a directory anyone can write is refused.
  expect_error([&] { db.append(record("64", 0.4)); }, {"can be written by other users", "chmod 700"});
  std::vector<std::string> warnings;
  EXPECT_TRUE(db.load(&warnings).empty()) << "records that others could have planted are not read";
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("not reading"), std::string::npos) << warnings[0];
  ::chmod(dir.path("a/b").c_str(), 0700);
  EXPECT_EQ(db.load().size(), 1u);
}

TEST(TuningDb, BestIsTheFastestCheckedRecordForTheArchThenAShippedOne) {
  TempDir dir;
  TuningDb db(dir.path("t.jsonl"));
  db.append(record("128", 0.50));
  db.append(record("64", 0.20, "mismatch: 12 of 4096 elements outside"));
  db.append(record("256", 0.45));
  db.append(record("32", 0.10, "ok", "sm_80"));
  std::optional<TuningRecord> b = db.best("gemm_wgmma", record("1", 1).shape, "float16", "sm_90");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->config.at("BM"), 256);
  EXPECT_FALSE(db.best("gemm_wgmma", {{"M", 1}}, "float16", "sm_90"));
  EXPECT_FALSE(db.best("gemm_wgmma", record("1", 1).shape, "bfloat16", "sm_90"));

  // Nothing of the user's for gemm_mma at 4096^3 on sm_90: the record shipped with tessel.
  ShapeParams s4096 = {{"M", 4096}, {"N", 4096}, {"K", 4096}};
  std::optional<TuningRecord> shipped = db.best("gemm_mma", s4096, "float16", "sm_90");
  ASSERT_TRUE(shipped);
  EXPECT_NE(shipped->origin.find("shipped"), std::string::npos);
  EXPECT_FALSE(db.best("gemm_mma", s4096, "float16", "sm_90", /*shipped=*/false));
}

TEST(TuningDb, ApplyTuningFillsOnlyTheKnobsTheUserLeft) {
  TempDir dir;
  TuningDb db(dir.path("t.jsonl"));
  const ScheduleEntry &e = find_schedule("gemm_wgmma");
  ShapeParams shape = resolve_shape(e, {{"M", 256}, {"N", 256}, {"K", 128}});
  TuningRecord r;
  r.schedule = e.name;
  r.shape = problem_shape(e, shape);
  r.dtype = "float16";
  r.config = {{"BM", 64}, {"BN", 128}, {"S", 3}, {"G", 16}};
  r.device = "cpu-executor";
  r.arch = "cpu";
  r.median_ms = 1;
  r.check = "ok";
  db.append(r);
  ShapeParams tuned = apply_tuning(e, shape, {{"M", 256}, {"N", 256}, {"K", 128}}, Float(16), "cpu", db);
  EXPECT_EQ(tuned.at("BM"), 64);
  EXPECT_EQ(tuned.at("S"), 3);
  ShapeParams mine = shape;
  mine["S"] = 5;
  ShapeParams kept = apply_tuning(e, mine, {{"S", 5}}, Float(16), "cpu", db);
  EXPECT_EQ(kept.at("S"), 5) << "a knob given on the command line wins";
  EXPECT_EQ(kept.at("BM"), 64);
  // Another arch, another shape: the schedule's own choices.
  EXPECT_EQ(apply_tuning(e, shape, {}, Float(16), "sm_90", db), shape);
}

TEST(Tuner, CandidatesStartWithTheDefaultAndHoldFixedKnobs) {
  const ScheduleEntry &e = find_schedule("gemm_wgmma");
  std::vector<ShapeParams> all = tuning_candidates(e, {{"M", 256}});
  size_t grid = 1;
  for (const auto &[k, v] : e.knobs)
    grid *= v.size();
  EXPECT_EQ(all.size(), grid + 1); // the default (zeros: the tiles' choice) is not in the grid
  EXPECT_EQ(all[0], resolve_shape(e, {{"M", 256}}));
  std::set<ShapeParams> distinct(all.begin(), all.end());
  EXPECT_EQ(distinct.size(), all.size());

  std::vector<ShapeParams> fixed = tuning_candidates(e, {{"M", 256}, {"BM", 128}}, 0);
  for (const ShapeParams &c : fixed)
    EXPECT_EQ(c.at("BM"), 128);
  EXPECT_EQ(fixed.size(), grid / e.knobs.at("BM").size() + 1);

  std::vector<ShapeParams> some = tuning_candidates(e, {{"M", 256}}, 5);
  ASSERT_EQ(some.size(), 5u);
  EXPECT_EQ(some[0], all[0]);
  EXPECT_EQ(some, tuning_candidates(e, {{"M", 256}}, 5)) << "the same on every run";
}

// gemm_wgmma at a small shape on the CPU executor: every candidate is checked against float64,
// a refused tile is recorded as such, and a second run resumes with nothing left to do.
TEST(Tuner, CpuModeWritesEveryCandidateAndResumes) {
  TempDir dir;
  TuneOptions o = small_cpu_tune(dir, 6);
  std::string progress;
  llvm::raw_string_ostream os(progress);
  o.progress = &os;
  TuneSummary first = tune(o);
  EXPECT_EQ(first.total, 6u);
  EXPECT_EQ(first.mine, 6u);
  EXPECT_EQ(first.records.size(), 6u);
  EXPECT_GE(first.measured, 3u) << os.str();
  EXPECT_GE(first.failed, 1u) << "BN=256 > N=128 must be refused:\n" << os.str();
  for (const TuningRecord &r : first.records) {
    EXPECT_EQ(r.arch, "cpu");
    EXPECT_TRUE(r.ok() || r.check.rfind("refused", 0) == 0) << r.check;
  }
  EXPECT_EQ(TuningDb(o.db_path).load().size(), 6u);
  EXPECT_NE(os.str().find("[6/6]"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("best gemm_wgmma"), std::string::npos) << os.str();

  TuneSummary again = tune(o);
  EXPECT_EQ(again.resumed, 6u);
  EXPECT_EQ(again.mine, 0u);
  EXPECT_TRUE(again.records.empty());
  EXPECT_EQ(TuningDb(o.db_path).load().size(), 6u);
}

TEST(Tuner, StopFlagInterruptsBeforeTheNextCandidate) {
  TempDir dir;
  TuneOptions o = small_cpu_tune(dir, 4);
  o.progress = nullptr;
  std::atomic<bool> stop{true};
  o.stop = &stop;
  TuneSummary s = tune(o);
  EXPECT_TRUE(s.interrupted);
  EXPECT_TRUE(s.records.empty());
  stop = false;
  o.ranks = 2; // this process takes candidates 0 and 2
  TuneSummary half = tune(o);
  EXPECT_EQ(half.mine, 2u);
  EXPECT_EQ(TuningDb(o.db_path).load().size(), 2u);
}

TEST(Tuner, ScheduleWithoutKnobsIsRefusedNamingTheTunableOnes) {
  TuneOptions o;
  o.schedule = "gemm_naive";
  o.cpu = true;
  expect_error([&] { tune(o); }, {"declares no tuning knobs", "gemm_wgmma"});
}

// On the GPU: candidates compiled with NVRTC, checked at sampled outputs, timed; a record names
// the GPU and its arch, and run-time lookup (build_tuned) then finds the fastest.
TEST(Tuner, GpuTunesChecksAndRecords) {
  if (!Device::available())
    GTEST_SKIP() << "no GPU: " << Device::unavailable_reason();
  if (Device::get().arch() != "sm_90")
    GTEST_SKIP() << "gemm_wgmma needs a Hopper GPU";
  TempDir dir;
  TuneOptions o;
  o.schedule = "gemm_wgmma";
  o.shape = {{"M", 512}, {"N", 512}, {"K", 256}};
  o.trials = 4;
  o.samples = 512;
  o.db_path = dir.path("t.jsonl");
  o.timing = {.number = 2, .repeat = 3, .warmup = 1};
  o.progress = nullptr;
  TuneSummary s = tune(o);
  EXPECT_EQ(s.records.size(), 4u);
  EXPECT_GE(s.measured, 2u);
  for (const TuningRecord &r : s.records) {
    EXPECT_EQ(r.arch, "sm_90");
    EXPECT_EQ(r.device, Device::get().name());
    if (r.ok()) {
      EXPECT_GT(r.median_ms, 0);
      EXPECT_LE(r.min_ms, r.median_ms);
    }
  }
  TuningDb db(o.db_path);
  const ScheduleEntry &e = find_schedule("gemm_wgmma");
  ShapeParams used;
  build_tuned(e, o.shape, Float(16), "sm_90", &used, db);
  std::optional<TuningRecord> best =
      db.best("gemm_wgmma", problem_shape(e, resolve_shape(e, o.shape)), "float16", "sm_90");
  ASSERT_TRUE(best);
  for (const auto &[k, v] : best->config)
    EXPECT_EQ(used.at(k), v) << k;
}

// A line nested 100000 levels deep crashed every command that read the database (the JSON
// parser recursed until the stack ran out); it is skipped like any other bad line.
TEST(TuningDb, DeeplyNestedLineIsSkippedNotParsed) {
  TempDir dir;
  TuningDb db(dir.path("t.jsonl"));
  db.append(record("128", 0.5));
  {
    std::ofstream f(db.path(), std::ios::app);
    f << std::string(100000, '[') << std::string(100000, ']') << "\n";
    f << R"({"a":[[[[[[[[[[[[[[[[[[["x"]]]]]]]]]]]]]]]]]]]]})" << "\n";
  }
  db.append(record("64", 0.4));
  std::vector<std::string> warnings;
  std::vector<TuningRecord> rs = db.load(&warnings);
  EXPECT_EQ(rs.size(), 2u);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find(":2: skipped: not a record: JSON nested more than 16 levels deep"),
            std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find(":3: skipped: not a record: JSON nested"), std::string::npos)
      << warnings[1];
  // Brackets inside strings are text, not nesting.
  TuningRecord r = record("32", 0.3);
  r.check = std::string(100, '[');
  std::string why;
  EXPECT_TRUE(TuningDb::from_line(TuningDb::to_line(r), &why)) << why;
}

// A record appended after a crash left a line unfinished starts on a line of its own: it was
// glued onto the broken line and skipped with it ever after (a resumed tune measured it again).
TEST(TuningDb, AppendAfterATruncatedLineStartsANewLine) {
  TempDir dir;
  TuningDb db(dir.path("t.jsonl"));
  db.append(record("128", 0.5));
  std::string half = TuningDb::to_line(record("64", 0.4));
  {
    std::ofstream f(db.path(), std::ios::app);
    f << half.substr(0, half.size() / 2); // no newline: the writer died here
  }
  db.append(record("256", 0.3));
  std::vector<std::string> warnings;
  std::vector<TuningRecord> rs = db.load(&warnings);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[1].config.at("BM"), 256);
  EXPECT_EQ(rs[1].origin, db.path() + ":3");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(":2: skipped"), std::string::npos) << warnings[0];
}

// The database is read and written only when it is a regular file of the current user's that
// no one else can write: another user's (planted records), a FIFO (which hung reading and
// appending), a link to /dev/zero (read forever).
TEST(TuningDb, DatabaseNotAPrivateRegularFileOfTheUserIsRefused) {
  TempDir dir;
  TuningDb db(dir.path("t.jsonl"));
  db.append(record("128", 0.5));
  auto refused = [&](const char *what) {
    std::vector<std::string> warnings;
    EXPECT_TRUE(db.load(&warnings).empty()) << what;
    ASSERT_EQ(warnings.size(), 1u) << what;
    EXPECT_NE(warnings[0].find("not reading " + db.path()), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find(what), std::string::npos) << warnings[0];
    expect_error([&] { db.append(record("64", 0.4)); }, {"not writing to", what});
    expect_error([&] { db.check_writable(); }, {"not writing to", what});
  };
  ASSERT_EQ(::chmod(db.path().c_str(), 0602), 0);
  refused("can be written by other users");
  if (::geteuid() == 0) { // chown needs root (CI runs as root)
    ASSERT_EQ(::chmod(db.path().c_str(), 0600), 0);
    ASSERT_EQ(::chown(db.path().c_str(), 4242, 4242), 0);
    refused("belongs to another user (uid 4242");
  }
  ASSERT_EQ(::unlink(db.path().c_str()), 0);
  ASSERT_EQ(::mkfifo(db.path().c_str(), 0600), 0);
  refused("is a FIFO");
  ASSERT_EQ(::unlink(db.path().c_str()), 0);
  ASSERT_EQ(::symlink("/dev/zero", db.path().c_str()), 0);
  refused("is a device");
}

// A search whose database cannot be written fails before it measures anything, not after its
// first candidate.
TEST(Tuner, UnwritableDatabaseFailsBeforeTheFirstCandidate) {
  TempDir dir;
  TuneOptions o = small_cpu_tune(dir, 2);
  ASSERT_EQ(::mkfifo(o.db_path.c_str(), 0600), 0);
  std::string progress;
  llvm::raw_string_ostream os(progress);
  o.progress = &os;
  expect_error([&] { tune(o); }, {"not writing to", "is a FIFO"});
  EXPECT_EQ(os.str(), "") << "nothing tried";
}

// Records are validated as --shape is: a knob out of range (S=-5) or times that are no
// measurement (median_ms=-1) were used; they are skipped, saying why, and the next best is used.
TEST(TuningDb, RecordsOutOfRangeAreSkipped) {
  TempDir dir;
  TuningDb db(dir.path("t.jsonl"));
  TuningRecord stages = record("128", 0.1);
  stages.config["S"] = -5;
  TuningRecord negative = record("64", -1);
  TuningRecord inverted = record("32", 0.2);
  inverted.min_ms = 0.3;
  TuningRecord huge = record("256", 0.25);
  huge.config["BM"] = int64_t(1) << 32;
  TuningRecord failed = record("16", NAN, "refused: BM=16 is not a multiple of 64");
  for (const TuningRecord &r : {stages, negative, inverted, huge, failed, record("128", 0.4)})
    db.append(r);
  std::vector<std::string> warnings;
  std::vector<TuningRecord> rs = db.load(&warnings);
  ASSERT_EQ(rs.size(), 2u) << "the refused candidate's record is kept: it is not used";
  ASSERT_EQ(warnings.size(), 4u);
  EXPECT_NE(warnings[0].find(":1: skipped: S=-5 is out of range (0 to 2147483647)"), std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[1].find(":2: skipped: its times are not a measurement (median_ms -1"),
            std::string::npos) << warnings[1];
  EXPECT_NE(warnings[2].find(":3: skipped: its times are not a measurement"), std::string::npos)
      << warnings[2];
  EXPECT_NE(warnings[3].find(":4: skipped: BM=4294967296 is out of range"), std::string::npos)
      << warnings[3];
  std::optional<TuningRecord> b = db.best("gemm_wgmma", record("1", 1).shape, "float16", "sm_90");
  ASSERT_TRUE(b);
  EXPECT_DOUBLE_EQ(b->median_ms, 0.4);
}

// A program of several outputs (attention with its rows' logsumexp) is refused before any
// candidate is built, naming what to leave out.
TEST(Tuner, ProgramOfSeveralOutputsIsRefused) {
  TempDir dir;
  TuneOptions o;
  o.schedule = "attention";
  o.shape = {{"B", 1}, {"H", 2}, {"HKV", 1}, {"SQ", 64}, {"SK", 64}, {"D", 64}, {"TC", 0},
             {"LSE", 1}};
  o.cpu = true;
  o.trials = 2;
  o.db_path = dir.path("t.jsonl");
  o.progress = nullptr;
  expect_error([&] { tune(o); }, {"tune", "programs of one output", "this one has 2", "LSE=0"});
}
