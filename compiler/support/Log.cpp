#include "compiler/support/Log.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/raw_ostream.h>

#include <cstdlib>

namespace tessel {

LogLevel log_level() {
  static const LogLevel level = [] {
    const char *env = std::getenv("TESSEL_LOG_LEVEL");
    llvm::StringRef v = env ? env : "";
    if (v == "error")
      return LogLevel::Error;
    if (v == "info")
      return LogLevel::Info;
    if (v == "debug")
      return LogLevel::Debug;
    if (!v.empty() && v != "warning")
      llvm::errs() << "tessel: warning: TESSEL_LOG_LEVEL='" << v
                   << "' is not error, warning, info or debug; using warning\n";
    return LogLevel::Warning;
  }();
  return level;
}

void log_message(LogLevel level, const std::string &message) {
  if (!log_enabled(level))
    return;
  static const char *const names[] = {"error", "warning", "info", "debug"};
  llvm::errs() << "tessel: " << names[int(level)] << ": " << message << "\n";
}

} // namespace tessel
