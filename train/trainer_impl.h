// The Trainer of `ddgnn train` (train/trainer.h): its state and steps, shared by the epoch loop
// (train/trainer.cpp) and the end of each epoch (train/trainer_epoch.cpp). Internal to train/.
#pragma once

#include <sys/resource.h>
#include <torch/optim/optimizer.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/watchdog.h"
#include "config/train_settings.h"
#include "model/optim.h"
#include "train/checkpoint.h"
#include "train/ddp.h"
#include "train/device.h"
#include "train/job_energy.h"
#include "train/loader.h"
#include "train/model_setup.h"
#include "train/run_log.h"
#include "train/spike_log.h"
#include "train/split_metrics.h"
#include "train/step.h"
#include "train/trainer.h"

namespace ddgnn {

namespace trainer_detail {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The process's peak resident memory so far, MiB.
inline double peak_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;
}

// The figures of one evaluation period (an epoch, or Training.eval_every_steps steps; shorter
// where a resume or the run's end cuts it), summed over the ranges of steps trained in it.
struct Period {
  Period(const ModelSetup& setup, int64_t epoch, double lr, int64_t replayed)
      : metrics(setup), row({{"epoch", epoch}, {"lr", lr}}), replayed_before(replayed) {}
  SplitMetrics metrics;  // the training split's, as its steps ran
  nlohmann::json row;    // epoch, lr (the rate of its first step)
  PhaseSeconds phases;
  double gn_sum = 0, train_s = 0;  // summed gradient norms; seconds of its training steps
  int64_t graphs_all = 0, steps = 0, unpadded = 0, skipped = 0, replayed_before = 0;
  std::vector<double> losses;  // this rank's finite step losses, for their median
  Clock::time_point t_start = Clock::now();
};

// The process's resident memory now, MiB (0 where /proc is not there).
inline double rss_mb() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / double(1 << 20);
}

// The process's proportional set size now, MiB (/proc/self/smaps_rollup's Pss: a page shared by
// k processes counts 1/k in each, so the store's shared window, whose pages every rank that
// reads them maps, counts once over the ranks; 0 where the file is not there).
inline double pss_mb() {
  double kb = 0;
  if (FILE* f = std::fopen("/proc/self/smaps_rollup", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "Pss: %lf kB", &kb) == 1) break;
    std::fclose(f);
  }
  return kb / 1024.0;
}

}  // namespace trainer_detail

class Trainer {
 public:
  Trainer(const Config& config, const TrainOptions& options)
      : m_config(config),
        m_options(options),
        m_s(train_settings(config)),
        m_comm(Communicator::dup(MPI_COMM_WORLD)),
        m_rank(m_comm.rank()),
        m_world(m_comm.size()),
        m_root(m_rank == 0) {}
  nlohmann::json run();

 private:
  nlohmann::json run_impl();
  int set_up_threads();
  void build_model(const nlohmann::json* resume_record);
  void log_start(int threads, const std::string& resume_path);
  void begin_stage_two(int64_t epoch);
  // Steps [first, last) of `epoch` (of n_steps) into `period`; returns where it stopped: `last`,
  // or the step at which a signal (m_interrupted_at) or the deadline (m_out_of_time_at) stopped
  // every rank.
  int64_t train_steps(int64_t epoch, int64_t first, int64_t last, int64_t n_steps,
                      trainer_detail::Period& period);
  // The period's training figures into its row (collective: the metrics' sums).
  void close_period(trainer_detail::Period& period);
  // Validation and test of the period, then end_period; true when the run stops here.
  bool evaluate_period(int64_t epoch, bool epoch_end, trainer_detail::Period& period);
  SplitMetrics evaluate_split(int split);
  // After a step where a rank was asked to stop: interrupted.pt on rank 0, then an Error on every
  // rank (the process exits non-zero).
  [[noreturn]] void stop_on_signal();
  // The deadline of Training.time_limit_s passed inside a period: a checkpoint of that step, the
  // event and the line.
  void stop_for_time();
  // Decisions, checkpoints, the metrics row and the log line; true when the run stops here.
  bool end_period(int64_t epoch, bool epoch_end, nlohmann::json& row, const SplitMetrics& val_m,
                  trainer_detail::Clock::time_point t0);
  void write_checkpoint(const std::string& path, bool with_optimizer);
  // The rolling checkpoint of where the run is (epoch_NNNNN.pt, or epoch_NNNNN_step_SSSSSSS.pt
  // inside an epoch), rotated by Output.keep_checkpoints, with its event; returns its path.
  // Rank 0.
  std::string write_rolling_checkpoint();
  // The data and split of this run, as the checkpoint records them.
  nlohmann::json split_record() const;
  TrainedObjects trained() {
    return {m_gnn.get(),
            &m_params,
            m_opt.get(),
            m_ema.get(),
            m_plateau.get(),
            m_early.get(),
            m_step_fn ? m_step_fn->spike_guard() : nullptr};
  }
  double elapsed() const {
    return m_elapsed_before + trainer_detail::seconds(m_t_start, trainer_detail::Clock::now());
  }

  const Config& m_config;
  TrainOptions m_options;
  TrainSettings m_s;
  Communicator m_comm;  // the main thread's collectives: gradients, metrics, decisions
  int m_rank = 0, m_world = 1;
  bool m_root = true;  // rank 0 writes the run directory and logs
  // DDGNN_DEBUG_SIGKILL_AT_STEP=S: every rank dies at step S (tests of resuming).
  const int64_t m_kill_step = std::getenv("DDGNN_DEBUG_SIGKILL_AT_STEP")
                                  ? std::atoll(std::getenv("DDGNN_DEBUG_SIGKILL_AT_STEP"))
                                  : -1;
  std::unique_ptr<FolderLock> m_run_lock;  // rank 0: Output.run_dir is this run's
  std::unique_ptr<Watchdog> m_watchdog;    // Comm.timeout_s
  std::unique_ptr<JobEnergy> m_energy;     // Output.energy_meter
  Placement m_place;                       // this rank's device (Runtime.device)
  std::unique_ptr<Loader> m_loader;
  ModelSetup m_setup;
  std::shared_ptr<Gnn> m_gnn;
  std::vector<at::Tensor> m_params;
  std::unique_ptr<DataParallel> m_ddp;  // several ranks
  std::unique_ptr<torch::optim::Optimizer> m_opt;
  std::unique_ptr<WeightAverage> m_ema;  // Training.ema_decay > 0
  std::unique_ptr<ReduceLROnPlateau> m_plateau;
  std::unique_ptr<EarlyStopping> m_early;
  std::unique_ptr<TrainStep> m_step_fn;
  RunLog m_log{m_root, m_s.log_all_ranks};  // rank 0's run directory and log lines
  bool m_forces = false;                    // the model predicts forces and the data has them
  std::optional<std::pair<int64_t, int64_t>> m_interrupted_at;  // (epoch, steps done) on a signal
  std::optional<std::pair<int64_t, int64_t>> m_out_of_time_at;  // (epoch, steps done): deadline
  bool m_cut_reported = false;  // max_neighbours cut some atom's neighbours (warned)
  RunState m_state;             // step, best epoch so far (epoch: set when a checkpoint is written)
  SpikeLog m_spikes{m_log, m_s};  // the spike guard's skipped and applied steps
  int64_t m_start_epoch = 1;
  int64_t m_epoch = 0;  // the epoch in progress
  nlohmann::json m_last_row;
  std::string m_stop_reason = "num_epoch";
  trainer_detail::Clock::time_point m_t_start = trainer_detail::Clock::now();
  double m_elapsed_before = 0.0;   // training seconds of the run before a resume
  double m_first_step_s = -1.0;    // seconds from start to this run's first step done
  double m_first_step_rss_mb = 0;  // resident memory then (the data's, before the steps' own)
  double m_first_step_pss_mb = 0;  // and its proportional share (shared pages split)
};

}  // namespace ddgnn
