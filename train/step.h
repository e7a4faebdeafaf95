// One training step on this rank's part of a step's batch: zero the gradients, predict
// (model/predict.h, forces with their graph), the loss scaled by this rank's share of the step,
// backward with the gradients summed over the ranks in buckets (DataParallel), clipping, the
// optimizer step and the weight average. A rank with no sample in the step still joins the sum.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/train_settings.h"
#include "model/gnn.h"
#include "model/optim.h"
#include "model/predict.h"
#include "train/ddp.h"
#include "train/loader.h"
#include "train/model_setup.h"
#include "train/run_log.h"

namespace ddgnn {

// When each phase of a step ended (load = waiting for the batch, before `start`).
struct StepTimes {
  std::chrono::steady_clock::time_point start, forward, forces, backward, synced, done;
};

// The seconds of each phase summed over an epoch's steps (metrics.csv's load_s .. optimizer_s;
// fetch and graph on the prefetch thread).
struct PhaseSeconds {
  double load = 0, fetch = 0, graph = 0, forward = 0, forces = 0, backward = 0, sync = 0,
         optimizer = 0;
  // One step whose batch was asked for at `asked`.
  void add(std::chrono::steady_clock::time_point asked, const StepBatch& batch, const StepTimes& t);
  void put(nlohmann::json& row) const;
};

// A step's spans in trace.json: the switcher's explorations (tid 2), fetch and collate (the
// prefetch thread, tid 1), load .. optimizer (the training thread; grad_sync with several ranks).
void trace_step(ChromeTrace& trace, std::chrono::steady_clock::time_point asked,
                const StepBatch& batch, const StepTimes& t, int64_t step, bool grad_sync);

struct StepResult {
  double loss = 0.0;       // this rank's loss (its share of the step's), normalised units
  double grad_norm = 0.0;  // before clipping (0 without Training.grad_clip)
  Prediction prediction;   // detached; empty when this rank had no sample
  StepTimes times;
};

// Where a step is, for its error messages.
struct StepPlace {
  int64_t epoch = 0, step = 0;  // step: 1-based over the run
  int rank = 0, world = 1;
  std::string data_path;
};

class TrainStep {
 public:
  // All references must outlive the step; `ddp` and `average` may be null (one rank, no
  // Training.ema_decay).
  TrainStep(Gnn& gnn, const std::vector<at::Tensor>& params, torch::optim::Optimizer& optimizer,
            DataParallel* ddp, WeightAverage* average, const ModelSetup& setup,
            const TrainSettings& settings);
  // A non-finite loss or gradient norm is a DataError naming the step and the graphs.
  StepResult run(const StepBatch& batch, const StepPlace& place);

 private:
  Gnn& m_gnn;
  const std::vector<at::Tensor>& m_params;
  torch::optim::Optimizer& m_optimizer;
  DataParallel* m_ddp;
  WeightAverage* m_average;
  const ModelSetup& m_setup;
  const TrainSettings& m_s;
};

}  // namespace ddgnn
