// ddgnn: the one executable. Parses the command line (CLI11), sets up logging, runs the chosen
// subcommand, and turns any error into one line on stderr plus a non-zero exit — MPI_Abort
// where other ranks would otherwise hang.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <exception>
#include <vector>

#include "app/commands.h"
#include "comm/mpi.h"
#include "core/alloc.h"
#include "core/error.h"
#include "core/log.h"
#include "core/version.h"
#include "loader/h5_exit.h"

namespace {

int report(const std::exception& e) {
  const int rank = ddgnn::world_rank_or_none();
  std::fprintf(stderr, "%s\n",
               ddgnn::error_line(e, ddgnn::world_size_or_one() > 1 ? rank : -1).c_str());
  std::fflush(stderr);
  ddgnn::abort_job(1);  // other ranks would wait forever in their next collective
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  ddgnn::tune_allocator();  // before the first tensor: freed buffers stay in the heap
  // A write past the file size limit (ulimit -f) then fails with EFBIG, which the writer reports
  // and cleans up after, instead of killing the process with no message and its temporary left.
  std::signal(SIGXFSZ, SIG_IGN);
  ddgnn::h5::take_over_library_exit();
  CLI::App app{
      "ddgnn: distributed training of multi-headed graph neural networks for atomistic "
      "energies and forces"};
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       std::string("ddgnn ") + DDGNN_VERSION + " (" + DDGNN_GIT_DESCRIBE + ")");
  ddgnn::LogOptions log;
  app.add_option("--log-level", log.level, "trace, debug, info, warn, error, off")
      ->capture_default_str();
  app.add_flag("--log-all-ranks", log.all_ranks, "every rank logs (default: rank 0 only)");

  std::vector<ddgnn::Command> commands = {
      ddgnn::add_convert_command(app), ddgnn::add_info_command(app),
      ddgnn::add_config_command(app),  ddgnn::add_bench_loader_command(app),
      ddgnn::add_tune_command(app),    ddgnn::add_simulate_command(app),
#ifdef DDGNN_WITH_TORCH
      ddgnn::add_train_command(app),   ddgnn::add_evaluate_command(app),
      ddgnn::add_driver_command(app),
#endif
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    log.rank = 0;
    ddgnn::init_logging(log);
    for (auto& c : commands)
      if (c.sub->parsed()) return c.run();
    return 0;
  } catch (const std::exception& e) {
    return report(e);
  }
}
