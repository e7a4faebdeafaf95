// What a training run leaves in its run directory besides checkpoints: metrics.csv (one row per
// epoch, columns fixed when the run starts), events.jsonl (one JSON object per line, flushed as
// they happen), trace.json (Chrome trace-event format; opens in Perfetto or chrome://tracing),
// the progress line on a terminal, and the log lines that summarise an epoch. RunLog holds them
// all on rank 0. No torch here.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/train_settings.h"

namespace ddgnn {

// metrics.csv: a header of named columns, then one row per epoch. Numbers are written with 9
// significant digits (%.9g); empty cells mean "not measured". On resume, rows after the
// checkpoint's epoch are dropped, so the file reads as one continuous run.
class MetricsCsv {
 public:
  // Creates (truncate = true) or reopens `path`. On reopen the header must be `columns`, else an
  // Error (the run directory belongs to a run with other heads); rows after `last_row` (the
  // checkpoint's latest row, may be null: its step, or without one its epoch; rows of epoch >
  // keep_epochs without either) are removed, and `last_row` is appended when the file lacks it.
  MetricsCsv(const std::string& path, std::vector<std::string> columns, bool truncate,
             int64_t keep_epochs, const nlohmann::json& last_row = nlohmann::json());
  // One row; values by column name (missing ones are empty). Flushed; a failed write (a full
  // disk) is an Error.
  void write(const nlohmann::json& row);
  const std::vector<std::string>& columns() const { return m_columns; }
  std::string row_text(const nlohmann::json& row) const;  // one CSV line, no newline

 private:
  std::string m_path;
  std::vector<std::string> m_columns;
  std::ofstream m_out;
};

// events.jsonl: {"time": ISO-8601, "elapsed_s": s, "event": name, ...fields}.
class EventLog {
 public:
  // Creates (truncate) or reopens `path`; reopened, a last line cut short is dropped.
  EventLog(const std::string& path, bool truncate);
  // One event, flushed; a failed write (a full disk) is an Error.
  void write(const std::string& event, nlohmann::json fields = nlohmann::json::object());
  // Whether the file holds an `event` line with this "epoch" (and this "step" when step >= 0).
  bool has_epoch_event(const std::string& event, int64_t epoch, int64_t step = -1) const;

 private:
  std::string m_path;
  std::ofstream m_out;
  std::chrono::steady_clock::time_point m_start;
};

// Complete events ("ph": "X") of the first `max_steps` steps, written to `path` atomically once
// that many steps are recorded (or at finish()). Timestamps in µs since the trace started.
class ChromeTrace {
 public:
  ChromeTrace(std::string path, int64_t max_steps);
  bool recording() const { return m_steps < m_max_steps; }
  // One phase of the current step, [begin, end).
  void add(const char* name, std::chrono::steady_clock::time_point begin,
           std::chrono::steady_clock::time_point end, int64_t step, int tid = 0);
  void end_step();  // counts a step; writes the file after the last one
  void finish();    // writes what was recorded (no-op when already written or empty)

 private:
  std::string m_path;
  int64_t m_max_steps, m_steps = 0;
  bool m_written = false;
  std::chrono::steady_clock::time_point m_origin;
  nlohmann::json m_events = nlohmann::json::array();
};

// "epoch 3/100 [#####-----] step 512/1600 812 graphs/s loss 0.0123 ETA 1m20s" (steps of the
// epoch) redrawn in place on stderr, at most 5 times a second, when enabled.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled);
  bool enabled() const { return m_enabled; }
  void update(int64_t epoch, int64_t n_epochs, int64_t done, int64_t total, double graphs_per_s,
              double loss, double eta_s);
  void clear();  // erases the line before a log line is printed

 private:
  bool m_enabled;
  bool m_shown = false;
  std::chrono::steady_clock::time_point m_last;
};

// Output.progress: auto draws the progress line when stderr is a terminal, bar always, lines
// never; Verbosity.level 0 never.
bool progress_wanted(Progress mode, int verbosity);

// "1h02m", "3m20s", "12.3s".
std::string format_duration(double seconds);

// Rank 0's outputs of a run together; on other ranks every call does nothing but line() with
// Output.log_all_ranks.
class RunLog {
 public:
  RunLog(bool root, bool all_ranks) : m_root(root), m_all_ranks(all_ranks) {}
  // Creates (resume: reopens) metrics.csv with `columns`, events.jsonl, trace.json (trace_steps
  // > 0) in `run_dir`; on resume, metrics rows after `resumed_row` (the checkpoint's latest,
  // of epoch `resumed_epoch`) are dropped and that row written again when it was lost, and so are
  // its "epoch" event and the "checkpoint" event of `resumed_checkpoint` (its path, written at
  // `resumed_step`). `progress`: draw the progress line (on stderr); without it, position() logs
  // a line every few minutes.
  void open(const std::string& run_dir, const std::vector<std::string>& columns, bool resume,
            int64_t resumed_epoch, int64_t resumed_step, const nlohmann::json& resumed_row,
            const std::string& resumed_checkpoint, int64_t trace_steps, bool progress);
  // One info line of the log on rank 0, or on every rank with Output.log_all_ranks (the progress
  // line cleared), also before open().
  void line(const std::string& text);
  void warn(const std::string& text);  // as line(), at warning level
  void event(const std::string& name, const nlohmann::json& fields);
  void metrics_row(const nlohmann::json& row);
  ChromeTrace* trace() { return m_trace && m_trace->recording() ? m_trace.get() : nullptr; }
  ProgressLine* progress() { return m_progress.get(); }
  // Where training is inside epoch `epoch` (of n_epochs): `done` of its `total` steps, at
  // `graphs_per_s`, the loss so far, `eta_s` to the epoch's end. The progress line when it is
  // drawn, else (rank 0) a log line at most every kPositionLineSeconds: an epoch of a large
  // dataset takes hours.
  void position(int64_t epoch, int64_t n_epochs, int64_t done, int64_t total, double graphs_per_s,
                double loss, double eta_s);
  static constexpr double kPositionLineSeconds = 300.0;
  // The error event of a run that stops on `e`, the trace written, the progress line cleared.
  void error(const std::exception& e);
  void finish();  // the trace written, the progress line cleared

 private:
  bool m_root, m_all_ranks;
  std::unique_ptr<MetricsCsv> m_csv;
  std::unique_ptr<EventLog> m_events;
  std::unique_ptr<ChromeTrace> m_trace;
  std::unique_ptr<ProgressLine> m_progress;
  std::chrono::steady_clock::time_point m_last_position = std::chrono::steady_clock::now();
};

// "epoch 3/100  lr 1.00e-03  loss a/b  E a/b meV/atom  F a/b meV/Å  812 graphs/s  3.1 s  *"
// from a metrics.csv row: train/validate figures, or train/validate/test with `test`; "-" where
// one is missing. An evaluation inside an epoch (epoch_steps >= 0: its steps done) reads
// "epoch 3/100 step 120 (run 1320)".
std::string epoch_line(const nlohmann::json& row, int64_t num_epochs, int64_t epoch_steps,
                       bool energy, bool forces, bool improved, bool test);

}  // namespace ddgnn
