// The online backend switcher's decisions (Loader.backend "auto"), without MPI: which backends a
// step fetches with, what is chosen from the measured times, and when to look again. The MPI
// side (train/backend_switcher.h) feeds it the slowest rank's times and broadcasts rank 0's
// decisions; this class is what rank 0 runs, deterministic given the times.
//
// Exploration: for `explore_batches` steps every candidate fetches the step's batch (the same
// ids, in an order rotated every step so that none always comes first with a cold cache); one
// result is used. Decision: the candidate with the lowest median time, unless the current one
// is within `switch_margin` of it (no flapping between near-ties). Before the first decision
// the current one is the first candidate (shm in the default list: `auto` without the tuner),
// which so keeps near-ties there too: on one node the grid's fastest backend is shm in most
// configurations, and five explored batches often measure rma a few percent ahead by chance
// (replayed by `ddgnn tune` on the two measurements of results/loader_grid_crossover*.csv: 123
// and 127 of 130 configurations within 5% of the best, against 118 and 126 when the first
// decision takes the fastest). The times go to the models:
// with prior cost models (ddgnn tune --out) each backend's model is scaled by its measured /
// predicted ratio (calibration); without, a backend's prediction is its measured time per batch
// byte times the batch's bytes. At a re-exploration, candidates whose calibrated prediction is
// more than `prune_factor` times the best one's are not explored. Serving: every `check_every`
// steps the median time of the window is compared with the prediction; a drift beyond `drift`
// starts a new exploration, as does a new epoch every `recheck_every_epochs`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tuner/cost_model.h"

namespace ddgnn {

// The median of measured times (the mean of the middle two for an even count; NAN when empty),
// as the switcher compares them (train/backend_switcher.cpp uses it too).
double median_seconds(std::vector<double> v);

struct OnlineOptions {
  std::vector<std::string> candidates;  // at least one
  int explore_batches = 5;              // steps of an exploration (every candidate each step)
  double drift = 0.25;                  // |observed / predicted - 1| that starts a re-exploration
  int check_every = 50;                 // serving steps per drift check
  int recheck_every_epochs = 0;         // 0: only on drift
  double switch_margin = 0.05;          // a challenger must be this much faster than the current
  double prune_factor = 4.0;            // prior prediction beyond this × the best: not explored
};

struct OnlineDecision {
  std::string backend, previous, reason;
  std::map<std::string, double> measured;   // median seconds per batch (slowest rank)
  std::map<std::string, double> predicted;  // the models' prediction before calibration (NAN: none)
};

class OnlineTuner {
 public:
  // prior: models by backend (may be empty or cover some candidates). ConfigError for an empty
  // candidate list or explore_batches < 1.
  OnlineTuner(OnlineOptions options, std::map<std::string, CostModel> prior = {});

  bool exploring() const { return m_exploring; }
  // The next check() calibrates (the first after a decision).
  bool calibrating() const { return m_rebase; }
  const std::string& current() const { return m_current; }
  const OnlineOptions& options() const { return m_options; }
  // The candidates this exploration step fetches with, in this step's order (`round` counts the
  // exploration's steps from 0).
  std::vector<std::string> explore_order(int round) const;
  // Candidates skipped by the prior models in this exploration (empty without prior).
  const std::vector<std::string>& pruned() const { return m_pruned; }

  // Ends an exploration: times[b][k] is candidate b's slowest-rank seconds in step k;
  // `features` those of the explored batches (bytes_mean, batch, ranks...). Sets current().
  OnlineDecision decide(const std::map<std::string, std::vector<double>>& times,
                        const FetchFeatures& features, const std::string& reason);

  // A drift check while serving: `observed` the window's median seconds per batch. True (and
  // exploring() from now) when it is more than `drift` away from the prediction, which is
  // returned in *predicted. The first check after a decision calibrates the chosen backend's
  // model to serving (an exploration fetches each batch several times, so later candidates find
  // it in cache) and returns false.
  // A change smaller than `floor` seconds is never drift (a fetch of a few µs against a step of
  // many ms: exploring again would cost more than it could save).
  bool check(double observed, const FetchFeatures& features, double* predicted, double floor = 0.0);
  // Starts an exploration (a new epoch's re-check, or after drift). Candidates measured before
  // whose calibrated prediction is over prune_factor × the best are not explored; `current_s`
  // (> 0: the current backend's observed time, after drift) replaces its stale prediction.
  void explore(const FetchFeatures& features, double current_s = 0.0);
  // The calibrated prediction for `backend` (NAN before it was measured).
  double predict(const std::string& backend, const FetchFeatures& features) const;

 private:
  // The prior model's uncalibrated prediction (NAN without a prior for `backend`).
  double prior_prediction(const std::string& backend, const FetchFeatures& features) const;

  OnlineOptions m_options;
  std::map<std::string, CostModel> m_prior;
  std::map<std::string, double> m_scale;  // measured / prior prediction, or seconds per byte
  std::vector<std::string> m_explored;    // this exploration's candidates
  std::vector<std::string> m_pruned;
  std::string m_current;
  bool m_exploring = true;
  bool m_rebase = false;  // the first check after a decision calibrates instead of checking
};

}  // namespace ddgnn
