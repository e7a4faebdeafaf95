// The data of a training run, spread over the ranks: each dataset file (one split by perc_train,
// or explicit train / validate / test files) is loaded once into the ranks' in-memory store
// (comm/store.h, each rank its contiguous part) and its graphs are fetched through the backend
// that Loader.backend names (comm/fetch.h). One rank is the same code with a world of one.
//
// Splits are addressed by position: graph k of the training split is position k (0 ..
// size(kTrain) - 1); the sampler deals positions, fetch() maps them to file ids and moves the
// records. Per-rank metadata: the store's O(N/P + P), and the split of one file as 2 bits a graph
// (loader/split.h SplitMap: HydraGNN's split rule is a permutation of the whole file). A list of
// files is one dataset: each file split on its own, the positions of a split file after file.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "config/train_settings.h"
#include "core/backend.h"
#include "loader/dataset.h"
#include "loader/split.h"
#include "loader/targets.h"

namespace ddgnn {

class Fetcher;
class LoaderGroup;
class ByteStore;

enum SplitIndex { kTrain = 0, kValidate = 1, kTest = 2 };
const char* split_name(int split);

// Loader.backend (empty: auto): auto is the local store on one rank (nothing to choose); on
// several, `shm` (node-local records by pointer, other nodes' by rma) until the online switcher
// (train/backend_switcher.h) decides, or for good when Tuner.enabled is false.
Backend resolve_backend(const std::optional<Backend>& backend, int world_size);

// What one fetch moved, for the switcher's measurements.
struct FetchInfo {
  double seconds = 0;   // the backend's fetch (moving the records), not the unpacking
  int64_t bytes = 0;    // record bytes
  int64_t samples = 0;  // records
  int64_t remote = 0;   // records owned by another rank of the loader group
};

class TrainData {
 public:
  // Collective over `world` (its ranks all construct it with the same settings). Opens the
  // files, splits, loads each rank's part into the store of its replica group and makes the
  // fetcher. Throws ConfigError for a backend this build or machine lacks, or a store over the
  // memory budget (on every rank together).
  TrainData(const TrainSettings& settings, MPI_Comm world);
  ~TrainData();
  TrainData(const TrainData&) = delete;
  TrainData& operator=(const TrainData&) = delete;

  // The backend that fetch() uses now; with "auto" on several ranks, the ones it can switch
  // between (one store in node shared memory with a window: rma, collective, shm; and file).
  Backend backend() const { return m_backend; }
  bool switchable() const { return m_candidates.size() > 1; }
  const std::vector<Backend>& candidates() const { return m_candidates; }
  // Every rank of the world switches at the same fetch (a collective backend needs all of them).
  void set_backend(Backend backend);
  // Ranks in this rank's loader group (1 without a group).
  int group_size() const;
  int64_t size(int split) const { return m_sizes[size_t(split)]; }
  // The file that holds `split` (the same Dataset for all three with one file; the first of a
  // list, whose files hold the same columns).
  const Dataset& dataset(int split) const;
  // The data for messages: a path, or "3 files (a.h5, b.h5, c.h5)".
  std::string describe() const;
  // Dataset.path as a list: its files (list_files() of them; 0 otherwise), each with the
  // per-structure column kBranchKey, its place in the list.
  size_t list_files() const { return m_list ? m_files.size() : 0; }
  const Dataset& list_file(size_t f) const;

  // Graphs at `positions` of `split`, in that order (GraphBlock::graph_ids: their file ids).
  // With a collective backend every rank of the loader group calls it the same number of times
  // in the same order (the sampler gives every rank the same number of steps).
  // `backend` (one of candidates()) overrides the current one for this call; `info` receives
  // the fetch's time and volume.
  GraphBlock fetch(int split, const std::vector<int64_t>& positions, FetchInfo* info = nullptr,
                   const Backend* backend = nullptr);

  // This rank's share of `split`, in chunks of at most `chunk` graphs, for statistics: f(block,
  // ids) with block-relative ids (the block holds the chunk's graphs of every split; the
  // per-atom arrays of those not in ids are left 0, not decoded). Over the ranks that
  // sum_stats() adds up, every graph of the split is shown exactly once.
  void visit_local(int split,
                   const std::function<void(const GraphBlock&, const std::vector<int64_t>&)>& f,
                   int64_t chunk = 4096) const;
  // The same without the per-atom arrays (pos, forces and per-atom columns may be empty: from
  // the store they are stepped over, not decoded), for statistics of the rest: atoms, elements,
  // energies, cells, stresses, per-structure columns.
  void visit_local_light(
      int split,
      const std::function<void(const GraphBlock&, const std::vector<int64_t>&)>& f) const;
  // Atoms of every graph of `split`, in position order, on every rank (collective; 2 bytes a
  // graph, 65535 for larger graphs: for atom-budget batching).
  std::vector<uint16_t> split_atoms(int split) const;
  // The bytes of the splits' maps on every rank (SplitMap, one per file split by perc_train; 0
  // with three files).
  int64_t split_map_bytes() const;
  // Element-wise sum over the ranks whose visit_local shares cover each split once.
  void sum_stats(long double* values, int64_t n) const;
  // Element-wise maximum over the same ranks.
  void max_stats(int64_t* values, int64_t n) const;

  // Load figures of this rank, and the group-wide maxima, for the log.
  struct LoadReport {
    double seconds = 0, max_seconds = 0;
    int64_t bytes = 0, max_bytes = 0, total_bytes = 0;
    int groups = 1, group_size = 1;
  };
  const LoadReport& load_report() const { return m_report; }
  // How one file was split: units (frames, blocks or groups) in train / validate / test, and in
  // all (units[k] = 0 with three files).
  struct SplitReport {
    SplitBy by = SplitBy::kFrame;
    int64_t block = 0;
    std::array<int64_t, 3> units{};
    int64_t n_units = 0;
    int64_t train_dropped = 0;  // training graphs left out by Dataset.train_fraction
  };
  const SplitReport& split_report() const { return m_split; }

 private:
  struct File;
  const File& file_of(int split) const;
  void visit(int split,
             const std::function<void(const GraphBlock&, const std::vector<int64_t>&)>& f,
             int64_t chunk, bool atom_arrays) const;
  void visit_file(const File& file, int split,
                  const std::function<void(const GraphBlock&, const std::vector<int64_t>&)>& f,
                  int64_t chunk, bool atom_arrays) const;

  Backend m_backend = Backend::kReplicated;
  std::vector<Backend> m_candidates;  // the backends fetch() can use (m_backend among them)
  // Destroyed in reverse order: the stores free their windows (collective) before the group and
  // the communicators go.
  Communicator m_world;  // dup of the world: statistics
  std::unique_ptr<LoaderGroup> m_group;
  Communicator m_stat_comm;  // whose ranks' local shares cover the data once
  // One, a list (each split on its own), or three (train, validate, test: m_explicit).
  std::vector<std::unique_ptr<File>> m_files;
  bool m_explicit = false;
  bool m_list = false;               // Dataset.path a list (of one file or more)
  std::array<int64_t, 3> m_sizes{};  // graphs of each split
  LoadReport m_report;
  SplitReport m_split;
};

}  // namespace ddgnn
