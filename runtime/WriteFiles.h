// Writing the files a command produces (a cubin, an exported header and its cubins): all of
// them or none. Each is written to a temporary beside it, every write and close checked, and
// only when all are whole are they renamed into place; on any failure the temporaries (and a
// directory this call created) are removed and a tessel::Error says which file failed and why.
#pragma once

#include <string>
#include <vector>

namespace tessel {

struct OutputFile {
  std::string path;
  std::string bytes;
};

/// Writes `files` all or nothing (see above); creates `dir` first when it is not empty and
/// missing. `where` names the operation in messages ("export").
void write_files(const std::vector<OutputFile> &files, const char *where,
                 const std::string &dir = "");

} // namespace tessel
