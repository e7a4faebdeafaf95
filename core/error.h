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
  // An error of the whole job that another rank reports: every rank throws it (from figures all
  // ranks share, or as the echo of a failed rank), and only `rank` prints it; the others stay
  // silent while that rank stops the job. -1 (the default): this rank reports it.
  int reported_by() const noexcept { return m_reported_by; }
  void set_reported_by(int rank) noexcept { m_reported_by = rank; }

 private:
  std::string m_hint;
  int m_reported_by = -1;
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

// A run that cannot go on: a non-finite loss or gradient, a diverged model.
class TrainingError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "training error"; }
};

// "path:line: message" — the location prefix used by readers.
std::string at(const std::string& path, long long line);

// One line for the terminal: "ddgnn: <kind> [rank R]: <what> — hint: <hint>".
// `rank` < 0 leaves the rank out (single-process tools).
std::string error_line(const std::exception& e, int rank);

}  // namespace ddgnn
