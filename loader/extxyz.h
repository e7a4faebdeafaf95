// Streaming reader of extended XYZ (the ASE convention), one frame at a time, constant memory.
// Comment-line keys: Lattice="ax ay az bx by bz cx cy cz", Properties=name:T:n:..., energy=,
// stress= (9 or 6 Voigt numbers) or virial=, pbc="T T F", config_type=. Key names configurable.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "loader/frame.h"

namespace ddgnn {

// Which keys hold which quantity, and which are required. Matched case-sensitively, as ASE does.
struct ExtxyzKeys {
  std::string energy = "energy";            // info key, eV
  std::string forces = "forces";            // Properties column, eV/Å
  std::string stress = "stress";            // info key, eV/Å^3 (virial= is used when absent)
  std::string config_type = "config_type";  // info key
  bool require_energy = true;               // a frame without energy is an error
  bool require_forces = false;              // a frame without forces is an error
  // Other per-atom Properties columns to keep (real or integer), e.g. {"charges"}; the rest are
  // skipped.
  std::vector<std::string> extra_columns;
  // Comment-line keys holding per-structure numbers to keep (one or more numbers, the same count
  // in every frame), e.g. {"gap"} for a graph head; every frame must have them.
  std::vector<std::string> info_keys;
};

class ExtxyzReader {
 public:
  static constexpr size_t kDefaultBufferBytes = size_t{4} << 20;

  // Opens `path` ("-" reads standard input). Throws DataError if it cannot be opened.
  // `buffer_bytes` is the read-buffer size (it grows if one line is longer); tests make it tiny.
  explicit ExtxyzReader(const std::string& path, ExtxyzKeys keys = {},
                        size_t buffer_bytes = kDefaultBufferBytes);
  ~ExtxyzReader();
  ExtxyzReader(const ExtxyzReader&) = delete;
  ExtxyzReader& operator=(const ExtxyzReader&) = delete;

  // Reads the next frame into `frame` (reusing its storage). Returns false at a clean end of
  // file (trailing blank lines allowed). Throws DataError "path:line: what — hint" on bad input.
  // An empty file is an error (no frame at all).
  bool next(Frame& frame);

  long long frames_read() const;
  size_t bytes_read() const;  // bytes consumed so far
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace ddgnn
