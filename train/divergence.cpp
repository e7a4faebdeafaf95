#include "train/divergence.h"

#include <cmath>

#include "core/log.h"
#include "train/run_log.h"

namespace ddgnn {

Divergence check_divergence(RunState& state, double loss, int64_t epoch, double factor) {
  const Divergence d{factor > 0 && std::isfinite(state.lowest_train_loss) &&
                         loss > factor * state.lowest_train_loss,
                     state.lowest_train_loss, state.lowest_train_epoch};
  if (loss < state.lowest_train_loss) {
    state.lowest_train_loss = loss;
    state.lowest_train_epoch = epoch;
  }
  return d;
}

nlohmann::json diverged_event(int64_t epoch, double loss, const Divergence& d, double factor) {
  return {{"epoch", epoch},
          {"train_loss", loss},
          {"lowest_train_loss", d.lowest},
          {"lowest_epoch", d.lowest_epoch},
          {"divergence_factor", factor}};
}

TrainingError diverged_error(int64_t epoch, double loss, const Divergence& d, double factor,
                             const std::string& last_checkpoint) {
  const bool any = !last_checkpoint.empty();
  TrainingError e(
      "the model diverged in epoch " + std::to_string(epoch) + ": its training loss " +
          fmt("%.4g", loss) + " is more than Training.divergence_factor (" + fmt("%g", factor) +
          ") times the lowest, " + fmt("%.4g", d.lowest) + " in epoch " +
          std::to_string(d.lowest_epoch) + "; the run stopped without checkpointing this epoch" +
          (any ? " (the last checkpoint: " + last_checkpoint + ")" : std::string()),
      "train again with a lower Optimizer.learning_rate or with the gradient norm clipped "
      "(Training.grad_clip; metrics.csv's grad_norm column then shows the norms)" +
          std::string(any ? ", or resume from the last checkpoint with it clipped: --set "
                            "Training.continue=1 --set Training.grad_clip=N"
                          : "") +
          "; Training.divergence_factor=0 trains on regardless");
  e.set_reported_by(0);  // every rank stops with it, from rank 0's figures
  return e;
}

}  // namespace ddgnn
