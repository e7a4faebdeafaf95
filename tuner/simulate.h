// The scale simulation of `ddgnn simulate`: predicted fetch, step and epoch times of every loader
// backend, and of `auto` (the fastest feasible one), at P = 1 ... 16,384 ranks, from the cost
// models fitted on one node (tuner/cost_model.h) plus a platform's network, memory and file
// system. Deterministic; no torch, no MPI. The model, term by term, is in simulate.cpp's header.
//
// Glossary: P ranks in the job, R ranks per node (min(P, platform's)), C cores per node,
// g ranks in a loader group (Loader.width, 0 = all P), B graphs per rank per step, S mean bytes
// of a packed sample, N graphs in an epoch, G gradient bytes. Times in seconds, sizes in bytes,
// bandwidths in GB/s (1e9 bytes/s), latencies in µs where a name says `_us`, power in watts
// (`_w`), energy in joules (`_j`). The presets live in platforms.cpp, the model in simulate.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tuner/cost_model.h"

namespace ddgnn {

// A machine. Presets cite where each figure comes from in `source`; every field may be
// overridden from the command line (`ddgnn simulate --latency-us ...`).
struct Platform {
  std::string name;
  int64_t nodes = 1;            // compute nodes of the machine (P beyond nodes x R is flagged)
  int64_t ranks_per_node = 1;   // one rank per GPU (GCD) on the GPU machines
  int64_t cores_per_node = 1;   // CPU cores (contention, and whether prefetch overlaps compute)
  double latency_us = 0;        // α: inter-node MPI latency, one way
  double injection_gbs = 0;     // per-node injection bandwidth (all NICs), shared by its ranks
  double memory_gb = 0;         // host memory per node
  double pfs_gbs = 0;           // parallel file system, aggregate read bandwidth (0: none)
  double pfs_iops = 0;          // its aggregate small random reads per second
  double pfs_latency_us = 0;    // one sample read from it, unloaded
  double get_overhead_us = 0;   // issuing one MPI_Get / one message (CPU + NIC), pipelined
  double peer_overhead_us = 0;  // per peer of the group and per collective fetch: MPI's and
                                // the fetcher's O(g) loops over counts and displacements
  // Power, for the energy of an epoch (epoch_energy_j); node_busy_w = 0: not known (the energy
  // is then NaN, an empty CSV field).
  double node_idle_w = 0;       // host part of a node (CPUs, memory, board) with idle cores
  double node_busy_w = 0;       // the same with every core busy
  int64_t gpus_per_node = 0;    // accelerators (GCDs on Frontier); 0: compute runs on the cores
  double gpu_idle_w = 0;        // one accelerator, idle
  double gpu_busy_w = 0;        // one accelerator, computing
  double network_w = 0;         // per node: its NICs and its share of the switches, always on
  std::string power_estimated;  // which power figures are estimates, not sourced ("" if none)
  std::string source;           // where the figures come from (URLs, assumptions)
};

// The preset names: perlmutter, frontier, summit, local.
const std::vector<std::string>& platform_presets();

// A preset by name; ConfigError listing the known presets otherwise. `local` is this machine:
// one node, cores and memory from the OS, latency and bandwidth derived from the calibrated rma
// (else shm) model through predict() — left NaN when `models` has neither (validate() then asks
// for --latency-us and --bandwidth-gbs).
Platform platform_preset(const std::string& name, const std::map<std::string, CostModel>& models);

// ConfigError naming the field for a non-positive count, latency or bandwidth (NaN included), a
// negative or non-finite power, or an idle power above its busy power.
void validate(const Platform& platform);

// Joules of one epoch of `steps` steps of `step_s` seconds on `nodes` nodes running P = `ranks`
// ranks, R = `ranks_per_node` a node, from the platform's power figures (NaN when node_busy_w is
// 0). Per node: host idle + (busy - idle) u, where u = min(1, R (step + prefetch) / (C step)) is
// the share of its cores at work (each rank's training thread for the whole step, its prefetch
// thread for `prefetch_s` = fetch + collate); plus network_w. Per accelerator with a rank: idle
// + (busy - idle) min(1, compute / step); the node's accelerators without a rank draw idle.
double epoch_energy_j(const Platform& platform, int64_t ranks, int64_t nodes,
                      int64_t ranks_per_node, double steps, double step_s, double compute_s,
                      double prefetch_s);
// Its two shares: u, of a node's cores at work, min(1, R (step + prefetch) / (C step)); and an
// accelerator's duty, min(1, compute / step).
double core_share(const Platform& platform, int64_t ranks_per_node, double step_s,
                  double prefetch_s);
double accelerator_duty(double step_s, double compute_s);

// What one training run moves and computes. Defaults: configs/cu_eam_schnet.json (Cu EAM, 108
// atoms, SchNet with 2 interactions) trained on two ranks of this 2-core machine: medians over
// the 174 epochs of its run (runs/cu_eam_2ranks_2layers/metrics.csv), 1,600 training graphs of
// 5,464 bytes each (all the same size), 34,241 parameters.
struct Workload {
  double graphs = 1600;        // N, graphs in one epoch (the training split)
  double bytes_mean = 5464;    // S
  double bytes_spread = 0;     // standard deviation of S (a feature of the cost models)
  double batch = 2;            // B per rank
  double compute_s = 0.0179;   // forward + forces + backward + optimizer, one step of B graphs
  double collate_s = 0.00103;  // collate + radius graph of B graphs (on the prefetch thread)
  double gradient_bytes = 34241.0 * 4;  // float32 gradients, summed over the ranks every step
  int64_t width = 0;                    // Loader.width: ranks per replica group, 0 = all
  double memory_fraction = 0.5;         // share of a node's memory its ranks' stores may take
};

// ConfigError naming the field for a non-positive size, batch or time, or a fraction outside
// (0, 1].
void validate(const Workload& workload);

// One backend at one P.
struct BackendPoint {
  std::string backend;
  bool calibrated = true;      // false: `file` without a model, priced by its PFS term alone
  bool feasible = true;        // this rank's store (or whole dataset) fits its memory share
  double memory_bytes = 0;     // per rank: its store part (all of it for replicated) + split map
  double fetch_node_s = 0;     // the calibrated on-node model, for the node's share of a batch
  double fetch_network_s = 0;  // the other nodes' share (or the file system's reads)
  double fetch_s = 0;          // node + network
  double load_s = 0;           // compute with the prefetch (fetch + collate) overlapped or not,
                               // stretched when more ranks than cores share them
  double step_s = 0;           // load + gradient all-reduce
  double epoch_s = 0;          // steps x step
  double energy_j = 0;         // the whole job's joules for one epoch (NaN: power not known)
};

// Every backend at one P, and which one `auto` picks.
struct ScalePoint {
  int64_t ranks = 1;                   // P
  int64_t nodes = 1;                   // ceil(P / ranks_per_node)
  bool within_platform = true;         // nodes <= platform.nodes (else a machine larger than it)
  int64_t group_ranks = 1;             // g
  int64_t steps = 1;                   // ceil(N / (B P))
  double allreduce_s = 0;              // gradient all-reduce of one step
  std::vector<BackendPoint> backends;  // in the models' (alphabetical) order
  std::string auto_pick;               // fastest feasible: step time, then fetch time; or "none"
};

// 1, 2, 4, ..., 16384.
std::vector<int64_t> default_rank_counts();

// Simulates each rank count. Backends: those with a model in `models`, plus `file` priced by
// the file system alone when the platform has one (pfs_gbs > 0) and `models` has no file model.
// ConfigError for an invalid platform or workload, a rank count < 1, or a Loader.width that does
// not divide a rank count at least as large as it.
std::vector<ScalePoint> simulate(const std::map<std::string, CostModel>& models,
                                 const Platform& platform, const Workload& workload,
                                 const std::vector<int64_t>& ranks);

// The CSV of `ddgnn simulate --out`: a header, then per P one row per backend and one row
// `auto` (the picked backend's figures; empty when none is feasible). Columns, fixed:
//   platform, ranks, nodes, within_platform (1/0), backend, group_ranks, calibrated (1/0),
//   feasible (1/0), memory_gb_per_rank, fetch_node_s, fetch_network_s, fetch_s, load_s,
//   allreduce_s, step_s, steps, epoch_s, energy_j (empty: no power figures), auto_pick (the
//   backend `auto` picks at this P)
std::string simulation_csv(const Platform& platform, const std::vector<ScalePoint>& points);
extern const char* const kSimulationCsvHeader;

}  // namespace ddgnn
