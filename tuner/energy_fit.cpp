// Power figures fitted to a run's measured joules (energy_fit.h).
#include "tuner/energy_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/text.h"

namespace ddgnn {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// y = a + b x by least squares; false (a = mean y) when x spreads less than `min_spread`.
bool line_fit(const std::vector<double>& x, const std::vector<double>& y, double min_spread,
              double& a, double& b) {
  const double n = double(x.size());
  double mx = 0, my = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    mx += x[k] / n;
    my += y[k] / n;
  }
  double sxx = 0, sxy = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    sxx += (x[k] - mx) * (x[k] - mx);
    sxy += (x[k] - mx) * (y[k] - my);
  }
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  if (x.size() < 2 || *hi - *lo < min_spread || sxx <= 0) {
    a = my;
    b = 0;
    return false;
  }
  b = sxy / sxx;
  a = my - b * mx;
  return true;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

MeasuredRun read_measured_run(const std::string& run_dir) {
  MeasuredRun run;
  run.path = run_dir + "/metrics.csv";
  std::ifstream in(run.path);
  if (!in)
    throw ConfigError("--calibrate: cannot read " + run.path,
                      "give the run directory of a `ddgnn train` run");
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split_csv_line(line);
  std::map<std::string, size_t> col;
  for (size_t k = 0; k < header.size(); ++k) col[header[k]] = k;
  for (const char* need : {"epoch_s", "energy_j", "forward_s", "backward_s", "fetch_s"})
    if (!col.count(need))
      throw ConfigError(run.path + ":1: no column " + std::string(need) +
                            " (a metrics.csv of a ddgnn version that measures no energy?)",
                        "train again with this version and Output.energy_meter auto");
  int row = 1;
  while (std::getline(in, line)) {
    ++row;
    if (line.empty()) continue;
    const std::vector<std::string> f = split_csv_line(line);
    const auto num = [&](const char* name) {
      const auto it = col.find(name);
      if (it == col.end() || it->second >= f.size() || f[it->second].empty()) return kNaN;
      try {
        size_t used = 0;
        const double v = std::stod(f[it->second], &used);
        if (used != f[it->second].size()) throw std::invalid_argument(name);
        return v;
      } catch (const std::exception&) {
        throw ConfigError(run.path + ":" + std::to_string(row) + ": column " + name +
                              " is not a number: '" + f[it->second] + "'",
                          "metrics.csv is written by ddgnn train; was it edited?");
      }
    };
    MeasuredEpoch e;
    e.epoch_s = num("epoch_s");
    e.energy_j = num("energy_j");
    if (!std::isfinite(e.energy_j) || !(e.epoch_s > 0)) continue;
    const auto zero_if_nan = [](double v) { return std::isfinite(v) ? v : 0.0; };
    e.compute_s = 0;
    for (const char* c : {"forward_s", "forces_s", "backward_s", "optimizer_s", "eval_s"})
      e.compute_s += zero_if_nan(num(c));
    e.prefetch_s = zero_if_nan(num("fetch_s")) + zero_if_nan(num("graph_s"));
    e.node_j = num("energy_node_j");
    e.cpu_j = num("energy_cpu_j");
    e.memory_j = num("energy_memory_j");
    e.gpu_j = num("energy_gpu_j");
    run.epochs.push_back(e);
  }
  if (run.epochs.empty())
    throw ConfigError(run.path + ": no epoch has a measured energy_j",
                      "the run measured nothing (Output.energy_meter none, or no readable "
                      "counters: its log says which); train on a machine whose counters ddgnn "
                      "can read");
  const std::string events = run_dir + "/events.jsonl";
  std::ifstream ev(events);
  bool found = false;
  while (ev && std::getline(ev, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || j.value("event", "") != "run_start") continue;
    run.ranks = j.contains("loader") ? j["loader"].value("ranks", int64_t(1)) : 1;
    run.device = j.value("device", "cpu");
    found = true;
  }
  if (!found)
    throw ConfigError("--calibrate: no run_start event in " + events,
                      "give the run directory of a `ddgnn train` run");
  return run;
}

PowerFit fit_power(const Platform& p, const MeasuredRun& run, int64_t nodes) {
  PowerFit fit;
  fit.nodes = std::max<int64_t>(1, nodes);
  fit.ranks_per_node = (run.ranks + fit.nodes - 1) / fit.nodes;
  const bool on_gpu = run.device != "cpu" && p.gpus_per_node > 0;
  fit.gpus_with_rank = on_gpu ? std::min(run.ranks, fit.nodes * p.gpus_per_node) : 0;
  const double all_gpus = on_gpu ? double(fit.nodes * p.gpus_per_node) : 0.0;
  const double n = double(fit.nodes);
  std::vector<double> u, host_w, d, gpu_w;
  for (const MeasuredEpoch& e : run.epochs) {
    // The host: the node's joules less its accelerators', or the CPUs' and memory's.
    double host = kNaN;
    if (std::isfinite(e.node_j)) {
      host = e.node_j - (std::isfinite(e.gpu_j) ? e.gpu_j : 0.0);
      fit.host_includes_network = true;
    } else if (std::isfinite(e.cpu_j)) {
      host = e.cpu_j + (std::isfinite(e.memory_j) ? e.memory_j : 0.0);
    }
    const double share = core_share(p, fit.ranks_per_node, e.epoch_s, e.prefetch_s);
    const double duty = accelerator_duty(e.epoch_s, e.compute_s);
    if (std::isfinite(host)) {
      u.push_back(share);
      host_w.push_back(host / (n * e.epoch_s));
    }
    if (on_gpu && std::isfinite(e.gpu_j)) {
      // gpu_j / epoch = idle x all + (busy - idle) x duty x with rank: one line in the duty.
      d.push_back(duty * double(fit.gpus_with_rank) / all_gpus);
      gpu_w.push_back(e.gpu_j / (all_gpus * e.epoch_s));
    }
  }
  if (!u.empty()) {
    fit.host_measured = true;
    double a = 0, b = 0;
    fit.host_separable = line_fit(u, host_w, 0.05, a, b);
    fit.host_idle_w = a;
    fit.host_busy_w = a + b;
    double mean = 0;
    for (double w : host_w) mean += w / double(host_w.size());
    fit.host_mean_w = mean;
    fit.u_min = *std::min_element(u.begin(), u.end());
    fit.u_max = *std::max_element(u.begin(), u.end());
  }
  if (!d.empty()) {
    fit.gpu_measured = true;
    double a = 0, b = 0;
    fit.gpu_separable = line_fit(d, gpu_w, 0.05 * double(fit.gpus_with_rank) / all_gpus, a, b);
    fit.gpu_idle_w = a;
    fit.gpu_busy_w = a + b;
    double mean = 0;
    for (double w : gpu_w) mean += w / double(gpu_w.size());
    fit.gpu_mean_w = mean;
    fit.d_min = *std::min_element(d.begin(), d.end()) * all_gpus / double(fit.gpus_with_rank);
    fit.d_max = *std::max_element(d.begin(), d.end()) * all_gpus / double(fit.gpus_with_rank);
  }
  // Both platforms' figures against the measurement, over the domains measured.
  const Platform fitted = with_fitted_power(p, fit);
  const auto modelled = [&](const Platform& q, const MeasuredEpoch& e) {
    double j = 0;
    const double share = core_share(q, fit.ranks_per_node, e.epoch_s, e.prefetch_s);
    if (fit.host_measured)
      j += n * e.epoch_s *
           (q.node_idle_w + (q.node_busy_w - q.node_idle_w) * share +
            (fit.host_includes_network ? q.network_w : 0.0));
    if (fit.gpu_measured) {
      const double duty = accelerator_duty(e.epoch_s, e.compute_s);
      j += e.epoch_s * (double(fit.gpus_with_rank) * (q.gpu_busy_w - q.gpu_idle_w) * duty +
                        all_gpus * q.gpu_idle_w);
    }
    return j;
  };
  for (const MeasuredEpoch& e : run.epochs) {
    double measured = 0;
    if (fit.host_measured)
      measured += std::isfinite(e.node_j)
                      ? e.node_j - (std::isfinite(e.gpu_j) ? e.gpu_j : 0.0)
                      : e.cpu_j + (std::isfinite(e.memory_j) ? e.memory_j : 0.0);
    if (fit.gpu_measured) measured += e.gpu_j;
    fit.measured_j += measured;
    fit.preset_j += modelled(p, e);
    fit.fitted_j += modelled(fitted, e);
  }
  fit.epochs = run.epochs.size();
  return fit;
}

Platform with_fitted_power(const Platform& platform, const PowerFit& fit) {
  Platform p = platform;
  if (fit.host_separable && fit.host_busy_w > 0 && fit.host_idle_w >= 0 &&
      fit.host_busy_w >= fit.host_idle_w) {
    const double network = fit.host_includes_network ? p.network_w : 0.0;
    p.node_idle_w = std::max(0.0, fit.host_idle_w - network);
    p.node_busy_w = std::max(p.node_idle_w, fit.host_busy_w - network);
  }
  if (fit.gpu_separable && fit.gpu_busy_w >= fit.gpu_idle_w && fit.gpu_idle_w >= 0) {
    p.gpu_idle_w = fit.gpu_idle_w;
    p.gpu_busy_w = fit.gpu_busy_w;
  }
  return p;
}

std::string describe(const PowerFit& fit, const Platform& preset, const MeasuredRun& run) {
  std::string s = "calibration from " + run.path + ": " + std::to_string(fit.epochs) +
                  " epochs with measured joules, " + std::to_string(run.ranks) + " rank(s) on " +
                  std::to_string(fit.nodes) + " node(s) of " + preset.name + ", device " +
                  run.device + "\n";
  if (fit.host_measured) {
    const std::string what = fit.host_includes_network
                                 ? "host (the node's counter less its accelerators')"
                                 : "host (CPUs and memory: RAPL sees no board or network)";
    if (fit.host_separable)
      s += "  " + what + ": idle " + fmt("%.4g", fit.host_idle_w) + " W, busy " +
           fmt("%.4g", fit.host_busy_w) + " W a node (fitted over a share of busy cores of " +
           fmt("%.2f", fit.u_min) + "-" + fmt("%.2f", fit.u_max) +
           "; preset: " + fmt("%.4g", preset.node_idle_w) + " and " +
           fmt("%.4g", preset.node_busy_w) + " W)\n";
    else
      s += "  " + what + ": " + fmt("%.4g", fit.host_mean_w) +
           " W a node on average; its share of busy cores stayed at " + fmt("%.2f", fit.u_min) +
           "-" + fmt("%.2f", fit.u_max) +
           ", too narrow to separate idle from busy power: the preset's are kept\n";
  }
  if (fit.gpu_measured) {
    if (fit.gpu_separable)
      s += "  accelerators: idle " + fmt("%.4g", fit.gpu_idle_w) + " W, busy " +
           fmt("%.4g", fit.gpu_busy_w) + " W each (fitted over a duty of " +
           fmt("%.2f", fit.d_min) + "-" + fmt("%.2f", fit.d_max) +
           "; preset: " + fmt("%.4g", preset.gpu_idle_w) + " and " +
           fmt("%.4g", preset.gpu_busy_w) + " W)\n";
    else
      s += "  accelerators: " + fmt("%.4g", fit.gpu_mean_w) +
           " W each on average; their duty stayed at " + fmt("%.2f", fit.d_min) + "-" +
           fmt("%.2f", fit.d_max) + ", too narrow to separate idle from busy: the preset's kept\n";
  }
  const double off = fit.measured_j > 0 ? fit.preset_j / fit.measured_j - 1 : kNaN;
  s += "  measured " + fmt("%.4g", fit.measured_j / 1e3) + " kJ over these epochs; the preset's " +
       "figures" + (preset.power_estimated.empty() ? "" : " (partly estimated)") + " model " +
       fmt("%.4g", fit.preset_j / 1e3) + " kJ (" + fmt("%+.0f", 100 * off) + "%)";
  if (fit.host_separable || fit.gpu_separable)
    s += ", the fitted " + fmt("%.4g", fit.fitted_j / 1e3) + " kJ (" +
         fmt("%+.0f", 100 * (fit.measured_j > 0 ? fit.fitted_j / fit.measured_j - 1 : kNaN)) +
         "%); the simulation below uses the fitted figures";
  return s + "\n";
}

}  // namespace ddgnn
