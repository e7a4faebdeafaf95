// `ddgnn train` and `ddgnn evaluate` on one process: the data in memory, the split, target
// normalisation, the epoch loop (prefetched batches, forces by autograd, loss, clipping,
// optimizer, schedule, early stopping), metrics per split, the run directory and checkpoints
// with bit-identical resume. The run directory's files are described in DESIGN.md ("Training").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "app/config.h"

namespace ddgnn {

struct TrainOptions {
  bool overwrite = false;  // start afresh in a run_dir that already holds a run
};

// Trains as the config says. Returns the summary also written as the "run_end" event.
nlohmann::json train(const Config& config, const TrainOptions& options);

struct EvaluateOptions {
  std::string checkpoint;      // a checkpoint file; or
  std::string run_dir;         // a run directory: its best.pt, else its latest epoch checkpoint
  std::string data;            // dataset file (default: the one the run trained on)
  std::string split = "test";  // test | validate | train | all (all graphs of `data`)
  std::string out;             // output folder (default <run_dir>/eval_<split>)
  int64_t batch_size = 0;      // 0: the run's eval batch size
};

// Writes predictions.extxyz, energies.csv, forces.csv and errors.json into the output folder and
// returns the error table as JSON.
nlohmann::json evaluate(const EvaluateOptions& options);

}  // namespace ddgnn
