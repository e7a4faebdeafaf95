// The online backend switcher (train/backend_switcher.h): MPI around tuner/online.h.
#include "train/backend_switcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "comm/mpi.h"
#include "core/error.h"
#include "core/log.h"
#include "tuner/online.h"
#include "tuner/selection.h"

namespace ddgnn {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string ms(double s) {
  return fmt("%.3g", 1e3 * s) + " ms";
}

}  // namespace

BackendSwitcher::BackendSwitcher(TrainData& data, const TrainSettings& s, MPI_Comm world,
                                 const std::string& csv_path, bool append)
    : m_data(data) {
  m_comm = Communicator::dup(world);
  m_rank = m_comm.rank();
  m_ranks_per_node = ranks_on_node(m_comm.get());
  m_cores = double(std::max(1u, std::thread::hardware_concurrency()));

  OnlineOptions o;
  o.candidates = to_strings(data.candidates());
  o.explore_batches = int(s.tuner.explore_batches);
  o.drift = s.tuner.drift;
  o.check_every = int(s.tuner.check_every);
  o.recheck_every_epochs = int(s.tuner.recheck_every_epochs);
  std::map<std::string, CostModel> prior;
  if (!s.tuner.models.empty()) {
    try {
      prior = read_cost_models(s.tuner.models, s.tuner.method);
    } catch (const ConfigError& e) {
      throw ConfigError("Tuner.models: " + std::string(e.what()), e.hint());
    }
  }
  m_tuner = std::make_unique<OnlineTuner>(o, std::move(prior));
  if (const char* slow = std::getenv("DDGNN_DEBUG_SLOW_FETCH")) {
    std::stringstream list(slow);
    for (std::string item; std::getline(list, item, ',');) {
      Slowdown d;
      std::stringstream fields(item);
      std::string sec, from, to;
      if (!std::getline(fields, d.backend, ':') || !std::getline(fields, sec, ':') ||
          !std::getline(fields, from, ':') || !std::getline(fields, to, ':'))
        throw ConfigError("DDGNN_DEBUG_SLOW_FETCH: '" + item + "' is not backend:s:from:to");
      d.seconds = std::stod(sec);
      d.from = std::stoll(from);
      d.to = std::stoll(to);
      m_slow.push_back(d);
    }
  }
  share_state();

  if (m_rank == 0 && !csv_path.empty()) {
    const bool fresh = !append || !std::filesystem::exists(csv_path);
    m_csv.reset(std::fopen(csv_path.c_str(), fresh ? "w" : "a"));
    if (!m_csv)
      throw Error(csv_path + ": cannot write the tuner's log",
                  "check that the run directory is writable");
    if (fresh)
      std::fprintf(m_csv.get(),
                   "time_s,epoch,step,event,backend,seconds,predicted_s,batch,bytes_mean,remote,"
                   "ranks,chosen,reason,overhead_s\n");
  }
}

BackendSwitcher::~BackendSwitcher() = default;

void BackendSwitcher::start_epoch(int64_t epoch) {
  m_epoch = epoch;
  // The same decision on every rank (epochs are counted alike): re-explore at the next fetch.
  const int every = m_tuner->options().recheck_every_epochs;
  if (every > 0 && epoch > 1 && (epoch - 1) % every == 0 && !m_exploring) {
    m_recheck = true;
    m_reason = "epoch " + std::to_string(epoch);
  }
}

void BackendSwitcher::write_row(const std::string& event, const std::string& backend,
                                double seconds, double predicted, const std::string& chosen,
                                const std::string& reason, double overhead) {
  if (!m_csv) return;
  const double n = std::max(1.0, m_fetches);
  std::fprintf(m_csv.get(), "%.6f,%lld,%lld,%s,%s,%.6g,%.6g,%.4g,%.6g,%.4f,%d,%s,%s,%.6g\n",
               seconds_since(m_t0), (long long)m_epoch, (long long)m_step, event.c_str(),
               backend.c_str(), seconds, predicted, m_samples / n,
               m_samples > 0 ? m_bytes / m_samples : 0.0,
               m_samples > 0 ? m_remote / m_samples : 0.0, m_data.group_size(), chosen.c_str(),
               reason.c_str(), overhead);
  std::fflush(m_csv.get());
}

void BackendSwitcher::share_state() {
  // [exploring, current, explored mask...] over the candidates' fixed order.
  const std::vector<std::string> cands = to_strings(m_data.candidates());
  std::vector<int> state(2 + cands.size(), 0);
  if (m_rank == 0) {
    state[0] = m_tuner->exploring() ? 1 : 0;
    state[1] = int(std::find(cands.begin(), cands.end(), m_tuner->current()) - cands.begin());
    for (const auto& b : m_tuner->explore_order(0))
      state[2 + size_t(std::find(cands.begin(), cands.end(), b) - cands.begin())] = 1;
  }
  MPI_CHECK(MPI_Bcast(state.data(), int(state.size()), MPI_INT, 0, m_comm.get()));
  m_exploring = state[0] != 0;
  m_data.set_backend(m_data.candidates().at(size_t(state[1])));
  m_order.clear();
  for (size_t k = 0; k < cands.size(); ++k)
    if (state[2 + k]) m_order.push_back(cands[k]);
  std::sort(m_order.begin(), m_order.end());
  m_times.assign(m_order.size(), {});
  m_active.assign(m_order.size(), true);
  m_round = 0;
  m_window.clear();
  m_intervals.clear();
  m_bytes = m_samples = m_remote = m_fetches = 0;
}

FetchFeatures BackendSwitcher::window_features() const {
  FetchFeatures f;
  const double n = std::max(1.0, m_fetches);
  f.batch = std::max(1.0, m_samples / n);
  f.ranks = m_data.group_size();
  f.ranks_per_node = m_ranks_per_node;
  f.cores_per_node = m_cores;
  f.bytes_mean = m_samples > 0 ? m_bytes / m_samples : 0.0;
  f.remote = m_samples > 0 ? m_remote / m_samples : 0.0;
  return f;
}

void BackendSwitcher::end_exploration(SwitchNote* note) {
  // m_times already holds every round's slowest-rank times (reduced round by round).
  double extra = m_round_extra_s;
  MPI_CHECK(MPI_Reduce(&m_round_extra_s, &extra, 1, MPI_DOUBLE, MPI_MAX, 0, m_comm.get()));
  m_round_extra_s = 0;
  if (m_rank == 0) {
    std::map<std::string, std::vector<double>> times;
    for (size_t k = 0; k < m_order.size(); ++k) times[m_order[k]] = m_times[k];
    const FetchFeatures f = window_features();
    const OnlineDecision d = m_tuner->decide(times, f, m_reason);
    std::string summary;
    nlohmann::json measured = nlohmann::json::object();
    for (const auto& [b, t] : d.measured) {
      write_row("explore", b, t, d.predicted.at(b), d.backend, m_reason, 0.0);
      summary += (summary.empty() ? "" : ", ") + b + " " + ms(t);
      if (times[b].size() < size_t(m_round))
        summary += " (dropped after " + std::to_string(times[b].size()) + ")";
      measured[b] = t;
    }
    for (const auto& b : m_tuner->pruned()) summary += ", " + b + " pruned";
    write_row("decide", d.backend, d.measured.at(d.backend), m_tuner->predict(d.backend, f),
              d.backend, m_reason, extra);
    if (note) {
      note->line = "tuner (" + m_reason +
                   "): " + (d.backend == d.previous ? "keeps " : "chooses ") + d.backend + " (" +
                   summary + " per batch, slowest rank; exploring cost " + ms(extra) + ")";
      note->event = nlohmann::json{
          {"reason", m_reason},
          {"backend", d.backend},
          {"previous", d.previous},
          {"measured_s", measured},
          {"exploration_overhead_s", extra},
          {"epoch", m_epoch},
          {"step",
           m_step}}.dump();
    }
  }
  share_state();
}

void BackendSwitcher::check_drift(SwitchNote* note) {
  double observed = median_seconds(m_window), slowest = observed;
  MPI_CHECK(MPI_Reduce(&observed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, m_comm.get()));
  if (m_rank == 0) {
    const FetchFeatures f = window_features();
    double predicted = NAN;
    const bool calibrating = m_tuner->calibrating();
    // A change under 1% of the step time is not worth an exploration.
    const double floor = 0.01 * median_seconds(m_intervals);
    const bool drift = m_tuner->check(slowest, f, &predicted, std::isfinite(floor) ? floor : 0.0);
    write_row("check", m_tuner->current(), slowest, predicted, m_tuner->current(),
              drift         ? "drift"
              : calibrating ? "calibrate"
                            : "",
              0.0);
    if (drift) {
      m_reason = "drift";
      if (note) {
        note->line = "tuner: " + m_tuner->current() + " takes " + ms(slowest) +
                     " per batch against " + ms(predicted) + " predicted: exploring again";
        note->event = nlohmann::json{{"reason", "drift"},     {"backend", m_tuner->current()},
                                     {"observed_s", slowest}, {"predicted_s", predicted},
                                     {"epoch", m_epoch},      {"step", m_step}}
                          .dump();
      }
    }
  }
  share_state();
  if (m_exploring && m_rank != 0) m_reason = "drift";
}

double BackendSwitcher::debug_delay(const std::string& backend) const {
  double d = 0;
  for (const auto& s : m_slow)
    if (s.backend == backend && m_step >= s.from && m_step < s.to) d += s.seconds;
  if (d > 0) std::this_thread::sleep_for(std::chrono::duration<double>(d));
  return d;
}

GraphBlock BackendSwitcher::fetch(const std::vector<int64_t>& positions, FetchInfo* info,
                                  SwitchNote* note) {
  ++m_step;
  const auto now = std::chrono::steady_clock::now();
  if (m_last_call != std::chrono::steady_clock::time_point{})
    m_intervals.push_back(std::chrono::duration<double>(now - m_last_call).count());
  m_last_call = now;
  if (m_recheck) {  // a new epoch's re-check: rank 0 prunes with what it knows, then all explore
    m_recheck = false;
    if (m_rank == 0) m_tuner->explore(window_features());
    share_state();
  }
  GraphBlock block;
  FetchInfo fi;
  if (m_exploring) {
    // Every candidate fetches the same batch, in an order rotated every step; the current
    // backend's result is kept (any would do: the records are the same bytes).
    std::vector<std::string> order;
    for (size_t k = 0; k < m_order.size(); ++k)
      if (m_active[k]) order.push_back(m_order[k]);
    std::rotate(order.begin(), order.begin() + size_t(m_round) % order.size(), order.end());
    double total = 0, kept = 0;
    std::vector<double> round(m_order.size(), 0.0);
    for (const auto& b : order) {
      FetchInfo one;
      const auto t0 = std::chrono::steady_clock::now();
      const Backend backend = parse_backend(b);
      GraphBlock got = m_data.fetch(kTrain, positions, &one, &backend);
      one.seconds += debug_delay(b);
      const auto t1 = std::chrono::steady_clock::now();
      if (note) note->spans.push_back({"tuner.explore:" + b, t0, t1});
      const size_t k = size_t(std::find(m_order.begin(), m_order.end(), b) - m_order.begin());
      round[k] = one.seconds;
      total += one.seconds;
      if (backend == m_data.backend() || block.n_graphs() == 0) {
        block = std::move(got);
        fi = one;
        kept = one.seconds;
      }
    }
    m_round_extra_s += total - kept;
    ++m_round;
    // The round's slowest rank per candidate, on every rank; from the second round on, a
    // candidate whose median so far is over prune_factor x the best one's is not fetched for
    // the rest of this exploration (the same decision on every rank: the values are identical).
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, round.data(), int(round.size()), MPI_DOUBLE, MPI_MAX,
                            m_comm.get()));
    double best = INFINITY;
    std::vector<double> med(m_order.size(), INFINITY);
    for (size_t k = 0; k < m_order.size(); ++k)
      if (m_active[k]) {
        m_times[k].push_back(round[k]);
        med[k] = median_seconds(m_times[k]);
        best = std::min(best, med[k]);
      }
    if (m_round >= 2)
      for (size_t k = 0; k < m_order.size(); ++k)
        if (m_active[k] && m_order[k] != to_string(m_data.backend()) &&
            med[k] > m_tuner->options().prune_factor * best)
          m_active[k] = false;
  } else {
    block = m_data.fetch(kTrain, positions, &fi);
    fi.seconds += debug_delay(to_string(m_data.backend()));
    m_window.push_back(fi.seconds);
  }
  m_bytes += double(fi.bytes);
  m_samples += double(fi.samples);
  m_remote += double(fi.remote);
  m_fetches += 1;
  if (info) *info = fi;
  if (m_exploring && m_round >= m_tuner->options().explore_batches)
    end_exploration(note);
  else if (!m_exploring && int(m_window.size()) >= m_tuner->options().check_every)
    check_drift(note);
  return block;
}

}  // namespace ddgnn
