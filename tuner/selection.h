// Measurements of the loader backends (the CSV of `ddgnn bench-loader`) and how well cost models
// fitted to them pick the fastest backend: leave-one-configuration-out, the way a run that was
// never measured would be predicted. A configuration is everything but the backend (group ranks,
// ranks per node, cores, sample size, batch).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tuner/cost_model.h"

namespace ddgnn {

// Reads a measurements CSV. Required columns: backend, ranks, sample_bytes, batch,
// fraction_remote, seconds_per_batch; optional: group_ranks (default ranks), ranks_per_node
// (default ranks: one node), cores_per_node (default `cores`), bytes_spread (default 0). DataError
// naming the file and line (or the missing columns) for a missing column, a value that is not a
// number, a time that is not positive, or a backend without a cost model (listing the known ones).
std::vector<FetchMeasurement> read_measurements(const std::string& path, double cores);

// The rows of `keep`'s backends only (`ddgnn tune --backends`: the choice a run actually has,
// e.g. one-sided against collective exchange as the published estimator decides). ConfigError
// for fewer than two names or a backend without a cost model; DataError naming `path` for a
// backend the grid has no rows of. When a backend is left out, the paired counts (beats_best,
// relative to the best of all measured backends) no longer apply and are dropped.
std::vector<FetchMeasurement> only_backends(const std::vector<FetchMeasurement>& data,
                                            const std::vector<std::string>& keep,
                                            const std::string& path);

// The models that `ddgnn tune --out FILE` wrote, fitted by `method`, by backend.
// ConfigError naming the file for a missing file, bad JSON, a missing method, or a model whose
// terms do not match this version's (saying to refit).
std::map<std::string, CostModel> read_cost_models(const std::string& path, FitMethod method);

// The paired sign test: a backend that was faster than the measured best in `beats` of `n`
// repetitions is not distinguishable from it when P(X <= beats) > alpha for X ~ Binomial(n, 1/2)
// (one-sided: the data do not show it to be slower in most repetitions). False when n < 1.
bool sign_test_tied(int beats, int n, double alpha = 0.05);

// One configuration of a leave-one-configuration-out run: what was measured, predicted, picked.
struct ConfigOutcome {
  FetchFeatures features;
  std::string best, picked;  // the lowest measured median; the lowest prediction
  std::string online;        // the replayed online switcher's pick ("" where not replayed)
  std::map<std::string, double> measured, predicted;  // seconds per batch, by backend
  double lost = 0;                                    // t(picked) / t(best) - 1
  bool exchanging = false;  // some backend's fraction remote > 0 (see SelectionReport)
};

struct SelectionReport {
  int configurations = 0, correct = 0;
  double accuracy = 0;  // correct / configurations
  // Picks whose measured time is within tie_tolerance of the best (a near-tie, where the
  // measured order is within the measurement's repeat-to-repeat noise, counts as right).
  double tie_tolerance = 0.05;
  int within_tolerance = 0;
  // Picks that are the measured best or not distinguishable from it by the paired sign test on
  // the repetitions (where the grid has beats_best; `tested` counts those configurations).
  int tested = 0, indistinguishable = 0;
  double mean_lost = 0;        // mean over all configurations of t(picked) / t(best) - 1
  double max_lost = 0;         // worst t(picked) / t(best) - 1
  double mean_lost_wrong = 0;  // the mean over the wrong picks only
  std::map<std::string, double> held_out_mdape;    // per backend, on the left-out rows
  std::map<std::string, double> speedup_over;      // mean t(backend) / t(picked), per backend
  std::map<std::string, double> max_speedup_over;  // the largest t(backend) / t(picked)
  // The online switcher (`auto`) replayed where the grid has explore_seconds / rest_seconds:
  // it picks the lowest time of the first repetitions (the incumbent's if within the switch
  // margin of it) and is judged on the others.
  int online_configurations = 0, online_correct = 0, online_within = 0;
  int online_tested = 0, online_indistinguishable = 0;
  double online_max_lost = 0;
  // The same counts over the configurations that exchange samples between ranks (fraction
  // remote > 0). On one rank every backend copies the batch from local memory (the backends
  // differ by a fixed overhead of a few µs, so above a few KiB per batch the measured fastest is
  // the noise) and `auto` makes no choice there: it resolves to replicated without exploring.
  int exchanging = 0, exchanging_correct = 0, exchanging_within = 0;
  int online_exchanging = 0, online_exchanging_within = 0;
  // The baseline a selection has to beat: always the backend most often measured fastest, and
  // how often it is (over all configurations; over those that exchange samples).
  std::string always, always_exchanging;
  int always_correct = 0, always_exchanging_correct = 0;
  std::map<std::string, double> online_speedup_over, online_max_speedup_over;
  std::vector<ConfigOutcome> outcomes;  // one per configuration counted, ordered by configuration
};

// Fits every backend's model on all configurations but one, predicts the left-out one, and
// counts whether the predicted fastest backend is the measured fastest. Only configurations
// measured with at least two backends count.
// `incumbent`: the backend the replayed online switcher starts from (the first candidate: shm
// by default), which it keeps unless another explores faster by OnlineOptions::switch_margin;
// "" for none.
SelectionReport leave_one_configuration_out(const std::vector<FetchMeasurement>& data,
                                            FitMethod method, int trials, uint64_t seed,
                                            const std::string& incumbent = "");

// Picks judged on another measurement of the same configurations (`ddgnn tune --remeasured`).
struct Agreement {
  int configurations = 0;  // configurations both have, with the picked backend measured again
  int same_best = 0;       // the pick is the remeasurement's fastest
  int within_tolerance = 0;
  double tie_tolerance = 0.05;
  double mean_lost = 0, max_lost = 0;  // t(pick) / t(fastest) - 1 in the remeasurement
  // The same two counts over the configurations that exchange samples (see SelectionReport).
  int exchanging = 0, exchanging_same_best = 0, exchanging_within = 0;
};

// How often two measurements of one grid agree on the fastest backend: `first`'s fastest judged
// on `second`'s times. No selection can be expected to agree with a measurement more often than
// the measurement agrees with itself: this is the ceiling of the selection accuracy. DataError
// naming `second_path` when the two share no configuration measured with two or more backends.
Agreement measurements_agree(const std::vector<FetchMeasurement>& first,
                             const std::vector<FetchMeasurement>& second,
                             const std::string& second_path);

// The predicted picks of `report` (fitted on one measurement) judged on `second`'s times: held
// out in the configuration and in the measurement. DataError as above.
Agreement picks_agree(const SelectionReport& report, const std::vector<FetchMeasurement>& second,
                      const std::string& second_path);

}  // namespace ddgnn
