// The scale simulation (simulate.h): the model, term by term, and its CSV (the platform presets
// and the checks of the inputs are in platforms.cpp).
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
//       (3 L + 3) α + 6 m o + g o_peer + (2 g L + 16 n + n S) / b + 2 n c_S
//     Not (P - 1) α: the exchange is sparse (a rank asks at most B owners) and MPI's dense
//     short-message all-to-all is logarithmic; what grows linearly is the per-peer bookkeeping.
//     2 n c_S: the fetcher copies each exchanged record into a send buffer at its owner and out
//     of the receive buffer at the asker (comm/fetch.cpp), c_S being the calibrated model's cost
//     of one local sample of S bytes over that of an empty one (this machine's memcpy, as for
//     the node part). rma gets straight into the batch and pays no such copies.
//   replicated: the node part alone (every sample local).
//   file: the calibrated file model if there is one, plus reads from the parallel file system:
//     each of the B samples a serial read that waits at least its latency, or its share of the
//     aggregate IOPS when P ranks read at once, and the bytes at the rank's share of the file
//     system's bandwidth (or of its NIC, whichever is smaller):
//       B max(L_pfs, P / IOPS) + B S / min(pfs / P, b)
// Load: the prefetch thread fetches and collates step k + 1 while step k computes, when every
//   rank has a core to itself for it (C >= 2 R): max(compute, fetch + collate); otherwise the
//   two share cores and add up: compute + fetch + collate. With more ranks than cores and the
//   compute on the cores (no accelerators), each rank runs on C / R of a core: compute and
//   collate stretch by R / C (the fetch is already stretched by its calibrated model's L^k):
//   (R / C) (compute + collate) + fetch.
// Step = load + gradient all-reduce (Rabenseifner: reduce-scatter + all-gather, 2 (P - 1) / P G
//   bytes at b, 2 ceil(log2 P) α), counted in full although DataParallel overlaps part of it
//   with backward. Epoch = ceil(N / (B P)) steps (past N / B ranks: one step, priced as full).
// Memory per rank: its store part N S / g (the whole dataset for replicated, none for file) plus
//   8 N bytes of split id lists (train/train_data.h); feasible when it fits memory_fraction of the
//   node's memory / R. `auto` = the feasible backend with the lowest step time; on a tie (the
//   fetch hidden behind compute) the one with the lowest fetch time, the most slack.
// Energy of an epoch (epoch_energy_j): epoch time x the job's power, whole nodes: each node's
//   host at idle + (busy - idle) u, u = min(1, R (step + fetch + collate) / (C step)) (every rank's
//   training thread the whole step, its prefetch thread while it fetches and collates), its
//   network_w, and its accelerators: one per rank at idle + (busy - idle) min(1, compute / step),
//   the others idle. Unknown (NaN) for a platform without power figures.
#include "tuner/simulate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/backend.h"
#include "core/error.h"
#include "core/log.h"

namespace ddgnn {

namespace {

// What every rank holds per graph of the dataset beside its store: the split's map (2 bits a
// graph and block counts, loader/split.h SplitMap).
constexpr double kSplitBytesPerGraph = 0.3;

}  // namespace

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double ceil_log2(int64_t n) {
  double l = 0;
  while ((int64_t(1) << int(l)) < n) ++l;
  return l;
}

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

// The calibrated cost of copying one sample of S bytes on this node: one local sample of S bytes
// over one of 0 bytes, without contention (the memcpy of the collective's pack and unpack).
double copy_cost(const CostModel& model, const FetchFeatures& like) {
  FetchFeatures f = like;
  f.batch = 1;
  f.remote = 0;
  f.ranks = 1;
  f.ranks_per_node = f.cores_per_node = 1;
  const double with_bytes = model.predict(f);
  f.bytes_mean = 0;
  f.bytes_spread = 0;
  return std::max(0.0, with_bytes - model.predict(f));
}

std::string fmt(double v) {
  return std::isfinite(v) ? ddgnn::fmt("%.6g", v) : std::string();
}

}  // namespace

const char* const kSimulationCsvHeader =
    "platform,ranks,nodes,within_platform,backend,group_ranks,calibrated,feasible,"
    "memory_gb_per_rank,fetch_node_s,fetch_network_s,fetch_s,load_s,allreduce_s,step_s,steps,"
    "epoch_s,energy_j,auto_pick";

double core_share(const Platform& p, int64_t ranks_per_node, double step_s, double prefetch_s) {
  const double at_work = double(ranks_per_node) * (step_s + prefetch_s);
  return step_s > 0 ? std::min(1.0, at_work / (double(p.cores_per_node) * step_s)) : 1;
}

double accelerator_duty(double step_s, double compute_s) {
  return step_s > 0 ? std::min(1.0, compute_s / step_s) : 1;
}

double epoch_energy_j(const Platform& p, int64_t ranks, int64_t nodes, int64_t ranks_per_node,
                      double steps, double step_s, double compute_s, double prefetch_s) {
  if (!(p.node_busy_w > 0)) return kNaN;
  const double epoch_s = steps * step_s;
  const double u = core_share(p, ranks_per_node, step_s, prefetch_s);
  const double host_w = p.node_idle_w + (p.node_busy_w - p.node_idle_w) * u;
  const double gpus = double(nodes) * double(p.gpus_per_node);
  const double gpus_used = std::min(double(ranks), gpus);
  const double duty = accelerator_duty(step_s, compute_s);
  const double gpu_w = gpus_used * (p.gpu_idle_w + (p.gpu_busy_w - p.gpu_idle_w) * duty) +
                       (gpus - gpus_used) * p.gpu_idle_w;
  return epoch_s * (double(nodes) * (host_w + p.network_w) + gpu_w);
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
    // More ranks than cores, the compute on the cores: each rank runs on C / R of a core.
    const double stretch = platform.gpus_per_node > 0
                               ? 1.0
                               : std::max(1.0, double(rpn) / double(platform.cores_per_node));
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
                               (2 * g * l + 16 * n_off + n_off * w.bytes_mean) / b +
                               2 * n_off * copy_cost(model->second, node);
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
      bp.memory_bytes = store + kSplitBytesPerGraph * w.graphs;
      bp.feasible = bp.memory_bytes <= memory_per_rank;
      bp.fetch_s = bp.fetch_node_s + bp.fetch_network_s;
      const double prefetch = bp.fetch_s + w.collate_s;
      bp.load_s = overlap ? std::max(w.compute_s, prefetch)
                          : stretch * (w.compute_s + w.collate_s) + bp.fetch_s;
      bp.step_s = bp.load_s + pt.allreduce_s;
      bp.epoch_s = double(pt.steps) * bp.step_s;
      bp.energy_j = epoch_energy_j(platform, p, pt.nodes, rpn, double(pt.steps), bp.step_s,
                                   w.compute_s, prefetch);
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
                                               bp ? fmt(bp->energy_j) : "",
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
