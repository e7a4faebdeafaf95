// metrics.csv, events.jsonl, trace.json and the terminal progress line.
#include "train/run_log.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <sstream>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "core/text.h"

namespace ddgnn {

namespace {

std::string csv_cell(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isnan(d)) return "nan";
    return fmt("%.9g", d);
  }
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + v[i];
  return out;
}

}  // namespace

MetricsCsv::MetricsCsv(const std::string& path, std::vector<std::string> columns, bool truncate,
                       int64_t keep_epochs, const nlohmann::json& last_row)
    : m_path(path), m_columns(std::move(columns)) {
  std::string kept;
  bool has_last = false;
  if (!truncate && std::filesystem::exists(path)) {
    std::ifstream in(path);
    std::string header;
    std::getline(in, header);
    // A file from a version that wrote fewer columns: its rows move to this run's columns by
    // name (the new ones empty); columns this run lacks mean another run's heads.
    const std::vector<std::string> old_columns = split_csv_line(header);
    std::vector<int> to_old(m_columns.size(), -1);
    for (size_t c = 0; c < m_columns.size(); ++c)
      for (size_t o = 0; o < old_columns.size(); ++o)
        if (old_columns[o] == m_columns[c]) to_old[c] = int(o);
    size_t found = 0;
    for (int o : to_old) found += o >= 0;
    // Rows carry the run's step (an evaluation inside an epoch): kept up to the checkpoint's.
    int step_at = -1;
    for (size_t o = 0; o < old_columns.size(); ++o)
      if (old_columns[o] == "step") step_at = int(o);
    const int64_t last_step =
        last_row.is_object() && last_row.contains("step") ? last_row["step"].get<int64_t>() : -1;
    if (header != join(m_columns) &&
        (found != old_columns.size() || old_columns.empty() || old_columns[0] != m_columns[0]))
      throw Error(path + ": its columns are not those of this run",
                  "resume with the config that started the run, or choose another "
                  "Output.run_dir");
    std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The writer ends every row with a newline: a last line without one was cut short.
    if (!rest.empty() && rest.back() != '\n') rest.erase(rest.rfind('\n') + 1);
    std::istringstream rows(rest);
    for (std::string line; std::getline(rows, line);) {
      if (line.empty()) continue;
      const auto cells = split_csv_line(line);
      // A row cut short (a full disk, a kill in mid-write): dropped; the checkpoint's row of
      // the resumed epoch comes back below.
      if (cells.size() != old_columns.size()) continue;
      const int64_t epoch = std::atoll(cells[0].c_str());
      const int64_t step = step_at >= 0 && !cells[size_t(step_at)].empty()
                               ? std::atoll(cells[size_t(step_at)].c_str())
                               : -1;
      if (last_step >= 0 && step >= 0 ? step > last_step : epoch > keep_epochs) continue;
      std::vector<std::string> row(m_columns.size());
      for (size_t c = 0; c < m_columns.size(); ++c)
        if (to_old[c] >= 0) row[c] = cells[size_t(to_old[c])];
      kept += join(row) + "\n";
      has_last =
          has_last || (last_step >= 0 && step >= 0 ? step == last_step : epoch == keep_epochs);
    }
    if (!has_last && last_row.is_object()) kept += row_text(last_row) + "\n";
  }
  write_file_atomic(path, join(m_columns) + "\n" + kept);
  m_out.open(path, std::ios::app);
  if (!m_out) throw Error(path + ": cannot open for writing", "check the run directory");
}

std::string MetricsCsv::row_text(const nlohmann::json& row) const {
  std::vector<std::string> cells;
  for (const auto& c : m_columns) cells.push_back(row.contains(c) ? csv_cell(row[c]) : "");
  return join(cells);
}

void MetricsCsv::write(const nlohmann::json& row) {
  m_out << row_text(row) << "\n";
  m_out.flush();
  if (!m_out)
    throw Error(m_path + ": cannot append the epoch's row (" + std::strerror(errno) + ")",
                "the disk may be full: free space, then resume with --set Training.continue=1");
}

EventLog::EventLog(const std::string& path, bool truncate)
    : m_path(path), m_start(std::chrono::steady_clock::now()) {
  if (!truncate && std::filesystem::is_regular_file(path)) {
    // A last line cut short (a full disk, a kill in mid-write) is dropped, so that every line
    // stays one JSON object.
    std::ifstream in(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    if (!text.empty() && text.back() != '\n') {
      const auto last = text.rfind('\n');
      write_file_atomic(path, last == std::string::npos ? std::string() : text.substr(0, last + 1));
    }
  }
  m_out.open(path, truncate ? std::ios::trunc : std::ios::app);
  if (!m_out) throw Error(path + ": cannot open for writing", "check the run directory");
}

bool EventLog::has_epoch_event(const std::string& event, int64_t epoch, int64_t step) const {
  std::ifstream in(m_path);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("event", std::string()) == event &&
        j.value("epoch", int64_t(-1)) == epoch &&
        (step < 0 || j.value("step", int64_t(-1)) == step))
      return true;
  }
  return false;
}

void EventLog::write(const std::string& event, nlohmann::json fields) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  nlohmann::json j = {
      {"time", stamp},
      {"elapsed_s",
       std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count()},
      {"event", event}};
  for (auto it = fields.begin(); it != fields.end(); ++it) j[it.key()] = it.value();
  m_out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  m_out.flush();
  if (!m_out)
    throw Error(m_path + ": cannot append the event '" + event + "' (" + std::strerror(errno) + ")",
                "the disk may be full: free space, then resume with --set Training.continue=1");
}

ChromeTrace::ChromeTrace(std::string path, int64_t max_steps)
    : m_path(std::move(path)), m_max_steps(max_steps), m_origin(std::chrono::steady_clock::now()) {}

void ChromeTrace::add(const char* name, std::chrono::steady_clock::time_point begin,
                      std::chrono::steady_clock::time_point end, int64_t step, int tid) {
  if (!recording()) return;
  using us = std::chrono::duration<double, std::micro>;
  m_events.push_back({{"name", name},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", tid},
                      {"ts", us(begin - m_origin).count()},
                      {"dur", us(end - begin).count()},
                      {"args", {{"step", step}}}});
}

void ChromeTrace::end_step() {
  if (!recording()) return;
  if (++m_steps == m_max_steps) finish();
}

void ChromeTrace::finish() {
  if (m_written || m_events.empty()) return;
  nlohmann::json doc = {{"traceEvents", m_events}, {"displayTimeUnit", "ms"}};
  doc["traceEvents"].push_back({{"name", "thread_name"},
                                {"ph", "M"},
                                {"pid", 0},
                                {"tid", 0},
                                {"args", {{"name", "train"}}}});
  doc["traceEvents"].push_back({{"name", "thread_name"},
                                {"ph", "M"},
                                {"pid", 0},
                                {"tid", 1},
                                {"args", {{"name", "prefetch"}}}});
  write_file_atomic(m_path, doc.dump() + "\n");
  m_written = true;
  m_events = nlohmann::json::array();
}

std::string format_duration(double s) {
  char buf[32];
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(s / 60), int(s) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(s / 3600), int(s / 60) % 60);
  }
  return buf;
}

ProgressLine::ProgressLine(bool enabled) : m_enabled(enabled) {}

bool progress_wanted(Progress mode, int verbosity) {
  if (verbosity < 1 || mode == Progress::kLines) return false;
  return mode == Progress::kBar || ::isatty(STDERR_FILENO);
}

void ProgressLine::update(int64_t epoch, int64_t n_epochs, int64_t done, int64_t total,
                          double graphs_per_s, double loss, double eta_s) {
  if (!m_enabled) return;
  const auto now = std::chrono::steady_clock::now();
  if (m_shown && done < total && now - m_last < std::chrono::milliseconds(200)) return;
  m_last = now;
  const int width = 20;
  const int filled = total > 0 ? int(width * done / total) : 0;
  std::string bar(size_t(filled), '#');
  bar += std::string(size_t(width - filled), '-');
  std::fprintf(stderr,
               "\r\033[Kepoch %lld/%lld [%s] step %lld/%lld  %.0f graphs/s  loss %.4g  ETA %s",
               (long long)epoch, (long long)n_epochs, bar.c_str(), (long long)done,
               (long long)total, graphs_per_s, loss, format_duration(eta_s).c_str());
  std::fflush(stderr);
  m_shown = true;
}

void ProgressLine::clear() {
  if (!m_enabled || !m_shown) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  m_shown = false;
}

void RunLog::open(const std::string& run_dir, const std::vector<std::string>& columns, bool resume,
                  int64_t resumed_epoch, int64_t resumed_step, const nlohmann::json& resumed_row,
                  const std::string& resumed_checkpoint, int64_t trace_steps, bool progress) {
  m_csv = std::make_unique<MetricsCsv>(run_dir + "/metrics.csv", columns, !resume, resumed_epoch,
                                       resumed_row);
  m_events = std::make_unique<EventLog>(run_dir + "/events.jsonl", !resume);
  // Resumed from a checkpoint whose events a kill lost (between the checkpoint and the events):
  // written back from the checkpoint's row, as the metrics row is.
  if (resume && resumed_row.is_object() && resumed_row.contains("epoch")) {
    const int64_t row_epoch = resumed_row["epoch"].get<int64_t>();
    if (!m_events->has_epoch_event("epoch", row_epoch, resumed_row.value("step", int64_t(-1))))
      m_events->write("epoch", resumed_row);
  }
  if (resume && !resumed_checkpoint.empty() && resumed_step > 0 &&
      !m_events->has_epoch_event("checkpoint", resumed_epoch, resumed_step))
    m_events->write(
        "checkpoint",
        {{"epoch", resumed_epoch}, {"step", resumed_step}, {"path", resumed_checkpoint}});
  if (trace_steps > 0)
    m_trace = std::make_unique<ChromeTrace>(run_dir + "/trace.json", trace_steps);
  m_progress = std::make_unique<ProgressLine>(progress);
}

void RunLog::position(int64_t epoch, int64_t n_epochs, int64_t done, int64_t total,
                      double graphs_per_s, double loss, double eta_s) {
  if (m_progress && m_progress->enabled()) {
    m_progress->update(epoch, n_epochs, done, total, graphs_per_s, loss, eta_s);
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!m_root || done >= total ||
      std::chrono::duration<double>(now - m_last_position).count() < kPositionLineSeconds)
    return;
  m_last_position = now;
  spdlog::info("epoch {}/{} step {}/{} ({:.1f}%)  {:.0f} graphs/s  loss {:.4g}  epoch ends in {}",
               epoch, n_epochs, done, total,
               100.0 * double(done) / double(std::max<int64_t>(total, 1)), graphs_per_s, loss,
               format_duration(eta_s));
}

void RunLog::line(const std::string& text) {
  if (!m_root && !m_all_ranks) return;
  if (m_progress) m_progress->clear();
  spdlog::info("{}", text);
}

void RunLog::warn(const std::string& text) {
  if (!m_root && !m_all_ranks) return;
  if (m_progress) m_progress->clear();
  spdlog::warn("{}", text);
}

void RunLog::event(const std::string& name, const nlohmann::json& fields) {
  if (m_events) m_events->write(name, fields);
}

void RunLog::metrics_row(const nlohmann::json& row) {
  if (m_csv) m_csv->write(row);
}

void RunLog::error(const std::exception& e) {
  if (m_progress) m_progress->clear();
  if (m_events) {
    const auto* err = dynamic_cast<const Error*>(&e);
    m_events->write("error", {{"what", e.what()}, {"hint", err ? err->hint() : ""}});
  }
  if (m_trace) m_trace->finish();
}

void RunLog::finish() {
  if (m_trace) m_trace->finish();
  if (m_progress) m_progress->clear();
}

namespace {

std::string splits(const nlohmann::json& row, const std::string& key, bool test) {
  std::string out;
  for (const char* split : {"train", "validate", "test"}) {
    if (!test && split == std::string("test")) break;
    const std::string k = std::string(split) + "_" + key;
    out += (out.empty() ? "" : "/") +
           (row.contains(k) ? fmt("%.3g", row[k].get<double>()) : std::string("-"));
  }
  return out;
}

}  // namespace

std::string epoch_line(const nlohmann::json& row, int64_t num_epochs, int64_t epoch_steps,
                       bool energy, bool forces, bool improved, bool test) {
  std::string line =
      "epoch " + std::to_string(row["epoch"].get<int64_t>()) + "/" + std::to_string(num_epochs);
  if (epoch_steps >= 0 && row.contains("step"))
    line += " step " + std::to_string(epoch_steps) + " (run " +
            std::to_string(row["step"].get<int64_t>()) + ")";
  line += "  lr " + fmt("%.2e", row["lr"].get<double>()) + "  loss " + splits(row, "loss", test);
  if (energy) line += "  E " + splits(row, "energy_mae_mev_atom", test) + " meV/atom";
  if (forces) line += "  F " + splits(row, "force_mae_mev_a", test) + " meV/Å";
  if (row.contains("validate_stress_mae_mev_a3"))
    line += "  S " + splits(row, "stress_mae_mev_a3", test) + " meV/Å³";
  line += "  " + fmt("%.0f", row["graphs_per_s"].get<double>()) + " graphs/s  " +
          fmt("%.1f", row["epoch_s"].get<double>()) + " s";
  if (row.contains("energy_j")) {  // the machine's counters (Output.energy_meter)
    const double joules = row["energy_j"].get<double>();
    line += "  " + (joules < 1e3 ? fmt("%.3g", joules) + " J" : fmt("%.3g", joules / 1e3) + " kJ");
  }
  if (improved) line += "  *";
  return line;
}

}  // namespace ddgnn
