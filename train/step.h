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
  // 0-dim tensors on the model's device, read by the host later (PendingSteps): this rank's loss
  // (its share of the step's, normalised units; undefined when this rank had no sample) and the
  // gradient norm before clipping (undefined without Training.grad_clip or the spike guard); the
  // spike guard's record (SpikeGuard::Record; undefined without Training.spike_factor).
  at::Tensor loss, grad_norm, guard;
  Prediction prediction;  // detached; empty when this rank had no sample
  StepTimes times;
};

// Where a step is, for its error messages.
struct StepPlace {
  int64_t epoch = 0, step = 0;  // step: 1-based over the run
  int rank = 0, world = 1;
  std::string data_path;
};

class StepGraphs;
class SpikeGuard;

class TrainStep {
 public:
  // All references must outlive the step; `ddp` and `average` may be null (one rank, no
  // Training.ema_decay). With Runtime.cuda_graphs on a CUDA device, padded batches' steps are
  // replayed as CUDA graphs (train/step_graphs.h).
  TrainStep(Gnn& gnn, const std::vector<at::Tensor>& params, torch::optim::Optimizer& optimizer,
            DataParallel* ddp, WeightAverage* average, const ModelSetup& setup,
            const TrainSettings& settings);
  ~TrainStep();
  // Never waits for the device: the loss and the gradient norm are checked when read.
  StepResult run(const StepBatch& batch, const StepPlace& place);
  // The step without CUDA graphs: forward_backward, the gradients summed over the ranks, update.
  StepResult run_eager(const StepBatch& batch, const StepPlace& place);

  // The two halves that a CUDA graph captures. forward_backward: the gradients zeroed, the
  // prediction, the loss (detached into `loss`) and its backward into the gradients (of this rank;
  // `share` its part of the step, replaced by b.share when the batch carries it); with
  // Training.spike_factor the guard judges the loss before backward. update: clipping, the
  // guard's verdict on the gradient norm (the step then applied or skipped), the optimizer and
  // the weight average.
  struct Update {
    at::Tensor grad_norm;  // before clipping (undefined without grad_clip or the guard)
    at::Tensor guard;      // SpikeGuard's record (undefined without the guard)
  };
  Prediction forward_backward(const PreparedBatch& b, StepShare share, at::Tensor& loss,
                              StepTimes* times = nullptr);
  Update update(const StepPlace& place);

  DataParallel* ddp() const { return m_ddp; }
  torch::optim::Optimizer& optimizer() const { return m_optimizer; }
  WeightAverage* average() const { return m_average; }
  const StepGraphs* graphs() const { return m_graphs.get(); }  // null: every step eager
  // The spike guard's history starts again (the loss changes meaning: stage two).
  void forget_spike_history();
  SpikeGuard* spike_guard() const { return m_guard.get(); }  // null: Training.spike_factor 0

 private:
  Gnn& m_gnn;
  const std::vector<at::Tensor>& m_params;
  torch::optim::Optimizer& m_optimizer;
  DataParallel* m_ddp;
  WeightAverage* m_average;
  const ModelSetup& m_setup;
  const TrainSettings& m_s;
  bool m_warmup_inside;  // the optimizer applies Training.warmup_steps itself (set_warmup)
  std::unique_ptr<StepGraphs> m_graphs;  // Runtime.cuda_graphs on a CUDA device
  std::unique_ptr<SpikeGuard> m_guard;   // Training.spike_factor > 0
  bool m_optimizer_gated = false;        // the optimizer takes the guard's gate itself
};

// The steps whose loss and gradient norm the host has not read yet. They stay on the device until
// read(), every Output.read_every_steps steps and at the end of an epoch, so that the host does
// not wait for the GPU inside a step and runs ahead of it.
class PendingSteps {
 public:
  struct Read {
    int64_t step = 0, graphs = 0;  // graphs: the step's, over all ranks
    bool has_loss = false;         // this rank had a sample in the step
    double loss = 0.0;             // this rank's share (0 when it had no sample)
    double grad_norm = 0.0;        // 0 without Training.grad_clip or the spike guard
    bool skipped = false;          // the spike guard skipped the step
    bool spike_applied = false;    // far above the median, applied after skips in a row
    std::string why;               // why it was skipped (what the guard judged)
    std::string where;             // "epoch E step S" (", rank R" on several ranks)
    std::string graphs_text;       // " on the batch of graphs [...] (indices in FILE)" or ""
  };
  // spike_factor: Training.spike_factor, for the reasons Read::why gives.
  explicit PendingSteps(double spike_factor = 0.0) : m_factor(spike_factor) {}
  void add(const StepResult& r, const StepBatch& batch, const StepPlace& place);
  size_t size() const { return m_steps.size(); }
  // Every pending value in one copy to the host, in step order. Without the spike guard a
  // non-finite loss or gradient norm is a TrainingError naming the first such step, its epoch and
  // its graphs; with it, such a step was skipped (Read::skipped, Read::why).
  std::vector<Read> read();

 private:
  struct Step {
    StepPlace place;
    int64_t graphs = 0;
    std::vector<int64_t> ids;  // the first 65 graph ids of this rank's batch
    bool has_loss = false, has_norm = false, has_guard = false;
  };
  double m_factor;
  std::vector<Step> m_steps;
  // per step: [loss, grad norm, the guard's record] float64 on the device
  std::vector<at::Tensor> m_values;
};

}  // namespace ddgnn
