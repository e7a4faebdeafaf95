// The training step replayed as CUDA graphs (Runtime.cuda_graphs; GPU build). For each fixed batch
// shape (Loader.static_shapes) the step runs eagerly kWarmupSteps times, then is captured once
// into two graphs that share one memory pool:
//   forward: the gradients zeroed, the prediction, forces, loss and backward into the flat
//            gradient buffer (TrainStep::forward_backward);
//   update:  clipping, Adam or AdamW and the weight average (TrainStep::update), which read their
//            step counts, rate and decay from the device.
// Each step of the shape copies its batch into the shape's input buffer (one device-to-device copy
// of its upload, model/upload.h), replays `forward`, sums the gradients over the ranks eagerly
// (NCCL or MPI: a graph holding NCCL would have to be replayed by every rank from one capture),
// replays `update`, and advances the host's step counts as the replayed kernels advanced the
// device's (note_replayed_step, WeightAverage::replayed_update). A batch whose tensors are laid out
// otherwise than its shape's runs eagerly. The step runs on a stream of its own (capture cannot
// use the default stream). The outputs of a replayed step (prediction, loss, gradient norm) are
// the graph's: valid until the next step.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>

namespace ddgnn {

class TrainStep;
struct StepBatch;
struct StepPlace;
struct StepResult;

class StepGraphs {
 public:
  static constexpr int64_t kWarmupSteps = 3;  // eager steps of a shape before its capture

  // Whether this build can capture CUDA graphs (the GPU build).
  static bool available();
  // `step` must outlive this; its device is `device` (CUDA). An Error in a build without CUDA.
  StepGraphs(TrainStep& step, c10::Device device);
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // One step of a padded batch (PreparedBatch::bucket >= 0, uploaded): eager, captured or
  // replayed as above.
  StepResult run(const StepBatch& batch, const StepPlace& place);

  // Steps so far: replayed, and eager (warm-up of a shape, or a layout other than its shape's).
  int64_t replayed() const;
  int64_t eager() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m;
};

}  // namespace ddgnn
