#include "runtime/PrivateDirectory.h"

#include <llvm/Support/FileSystem.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

namespace tessel {

std::string unsafe_directory_reason(const std::string &dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return "";
  if (!S_ISDIR(st.st_mode))
    return "'" + dir + "' is not a directory";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    return "the directory '" + dir + "' (mode " + mode +
           ") can be written by other users, who could plant entries that tessel would then "
           "use; make it private (chmod 700 '" + dir + "') or choose another directory";
  }
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

} // namespace tessel
