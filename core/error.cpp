// The one-line report of an error, shared by `main` and the tests.
#include "core/error.h"

namespace ddgnn {

std::string at(const std::string& path, long long line) {
  return path + ":" + std::to_string(line);
}

std::string error_line(const std::exception& e, int rank) {
  std::string out = "ddgnn: ";
  const auto* err = dynamic_cast<const Error*>(&e);
  out += err ? err->kind() : "internal error";
  if (rank >= 0) out += " [rank " + std::to_string(rank) + "]";
  out += ": ";
  std::string what = e.what();
  // Keep it one line: fold any newline that slipped into a message.
  for (char& c : what)
    if (c == '\n') c = ' ';
  out += what;
  if (err && !err->hint().empty()) out += " — hint: " + err->hint();
  if (!err) out += " — hint: this is a bug in ddgnn; please report it with the command line";
  return out;
}

}  // namespace ddgnn
