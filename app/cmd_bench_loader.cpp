// `mpiexec -n P ddgnn bench-loader [--out grid.csv] [--width W] [--mib-per-rank M]`: the loader
// backends' benchmark grid (comm/bench_loader.h) on the ranks of the launch.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "comm/bench_loader.h"
#include "comm/mpi.h"
#include "core/backend.h"
#include "core/error.h"

namespace ddgnn {

Command add_bench_loader_command(CLI::App& app) {
  auto o = std::make_shared<LoaderBenchOptions>();
  auto backends = std::make_shared<std::vector<std::string>>(to_strings(o->backends));
  CLI::App* sub =
      app.add_subcommand("bench-loader",
                         "measure the loader backends (rma, collective, shm, replicated): µs per "
                         "sample and GB/s against "
                         "memcpy, over sample sizes and batch sizes, on the ranks of this launch");
  sub->add_option("--out", o->csv, "CSV to append the grid to (rank 0 writes it)");
  sub->add_option("--width", o->width, "replica-group width (0: one group of all ranks)")
      ->capture_default_str();
  sub->add_option("--mib-per-rank", o->mib_per_rank, "store size per rank, MiB")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  sub->add_option("--sample-bytes", o->sample_bytes, "record sizes to measure")
      ->capture_default_str();
  sub->add_option("--batch", o->batch_sizes, "batch sizes to measure")->capture_default_str();
  sub->add_option("--backends", *backends, "backends to measure")
      ->capture_default_str()
      ->check(CLI::IsMember(
          to_strings({Backend::kRma, Backend::kCollective, Backend::kShm, Backend::kReplicated})));
  sub->add_option("--repetitions", o->repetitions,
                  "timed repetitions per cell (every backend, interleaved)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  sub->add_option("--max-seconds-per-cell", o->max_seconds_per_cell,
                  "fewer repetitions (down to 10) where a cell would take longer")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-batch-mib", o->max_batch_mib,
                  "skip the cells whose batch (batch size × sample bytes) is larger")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  return {sub, [o, backends] {
            o->backends = parse_backends(*backends, "--backends");
            return run_under_mpi([&](const MpiEnvironment&) {
              for (int64_t s : o->sample_bytes)
                if (s < 1)
                  throw ConfigError("--sample-bytes: " + std::to_string(s) + " is not positive");
              for (int64_t b : o->batch_sizes)
                if (b < 1) throw ConfigError("--batch: " + std::to_string(b) + " is not positive");
              run_loader_bench(*o);
            });
          }};
}

}  // namespace ddgnn
