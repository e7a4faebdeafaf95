// The trainer's one face to the data: ready batches. The loader owns the run's data on the ranks
// (TrainData: stores, backends), the online backend switcher (Loader.backend auto on several
// ranks), the sampler and the prefetch thread; a batch comes out fetched through the backend,
// collated into a GraphBatch with its radius graph and normalised targets (model_setup.h), and,
// for training, with the step's graphs and atoms summed over the ranks (each rank's loss share).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "config/train_settings.h"
#include "train/backend_switcher.h"
#include "train/model_setup.h"
#include "train/prefetcher.h"
#include "train/train_data.h"

namespace ddgnn {

// One step's batch on this rank: the prepared graphs (none when this rank has no sample in the
// step), and for training the graphs and atoms of the step on all ranks (the loss shares).
struct StepBatch {
  PreparedBatch prepared;
  bool empty = true;
  int64_t graphs_all = 0, atoms_all = 0;
  double fetch_s = 0.0;  // moving the records (the backend's part of loading)
  std::chrono::steady_clock::time_point t_fetch, t_fetched, t_built;  // for the trace
  SwitchNote note;    // the backend switcher's explorations and decisions (training, auto)
  bool stop = false;  // a rank was asked to stop by a signal: every rank stops at this step
  // A rank built it after the deadline (set_deadline): every rank stops at this step.
  bool out_of_time = false;
};

using Batches = Prefetcher<StepBatch>;

class Loader {
 public:
  // Collective over `world`: loads the data (TrainData) and sums the splits' sizes in atoms.
  Loader(const TrainSettings& settings, MPI_Comm world);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  TrainData& data() { return *m_data; }
  const TrainData& data() const { return *m_data; }
  // Atoms of each split over all ranks (evaluation losses are means over a whole split), and the
  // graphs with a periodic cell.
  int64_t split_atoms(int split) const { return m_split_atoms[split]; }
  int64_t periodic_graphs() const { return m_periodic_graphs; }

  // With Loader.backend auto on several ranks, starts the online switcher (collective), which
  // writes `csv_path` (rank 0; appended to when `append`). Does nothing otherwise.
  void start_switcher(const std::string& csv_path, bool append);
  // "backend rma, 2 rank(s), 1 replica group(s) of 2; store ... loaded in ... s" for the log, and
  // the same figures as JSON (the run_start event).
  std::string description() const;
  nlohmann::json figures() const;

  // Starts `epoch`: this rank's batches of it (the sampler's: batch_size graphs, or atom-budget
  // steps balanced over the ranks) and the switcher's epoch. Returns its steps, the same on every
  // rank.
  int64_t begin_epoch(int64_t epoch);
  // Steps [first, last) of the epoch begun, through the backend (switching under auto),
  // prefetch_depth ahead; every builder is done when the last is taken, so that the trainer may
  // evaluate between two ranges. A step built after a rank's signal or deadline is the last.
  Batches train_steps(int64_t first, int64_t last, const ModelSetup& setup);
  // Training.time_limit_s: a step built after `deadline` stops the run there (every rank at the
  // same step), except the run's first step, which always runs.
  void set_deadline(std::chrono::steady_clock::time_point deadline) { m_deadline = deadline; }
  // This rank's share of the validation or test split, in order (eval_batch_size graphs each),
  // each batch given to `f`. Built once and kept when the shares are small (the same decision on
  // every rank, so that no rank skips a collective fetch that another makes).
  void for_each_eval_batch(int split, const ModelSetup& setup,
                           const std::function<void(const PreparedBatch&)>& f);

 private:
  StepBatch build(int split, const std::vector<int64_t>& positions, const ModelSetup& setup,
                  bool training);

  TrainSettings m_s;
  int m_rank = 0, m_world = 1;
  std::unique_ptr<TrainData> m_data;
  std::unique_ptr<BackendSwitcher> m_switcher;  // Loader.backend auto on several ranks
  Communicator m_count_comm;                    // the prefetch thread's per-step sums
  std::vector<uint16_t> m_train_atoms;          // atoms of each training position (atom budget)
  std::vector<std::vector<int64_t>> m_epoch_batches;  // this rank's batches of the epoch begun
  std::optional<std::chrono::steady_clock::time_point> m_deadline;
  int64_t m_steps_built = 0;  // training steps built by this run (the first ignores the deadline)
  int64_t m_split_atoms[3] = {0, 0, 0};
  int64_t m_periodic_graphs = 0;
  bool m_cache_eval = true;
  std::vector<PreparedBatch> m_eval_cache[3];
  bool m_eval_cached[3] = {false, false, false};
};

}  // namespace ddgnn
