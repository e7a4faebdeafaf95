// The loader backends' benchmark grid (see bench_loader.h).
#include "comm/bench_loader.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/fetch.h"
#include "comm/mpi.h"
#include "comm/store.h"
#include "core/energy_meter.h"

namespace ddgnn {

namespace {

using Clock = std::chrono::steady_clock;

// Repetitions that the replay of the online switcher counts as its exploration.
constexpr int kExplore = 5;
// The fewest repetitions a cell gets however slow it is (2 × kExplore: exploration and rest).
constexpr int kMinRepetitions = 2 * kExplore;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// GB/s of memcpy of a buffer larger than the caches, all ranks copying at once (best of 5).
double memcpy_gbps(MPI_Comm comm) {
  const size_t n = size_t(128) << 20;
  std::vector<uint8_t> a(n, 1), b(n, 0);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    MPI_Barrier(comm);
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), n);
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, t);
    a[size_t(rep)] = b[size_t(rep) + 1];  // keep the copies observable
  }
  return double(n) / best / 1e9;
}

// Repetitions of a cell: options.repetitions, fewer where one round (every backend once, the
// slowest rank's `round_s`) would take the cell past max_seconds_per_cell, but at least
// kMinRepetitions (or all that were asked for, when that is fewer).
int repetitions_within(const LoaderBenchOptions& options, double round_s) {
  const int floor = std::min(options.repetitions, kMinRepetitions);
  const double fit = options.max_seconds_per_cell / std::max(round_s, 1e-9);
  return std::max(floor, int(std::min<double>(options.repetitions, fit)));
}

}  // namespace

int64_t run_loader_bench(const LoaderBenchOptions& options) {
  const std::string& out_path = options.csv;
  const int width = options.width;
  const int64_t mib_per_rank = options.mib_per_rank;
  LoaderGroup group(MPI_COMM_WORLD, width);
  int world_rank = 0, world = 1;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  int64_t rows = 0;
  const double memcpy_bw = memcpy_gbps(MPI_COMM_WORLD);
  if (world_rank == 0)
    std::printf("%d ranks, width %d (%d per group), memcpy %.2f GB/s per rank\n", world, width,
                group.size(), memcpy_bw);
  // The machine's energy over the whole grid: one meter a node (its first rank), summed.
  const Communicator node = Communicator::split_node(MPI_COMM_WORLD, world_rank);
  std::unique_ptr<EnergyMeter> meter;
  if (node.rank() == 0) meter = std::make_unique<EnergyMeter>(EnergySource::kAuto);
  if (world_rank == 0 && meter && !meter->active()) std::printf("%s\n", meter->notice().c_str());
  const auto grid_start = std::chrono::steady_clock::now();
  std::FILE* csv = nullptr;
  if (world_rank == 0 && !out_path.empty()) {
    const bool fresh = !std::ifstream(out_path).good();
    csv = std::fopen(out_path.c_str(), "a");
    if (fresh && csv)
      std::fprintf(
          csv,
          "backend,ranks,group_ranks,width,sample_bytes,batch,fraction_remote,"
          "us_per_sample,gb_per_s,memcpy_gb_per_s,seconds_per_batch,p25_seconds,p75_seconds,"
          "repetitions,explore_seconds,rest_seconds,beats_best\n");
  }
  if (world_rank == 0)
    std::printf("%-11s %8s %6s %10s %8s %8s %9s %5s\n", "backend", "bytes", "batch", "us/sample",
                "GB/s", "memcpy%", "remote", "reps");
  // Stores: one in window memory over the group (rma, collective), one in node shared memory
  // (shm), and a full copy on every rank (replicated: the local fetcher over MPI_COMM_SELF). All
  // live at once so that the backends are measured interleaved: every repetition times each
  // backend in turn (in a rotated order), so that drift of the machine hits all of them alike.
  enum Kind { kWindow, kShared, kReplicated };
  auto kind_of = [](Backend backend) {
    return backend == Backend::kShm          ? kShared
           : backend == Backend::kReplicated ? kReplicated
                                             : kWindow;
  };
  for (const int64_t sample : options.sample_bytes) {
    const int64_t per_rank = std::max<int64_t>(64, (mib_per_rank << 20) / sample);
    const int64_t n_total = per_rank * group.size();
    std::unique_ptr<ByteStore> stores[3];
    std::unique_ptr<Partition> parts[3];
    int store_ranks[3] = {0, 0, 0};
    for (const Kind kind : {kWindow, kShared, kReplicated}) {
      if (std::none_of(options.backends.begin(), options.backends.end(),
                       [&](Backend b) { return kind_of(b) == kind; }))
        continue;
      StoreOptions so;
      so.shared = kind == kShared;
      so.world = MPI_COMM_WORLD;
      const MPI_Comm store_comm = kind == kReplicated ? MPI_COMM_SELF : group.comm();
      store_ranks[kind] = kind == kReplicated ? 0 : group.rank();
      parts[kind] =
          std::make_unique<Partition>(Partition{n_total, kind == kReplicated ? 1 : group.size()});
      std::vector<int64_t> sizes(size_t(parts[kind]->count(store_ranks[kind])), sample);
      stores[kind] = std::make_unique<ByteStore>(store_comm, n_total, sizes, so);
      ByteStore& store = *stores[kind];
      for (int64_t i = 0; i < store.n_bytes(); ++i) store.data()[i] = uint8_t(i * 131 + 7);
      store.ready();
    }
    std::vector<std::unique_ptr<Fetcher>> fetchers;
    for (const Backend backend : options.backends)
      fetchers.push_back(make_store_fetcher(backend, *stores[kind_of(backend)]));
    const size_t nb = options.backends.size();
    // Warm every store: each rank fetches every record once with every backend, so that the
    // cells time the steady state of training (the data touched before) and not first touches.
    // The backends take turns chunk by chunk: warmed one after the other, the last one's store
    // filled the cache and the others' records came back into it only over the first dozen
    // repetitions (at 1 KiB on one rank rma, shm and collective started 20-40% slow while
    // replicated, warmed last, did not), which biased the online switcher's replay.
    {
      const int64_t chunk = std::clamp<int64_t>((int64_t(64) << 20) / sample, 1, 1024);
      std::vector<int64_t> all;
      Fetched f;
      for (int64_t first = 0; first < n_total; first += chunk) {
        all.resize(size_t(std::min(chunk, n_total - first)));
        for (size_t k = 0; k < all.size(); ++k) all[k] = first + int64_t(k);
        for (size_t b = 0; b < nb; ++b) fetchers[b]->fetch(all.data(), int64_t(all.size()), f);
      }
    }
    // The cells of this sample size (a batch at most max_batch_mib) are measured together: every
    // repetition visits each cell in turn, so that a cell's repetitions are spread over the
    // whole measurement instead of a few milliseconds that one disturbance of the machine (a
    // descheduled rank, another process) can cover. Within a cell the backends take turns in an
    // order shuffled per repetition (the same on every rank), each with ids of its own: with the
    // same ids, the first backend brought the records into the cache for the others, and the
    // order, not the backend, decided which one was faster in a repetition. A rotated order was
    // not enough: it gives every backend the same predecessor in every repetition, and
    // collective, which always followed rma over the same store, found a batch of 16 MiB on
    // one rank 10-20% warmer than rma did (which followed replicated's separate copy).
    struct Cell {
      int64_t batch;
      std::mt19937_64 rng;
      std::vector<int64_t> ids;
      Fetched f;
      std::vector<std::vector<double>> times;
      std::vector<int64_t> remote, asked;
    };
    std::vector<Cell> cells;
    for (const int64_t batch : options.batch_sizes) {
      if (batch * sample > (options.max_batch_mib << 20)) continue;
      // Every rank of the group measures (and the collective backends need all of them).
      cells.push_back({batch, std::mt19937_64(uint64_t(world_rank) * 7919 + uint64_t(batch)),
                       std::vector<int64_t>(size_t(batch)), Fetched{},
                       std::vector<std::vector<double>>(nb), std::vector<int64_t>(nb, 0),
                       std::vector<int64_t>(nb, 0)});
    }
    std::uniform_int_distribution<int64_t> pick(0, n_total - 1);
    // Two warm-up repetitions, then as many as asked, fewer (down to kMinRepetitions) where
    // that many would take a cell past its time budget on average; every rank agrees.
    int reps = 0;
    std::mt19937_64 order_rng{static_cast<uint64_t>(sample)};  // seeded alike on every rank
    std::vector<size_t> order(nb);
    for (int rep = -2; rep < reps; ++rep) {
      double round_s = 0;
      for (Cell& c : cells) {
        for (size_t j = 0; j < nb; ++j) order[j] = j;
        std::shuffle(order.begin(), order.end(), order_rng);
        for (const size_t b : order) {
          for (auto& id : c.ids) id = pick(c.rng);
          MPI_Barrier(group.comm());
          const auto t0 = Clock::now();
          fetchers[b]->fetch(c.ids.data(), c.batch, c.f);
          const double t = std::chrono::duration<double>(Clock::now() - t0).count();
          round_s += t;
          if (rep < 0) continue;
          c.times[b].push_back(t);
          const Kind kind = kind_of(options.backends[b]);
          for (int64_t id : c.ids)
            c.remote[b] += parts[kind]->owner(id) != store_ranks[kind] ? 1 : 0;
          c.asked[b] += c.batch;
        }
      }
      if (rep == -1 && !cells.empty()) {
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &round_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        reps = repetitions_within(options, round_s / double(cells.size()));
      }
    }
    for (Cell& c : cells) {
      const int64_t batch = c.batch;
      const std::vector<std::vector<double>>& times = c.times;
      const std::vector<int64_t>&remote = c.remote, &asked = c.asked;
      // Each repetition's slowest rank is the step's time.
      std::vector<std::vector<double>> slowest(nb);
      std::vector<double> medians(nb);
      for (size_t b = 0; b < nb; ++b) {
        slowest[b].resize(times[b].size());
        MPI_CHECK(MPI_Allreduce(times[b].data(), slowest[b].data(), int(slowest[b].size()),
                                MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        medians[b] = median(slowest[b]);
      }
      const size_t best =
          size_t(std::min_element(medians.begin(), medians.end()) - medians.begin());
      for (size_t b = 0; b < nb; ++b) {
        // The online switcher's view: the first kExplore repetitions (its exploration) and the
        // rest (what it is then served), so that `ddgnn tune` can replay `auto` held out.
        const std::vector<double>& s = slowest[b];
        const size_t explore = std::min(s.size() / 2, size_t(kExplore));
        const double t_explore = median(std::vector<double>(s.begin(), s.begin() + long(explore)));
        const double t_rest = median(std::vector<double>(s.begin() + long(explore), s.end()));
        // Paired with the fastest backend (adjacent in time): the repetitions this one
        // was faster in, for a sign test of whether the two differ at all.
        int beats_best = 0;
        for (size_t r = 0; r < s.size(); ++r) beats_best += s[r] < slowest[best][r] ? 1 : 0;
        std::vector<double> sorted = s;
        std::sort(sorted.begin(), sorted.end());
        const double t = medians[b];
        const double q1 = sorted[sorted.size() / 4], q3 = sorted[(3 * sorted.size()) / 4];
        const double us = 1e6 * t / double(batch), gbps = double(batch * sample) / t / 1e9;
        const double frac = double(remote[b]) / double(std::max<int64_t>(asked[b], 1));
        const std::string backend = to_string(options.backends[b]);
        if (world_rank == 0) {
          std::printf("%-11s %8lld %6lld %10.2f %8.2f %7.0f%% %8.0f%% %5d\n", backend.c_str(),
                      (long long)sample, (long long)batch, us, gbps, 100 * gbps / memcpy_bw,
                      100 * frac, int(s.size()));
          ++rows;
          if (csv)
            std::fprintf(
                csv, "%s,%d,%d,%d,%lld,%lld,%.4f,%.4f,%.4f,%.3f,%.6g,%.6g,%.6g,%d,%.6g,%.6g,%d\n",
                backend.c_str(), world, group.size(), width, (long long)sample, (long long)batch,
                frac, us, gbps, memcpy_bw, t, q1, q3, int(s.size()), t_explore, t_rest, beats_best);
        }
      }
    }
    fetchers.clear();
    for (auto& st : stores) st.reset();
  }
  if (csv) std::fclose(csv);
  double energy[2] = {0, 0};  // joules, nodes measuring
  if (meter && meter->active()) {
    energy[0] = meter->joules();
    energy[1] = 1;
  }
  MPI_CHECK(MPI_Reduce(world_rank == 0 ? MPI_IN_PLACE : energy, energy, 2, MPI_DOUBLE, MPI_SUM, 0,
                       MPI_COMM_WORLD));
  const double grid_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - grid_start).count();
  if (world_rank == 0 && energy[1] > 0)
    std::printf("energy: %.4g J over the grid's %.3g s (%.4g W), measured by %s on %.0f node(s)\n",
                energy[0], grid_s, energy[0] / grid_s,
                meter ? meter->description().c_str() : "the nodes' counters", energy[1]);
  return rows;
}

}  // namespace ddgnn
