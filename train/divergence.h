// Training.divergence_factor: whether an epoch says the model diverged (the median of its batch
// losses more than the factor times the lowest such median of the run, kept in RunState: a median,
// so that one batch whose loss explodes cannot decide it; or the validation loss more than the
// factor times the best of the run, or not finite once one was), and the error that stops such a
// run.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/train_settings.h"
#include "core/error.h"
#include "train/checkpoint.h"

namespace ddgnn {

struct Divergence {
  bool diverged = false;
  bool by_validation = false;  // the validation loss said so (the median did not)
  double lowest = 0.0;         // the lowest epoch median before this epoch
  int64_t lowest_epoch = 0;    // its epoch
  double validate_loss = 0.0;  // this epoch's
  double best_validate = 0.0;  // the best validation loss before this epoch
  int64_t best_epoch = 0;      // its epoch
};

// The median of `values` (the mean of the middle two for an even count; nan for none).
double median_of(std::vector<double> values);

// Compares `median` (epoch `epoch`'s) with state's lowest (never when factor is 0, before a first
// epoch or for a nan median), then makes it the lowest if it is; and `validate_loss` with state's
// best_validate_loss (which the caller updates).
Divergence check_divergence(RunState& state, double median, double validate_loss, int64_t epoch,
                            double factor);

// The "diverged" event's fields.
nlohmann::json diverged_event(int64_t epoch, double median, const Divergence& d,
                              const TrainSettings& s);

// The error that stops a diverged run: the epoch's median against the lowest, the last checkpoint
// ("" for none) and what to do, naming what the run has set (clipping, the spike guard, warm-up).
// Every rank throws it; rank 0 reports it for the job.
TrainingError diverged_error(int64_t epoch, double median, const Divergence& d,
                             const TrainSettings& s, const std::string& last_checkpoint);

}  // namespace ddgnn
