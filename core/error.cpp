// The one-line report of an error, shared by `main` and the tests.
#include "core/error.h"

#include <filesystem>
#include <new>

namespace ddgnn {

std::string at(const std::string& path, long long line) {
  return path + ":" + std::to_string(line);
}

std::string error_line(const std::exception& e, int rank) {
  std::string out = "ddgnn: ";
  const auto* err = dynamic_cast<const Error*>(&e);
  // Not ddgnn's own errors but not bugs either: the file system refused (a path too long, a
  // place that cannot be read) or the machine ran out of memory.
  const auto* fs_err = dynamic_cast<const std::filesystem::filesystem_error*>(&e);
  const bool no_memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
  out += err ? err->kind() : fs_err ? "file error" : no_memory ? "out of memory" : "internal error";
  if (rank >= 0) out += " [rank " + std::to_string(rank) + "]";
  out += ": ";
  std::string what = e.what();
  // Keep it one line: fold any newline that slipped into a message.
  for (char& c : what)
    if (c == '\n') c = ' ';
  out += what;
  if (err && !err->hint().empty()) out += " — hint: " + err->hint();
  if (fs_err)
    out += " — hint: check the path named (its length, its folders, permissions and free space)";
  else if (no_memory)
    out += " — hint: use a smaller batch, model or dataset part per rank, or more ranks";
  else if (!err)
    out += " — hint: this is a bug in ddgnn; please report it with the command line";
  return out;
}

}  // namespace ddgnn
