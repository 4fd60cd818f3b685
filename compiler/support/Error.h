// User errors and internal invariant failures.
//
// A user's mistake (a bad schedule, a wrong shape, a compile failure of generated code) throws
// tessel::Error with a message that says what was expected and what to do. A broken invariant
// inside the compiler throws tessel::InternalError. Both are raised with a streaming builder:
//
//   user_check(axis_belongs, "split") << "axis '" << name << "' is not an axis of stage '" ...;
//   user_error("split") << "...";
//   internal_check(e.defined()) << "...";
//
// The message is streamed, then raised; control never continues past a failed check.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tessel {

/// A mistake in what the user wrote or asked for. The message is meant to be read by them.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &msg) : std::runtime_error(msg) {}
};

/// A broken invariant inside tessel: a bug in tessel, not in the user's program.
class InternalError : public std::logic_error {
public:
  explicit InternalError(const std::string &msg) : std::logic_error(msg) {}
};

namespace detail {

class ErrorReport {
public:
  enum Kind { User, Internal };
  ErrorReport(Kind kind, const std::string &context, const char *file, int line,
              const char *cond);
  ErrorReport(const ErrorReport &) = delete;
  ErrorReport &operator=(const ErrorReport &) = delete;

  template <typename T> ErrorReport &operator<<(const T &x) {
    msg_ << x;
    return *this;
  }

  /// Throws Error or InternalError with the collected message.
  [[noreturn]] void raise();

private:
  Kind kind_;
  std::ostringstream msg_;
};

} // namespace detail
} // namespace tessel

// The `for (...;; r.raise()) r << ...` form streams the message, then raises; the compiler sees
// that control never continues past it, so no `return` is needed after an error.
#define TESSEL_ERROR_REPORT(kind, context, cond)                                                   \
  for (::tessel::detail::ErrorReport tessel_report_(::tessel::detail::ErrorReport::kind, context,  \
                                                    __FILE__, __LINE__, cond);                     \
       ; tessel_report_.raise())                                                                   \
  tessel_report_

/// Raise a tessel::Error. `context` names the operation that failed ("split", "compute", ...).
#define user_error(context) TESSEL_ERROR_REPORT(User, context, nullptr)

/// Raise a tessel::Error unless `cond` holds.
#define user_check(cond, context)                                                                  \
  while (!(cond))                                                                                  \
  user_error(context)

/// Raise a tessel::InternalError unless `cond` holds.
#define internal_check(cond)                                                                       \
  while (!(cond))                                                                                  \
  TESSEL_ERROR_REPORT(Internal, "", #cond)

/// Raise a tessel::InternalError.
#define internal_error TESSEL_ERROR_REPORT(Internal, "", nullptr)
