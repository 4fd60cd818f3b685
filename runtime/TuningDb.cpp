#include "runtime/TuningDb.h"

#include "compiler/support/Error.h"
#include "compiler/support/Log.h"
#include "runtime/Device.h"
#include "runtime/PrivateFiles.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/SHA1.h>
#include <llvm/Support/raw_ostream.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace tessel {

namespace {

llvm::json::Object params_json(const ShapeParams &p) {
  llvm::json::Object o;
  for (const auto &[k, v] : p)
    o[k] = v;
  return o;
}

bool params_from(const llvm::json::Object *o, ShapeParams &out) {
  if (!o)
    return false;
  for (const auto &kv : *o) {
    auto v = kv.second.getAsInteger();
    if (!v)
      return false;
    out[kv.first.str()] = *v;
  }
  return true;
}

llvm::json::Value number(double v) {
  return std::isnan(v) ? llvm::json::Value(nullptr) : llvm::json::Value(v);
}

double number_from(const llvm::json::Object &o, llvm::StringRef key) {
  auto v = o.getNumber(key);
  return v ? *v : NAN;
}

// The record's JSON without its checksum; llvm::json prints object keys sorted, so the text is
// canonical and the checksum can be recomputed from a parsed line.
llvm::json::Object record_json(const TuningRecord &r) {
  return llvm::json::Object{{"schedule", r.schedule},
                            {"shape", params_json(r.shape)},
                            {"dtype", r.dtype},
                            {"config", params_json(r.config)},
                            {"device", r.device},
                            {"arch", r.arch},
                            {"driver", r.driver},
                            {"cuda", r.cuda},
                            {"tessel", r.tessel_version},
                            {"median_ms", number(r.median_ms)},
                            {"min_ms", number(r.min_ms)},
                            {"max_ms", number(r.max_ms)},
                            {"check", r.check}};
}

std::string checksum(llvm::StringRef text) {
  return llvm::toHex(llvm::SHA1::hash(llvm::arrayRefFromStringRef(text)), true).substr(0, 16);
}

std::string print(llvm::json::Value v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << v;
  return os.str();
}

// llvm::json::parse recurses once per level of nesting: a line of 100000 '[' overflowed the
// stack. A record nests two levels; a line nested deeper than this is refused unparsed.
constexpr int kMaxJsonDepth = 16;

bool nested_too_deep(llvm::StringRef text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

std::string directory_of(const std::string &path) {
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  return dir.empty() ? "." : dir.str().str();
}

} // namespace

const char *tessel_version() { return TESSEL_VERSION; }

std::string TuningRecord::config_str() const {
  return config.empty() ? "(defaults)" : params_string(config);
}

TuningDb::TuningDb(std::string path) : path_(path.empty() ? default_path() : std::move(path)) {}

std::string TuningDb::default_path() {
  if (const char *env = std::getenv("TESSEL_TUNING_DB"); env && *env)
    return env;
  // The user's cache directory ($XDG_CACHE_HOME, else ~/.cache), as the kernel cache's.
  llvm::SmallString<256> p;
  if (!llvm::sys::path::cache_directory(p))
    p = ".";
  llvm::sys::path::append(p, "tessel", "tuning.jsonl");
  return p.str().str();
}

std::string TuningDb::to_line(const TuningRecord &r) {
  llvm::json::Object o = record_json(r);
  std::string sum = checksum(print(llvm::json::Object(o)));
  o["sum"] = sum;
  return print(std::move(o));
}

std::optional<TuningRecord> TuningDb::from_line(const std::string &line, std::string *why) {
  auto fail = [&](const std::string &w) -> std::optional<TuningRecord> {
    if (why)
      *why = w;
    return std::nullopt;
  };
  if (nested_too_deep(line))
    return fail("not a record: JSON nested more than " + std::to_string(kMaxJsonDepth) +
                " levels deep");
  llvm::Expected<llvm::json::Value> v = llvm::json::parse(line);
  if (!v) {
    std::string msg = llvm::toString(v.takeError());
    return fail("not JSON (" + msg + ")");
  }
  llvm::json::Object *o = v->getAsObject();
  if (!o)
    return fail("not a JSON object");
  auto sum = o->getString("sum");
  if (!sum)
    return fail("no checksum");
  std::string expected = sum->str();
  // The record without its checksum (a copy: json::Object::erase leaves the key in LLVM 14).
  llvm::json::Object rest;
  for (const auto &kv : *o)
    if (kv.first != "sum")
      rest[kv.first] = kv.second;
  if (checksum(print(std::move(rest))) != expected)
    return fail("checksum mismatch (a damaged or hand-edited line)");
  TuningRecord r;
  auto str = [&](llvm::StringRef key, std::string &out) {
    auto s = o->getString(key);
    if (s)
      out = s->str();
    return s.hasValue();
  };
  auto integer = [&](llvm::StringRef key, int &out) {
    auto i = o->getInteger(key);
    if (i)
      out = int(*i);
    return i.hasValue();
  };
  if (!str("schedule", r.schedule) || !str("dtype", r.dtype) || !str("device", r.device) ||
      !str("arch", r.arch) || !str("tessel", r.tessel_version) || !str("check", r.check) ||
      !integer("driver", r.driver) || !integer("cuda", r.cuda) ||
      !params_from(o->getObject("shape"), r.shape) || !params_from(o->getObject("config"), r.config))
    return fail("a field is missing or of the wrong type");
  r.median_ms = number_from(*o, "median_ms");
  r.min_ms = number_from(*o, "min_ms");
  r.max_ms = number_from(*o, "max_ms");
  // What --shape would take of a knob or a shape value (a record with S=-5 was built with it).
  for (const ShapeParams *params : {&r.shape, &r.config})
    for (const auto &[k, v] : *params)
      if (v < 0 || v > kMaxShapeValue)
        return fail(k + "=" + std::to_string(v) + " is out of range (0 to " +
                    std::to_string(kMaxShapeValue) + ")");
  // A record that checked ok is a measurement: 0 < min <= median <= max (each may be missing).
  auto positive = [](double v) { return std::isnan(v) || (std::isfinite(v) && v > 0); };
  if (r.ok() && (std::isnan(r.median_ms) || !positive(r.median_ms) || !positive(r.min_ms) ||
                 !positive(r.max_ms) || r.min_ms > r.median_ms || r.median_ms > r.max_ms))
    return fail("its times are not a measurement (median_ms " + print(number(r.median_ms)) +
                ", min_ms " + print(number(r.min_ms)) + ", max_ms " + print(number(r.max_ms)) +
                ")");
  return r;
}

std::vector<TuningRecord> TuningDb::load(std::vector<std::string> *warnings) const {
  std::vector<TuningRecord> out;
  if (path_ == "off")
    return out;
  // Into `warnings` when given, else logged once per process: the database is read more than
  // once.
  auto warn = [&](const std::string &w) {
    if (warnings) {
      warnings->push_back(w);
      return;
    }
    static std::mutex mutex;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> lock(mutex);
    if (warned.insert(w).second)
      log_message(LogLevel::Warning, "tuning database " + w);
  };
  std::string refused = unsafe_directory_reason(directory_of(path_));
  std::optional<std::string> contents;
  if (refused.empty())
    contents = read_private_file(path_, refused);
  if (!contents) {
    if (!refused.empty())
      warn("not reading " + path_ + ": " + refused);
    return out; // else no database yet
  }
  llvm::SmallVector<llvm::StringRef, 0> lines;
  llvm::StringRef(*contents).split(lines, '\n', -1, false);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].trim().empty())
      continue;
    std::string why;
    if (auto r = from_line(lines[i].str(), &why)) {
      r->origin = path_ + ":" + std::to_string(i + 1);
      out.push_back(std::move(*r));
      continue;
    }
    warn(path_ + ":" + std::to_string(i + 1) + ": skipped: " + why);
  }
  return out;
}

namespace {

// The database opened for appending (created 0600 if missing), after the checks a reader makes
// of it; tessel::Error saying why not.
int open_for_append(const std::string &path) {
  user_check(path != "off", "tuning database")
      << "TESSEL_TUNING_DB=off turns the database off; give a file to record to (--db FILE)";
  std::string why = prepare_private_directory(directory_of(path));
  user_check(why.empty(), "tuning database")
      << "not writing to " << path << ": " << why
      << " (or set TESSEL_TUNING_DB to a file in a private directory)";
  // Checked before opening too: a FIFO would not open without a reader (and, without
  // O_NONBLOCK, wait for one). O_RDWR: append() reads the last byte.
  why = unsafe_file_reason(path);
  user_check(why.empty(), "tuning database") << "not writing to " << path << ": " << why;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0600);
  user_check(fd >= 0, "tuning database")
      << "cannot open " << path << " to append a record: " << std::strerror(errno)
      << "; set TESSEL_TUNING_DB to a writable file";
  why = unsafe_file_reason(fd, path);
  if (!why.empty()) {
    ::close(fd);
    user_error("tuning database") << "not writing to " << path << ": " << why;
  }
  return fd;
}

} // namespace

void TuningDb::check_writable() const { ::close(open_for_append(path_)); }

void TuningDb::append(const TuningRecord &r) const {
  std::string line = to_line(r) + "\n";
  int fd = open_for_append(path_);
  // One writer at a time; each record one write() of a whole line, on a line of its own: a
  // line left unfinished by a crash gets a newline first, or the record would be glued to it
  // and skipped with it ever after.
  bool locked = ::flock(fd, LOCK_EX) == 0;
  struct stat st;
  char last = '\n';
  if (::fstat(fd, &st) == 0 && st.st_size > 0 && ::pread(fd, &last, 1, st.st_size - 1) != 1)
    last = '\n';
  if (last != '\n')
    line.insert(line.begin(), '\n');
  ssize_t written = ::write(fd, line.data(), line.size());
  int err = errno;
  if (locked)
    ::flock(fd, LOCK_UN);
  ::close(fd);
  user_check(written == ssize_t(line.size()), "tuning database")
      << "writing a record to " << path_ << " failed: "
      << (written < 0 ? std::strerror(err) : "a short write (is the disk full?)");
}

std::optional<TuningRecord> TuningDb::best(const std::string &schedule, const ShapeParams &shape,
                                           const std::string &dtype, const std::string &arch,
                                           bool shipped) const {
  auto fastest = [&](const std::vector<TuningRecord> &records) {
    std::optional<TuningRecord> out;
    for (const TuningRecord &r : records)
      if (r.ok() && r.schedule == schedule && r.shape == shape && r.dtype == dtype &&
          r.arch == arch && !std::isnan(r.median_ms) && (!out || r.median_ms < out->median_ms))
        out = r;
    return out;
  };
  std::optional<TuningRecord> mine = fastest(load());
  if (mine || !shipped)
    return mine;
  return fastest(shipped_tuning_records());
}

ShapeParams apply_tuning(const ScheduleEntry &entry, const ShapeParams &shape,
                         const ShapeParams &explicit_params, DataType dtype,
                         const std::string &arch, const TuningDb &db) {
  if (entry.knobs.empty())
    return shape;
  ShapeParams problem = problem_shape(entry, shape);
  std::optional<TuningRecord> r = db.best(entry.name, problem, dtype.str(), arch);
  if (!r) {
    log_message(LogLevel::Info, "no tuning record for " + entry.name + " on " + arch + " in " +
                                    db.path() + ": the schedule's own choices");
    return shape;
  }
  ShapeParams out = shape;
  for (const auto &[k, v] : r->config)
    if (entry.knobs.count(k) && !explicit_params.count(k))
      out[k] = v;
  log_message(LogLevel::Info, "using the tuning record " + entry.name + " " + r->config_str() +
                                  " (median " + llvm::formatv("{0:F4}", r->median_ms).str() +
                                  " ms on " + r->device + ", tessel " + r->tessel_version +
                                  ") from " + r->origin);
  return out;
}

ScheduledProgram build_tuned(const ScheduleEntry &entry, const ShapeParams &overrides,
                             DataType dtype, const std::string &arch,
                             ShapeParams *shape_used, const TuningDb &db) {
  ShapeParams shape = resolve_shape(entry, overrides);
  if (!arch.empty())
    shape = apply_tuning(entry, shape, overrides, dtype, arch, db);
  else if (!entry.knobs.empty())
    log_message(LogLevel::Info, "no GPU to look up tuning records for: " + entry.name +
                                    " uses the schedule's own choices");
  if (shape_used)
    *shape_used = shape;
  return entry.build(shape, dtype);
}

std::string tuning_arch() { return Device::available() ? Device::get().arch() : std::string(); }

} // namespace tessel
