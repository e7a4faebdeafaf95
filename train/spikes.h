// Training.spike_factor: the loss-spike guard. A step whose loss (this rank's part) or gradient
// norm (the step's, summed over the ranks, before clipping) is non-finite, or more than the factor
// times the median of the last kWindow steps' finite values, is skipped: no optimizer step and no
// weight-average update. A spike that follows kMaxSpikesInARow skipped steps is applied: when
// every batch spikes, the weights are the cause, not a batch, and the gradient of those losses
// (clipped with Training.grad_clip) is what brings them back; a non-finite step is always skipped.
// The judgement stays on the device (no host wait inside a step): a rank whose loss is judged a
// spike differentiates nan instead, so that the summed gradient is non-finite on every rank and
// every rank skips the same step; the gate of the step is handed to the optimizer and the weight
// average (set_step_gate, model/optim.h). PendingSteps reads the record of each step with its loss.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <nlohmann/json.hpp>

namespace ddgnn {

class SpikeGuard {
 public:
  static constexpr int64_t kWindow = 100;         // the steps whose median is the reference
  static constexpr int64_t kMinHistory = 10;      // finite values needed before a spike is judged
  static constexpr int64_t kMaxSpikesInARow = 3;  // skipped in a row, then a spike is applied
  // Where the record's values are (SpikeGuard::Verdict::record).
  // kPersisted: far above the median but applied (kMaxSpikesInARow skipped before it).
  enum Record : int64_t { kLossSpike, kSkipped, kLossMedian, kNormMedian, kPersisted, kRecordSize };

  // factor > 0 (the config checks it).
  SpikeGuard(double factor, c10::Device device);

  // Before backward, this rank's loss: the loss to differentiate, `loss` itself or nan when it is
  // non-finite or a spike. Kept in the history either way (a non-finite value as nothing).
  at::Tensor judge_loss(const at::Tensor& loss);

  struct Verdict {
    at::Tensor apply;   // 0-dim bool: the step is applied
    at::Tensor record;  // [kRecordSize] float64: loss spike (this rank), skipped, the medians,
                        // persisted
  };
  // After the gradients are summed, their norm before clipping: whether the step applies, judged
  // on it and on this step's judge_loss (a rank without a sample calls only this).
  Verdict judge_step(const at::Tensor& grad_norm);

  double factor() const { return m_factor; }
  // The history (values, where the next goes, skips in a row) as JSON, copied to the host, and
  // back: a run resumed from a checkpoint judges its next steps as the run it continues would.
  nlohmann::json state() const;
  void load_state(const nlohmann::json& state);
  // The history starts again: no spike is judged until kMinHistory values are known.
  void forget();

 private:
  double m_factor;
  at::Tensor m_losses, m_norms;       // [kWindow] float64, nan where nothing is kept
  at::Tensor m_loss_at, m_norm_at;    // 0-dim int64: where the next value goes (mod kWindow)
  at::Tensor m_spike, m_loss_median;  // the last judge_loss's verdict and median
  at::Tensor m_persisted;             // the last judge_loss saw a spike it let through
  at::Tensor m_in_a_row;              // 0-dim float64: steps skipped in a row
  at::Tensor skips_allowed() const;   // 0-dim bool: fewer than kMaxSpikesInARow in a row
};

}  // namespace ddgnn
