#include "runtime/PrivateFiles.h"

#include <llvm/Support/FileSystem.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tessel {

namespace {

std::string mode_string(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", unsigned(mode & 07777));
  return text;
}

const char *kind_of(mode_t mode) {
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

} // namespace

std::string unsafe_directory_reason(const std::string &dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return "";
  if (!S_ISDIR(st.st_mode))
    return "'" + dir + "' is not a directory";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
    return "the directory '" + dir + "' (mode " + mode_string(st.st_mode) +
           ") can be written by other users, who could plant entries that tessel would then "
           "use; make it private (chmod 700 '" + dir + "') or choose another directory";
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return "the directory '" + dir + "' belongs to another user (uid " +
           std::to_string(st.st_uid) + "); choose a directory of your own";
  return "";
}

std::string prepare_private_directory(const std::string &dir) {
  if (!llvm::sys::fs::exists(dir)) {
    std::error_code ec = llvm::sys::fs::create_directories(dir, /*IgnoreExisting=*/true,
                                                           llvm::sys::fs::perms(0700));
    if (ec)
      return "cannot create the directory '" + dir + "': " + ec.message();
  }
  return unsafe_directory_reason(dir);
}

namespace {

std::string unsafe_reason(const struct stat &st, const std::string &path) {
  if (!S_ISREG(st.st_mode))
    return "'" + path + "' is " + kind_of(st.st_mode) + ", not a regular file";
  if (st.st_uid != ::geteuid())
    return "'" + path + "' belongs to another user (uid " + std::to_string(st.st_uid) +
           ", not " + std::to_string(::geteuid()) + "), who could have planted it; remove it "
           "or choose a directory of your own";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return "'" + path + "' (mode " + mode_string(st.st_mode) +
           ") can be written by other users, who could have planted its contents; make it "
           "private (chmod 600 '" + path + "') or remove it";
  return "";
}

} // namespace

std::string unsafe_file_reason(int fd, const std::string &path) {
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return "cannot stat '" + path + "': " + std::strerror(errno);
  return unsafe_reason(st, path);
}

std::string unsafe_file_reason(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return errno == ENOENT ? "" : "cannot stat '" + path + "': " + std::strerror(errno);
  return unsafe_reason(st, path);
}

std::optional<std::string> read_private_file(const std::string &path, std::string &refused) {
  refused.clear();
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT)
      refused = "cannot open '" + path + "': " + std::strerror(errno);
    return std::nullopt;
  }
  refused = unsafe_file_reason(fd, path);
  std::string contents;
  if (refused.empty()) {
    char buffer[1 << 16];
    for (;;) {
      ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0) {
        refused = "cannot read '" + path + "': " + std::strerror(errno);
        break;
      }
      if (n == 0)
        break;
      contents.append(buffer, size_t(n));
    }
  }
  ::close(fd);
  if (!refused.empty())
    return std::nullopt;
  return contents;
}

} // namespace tessel
