// The one small exception family of ddgnn, and the one-line report that `main` prints.
// Every message says what went wrong and where (file:line, key, rank); the hint says what to do.
#pragma once

#include <stdexcept>
#include <string>

namespace ddgnn {

// Base of every error ddgnn throws on purpose. `what()` holds the full message
// ("<where>: <what>"); `hint()` holds the advice, possibly empty.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, std::string hint = {})
      : std::runtime_error(message), m_hint(std::move(hint)) {}
  const std::string& hint() const noexcept { return m_hint; }
  virtual const char* kind() const noexcept { return "error"; }

 private:
  std::string m_hint;
};

// A bad config file, key or value, or a bad command-line option.
class ConfigError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "config error"; }
};

// A bad input file: extxyz, HDF5 dataset, checkpoint.
class DataError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "data error"; }
};

// A failure of MPI, NCCL, CUDA or of another rank.
class CommError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "comm error"; }
};

// "path:line: message" — the location prefix used by readers.
std::string at(const std::string& path, long long line);

// One line for the terminal: "ddgnn: <kind> [rank R]: <what> — hint: <hint>".
// `rank` < 0 leaves the rank out (single-process tools).
std::string error_line(const std::exception& e, int rank);

}  // namespace ddgnn
