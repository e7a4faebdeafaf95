// The loader backends' benchmark grid (`ddgnn bench-loader`, bench/bench_loader): backend × sample
// size × batch size on the ranks of a launch. The stores are warmed first (every rank fetches every
// record once with every backend: first touches of a peer's pages are page faults, not the steady
// state of training). Every repetition fetches one batch of random samples with each backend in
// turn (each its own ids, so that none finds the records another just fetched in the cache; the
// order shuffled per repetition, so that drift of the machine and the cache a predecessor leaves
// hit all backends alike; every rank asks for its own batch at once), and visits every batch size
// of the sample size in turn, so that a cell's repetitions spread over the whole measurement rather
// than a few milliseconds. Per cell: the slowest rank's time per repetition, as median and
// quartiles, as µs per sample and GB/s, beside this machine's memcpy bandwidth measured in the same
// run (every rank copying at once) as the ceiling; and the medians over the first 5 repetitions and
// over the rest, with which `ddgnn tune` replays the online switcher (it explores, then is served);
// and beats_best, the repetitions in which the backend was faster than the cell's fastest (lowest
// median) in the same repetition, for a paired sign test of whether they differ. Synthetic records
// of a fixed size: the store does not look inside them. Collective over MPI_COMM_WORLD. (The `file`
// backend reads graph records from HDF5: bench/train_scaling.sh measures it in training.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"

namespace ddgnn {

struct LoaderBenchOptions {
  std::string csv;  // appended to (header when new) on rank 0; empty: print only
  int width = 0;    // replica-group width (Loader.width)
  int64_t mib_per_rank = 64;
  std::vector<int64_t> sample_bytes = {1 << 10, 4 << 10, 64 << 10, 1 << 20};
  std::vector<int64_t> batch_sizes = {16, 64, 256};
  // rma, collective, shm, replicated (a full copy on every rank: the local store)
  std::vector<Backend> backends = {Backend::kRma, Backend::kCollective, Backend::kShm,
                                   Backend::kReplicated};
  // Timed repetitions per cell (after two warm-up ones); fewer, down to 10, where that many
  // would take longer than max_seconds_per_cell (1 MiB records in batches of 256 on 8 ranks).
  int repetitions = 30;
  double max_seconds_per_cell = 20.0;
  // Cells whose batch (batch × sample bytes) is larger are not measured.
  int64_t max_batch_mib = 256;
};

// Runs the grid; rank 0 prints a table (and writes the CSV). Returns the rows written.
int64_t run_loader_bench(const LoaderBenchOptions& options);

}  // namespace ddgnn
