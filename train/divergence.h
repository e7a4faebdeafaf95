// Training.divergence_factor: whether an epoch's training loss says the model diverged (more than
// the factor times the lowest epoch loss of the run, kept in RunState), and the error that stops
// such a run.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "train/checkpoint.h"

namespace ddgnn {

struct Divergence {
  bool diverged = false;
  double lowest = 0.0;       // the lowest epoch loss before this epoch
  int64_t lowest_epoch = 0;  // its epoch
};

// Compares `loss` (epoch `epoch`) with state's lowest (never when factor is 0 or before a first
// epoch), then makes it the lowest if it is.
Divergence check_divergence(RunState& state, double loss, int64_t epoch, double factor);

// The "diverged" event's fields.
nlohmann::json diverged_event(int64_t epoch, double loss, const Divergence& d, double factor);

// The error that stops a diverged run: the epoch's loss against the lowest, the last checkpoint
// ("" for none) and what to do. Every rank throws it; rank 0 reports it for the job.
TrainingError diverged_error(int64_t epoch, double loss, const Divergence& d, double factor,
                             const std::string& last_checkpoint);

}  // namespace ddgnn
