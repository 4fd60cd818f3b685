// The directories tessel's caches live in (compiled kernels, the tuning database): created
// 0700, and refused when other users can write them, since whoever can write there can plant a
// cubin that tessel would load and run, or a tuning record it would build.
#pragma once

#include <string>

namespace tessel {

/// Creates `dir` (and its parents) with mode 0700 if it is missing. Empty when `dir` is then
/// safe to use; else why not, as a sentence naming the directory and what to do.
std::string prepare_private_directory(const std::string &dir);

/// Empty when `dir` is missing or only its owner (and root) can write it; else why it must not
/// be trusted. A sticky directory (like /tmp) counts as safe: others cannot replace its files.
std::string unsafe_directory_reason(const std::string &dir);

} // namespace tessel
