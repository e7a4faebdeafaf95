#include "train/divergence.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/log.h"
#include "train/run_log.h"

namespace ddgnn {

double median_of(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const auto mid = v.begin() + long(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2) return *mid;
  return 0.5 * (*mid + *std::max_element(v.begin(), mid));
}

Divergence check_divergence(RunState& state, double median, double validate_loss, int64_t epoch,
                            double factor) {
  Divergence d;
  d.lowest = state.lowest_train_loss;
  d.lowest_epoch = state.lowest_train_epoch;
  d.validate_loss = validate_loss;
  d.best_validate = state.best_validate_loss;
  d.best_epoch = state.best_epoch;
  const bool by_median = factor > 0 && std::isfinite(state.lowest_train_loss) &&
                         median > factor * state.lowest_train_loss;
  // Not `validate_loss > ...`: a nan validation loss after a finite one diverged too.
  d.by_validation = !by_median && factor > 0 && std::isfinite(state.best_validate_loss) &&
                    !(validate_loss <= factor * state.best_validate_loss);
  d.diverged = by_median || d.by_validation;
  if (median < state.lowest_train_loss) {
    state.lowest_train_loss = median;
    state.lowest_train_epoch = epoch;
  }
  return d;
}

nlohmann::json diverged_event(int64_t epoch, double median, const Divergence& d,
                              const TrainSettings& s) {
  return {{"epoch", epoch},
          {"train_loss_median", median},
          {"lowest_train_loss_median", d.lowest},
          {"lowest_epoch", d.lowest_epoch},
          {"by_validation", d.by_validation},
          {"validate_loss", std::isfinite(d.validate_loss) ? nlohmann::json(d.validate_loss)
                                                           : nlohmann::json(nullptr)},
          {"best_validate_loss", std::isfinite(d.best_validate) ? nlohmann::json(d.best_validate)
                                                                : nlohmann::json(nullptr)},
          {"best_epoch", d.best_epoch},
          {"divergence_factor", s.divergence_factor},
          {"learning_rate", s.learning_rate},
          {"grad_clip", s.grad_clip},
          {"spike_factor", s.spike_factor}};
}

TrainingError diverged_error(int64_t epoch, double median, const Divergence& d,
                             const TrainSettings& s, const std::string& last_checkpoint) {
  const bool any = !last_checkpoint.empty();
  // What the run has set, so that the hint never asks for what is on already.
  std::string set = "Training.Optimizer.learning_rate is " + fmt("%g", s.learning_rate);
  set += s.warmup_steps > 0 ? ", Training.warmup_steps " + std::to_string(s.warmup_steps)
                            : ", no warm-up (Training.warmup_steps)";
  set += s.grad_clip > 0 ? ", Training.grad_clip " + fmt("%g", s.grad_clip)
                         : ", no gradient clipping (Training.grad_clip)";
  set += s.spike_factor > 0 ? ", Training.spike_factor " + fmt("%g", s.spike_factor)
                            : ", no spike guard (Training.spike_factor 0)";
  std::string todo = "train again with a lower Optimizer.learning_rate";
  if (s.warmup_steps <= 0) todo += ", a warm-up";
  if (s.grad_clip <= 0)
    todo +=
        " or the gradient norm clipped (metrics.csv's grad_norm column "
        "then shows the norms)";
  if (any)
    todo +=
        ", or resume from the last checkpoint with a lower rate: --set Training.continue=1 "
        "--set Training.Optimizer.learning_rate=R";
  const std::string what =
      d.by_validation
          ? "its validation loss " + fmt("%.4g", d.validate_loss) +
                (std::isfinite(d.validate_loss)
                     ? " is more than Training.divergence_factor (" +
                           fmt("%g", s.divergence_factor) + ") times the best, "
                     : " is not finite, after the best, ") +
                fmt("%.4g", d.best_validate) + " in epoch " + std::to_string(d.best_epoch) +
                " (the median of its batch losses " + fmt("%.4g", median) + ")"
          : "the median of its batch losses " + fmt("%.4g", median) +
                " is more than Training.divergence_factor (" + fmt("%g", s.divergence_factor) +
                ") times the lowest, " + fmt("%.4g", d.lowest) + " in epoch " +
                std::to_string(d.lowest_epoch);
  TrainingError e("the model diverged in epoch " + std::to_string(epoch) + ": " + what + " (" +
                      set + "); the run stopped without checkpointing this epoch" +
                      (any ? " (the last checkpoint: " + last_checkpoint + ")" : std::string()),
                  todo + "; Training.divergence_factor=0 trains on regardless");
  e.set_reported_by(0);  // every rank stops with it, from rank 0's figures
  return e;
}

}  // namespace ddgnn
