#include "compiler/support/Error.h"

namespace tessel::detail {

ErrorReport::ErrorReport(Kind kind, const std::string &context, const char *file, int line,
                         const char *cond)
    : kind_(kind) {
  if (kind == User) {
    // Users read these: name the operation, not our source file.
    if (!context.empty())
      msg_ << context << ": ";
  } else {
    msg_ << "internal error at " << file << ":" << line;
    if (cond)
      msg_ << ": condition failed: " << cond;
    msg_ << "\n  ";
  }
}

void ErrorReport::raise() {
  std::string msg = msg_.str();
  if (kind_ == User)
    throw Error(msg);
  msg += "\n  (this is a bug in tessel; please report it with the program that triggered it)";
  throw InternalError(msg);
}

} // namespace tessel::detail
