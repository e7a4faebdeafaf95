// `ddgnn train`: the epoch loop on the ranks of MPI_COMM_WORLD (one without mpiexec). Set-up
// (threads, the loader, the run directory, the model, a resume), then per epoch: the training
// steps (train/step.h) on ready batches (train/loader.h), validation and test errors, the
// schedule and early stopping, checkpoints, one metrics row and one log line. The run directory's
// files are described in DESIGN.md ("Outputs of a run").
#pragma once

#include <nlohmann/json.hpp>

#include "config/config.h"

namespace ddgnn {

struct TrainOptions {
  bool overwrite = false;  // start afresh in a run_dir that already holds a run
};

// Trains as the config says. Returns the summary also written as the "run_end" event. An error on
// one of several ranks is printed by that rank and stops the job (MPI_Abort).
nlohmann::json train(const Config& config, const TrainOptions& options);

}  // namespace ddgnn
