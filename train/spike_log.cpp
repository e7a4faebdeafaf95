// The spike guard's steps in the run's log (train/spike_log.h).
#include "train/spike_log.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "train/spikes.h"

namespace ddgnn {

namespace {

constexpr int64_t kSkipLines = 5;          // skipped (and applied) steps given a log line, per run
constexpr int64_t kMaxSkippedInARow = 25;  // then the run stops

}  // namespace

void SpikeLog::note(const PendingSteps::Read& s, int64_t epoch) {
  if (s.skipped) {
    skipped(s, epoch);
    return;
  }
  m_in_a_row = 0;
  if (s.spike_applied) applied(s, epoch);
}

void SpikeLog::skipped(const PendingSteps::Read& s, int64_t epoch) {
  ++m_skipped;
  ++m_in_a_row;
  m_log.event("skipped_step", {{"epoch", epoch},
                               {"step", s.step},
                               {"why", s.why},
                               {"loss", s.loss},
                               {"grad_norm", s.grad_norm},
                               {"graphs", s.graphs_text}});
  if (m_skipped <= kSkipLines)
    m_log.line(
        "skipped " + s.where + ": " + s.why + s.graphs_text +
        (m_skipped == kSkipLines ? "; further skipped steps only in events.jsonl" : std::string()));
  if (m_in_a_row < kMaxSkippedInARow) return;
  TrainingError e(
      std::to_string(kMaxSkippedInARow) + " steps in a row were skipped, the last at " + s.where +
          ": " + s.why + s.graphs_text,
      "the steps before these left weights that fail on every batch: lower "
      "Training.Optimizer.learning_rate (now " +
          fmt("%g", m_s.learning_rate) + ")" +
          (m_s.warmup_steps > 0 ? std::string()
                                : " or raise it gradually (Training.warmup_steps, e.g. a few "
                                  "hundred steps; none is set)") +
          (s.has_loss && !std::isfinite(s.loss)
               ? ", and check those graphs with `ddgnn info`"
               : "; if the losses rose for a reason (new loss weights, a higher rate), raise "
                 "Training.spike_factor (now " +
                     fmt("%g", m_s.spike_factor) + ") or set it to 0"));
  e.set_reported_by(0);
  throw e;
}

void SpikeLog::applied(const PendingSteps::Read& s, int64_t epoch) {
  ++m_applied;
  m_log.event("spike_applied", {{"epoch", epoch},
                                {"step", s.step},
                                {"loss", s.loss},
                                {"grad_norm", s.grad_norm},
                                {"graphs", s.graphs_text}});
  if (m_applied <= kSkipLines)
    m_log.line("applied " + s.where + " although far above the median of the last steps (loss " +
               fmt("%.4g", s.loss) + ", gradient norm " + fmt("%.4g", s.grad_norm) + "): the " +
               std::to_string(SpikeGuard::kMaxSpikesInARow) +
               " steps before it were skipped, so the weights are the cause, not a batch, and "
               "their gradient is what corrects them" +
               (m_s.grad_clip > 0
                    ? " (clipped at Training.grad_clip " + fmt("%g", m_s.grad_clip) + ")"
                    : std::string()));
}

}  // namespace ddgnn
