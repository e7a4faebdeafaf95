// `ddgnn evaluate`: a checkpoint's predictions on a split of its run (or on every graph of a
// file), written as extxyz and CSV with the error table (MAE / RMSE in meV/atom and meV/Å).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace ddgnn {

struct EvaluateOptions {
  std::string checkpoint;      // a checkpoint file; or
  std::string run_dir;         // a run directory: its best.pt, else its latest epoch checkpoint
  std::string data;            // dataset file (default: the one the run trained on)
  std::string split = "test";  // test | validate | train | all (all graphs of `data`)
  std::string out;             // output folder (default <run_dir>/eval_<split>)
  int64_t batch_size = 0;      // 0: the run's eval batch size
  int threads = 0;             // 0: the run's Runtime.intra_op_threads (its 0: the cores available)
};

// Writes predictions.extxyz, energies.csv, forces.csv and errors.json into the output folder and
// returns the error table as JSON: energy and force MAE / RMSE, force errors as vectors (|dF| per
// atom) and per element. Each energies.csv row and extxyz frame names its graph's split in the
// run (train, validate, test; "other" for a file the run did not train on); forces.csv rows join
// them by graph.
nlohmann::json evaluate(const EvaluateOptions& options);

}  // namespace ddgnn
