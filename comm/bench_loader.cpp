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

#include "comm/fetch.h"
#include "comm/mpi.h"
#include "comm/store.h"

namespace ddgnn {

namespace {

using Clock = std::chrono::steady_clock;

// Repetitions that the replay of the online switcher counts as its exploration.
constexpr int kExplore = 5;

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
  std::FILE* csv = nullptr;
  if (world_rank == 0 && !out_path.empty()) {
    const bool fresh = !std::ifstream(out_path).good();
    csv = std::fopen(out_path.c_str(), "a");
    if (fresh && csv)
      std::fprintf(
          csv,
          "backend,ranks,group_ranks,width,sample_bytes,batch,fraction_remote,"
          "us_per_sample,gb_per_s,memcpy_gb_per_s,seconds_per_batch,p25_seconds,p75_seconds,"
          "repetitions,explore_seconds,rest_seconds\n");
  }
  if (world_rank == 0)
    std::printf("%-11s %8s %6s %10s %8s %8s %9s\n", "backend", "bytes", "batch", "us/sample",
                "GB/s", "memcpy%", "remote");
  // Stores: one in window memory over the group (rma, collective), one in node shared memory
  // (shm), and a full copy on every rank (replicated: the local fetcher over MPI_COMM_SELF). All
  // live at once so that the backends are measured interleaved: every repetition times each
  // backend in turn (in a rotated order), so that drift of the machine hits all of them alike.
  enum Kind { kWindow, kShared, kReplicated };
  auto kind_of = [](const std::string& backend) {
    return backend == "shm" ? kShared : backend == "replicated" ? kReplicated : kWindow;
  };
  for (const int64_t sample : options.sample_bytes) {
    const int64_t per_rank = std::max<int64_t>(64, (mib_per_rank << 20) / sample);
    const int64_t n_total = per_rank * group.size();
    std::unique_ptr<ByteStore> stores[3];
    std::unique_ptr<Partition> parts[3];
    int store_ranks[3] = {0, 0, 0};
    for (const Kind kind : {kWindow, kShared, kReplicated}) {
      if (std::none_of(options.backends.begin(), options.backends.end(),
                       [&](const std::string& b) { return kind_of(b) == kind; }))
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
    for (const std::string& backend : options.backends) {
      const Kind kind = kind_of(backend);
      fetchers.push_back(make_fetcher(kind == kReplicated ? "local" : backend, *stores[kind]));
    }
    const size_t nb = options.backends.size();
    for (const int64_t batch : options.batch_sizes) {
      if (batch * sample > (int64_t(256) << 20)) continue;  // keep a batch under 256 MiB
      // Every rank of the group measures (and the collective backends need all of them).
      std::mt19937_64 rng(uint64_t(world_rank) * 7919 + uint64_t(batch));
      std::uniform_int_distribution<int64_t> pick(0, n_total - 1);
      std::vector<int64_t> ids(static_cast<size_t>(batch));
      Fetched f;
      const int reps = sample >= (int64_t(1) << 20) ? 10 : 30;
      std::vector<std::vector<double>> times(nb);
      std::vector<int64_t> remote(nb, 0), asked(nb, 0);
      for (int rep = -2; rep < reps; ++rep) {
        for (auto& id : ids) id = pick(rng);
        for (size_t j = 0; j < nb; ++j) {
          const size_t b = (j + size_t(rep + 2)) % nb;
          MPI_Barrier(group.comm());
          const auto t0 = Clock::now();
          fetchers[b]->fetch(ids.data(), batch, f);
          const double t = std::chrono::duration<double>(Clock::now() - t0).count();
          if (rep < 0) continue;
          times[b].push_back(t);
          const Kind kind = kind_of(options.backends[b]);
          for (int64_t id : ids) remote[b] += parts[kind]->owner(id) != store_ranks[kind] ? 1 : 0;
          asked[b] += batch;
        }
      }
      for (size_t b = 0; b < nb; ++b) {
        // Each repetition's slowest rank is the step's time; the median and quartiles over them.
        std::vector<double> slowest(times[b].size());
        MPI_CHECK(MPI_Allreduce(times[b].data(), slowest.data(), int(slowest.size()), MPI_DOUBLE,
                                MPI_MAX, MPI_COMM_WORLD));
        // The online switcher's view: the first kExplore repetitions (its exploration) and the
        // rest (what it is then served), so that `ddgnn tune` can replay `auto` held out.
        const size_t explore = std::min(slowest.size() / 2, size_t(kExplore));
        const double t_explore =
            median(std::vector<double>(slowest.begin(), slowest.begin() + long(explore)));
        const double t_rest =
            median(std::vector<double>(slowest.begin() + long(explore), slowest.end()));
        std::sort(slowest.begin(), slowest.end());
        const double t = median(slowest);
        const double q1 = slowest[slowest.size() / 4], q3 = slowest[(3 * slowest.size()) / 4];
        const double us = 1e6 * t / double(batch), gbps = double(batch * sample) / t / 1e9;
        const double frac = double(remote[b]) / double(std::max<int64_t>(asked[b], 1));
        const std::string& backend = options.backends[b];
        if (world_rank == 0) {
          std::printf("%-11s %8lld %6lld %10.2f %8.2f %7.0f%% %8.0f%%\n", backend.c_str(),
                      (long long)sample, (long long)batch, us, gbps, 100 * gbps / memcpy_bw,
                      100 * frac);
          ++rows;
          if (csv)
            std::fprintf(
                csv, "%s,%d,%d,%d,%lld,%lld,%.4f,%.4f,%.4f,%.3f,%.6g,%.6g,%.6g,%d,%.6g,%.6g\n",
                backend.c_str(), world, group.size(), width, (long long)sample, (long long)batch,
                frac, us, gbps, memcpy_bw, t, q1, q3, int(slowest.size()), t_explore, t_rest);
        }
      }
    }
    fetchers.clear();
    for (auto& st : stores) st.reset();
  }
  if (csv) std::fclose(csv);
  return rows;
}

}  // namespace ddgnn
