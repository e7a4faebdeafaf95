// The scale simulation (simulate.h): the platform presets and the model, term by term.
//
// Placement: ranks fill nodes in order, R = min(P, platform ranks per node) to a node; a loader
// group is g consecutive ranks (g = Loader.width, or P), so r = min(g, R) of its ranks share a
// node (exact when g and R divide one another, as powers of two do; an approximation otherwise).
// Samples are drawn uniformly, so a rank's batch of B is owned by itself (1/g), by another rank
// of its node ((r - 1)/g), or by a rank on another node (f_off = (g - r)/g).
//
// Fetch = node part + network part.
//   node part: the calibrated model (CostModel::predict) for the B (1 - f_off) samples served on
//     the node: ranks r, R ranks and C cores per node (contention), bytes S, remote = the node's
//     other ranks' share of them. The calibration saw one node only; its per-peer and per-round
//     terms describe shared-memory peers and are not stretched to network peers (which the
//     network part prices).
//   rma, shm (other nodes through rma): n = B f_off samples by one-sided gets, pipelined: the
//     fetch's two flushes (owners' offsets, then payloads) are two round trips of 2 α each (α
//     one-way), each sample two gets (its offsets, its bytes) at the per-get overhead o, and the
//     bytes at the rank's share of its node's injection bandwidth b = injection / R:
//       4 α + 2 n o + n S / b
//   collective: four collectives over the g ranks whenever g > r. The request counts
//     (MPI_Alltoall of one int per peer, Bruck: L = ceil(log2 g) rounds of g/2 ints), three
//     MPI_Alltoallv (requests, sizes, payloads) whose messages go only to the m = (g - r)(1 -
//     (1 - 1/g)^B) owners asked (sparse: each costs one latency and 2 m message overheads: sends
//     and receives), two MPI_Allreduce (the round's "anything left", recursive doubling: L α
//     each), and O(g) loops over counts and displacements at the per-peer overhead:
//       (3 L + 3) α + 6 m o + g o_peer + (2 g L + 16 n + n S) / b
//     Not (P - 1) α: the exchange is sparse (a rank asks at most B owners) and MPI's dense
//     short-message all-to-all is logarithmic; what grows linearly is the per-peer bookkeeping.
//   replicated: the node part alone (every sample local).
//   file: the calibrated file model if there is one, plus reads from the parallel file system:
//     each of the B samples a serial read that waits at least its latency, or its share of the
//     aggregate IOPS when P ranks read at once, and the bytes at the rank's share of the file
//     system's bandwidth (or of its NIC, whichever is smaller):
//       B max(L_pfs, P / IOPS) + B S / min(pfs / P, b)
// Load: the prefetch thread fetches and collates step k + 1 while step k computes, when every
//   rank has a core to itself for it (C >= 2 R): max(compute, fetch + collate); otherwise the
//   two share cores and add up: compute + fetch + collate.
// Step = load + gradient all-reduce (Rabenseifner: reduce-scatter + all-gather, 2 (P - 1) / P G
//   bytes at b, 2 ceil(log2 P) α), counted in full although DataParallel overlaps part of it
//   with backward. Epoch = ceil(N / (B P)) steps (past N / B ranks: one step, priced as full).
// Memory per rank: its store part N S / g (the whole dataset for replicated, none for file) plus
//   8 N bytes of split id lists (train/train_data.h); feasible when it fits memory_fraction of the
//   node's memory / R. `auto` = the feasible backend with the lowest step time; on a tie (the
//   fetch hidden behind compute) the one with the lowest fetch time, the most slack.
#include "tuner/simulate.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <thread>

#include "core/backend.h"
#include "core/error.h"

namespace ddgnn {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double ceil_log2(int64_t n) {
  double l = 0;
  while ((int64_t(1) << int(l)) < n) ++l;
  return l;
}

Platform perlmutter() {
  Platform p;
  p.name = "perlmutter";
  p.nodes = 1792;
  p.ranks_per_node = 4;
  p.cores_per_node = 64;
  p.latency_us = 2.0;
  p.injection_gbs = 100.0;
  p.memory_gb = 256.0;
  p.pfs_gbs = 5000.0;
  p.pfs_iops = 4.0e6;
  p.pfs_latency_us = 100.0;
  p.get_overhead_us = 0.5;
  p.peer_overhead_us = 0.1;
  p.source =
      "NERSC Perlmutter GPU partition. nodes 1,792 (1,536 with A100 40 GB + 256 with A100 80 GB), "
      "1x AMD EPYC 7763 (64 cores), 4x A100 (one rank each), 4x HPE Slingshot 11 NICs: "
      "https://docs.nersc.gov/systems/perlmutter/architecture/ ; 256 GB DDR4 per GPU node: "
      "https://docs.nersc.gov/beginner-guide/nodetypesfig ; 200 Gb/s = 25 GB/s per Slingshot "
      "port, so 4 x 25 = 100 GB/s per node: https://www.alcf.anl.gov/support-center/aurora/"
      "interconnect ; scratch (all-flash Lustre, 35 PB): >5 TB/s aggregate, 4 million IOPS "
      "(4 KiB random): https://docs.nersc.gov/filesystems/perlmutter-scratch/ . Assumed (no "
      "figure found; override them): latency 2 us (inter-node MPI on a 3-hop dragonfly), 100 us "
      "a small flash Lustre read, 0.5 us a get, 0.1 us per peer per collective fetch.";
  return p;
}

Platform frontier() {
  Platform p;
  p.name = "frontier";
  p.nodes = 9856;
  p.ranks_per_node = 8;
  p.cores_per_node = 64;
  p.latency_us = 2.0;
  p.injection_gbs = 100.0;
  p.memory_gb = 512.0;
  p.pfs_gbs = 5500.0;
  p.pfs_iops = 7.2e6;
  p.pfs_latency_us = 8000.0;
  p.get_overhead_us = 0.5;
  p.peer_overhead_us = 0.1;
  p.source =
      "OLCF Frontier. 9,856 nodes, 1x 64-core AMD EPYC, 512 GB DDR4, 4x MI250X = 8 GCDs (one "
      "rank each), 4x HPE Slingshot 200 Gb/s (25 GB/s) NICs = 100 GB/s node injection, Orion "
      "(Lustre, 679 PB) whose default layout puts file data past 8 MB on the capacity (disk) "
      "pool: https://docs.olcf.ornl.gov/systems/frontier_user_guide.html ; disk tier 47,700 "
      "disks, 5.5 TB/s read: https://insidehpc.com/2021/05/"
      "olcf-releases-storage-specs-for-frontier-exascale/ . Estimated: 7.2 million random reads "
      "a second (47,700 disks x 150), 8 ms a random disk read (half a turn at 7,200 rpm plus a "
      "seek). Assumed (override them): latency 2 us, 0.5 us a get, 0.1 us per peer per "
      "collective fetch.";
  return p;
}

Platform summit() {
  Platform p;
  p.name = "summit";
  p.nodes = 4608;
  p.ranks_per_node = 6;
  p.cores_per_node = 42;
  p.latency_us = 2.0;
  p.injection_gbs = 25.0;
  p.memory_gb = 512.0;
  p.pfs_gbs = 2500.0;
  p.pfs_iops = 4.9e6;
  p.pfs_latency_us = 8000.0;
  p.get_overhead_us = 0.5;
  p.peer_overhead_us = 0.1;
  p.source =
      "OLCF Summit (2018-2024; where the MDLoader and DDStore results were measured). 4,608 IBM "
      "AC922 nodes, 2x POWER9 (22 cores, 21 for applications: 42), 6x V100 16 GB (one rank "
      "each), 512 GB DDR4 + 96 GB HBM2, dual-rail Mellanox EDR InfiniBand, 2 x 100 Gb/s = 25 GB/s "
      "per node, non-blocking fat tree; Alpine (IBM Spectrum Scale/GPFS, 250 PB, 2.5 TB/s): "
      "https://docs.olcf.ornl.gov/systems/summit_user_guide.html . Estimated as Frontier's disk "
      "tier: 4.9 million random reads a second (about 32,500 disks x 150), 8 ms a random disk "
      "read. "
      "Assumed (override them): latency 2 us, 0.5 us a get, 0.1 us per peer per collective fetch.";
  return p;
}

// This machine: one node; the on-node transport's latency and bandwidth from the calibration.
Platform local(const std::map<std::string, CostModel>& models) {
  Platform p;
  p.name = "local";
  p.nodes = 1;
  p.cores_per_node = int64_t(std::max(1u, std::thread::hardware_concurrency()));
  p.ranks_per_node = p.cores_per_node;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  p.memory_gb = pages > 0 && page > 0 ? double(pages) * double(page) / 1e9 : kNaN;
  p.latency_us = p.injection_gbs = kNaN;
  p.get_overhead_us = 0.5;
  p.peer_overhead_us = 0.1;
  std::string from = "neither rma nor shm has a model: give --latency-us and --bandwidth-gbs";
  for (const Backend b : {Backend::kRma, Backend::kShm}) {
    const auto it = models.find(to_string(b));
    if (it == models.end()) continue;
    // One remote sample on a node without contention: a fetch is two flush round trips (4 α),
    // and the extra time of a 1 MiB sample is its bytes at the transport's bandwidth.
    FetchFeatures f;
    f.batch = 1;
    f.ranks = f.ranks_per_node = f.cores_per_node = 2;
    f.remote = 1;
    const double t0 = it->second.predict(f);
    f.bytes_mean = 1 << 20;
    const double t1 = it->second.predict(f);
    p.latency_us = t0 > 0 ? 0.25 * t0 * 1e6 : kNaN;
    p.injection_gbs = t1 > t0 ? double(p.ranks_per_node) * double(1 << 20) / (t1 - t0) / 1e9 : kNaN;
    from = "latency = a quarter of the " + to_string(b) +
           " model's time for one remote sample of 0 bytes, " +
           "bandwidth per rank = 1 MiB over the extra time of a 1 MiB one";
    break;
  }
  p.source = "this machine: 1 node, cores (= ranks per node) and memory from the OS; " + from +
             "; no parallel file system (file: its calibrated model only).";
  return p;
}

void require_positive(const std::string& what, const std::string& field, double v,
                      const std::string& option) {
  if (!(v > 0) || !std::isfinite(v))
    throw ConfigError(what + ": " + field + " = " + std::to_string(v) + " is not a positive number",
                      "set it with " + option);
}

// What `predict` sees for the node's share of a batch (see the file header).
FetchFeatures node_features(const Workload& w, double g, double r, double rpn, double cores) {
  const double f_off = (g - r) / g, on_node = 1 - f_off;
  FetchFeatures f;
  f.batch = w.batch * on_node;
  f.ranks = r;
  f.ranks_per_node = rpn;
  f.cores_per_node = cores;
  f.bytes_mean = w.bytes_mean;
  f.bytes_spread = w.bytes_spread;
  f.remote = on_node > 0 ? ((r - 1) / g) / on_node : 0.0;
  return f;
}

std::string fmt(double v) {
  if (!std::isfinite(v)) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

const char* const kSimulationCsvHeader =
    "platform,ranks,nodes,within_platform,backend,group_ranks,calibrated,feasible,"
    "memory_gb_per_rank,fetch_node_s,fetch_network_s,fetch_s,load_s,allreduce_s,step_s,steps,"
    "epoch_s,auto_pick";

const std::vector<std::string>& platform_presets() {
  static const std::vector<std::string> names = {"perlmutter", "frontier", "summit", "local"};
  return names;
}

Platform platform_preset(const std::string& name, const std::map<std::string, CostModel>& models) {
  if (name == "perlmutter") return perlmutter();
  if (name == "frontier") return frontier();
  if (name == "summit") return summit();
  if (name == "local") return local(models);
  std::string known;
  for (const auto& n : platform_presets()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("unknown platform preset '" + name + "'", "known presets: " + known);
}

void validate(const Platform& p) {
  const std::string what = "platform '" + p.name + "'";
  require_positive(what, "nodes", double(p.nodes), "--nodes");
  require_positive(what, "ranks_per_node", double(p.ranks_per_node), "--ranks-per-node");
  require_positive(what, "cores_per_node", double(p.cores_per_node), "--cores-per-node");
  require_positive(what, "latency_us", p.latency_us, "--latency-us");
  require_positive(what, "injection_gbs", p.injection_gbs, "--bandwidth-gbs");
  require_positive(what, "memory_gb", p.memory_gb, "--memory-gb");
  if (!(p.get_overhead_us >= 0) || !(p.peer_overhead_us >= 0))
    throw ConfigError(what + ": a per-get or per-peer overhead is negative",
                      "set them with --get-overhead-us, --peer-overhead-us");
  if (p.pfs_gbs > 0) {  // a file system: all three figures
    require_positive(what, "pfs_iops", p.pfs_iops, "--pfs-iops");
    require_positive(what, "pfs_latency_us", p.pfs_latency_us, "--pfs-latency-us");
  } else if (!(p.pfs_gbs >= 0)) {
    throw ConfigError(what + ": pfs_gbs is negative", "0 means no parallel file system");
  }
}

void validate(const Workload& w) {
  require_positive("workload", "graphs", w.graphs, "--graphs");
  require_positive("workload", "bytes_mean", w.bytes_mean, "--sample-bytes");
  require_positive("workload", "batch", w.batch, "--batch");
  require_positive("workload", "compute_s", w.compute_s, "--compute-s");
  if (!(w.collate_s >= 0) || !(w.gradient_bytes >= 0) || !(w.bytes_spread >= 0))
    throw ConfigError("workload: collate time, gradient bytes and sample spread must be >= 0");
  if (w.width < 0) throw ConfigError("workload: width " + std::to_string(w.width) + " < 0");
  if (!(w.memory_fraction > 0 && w.memory_fraction <= 1))
    throw ConfigError("workload: memory fraction " + std::to_string(w.memory_fraction) +
                      " is not in (0, 1]");
}

std::vector<int64_t> default_rank_counts() {
  std::vector<int64_t> out;
  for (int64_t p = 1; p <= 16384; p *= 2) out.push_back(p);
  return out;
}

std::vector<ScalePoint> simulate(const std::map<std::string, CostModel>& models,
                                 const Platform& platform, const Workload& w,
                                 const std::vector<int64_t>& ranks) {
  validate(platform);
  validate(w);
  std::vector<std::string> names;
  for (const auto& [name, model] : models) names.push_back(name);
  const std::string file = to_string(Backend::kFile);
  if (!models.count(file) && platform.pfs_gbs > 0) {
    names.push_back(file);
    std::sort(names.begin(), names.end());
  }
  const double alpha = platform.latency_us * 1e-6, o_get = platform.get_overhead_us * 1e-6,
               o_peer = platform.peer_overhead_us * 1e-6;
  std::vector<ScalePoint> out;
  for (const int64_t p : ranks) {
    if (p < 1) throw ConfigError("rank count " + std::to_string(p) + " is not positive");
    ScalePoint pt;
    pt.ranks = p;
    const int64_t rpn = std::min(p, platform.ranks_per_node);
    pt.nodes = (p + platform.ranks_per_node - 1) / platform.ranks_per_node;
    pt.within_platform = pt.nodes <= platform.nodes;
    pt.group_ranks = w.width > 0 ? std::min(w.width, p) : p;
    if (p % pt.group_ranks != 0)
      throw ConfigError("Loader.width " + std::to_string(w.width) + " does not divide " +
                            std::to_string(p) + " ranks",
                        "simulate rank counts that are multiples of the width");
    pt.steps = int64_t(std::ceil(w.graphs / (w.batch * double(p))));
    const double g = double(pt.group_ranks), r = double(std::min(pt.group_ranks, rpn));
    const double b = platform.injection_gbs * 1e9 / double(rpn);  // bytes/s per rank
    const double n_off = w.batch * (g - r) / g;                   // samples from other nodes
    const double memory_per_rank = w.memory_fraction * platform.memory_gb * 1e9 / double(rpn);
    pt.allreduce_s =
        p > 1 ? 2.0 * double(p - 1) / double(p) * w.gradient_bytes / b + 2.0 * ceil_log2(p) * alpha
              : 0.0;
    const bool overlap = platform.cores_per_node >= 2 * rpn;
    const FetchFeatures node = node_features(w, g, r, double(rpn), double(platform.cores_per_node));
    FetchFeatures alone = node;  // every sample local: replicated and file
    alone.batch = w.batch;
    alone.ranks = 1;
    alone.remote = 0;
    for (const std::string& name : names) {
      BackendPoint bp;
      bp.backend = name;
      const auto model = models.find(name);
      bp.calibrated = model != models.end();
      double store = w.graphs * w.bytes_mean / g;
      const Backend backend = find_backend(name).value_or(Backend::kNccl);  // nccl: no rule here
      if (backend == Backend::kRma || backend == Backend::kShm) {
        bp.fetch_node_s = model->second.predict(node);
        if (n_off > 0)
          bp.fetch_network_s = 4 * alpha + 2 * n_off * o_get + n_off * w.bytes_mean / b;
      } else if (backend == Backend::kCollective) {
        bp.fetch_node_s = model->second.predict(node);
        if (g > r) {
          const double l = ceil_log2(pt.group_ranks);
          const double peers_asked = (g - r) * (1 - std::pow(1 - 1 / g, w.batch));
          bp.fetch_network_s = (3 * l + 3) * alpha + 6 * peers_asked * o_get + g * o_peer +
                               (2 * g * l + 16 * n_off + n_off * w.bytes_mean) / b;
        }
      } else if (backend == Backend::kReplicated) {
        bp.fetch_node_s = model->second.predict(alone);
        store = w.graphs * w.bytes_mean;
      } else if (backend == Backend::kFile) {
        bp.fetch_node_s = bp.calibrated ? model->second.predict(alone) : 0.0;
        if (platform.pfs_gbs > 0) {
          const double per_read =
              std::max(platform.pfs_latency_us * 1e-6, double(p) / platform.pfs_iops);
          const double share = std::min(platform.pfs_gbs * 1e9 / double(p), b);
          bp.fetch_network_s = w.batch * per_read + w.batch * w.bytes_mean / share;
        }
        store = 0;
      } else {
        // A backend with a model but no placement rule here: price it on the node alone.
        bp.fetch_node_s = model->second.predict(node);
      }
      bp.memory_bytes = store + 8 * w.graphs;
      bp.feasible = bp.memory_bytes <= memory_per_rank;
      bp.fetch_s = bp.fetch_node_s + bp.fetch_network_s;
      const double prefetch = bp.fetch_s + w.collate_s;
      bp.load_s = overlap ? std::max(w.compute_s, prefetch) : w.compute_s + prefetch;
      bp.step_s = bp.load_s + pt.allreduce_s;
      bp.epoch_s = double(pt.steps) * bp.step_s;
      pt.backends.push_back(bp);
    }
    pt.auto_pick = "none";
    const BackendPoint* best = nullptr;
    for (const auto& bp : pt.backends)
      if (bp.feasible && (!best || bp.step_s < best->step_s ||
                          (bp.step_s == best->step_s && bp.fetch_s < best->fetch_s))) {
        best = &bp;
        pt.auto_pick = bp.backend;
      }
    out.push_back(pt);
  }
  return out;
}

std::string simulation_csv(const Platform& platform, const std::vector<ScalePoint>& points) {
  std::ostringstream csv;
  csv << kSimulationCsvHeader << "\n";
  for (const auto& pt : points) {
    // `bp` null: the auto row of a P where no backend is feasible (times left empty).
    auto row = [&](const std::string& name, const BackendPoint* bp) {
      const std::vector<std::string> fields = {platform.name,
                                               std::to_string(pt.ranks),
                                               std::to_string(pt.nodes),
                                               pt.within_platform ? "1" : "0",
                                               name,
                                               std::to_string(pt.group_ranks),
                                               bp ? (bp->calibrated ? "1" : "0") : "",
                                               bp && bp->feasible ? "1" : "0",
                                               bp ? fmt(bp->memory_bytes / 1e9) : "",
                                               bp ? fmt(bp->fetch_node_s) : "",
                                               bp ? fmt(bp->fetch_network_s) : "",
                                               bp ? fmt(bp->fetch_s) : "",
                                               bp ? fmt(bp->load_s) : "",
                                               fmt(pt.allreduce_s),
                                               bp ? fmt(bp->step_s) : "",
                                               std::to_string(pt.steps),
                                               bp ? fmt(bp->epoch_s) : "",
                                               pt.auto_pick};
      for (size_t k = 0; k < fields.size(); ++k) csv << (k ? "," : "") << fields[k];
      csv << "\n";
    };
    const BackendPoint* picked = nullptr;
    for (const auto& bp : pt.backends) {
      row(bp.backend, &bp);
      if (bp.backend == pt.auto_pick) picked = &bp;
    }
    row("auto", picked);
  }
  return csv.str();
}

}  // namespace ddgnn
