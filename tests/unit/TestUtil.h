// Helpers shared by tessel's unit tests.
#pragma once

#include "compiler/support/Error.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace tessel::test {

/// Expects `f` to throw tessel::Error whose message contains every one of `parts`.
template <typename F> void expect_error(F f, std::initializer_list<const char *> parts) {
  try {
    f();
    ADD_FAILURE() << "expected tessel::Error";
  } catch (const Error &e) {
    for (const char *p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message lacks '" << p << "':\n"
          << e.what();
  }
}

/// How many times `needle` occurs in `hay` (overlapping occurrences included).
inline int count_of(const std::string &hay, const std::string &needle) {
  int n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1))
    ++n;
  return n;
}

} // namespace tessel::test
