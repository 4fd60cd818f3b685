// tessel's log: messages on standard error at or above TESSEL_LOG_LEVEL (error, warning,
// info or debug; warning by default), as "tessel: info: ...". Here, below the compiler and the
// runtime, so that lowering can warn too.
#pragma once

#include <string>

namespace tessel {

enum class LogLevel { Error = 0, Warning = 1, Info = 2, Debug = 3 };

/// The level from TESSEL_LOG_LEVEL (read once).
LogLevel log_level();
/// Whether a message at `level` is printed.
inline bool log_enabled(LogLevel level) { return level <= log_level(); }
void log_message(LogLevel level, const std::string &message);

} // namespace tessel
