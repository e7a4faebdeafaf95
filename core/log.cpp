// spdlog set-up: one stderr sink, a short pattern, rank prefix when several ranks speak.
#include "core/log.h"

#include <cstdio>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "core/error.h"

namespace ddgnn {

namespace {
LogOptions g_options;  // what init_logging was last given
}  // namespace

void init_logging(const LogOptions& options) {
  auto level = spdlog::level::from_str(options.level);
  if (level == spdlog::level::off && options.level != "off")
    throw ConfigError("unknown log level '" + options.level + "'",
                      "use one of trace, debug, info, warn, error, off");
  auto logger = spdlog::stderr_color_mt("ddgnn");
  if (options.all_ranks)
    logger->set_pattern("[%H:%M:%S.%e] [rank " + std::to_string(options.rank) + "] [%^%l%$] %v");
  else
    logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  if (options.rank != 0 && !options.all_ranks && level < spdlog::level::err)
    level = spdlog::level::err;
  logger->set_level(level);
  spdlog::set_default_logger(logger);
  g_options = options;
}

void set_log_options(const std::string& level, bool all_ranks) {
  LogOptions o = g_options;
  o.level = level;
  o.all_ranks = all_ranks;
  spdlog::drop("ddgnn");
  init_logging(o);
}

std::string current_log_level() {
  return g_options.level;
}

void set_log_rank(int rank) {
  if (rank == g_options.rank) return;
  LogOptions o = g_options;
  o.rank = rank;
  spdlog::drop("ddgnn");
  init_logging(o);
}

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

}  // namespace ddgnn
