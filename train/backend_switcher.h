// The online backend switcher of `ddgnn train` (Loader.backend "auto" on several ranks): the
// training split's fetches go through it. While exploring, each step's batch is fetched with
// every candidate backend (the same ids; one result is used), each timed; after
// Tuner.explore_batches steps the slowest rank's times reach rank 0 (MPI_Reduce, max), which
// decides (tuner/online.h) and broadcasts; all ranks switch at the next fetch, a batch boundary.
// While serving, every Tuner.check_every_steps the window's time is checked against the
// prediction (drift re-explores), and every Tuner.recheck_every_epochs a new epoch re-explores.
// Every measurement and decision is a row of <run_dir>/tuner.csv (rank 0) and a span of the
// trace. Runs on the prefetch thread, in lockstep on all ranks (every rank fetches the same
// number of training batches per epoch), over its own communicator.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "train/train_data.h"

namespace ddgnn {

class OnlineTuner;
struct FetchFeatures;

// What a fetch did, for the trainer's trace and log (filled on every rank; `decision` and
// `line` only when this fetch ended an exploration or a check re-opened one).
struct SwitchNote {
  struct Span {
    std::string name;  // "tuner.explore:<backend>"
    std::chrono::steady_clock::time_point begin, end;
  };
  std::vector<Span> spans;
  std::string line;   // a log line (rank 0), empty when nothing was decided
  std::string event;  // the events.jsonl record of it (JSON text), empty likewise
};

class BackendSwitcher {
 public:
  // Collective over `world`. csv_path: rank 0's tuner.csv (empty: none). Reads the prior models
  // (Tuner.models) when given: a ConfigError names the file.
  BackendSwitcher(TrainData& data, const TrainSettings& settings, MPI_Comm world,
                  const std::string& csv_path, bool append);
  ~BackendSwitcher();
  BackendSwitcher(const BackendSwitcher&) = delete;
  BackendSwitcher& operator=(const BackendSwitcher&) = delete;

  // Before an epoch's batches are fetched (not while a prefetch thread runs).
  void start_epoch(int64_t epoch);
  // The training split's graphs at `positions` (TrainData::fetch with the switching).
  GraphBlock fetch(const std::vector<int64_t>& positions, FetchInfo* info, SwitchNote* note);

 private:
  void write_row(const std::string& event, const std::string& backend, double seconds,
                 double predicted, const std::string& chosen, const std::string& reason,
                 double overhead);
  void end_exploration(SwitchNote* note);
  void check_drift(SwitchNote* note);
  // The features of the batches fetched since the last decision or check (this rank's).
  FetchFeatures window_features() const;
  // Rank 0's exploring flag, current backend and explored set to all ranks (collective), and a
  // fresh exploration round and window.
  void share_state();
  // Sleeps for DDGNN_DEBUG_SLOW_FETCH's delay of `backend` at this step; returns the seconds.
  double debug_delay(const std::string& backend) const;

  TrainData& m_data;
  std::unique_ptr<OnlineTuner> m_tuner;
  Communicator m_comm;  // the prefetch thread's: reductions of times, decisions
  int m_rank = 0, m_ranks_per_node = 1;
  double m_cores = 1;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> m_csv{nullptr, &std::fclose};
  std::chrono::steady_clock::time_point m_t0 = std::chrono::steady_clock::now();
  int64_t m_epoch = 0, m_step = 0;
  int m_round = 0;                           // step of the current exploration
  std::string m_reason = "start";            // why the current exploration runs
  std::vector<std::string> m_order;          // the explored candidates, in canonical order
  std::vector<std::vector<double>> m_times;  // [candidate][round], the slowest rank's seconds
  std::vector<bool> m_active;                // still fetched in this exploration
  double m_bytes = 0, m_samples = 0, m_remote = 0, m_fetches = 0;  // features of the window
  std::vector<double> m_window;     // serving: this rank's seconds since the last check
  std::vector<double> m_intervals;  // seconds between fetches (≈ the step time when prefetching)
  std::chrono::steady_clock::time_point m_last_call{};
  double m_round_extra_s = 0;  // this exploration's extra fetch seconds (this rank)
  // DDGNN_DEBUG_SLOW_FETCH="backend:seconds:from_step:to_step,...": fetches of that backend in
  // steps [from, to) take that much longer (tests of the switcher's decisions and drift).
  struct Slowdown {
    std::string backend;
    double seconds = 0;
    int64_t from = 0, to = 0;
  };
  std::vector<Slowdown> m_slow;
  bool m_recheck = false, m_exploring = true;
};

}  // namespace ddgnn
