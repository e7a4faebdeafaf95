// `ddgnn simulate --calibrate RUN`: the platform's power figures fitted to a training run's
// measured joules (metrics.csv's energy columns, Output.energy_meter), and how far the preset's
// (partly estimated) figures were from that measurement. The model is epoch_energy_j's
// (simulate.h): per node, host idle + (busy - idle) u with u the share of its cores at work, per
// accelerator with a rank idle + (busy - idle) d with d its duty, the node's other accelerators
// idle. Each epoch gives one equation; idle and busy separate only when u (or d) varies between
// epochs, else the fit reports the mean power alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tuner/simulate.h"

namespace ddgnn {

// One epoch of a run, from its metrics.csv row. Joules NaN where the meter did not report them.
struct MeasuredEpoch {
  double epoch_s = 0;
  double compute_s = 0;   // forward + forces + backward + optimizer + eval: the device's work
  double prefetch_s = 0;  // fetch + graph: the prefetch thread's
  double energy_j = 0;    // the job's total as the meter reports it
  double node_j = 0, cpu_j = 0, memory_j = 0, gpu_j = 0;
};

struct MeasuredRun {
  std::string path;  // its metrics.csv
  int64_t ranks = 1;
  std::string device;                 // run_start's: cpu or cuda
  std::vector<MeasuredEpoch> epochs;  // those with measured joules
};

// Reads RUN/metrics.csv and RUN/events.jsonl (run_start: ranks, device). ConfigError naming the
// file when it is missing or malformed, or when no epoch has energy_j (the run measured nothing:
// Output.energy_meter was none, or the machine's counters were not readable).
MeasuredRun read_measured_run(const std::string& run_dir);

struct PowerFit {
  int64_t nodes = 1, ranks_per_node = 1, gpus_with_rank = 0;
  // The host (the node's measurement less its accelerators', or cpu + memory where only RAPL
  // reports), as a fit of idle and busy over the share of busy cores, or its mean power alone.
  bool host_measured = false, host_separable = false, host_includes_network = false;
  double host_idle_w = 0, host_busy_w = 0, host_mean_w = 0, u_min = 0, u_max = 0;
  // The accelerators, the same way over their duty.
  bool gpu_measured = false, gpu_separable = false;
  double gpu_idle_w = 0, gpu_busy_w = 0, gpu_mean_w = 0, d_min = 0, d_max = 0;
  // The platform's figures against the measurement: joules of all the epochs, modelled over
  // the same domains as measured.
  double measured_j = 0, preset_j = 0, fitted_j = 0;
  size_t epochs = 0;
};

// The fit for `run` placed on `nodes` nodes of `platform` (its cores and accelerators a node).
PowerFit fit_power(const Platform& platform, const MeasuredRun& run, int64_t nodes);

// The fitted figures put into `platform` (those that separated; the others kept).
Platform with_fitted_power(const Platform& platform, const PowerFit& fit);

// What the fit found, for the terminal: several lines.
std::string describe(const PowerFit& fit, const Platform& preset, const MeasuredRun& run);

}  // namespace ddgnn
