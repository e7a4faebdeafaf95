// Reading measurements, and leave-one-configuration-out selection accuracy.
#include "tuner/selection.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tuner/online.h"

namespace ddgnn {

namespace {

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  for (std::string c; std::getline(ss, c, ',');) {
    while (!c.empty() && (c.back() == '\r' || c.back() == ' ')) c.pop_back();
    while (!c.empty() && c.front() == ' ') c.erase(c.begin());
    out.push_back(c);
  }
  return out;
}

using ConfigKey = std::tuple<double, double, double, double, double>;

// Everything but the backend (the memcpy figure belongs to a run of the grid, not a setting).
ConfigKey config_of(const FetchFeatures& f) {
  return {f.ranks, f.ranks_per_node, f.cores_per_node, f.bytes_mean, f.batch};
}

// Measured seconds per batch by configuration and backend.
std::map<ConfigKey, std::map<std::string, double>> times_by_config(
    const std::vector<FetchMeasurement>& data) {
  std::map<ConfigKey, std::map<std::string, double>> times;
  for (const auto& m : data) times[config_of(m.features)][m.backend] = m.seconds;
  return times;
}

// Per backend, the mean and the largest of its ratios.
void mean_and_max(const std::map<std::string, std::vector<double>>& ratios,
                  std::map<std::string, double>& mean, std::map<std::string, double>& most) {
  for (const auto& [b, s] : ratios) {
    double sum = 0, top = 0;
    for (double x : s) {
      sum += x;
      top = std::max(top, x);
    }
    mean[b] = sum / double(s.size());
    most[b] = top;
  }
}

// Is `picked` the configuration's measured `best` (lowest median) or not distinguishable from
// it? -1: the rows do not say (no beats_best column).
int tied_with_best(const std::vector<FetchMeasurement>& data, const std::vector<size_t>& rows,
                   const std::string& picked, const std::string& best) {
  const FetchMeasurement* pick = nullptr;
  for (size_t i : rows) {
    if (data[i].beats_best < 0) return -1;
    if (data[i].backend == picked) pick = &data[i];
  }
  if (!pick) return -1;
  return picked == best || sign_test_tied(pick->beats_best, pick->repetitions) ? 1 : 0;
}

}  // namespace

bool sign_test_tied(int beats, int n, double alpha) {
  if (n < 1 || beats < 0) return false;
  // P(X <= beats) for X ~ Binomial(n, 1/2), summed in logs (n may be in the hundreds).
  double p = 0;
  for (int k = 0; k <= std::min(beats, n); ++k)
    p += std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) -
                  n * std::log(2.0));
  return p > alpha;
}

std::vector<FetchMeasurement> read_measurements(const std::string& path, double cores) {
  std::ifstream in(path);
  if (!in)
    throw DataError(path + ": cannot open the measurements file",
                    "make one with `mpiexec -n P ddgnn bench-loader --out " + path + "`");
  std::string line;
  if (!std::getline(in, line)) throw DataError(path + ": empty, expected a CSV header");
  const std::vector<std::string> header = split_csv(line);
  auto column = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : int(it - header.begin());
  };
  std::string missing;
  for (const char* c :
       {"backend", "ranks", "sample_bytes", "batch", "fraction_remote", "seconds_per_batch"})
    if (column(c) < 0) missing += (missing.empty() ? "" : ", ") + std::string(c);
  if (!missing.empty())
    throw DataError(path + ": missing column(s) " + missing,
                    "the header of `ddgnn bench-loader --out` has them all");
  const std::vector<std::string>& known = CostModel::backends();
  std::vector<FetchMeasurement> out;
  for (int line_no = 2; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::vector<std::string> cells = split_csv(line);
    const std::string where = path + ":" + std::to_string(line_no);
    auto number = [&](const char* name, double fallback, bool required) {
      const int c = column(name);
      if (c < 0 || size_t(c) >= cells.size() || cells[size_t(c)].empty()) {
        if (required) throw DataError(where + ": no value in column " + name);
        return fallback;
      }
      try {
        size_t used = 0;
        const double v = std::stod(cells[size_t(c)], &used);
        if (used != cells[size_t(c)].size()) throw std::invalid_argument(name);
        return v;
      } catch (const std::exception&) {
        throw DataError(where + ": column " + name + " = '" + cells[size_t(c)] +
                        "' is not a number");
      }
    };
    FetchMeasurement m;
    m.backend = cells[size_t(column("backend"))];
    if (std::find(known.begin(), known.end(), m.backend) == known.end()) {
      std::string list;
      for (const auto& b : known) list += (list.empty() ? "" : ", ") + b;
      throw DataError(where + ": unknown backend '" + m.backend + "'", "known backends: " + list);
    }
    FetchFeatures& f = m.features;
    f.ranks = number("group_ranks", number("ranks", 1, true), false);
    f.ranks_per_node = number("ranks_per_node", number("ranks", 1, true), false);
    f.cores_per_node = number("cores_per_node", cores, false);
    f.bytes_mean = number("sample_bytes", 0, true);
    f.bytes_spread = number("bytes_spread", 0, false);
    f.batch = number("batch", 1, true);
    f.remote = number("fraction_remote", 0, true);
    m.seconds = number("seconds_per_batch", 0, true);
    m.explore_seconds = number("explore_seconds", NAN, false);
    m.rest_seconds = number("rest_seconds", NAN, false);
    m.repetitions = int(number("repetitions", 0, false));
    m.beats_best = int(number("beats_best", -1, false));
    if (m.beats_best > m.repetitions)
      throw DataError(where + ": beats_best = " + std::to_string(m.beats_best) +
                      " is more than the " + std::to_string(m.repetitions) + " repetitions");
    if (!(m.seconds > 0))
      throw DataError(where + ": seconds_per_batch = " +
                          cells[size_t(column("seconds_per_batch"))] + " is not a positive time",
                      "remove the row, or measure it again");
    if (!(f.batch >= 1) || !(f.ranks >= 1) || !(f.bytes_mean > 0) || f.remote < 0 || f.remote > 1)
      throw DataError(where +
                      ": batch, ranks and sample_bytes must be positive and "
                      "fraction_remote in [0, 1]");
    out.push_back(m);
  }
  if (out.empty()) throw DataError(path + ": no measurements after the header");
  return out;
}

std::vector<FetchMeasurement> only_backends(const std::vector<FetchMeasurement>& data,
                                            const std::vector<std::string>& keep,
                                            const std::string& path) {
  const std::set<std::string> chosen(keep.begin(), keep.end());
  if (chosen.size() < 2)
    throw ConfigError("--backends: choose at least two backends to select between",
                      "e.g. --backends rma collective");
  std::set<std::string> present;
  for (const auto& m : data) present.insert(m.backend);
  for (const auto& b : chosen) {
    CostModel::backend_terms(b);  // ConfigError listing the known backends
    if (!present.count(b)) {
      std::string has;
      for (const auto& p : present) has += (has.empty() ? "" : ", ") + p;
      throw DataError(path + ": no measurements of backend '" + b + "'",
                      "the grid has " + has + "; measure it with ddgnn bench-loader --backends");
    }
  }
  const bool dropped = present.size() > chosen.size();
  std::vector<FetchMeasurement> out;
  for (const auto& m : data) {
    if (!chosen.count(m.backend)) continue;
    out.push_back(m);
    if (dropped) out.back().beats_best = -1;
  }
  return out;
}

SelectionReport leave_one_configuration_out(const std::vector<FetchMeasurement>& data,
                                            FitMethod method, int trials, uint64_t seed,
                                            const std::string& incumbent) {
  std::map<ConfigKey, std::vector<size_t>> configs;
  for (size_t i = 0; i < data.size(); ++i) configs[config_of(data[i].features)].push_back(i);
  std::set<std::string> backends;
  for (const auto& m : data) backends.insert(m.backend);
  SelectionReport rep;
  std::map<std::string, std::vector<double>> errors, slowdown, online_slowdown;
  double lost_wrong = 0;
  for (const auto& [key, rows] : configs) {
    std::set<std::string> here;
    for (size_t i : rows) here.insert(data[i].backend);
    if (here.size() < 2) continue;
    std::vector<FetchMeasurement> train;
    for (size_t i = 0; i < data.size(); ++i)
      if (config_of(data[i].features) != key) train.push_back(data[i]);
    std::string best, picked;
    double t_best = INFINITY, p_best = INFINITY;
    std::map<std::string, double> measured, predicted;
    for (size_t i : rows) {
      const FetchMeasurement& m = data[i];
      CostModel model(m.backend);
      model.fit(train, method, trials, seed);
      const double p = model.predict(m.features);
      predicted[m.backend] = p;
      errors[m.backend].push_back(std::abs(p - m.seconds) / m.seconds);
      measured[m.backend] = m.seconds;
      if (m.seconds < t_best) {
        t_best = m.seconds;
        best = m.backend;
      }
      if (p < p_best) {
        p_best = p;
        picked = m.backend;
      }
    }
    ++rep.configurations;
    const double lost = measured[picked] / t_best - 1;
    bool exchanging = false;
    for (size_t i : rows) exchanging = exchanging || data[i].features.remote > 0;
    ConfigOutcome outcome;
    outcome.features = data[rows.front()].features;
    outcome.best = best;
    outcome.picked = picked;
    outcome.measured = measured;
    outcome.predicted = predicted;
    outcome.lost = lost;
    outcome.exchanging = exchanging;
    rep.mean_lost += lost;
    rep.max_lost = std::max(rep.max_lost, lost);
    if (picked == best)
      ++rep.correct;
    else
      lost_wrong += lost;
    if (lost <= rep.tie_tolerance) ++rep.within_tolerance;
    if (exchanging) {
      ++rep.exchanging;
      rep.exchanging_correct += picked == best ? 1 : 0;
      rep.exchanging_within += lost <= rep.tie_tolerance ? 1 : 0;
    }
    if (const int tied = tied_with_best(data, rows, picked, best); tied >= 0) {
      ++rep.tested;
      rep.indistinguishable += tied;
    }
    for (const auto& [b, t] : measured) slowdown[b].push_back(t / measured[picked]);
    // The online switcher replayed: it picks by the first repetitions and is judged on the rest.
    std::string online;
    double e_best = INFINITY, r_best = INFINITY;
    std::map<std::string, double> rest;
    for (size_t i : rows) {
      const FetchMeasurement& m = data[i];
      if (!(m.explore_seconds > 0) || !(m.rest_seconds > 0)) {
        rest.clear();
        break;
      }
      rest[m.backend] = m.rest_seconds;
      r_best = std::min(r_best, m.rest_seconds);
      if (m.explore_seconds < e_best) {
        e_best = m.explore_seconds;
        online = m.backend;
      }
    }
    if (!rest.empty()) {
      // As OnlineTuner::decide: the incumbent stays unless beaten by the switch margin.
      for (size_t i : rows)
        if (data[i].backend == incumbent &&
            data[i].explore_seconds <= e_best * (1.0 + OnlineOptions{}.switch_margin))
          online = incumbent;
      ++rep.online_configurations;
      const double lost = rest[online] / r_best - 1;
      rep.online_correct += rest[online] == r_best ? 1 : 0;
      rep.online_within += lost <= rep.tie_tolerance ? 1 : 0;
      rep.online_max_lost = std::max(rep.online_max_lost, lost);
      if (exchanging) {
        ++rep.online_exchanging;
        rep.online_exchanging_within += lost <= rep.tie_tolerance ? 1 : 0;
      }
      if (const int tied = tied_with_best(data, rows, online, best); tied >= 0) {
        ++rep.online_tested;
        rep.online_indistinguishable += tied;
      }
      for (const auto& [b, t] : rest) online_slowdown[b].push_back(t / rest[online]);
      outcome.online = online;
    }
    rep.outcomes.push_back(std::move(outcome));
  }
  mean_and_max(online_slowdown, rep.online_speedup_over, rep.online_max_speedup_over);
  // The constant-pick baseline: the backend most often measured fastest (the first by name
  // among equals), over every configuration or over those that exchange samples only.
  auto most_often_fastest = [&](bool exchanging_only, std::string& backend, int& count) {
    std::map<std::string, int> fastest;
    for (const ConfigOutcome& o : rep.outcomes)
      if (!exchanging_only || o.exchanging) ++fastest[o.best];
    for (const auto& [b, n] : fastest)
      if (n > count) std::tie(backend, count) = std::tie(b, n);
  };
  most_often_fastest(false, rep.always, rep.always_correct);
  most_often_fastest(true, rep.always_exchanging, rep.always_exchanging_correct);
  if (rep.configurations == 0)
    throw DataError("no configuration was measured with two or more backends",
                    "run ddgnn bench-loader with several --backends");
  rep.accuracy = double(rep.correct) / rep.configurations;
  rep.mean_lost /= rep.configurations;
  const int wrong = rep.configurations - rep.correct;
  rep.mean_lost_wrong = wrong ? lost_wrong / wrong : 0.0;
  for (const auto& [b, e] : errors) rep.held_out_mdape[b] = upper_median(e);
  mean_and_max(slowdown, rep.speedup_over, rep.max_speedup_over);
  return rep;
}

namespace {

// `picks` (configuration -> backend) judged on the times of `second`.
Agreement judge_picks(const std::vector<std::pair<ConfigKey, std::string>>& picks,
                      const std::vector<FetchMeasurement>& second, const std::string& second_path) {
  const auto times = times_by_config(second);
  std::set<ConfigKey> exchanging;
  for (const auto& m : second)
    if (m.features.remote > 0) exchanging.insert(config_of(m.features));
  Agreement a;
  for (const auto& [key, pick] : picks) {
    const auto it = times.find(key);
    if (it == times.end() || it->second.size() < 2 || !it->second.count(pick)) continue;
    double fastest = INFINITY;
    for (const auto& [b, t] : it->second) fastest = std::min(fastest, t);
    const double lost = it->second.at(pick) / fastest - 1;
    ++a.configurations;
    a.same_best += lost == 0 ? 1 : 0;
    a.within_tolerance += lost <= a.tie_tolerance ? 1 : 0;
    if (exchanging.count(key)) {
      ++a.exchanging;
      a.exchanging_same_best += lost == 0 ? 1 : 0;
      a.exchanging_within += lost <= a.tie_tolerance ? 1 : 0;
    }
    a.mean_lost += lost;
    a.max_lost = std::max(a.max_lost, lost);
  }
  if (a.configurations == 0)
    throw DataError(second_path +
                        ": no configuration in common with the fitted grid (same ranks, ranks per "
                        "node, cores, sample size and batch, two or more backends)",
                    "measure the same grid again with the same ddgnn bench-loader commands");
  a.mean_lost /= a.configurations;
  return a;
}

}  // namespace

Agreement measurements_agree(const std::vector<FetchMeasurement>& first,
                             const std::vector<FetchMeasurement>& second,
                             const std::string& second_path) {
  std::vector<std::pair<ConfigKey, std::string>> picks;
  for (const auto& [key, times] : times_by_config(first))
    if (times.size() >= 2)
      picks.emplace_back(key, std::min_element(times.begin(), times.end(), [](auto& x, auto& y) {
                                return x.second < y.second;
                              })->first);
  return judge_picks(picks, second, second_path);
}

Agreement picks_agree(const SelectionReport& report, const std::vector<FetchMeasurement>& second,
                      const std::string& second_path) {
  std::vector<std::pair<ConfigKey, std::string>> picks;
  for (const auto& o : report.outcomes) picks.emplace_back(config_of(o.features), o.picked);
  return judge_picks(picks, second, second_path);
}

std::map<std::string, CostModel> read_cost_models(const std::string& path, FitMethod fit) {
  const std::string method = to_string(fit);
  std::ifstream in(path);
  if (!in)
    throw ConfigError(path + ": cannot open the cost models",
                      "write them with: ddgnn tune -m grid.csv --out " + path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path + ": not JSON (" + std::string(e.what()) + ")",
                      "write it with: ddgnn tune -m grid.csv --out " + path);
  }
  if (!j.is_object() || !j.contains(method) || !j[method].is_object())
    throw ConfigError(
        path + ": no models fitted by '" + method + "'",
        "fit them with: ddgnn tune -m grid.csv --method " + method + " --out " + path);
  std::map<std::string, CostModel> models;
  for (const auto& [backend, m] : j[method].items()) {
    if (backend == "selection") continue;  // the fit's report, not a model
    try {
      const std::map<std::string, double> terms =
          m.at("terms").get<std::map<std::string, double>>();
      models.emplace(backend, CostModel::from_parameters(
                                  backend, terms, m.at("contention_exponent").get<double>()));
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(path + ": the '" + method + "' model of '" + backend + "' is malformed (" +
                            e.what() + ")",
                        "refit with: ddgnn tune -m grid.csv --out " + path);
    } catch (const ConfigError& e) {
      throw ConfigError(path + ": " + e.what(), e.hint());
    }
  }
  if (models.empty()) throw ConfigError(path + ": no backend models under '" + method + "'");
  return models;
}

}  // namespace ddgnn
