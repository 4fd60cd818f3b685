// The files tessel trusts to build and run kernels from (the kernel cache's entries, the tuning
// database) and the directories they live in. Whoever can write them can plant a cubin that
// tessel would load and run, or a tuning record it would build, so, as OpenSSH and pip do for
// their files: directories are created 0700 and refused when other users can write them, and a
// file is read only when it is a regular file of the current user that no one else can write.
#pragma once

#include <optional>
#include <string>

namespace tessel {

/// Creates `dir` (and its parents) with mode 0700 if it is missing. Empty when `dir` is then
/// safe to use; else why not, as a sentence naming the directory and what to do.
std::string prepare_private_directory(const std::string &dir);

/// Empty when `dir` is missing or only its owner (and root) can write it; else why it must not
/// be trusted. A sticky directory (like /tmp) counts as safe: others cannot replace or remove
/// its files, and each file in it is checked on its own (read_private_file).
std::string unsafe_directory_reason(const std::string &dir);

/// Empty when the open file `fd` (named `path` in the message) is one tessel may trust: a
/// regular file (not a FIFO, a device or a directory) owned by the current user and writable
/// by no one else; else why not, as a sentence naming the file.
std::string unsafe_file_reason(int fd, const std::string &path);
/// The same of the file at `path` (following links), before opening it; empty when missing.
std::string unsafe_file_reason(const std::string &path);

/// The contents of `path`, read without blocking on special files and only when it is safe
/// (unsafe_file_reason). std::nullopt when it does not exist (`refused` empty) or is refused
/// (`refused` says why) or cannot be read (`refused` says why).
std::optional<std::string> read_private_file(const std::string &path, std::string &refused);

} // namespace tessel
