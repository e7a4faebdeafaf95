// Text helpers for messages and for names that come from outside (file names, config types):
// names joined into one line, the fields of a line of ddgnn's CSV files, and the UTF-8 check
// that every name stored as text must pass.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ddgnn {

// "a, b, c" (or with `separator` between them); empty for no names.
inline std::string join_names(const std::vector<std::string>& names,
                              const std::string& separator = ", ") {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : separator) + n;
  return out;
}

// The comma-separated fields of one line of a CSV file ddgnn writes (no quoting: its CSV files
// have none), an empty last field included ("a,b," is three fields).
std::vector<std::string> split_csv_line(const std::string& line);

// Byte offset of the first byte of `s` that is not valid UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or npos.
size_t invalid_utf8_at(const std::string& s);

// "byte 0xFF at position 2": where `s` stops being UTF-8, for a message (`at` from
// invalid_utf8_at).
std::string utf8_error_at(const std::string& s, size_t at);

// `s` with each byte that is not part of valid UTF-8 written as "\xFF" (four ASCII characters):
// a name from outside (a file name in another encoding) kept readable and distinct in JSON text.
std::string escape_invalid_utf8(const std::string& s);

}  // namespace ddgnn
