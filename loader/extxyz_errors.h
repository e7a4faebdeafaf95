// Slow-path diagnostics of the extxyz reader (loader-internal): run only once a line has been
// rejected, they re-read it and throw a DataError "file:line: what" whose hint says what to do.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "loader/extxyz_header.h"

namespace ddgnn::extxyz {

inline constexpr char kTruncatedHint[] =
    "the file looks truncated (an interrupted write or copy?); regenerate it or cut off the "
    "last, incomplete frame";

// Throws DataError "file:line: what" with `hint`.
[[noreturn]] void fail(const std::string& file, long long line, const std::string& what,
                       const std::string& hint);

// A token as shown in a message: quoted, at most 40 characters, non-printables as '?'.
std::string shown(std::string_view t);

// What the reader knows of the frame before, for messages about a count line.
struct PreviousFrame {
  long long frames = 0;      // frames read so far
  long long count_line = 0;  // line of its count line
  long long n_atoms = 0;     // what its count line says
  int n_tokens = 0;          // tokens per atom line
};

// Count line `s`, line `line`, is not a positive integer: says why, guessing from `prev`.
[[noreturn]] void explain_count(const std::string& file, long long line, std::string_view s,
                                const PreviousFrame& prev);

// Atom line `s`, line `line`, was rejected as atom `i` (0-based) of the `n_atoms` that the count
// line at `count_line` announces; `unterminated`: it ends the file without a '\n'.
[[noreturn]] void explain_atom(const std::string& file, long long line, std::string_view s,
                               size_t i, long long n_atoms, long long count_line, bool unterminated,
                               const Layout& layout);

}  // namespace ddgnn::extxyz
