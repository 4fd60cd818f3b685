#include "runtime/WriteFiles.h"

#include "compiler/support/Error.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/raw_ostream.h>

namespace tessel {

namespace {

// Writes `bytes` through a stream to `path` (opened by `os`); empty, or why it failed.
std::string write_through(llvm::raw_fd_ostream &os, const std::string &path,
                          const std::string &bytes) {
  os << bytes;
  os.close();
  if (!os.has_error())
    return "";
  // Cleared, or the stream's destructor would abort the process (LLVM's report_fatal_error).
  std::string why = "writing '" + path + "' failed: " + os.error().message();
  os.clear_error();
  return why;
}

// A unique temporary beside `path` holding `bytes`; empty with `why` set when it failed (and
// nothing left behind).
std::string write_temporary(const std::string &path, const std::string &bytes, std::string &why) {
  int fd = -1;
  llvm::SmallString<256> tmp;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(path + ".%%%%%%%%.tmp", fd, tmp,
                                                           llvm::sys::fs::OF_None, 0644)) {
    why = "cannot create a file beside '" + path + "': " + ec.message();
    return "";
  }
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  why = write_through(os, path, bytes);
  if (why.empty())
    return tmp.str().str();
  llvm::sys::fs::remove(tmp);
  return "";
}

// A path that exists and is not a regular file (a device such as /dev/stdout, a FIFO) is
// written in place: there is nothing to rename over it.
bool special_file(const std::string &path, const char *where) {
  llvm::sys::fs::file_status st;
  if (llvm::sys::fs::status(path, st) || !llvm::sys::fs::exists(st))
    return false;
  user_check(!llvm::sys::fs::is_directory(st), where)
      << "cannot write '" << path << "': it is a directory";
  return !llvm::sys::fs::is_regular_file(st);
}

} // namespace

void write_files(const std::vector<OutputFile> &files, const char *where, const std::string &dir) {
  bool created_dir = false;
  if (!dir.empty() && !llvm::sys::fs::exists(dir)) {
    std::error_code ec = llvm::sys::fs::create_directories(dir);
    user_check(!ec, where) << "cannot create the directory '" << dir << "': " << ec.message();
    created_dir = true;
  }
  // Every regular file to a temporary first; special files get an empty entry.
  std::vector<std::string> temporaries;
  auto undo = [&](size_t from) {
    for (size_t i = from; i < temporaries.size(); ++i)
      if (!temporaries[i].empty())
        llvm::sys::fs::remove(temporaries[i]);
    if (created_dir && from == 0)
      llvm::sys::fs::remove(dir); // only if empty: nothing of this call was put into it
  };
  auto fail = [&](size_t i, const std::string &why) {
    undo(i);
    std::string done;
    for (size_t j = 0; j < i; ++j)
      done += (done.empty() ? "" : ", ") + files[j].path;
    user_error(where) << why
                      << (done.empty() ? "; nothing was written" : "; already written: " + done);
  };
  for (const OutputFile &f : files) {
    std::string why, tmp;
    if (!special_file(f.path, where) && (tmp = write_temporary(f.path, f.bytes, why)).empty())
      fail(0, why);
    temporaries.push_back(tmp);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    std::string why;
    if (temporaries[i].empty()) {
      std::error_code ec;
      llvm::raw_fd_ostream os(files[i].path, ec, llvm::sys::fs::OF_None);
      why = ec ? "cannot write '" + files[i].path + "': " + ec.message()
               : write_through(os, files[i].path, files[i].bytes);
    } else if (std::error_code ec = llvm::sys::fs::rename(temporaries[i], files[i].path)) {
      why = "cannot move the new '" + files[i].path + "' into place: " + ec.message();
    }
    if (!why.empty())
      fail(i, why);
  }
}

} // namespace tessel
