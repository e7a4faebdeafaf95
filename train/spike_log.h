// What the loss-spike guard (train/spikes.h) did, in the run's log: each skipped step and each
// spike applied after skips in a row as an event (events.jsonl), a line for the run's first few,
// and the error that stops the run after 25 steps skipped in a row.
#pragma once

#include <cstdint>

#include "config/train_settings.h"
#include "train/run_log.h"
#include "train/step.h"

namespace ddgnn {

class SpikeLog {
 public:
  // Both must outlive it; settings for the messages' figures.
  SpikeLog(RunLog& log, const TrainSettings& settings) : m_log(log), m_s(settings) {}
  // One step as PendingSteps read it: skipped (a TrainingError, every rank alike, after 25 in a
  // row), applied although a spike, or ordinary.
  void note(const PendingSteps::Read& s, int64_t epoch);

 private:
  void skipped(const PendingSteps::Read& s, int64_t epoch);
  void applied(const PendingSteps::Read& s, int64_t epoch);

  RunLog& m_log;
  const TrainSettings& m_s;
  int64_t m_skipped = 0, m_in_a_row = 0;  // skipped steps of this process, and in a row
  int64_t m_applied = 0;                  // spikes applied
};

}  // namespace ddgnn
