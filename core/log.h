// Logging through spdlog: rank 0 speaks, other ranks stay quiet unless asked (or for errors).
#pragma once

#include <string>

namespace ddgnn {

struct LogOptions {
  int rank = 0;
  bool all_ranks = false;      // every rank logs, each line prefixed with its rank
  std::string level = "info";  // trace, debug, info, warn, error, off
};

// Sets up the default spdlog logger. Ranks other than 0 log only errors unless `all_ranks`.
void init_logging(const LogOptions& options);
// Once MPI is up: sets up the logger again (same options) for this process's rank.
void set_log_rank(int rank);
// Sets up the logger again with another level and all_ranks (the run config's Output keys).
void set_log_options(const std::string& level, bool all_ranks);
// The level the logger was last set up with.
std::string current_log_level();
// printf-style formatting of one number, for messages and log lines: fmt("%.2f", x).
std::string fmt(const char* format, double value);

}  // namespace ddgnn
