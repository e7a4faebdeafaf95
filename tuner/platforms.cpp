// The platform presets of `ddgnn simulate` (simulate.h) with the source of every figure, and the
// checks of a platform and a workload. Each preset's `source` repeats its figures' origins for
// the printed settings; the comments here say the same per field.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

#include "core/backend.h"
#include "core/error.h"
#include "tuner/simulate.h"

namespace ddgnn {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Slingshot NICs, the same on both HPE Cray EX machines: four 200 Gb/s ports a node.
constexpr double kSlingshotNetworkW = 160;  // estimated: 4 NICs of ~25 W + a share of switches

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
  p.node_idle_w = 100;  // estimated: one idle EPYC 7763 socket, 256 GB DDR4, board
  p.node_busy_w = 340;  // EPYC 7763 default TDP 280 W (AMD) + an estimated 60 W memory, board
  p.gpus_per_node = 4;  // A100 SXM4
  p.gpu_idle_w = 50;    // estimated
  p.gpu_busy_w = 400;   // A100 SXM4 40 GB maximum (NVIDIA datasheet; NERSC caps 100-400 W)
  p.network_w = kSlingshotNetworkW;
  p.power_estimated = "node idle 100 W, 60 W of node busy (memory, board), GPU idle 50 W, network";
  p.source =
      "NERSC Perlmutter GPU partition. nodes 1,792 (1,536 with A100 40 GB + 256 with A100 80 GB), "
      "1x AMD EPYC 7763 (64 cores), 4x A100 (one rank each), 4x HPE Slingshot 11 NICs: "
      "https://docs.nersc.gov/systems/perlmutter/architecture/ ; 256 GB DDR4 per GPU node: "
      "https://docs.nersc.gov/beginner-guide/nodetypesfig ; 200 Gb/s = 25 GB/s per Slingshot "
      "port, so 4 x 25 = 100 GB/s per node: https://www.alcf.anl.gov/support-center/aurora/"
      "interconnect ; scratch (all-flash Lustre, 35 PB): >5 TB/s aggregate, 4 million IOPS "
      "(4 KiB random): https://docs.nersc.gov/filesystems/perlmutter-scratch/ . Power: A100 SXM4 "
      "40 GB at most 400 W (https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/"
      "pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf ; caps 100-400 W: "
      "https://docs.nersc.gov/jobs/power-capping/), EPYC 7763 280 W default TDP "
      "(https://www.amd.com/en/products/cpu/amd-epyc-7763). Assumed (no figure found; override "
      "them): latency 2 us (inter-node MPI on a 3-hop dragonfly), 100 us a small flash Lustre "
      "read, 0.5 us a get, 0.1 us per peer per collective fetch; estimated: 60 W of memory and "
      "board over the CPU's TDP, 100 W for an idle host, 50 W an idle A100, 160 W a node of NICs "
      "and switch share.";
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
  p.node_idle_w = 100;  // estimated, as Perlmutter's host
  p.node_busy_w = 340;  // the 7A53's TDP is not published: the 7763's 280 W + an estimated 60 W
  p.gpus_per_node = 8;  // GCDs: 4 MI250X of 2 each
  p.gpu_idle_w = 45;    // estimated: 90 W an idle MI250X
  p.gpu_busy_w = 250;   // MI250X 500 W TDP (AMD), two GCDs
  p.network_w = kSlingshotNetworkW;
  p.power_estimated =
      "node idle 100 W, node busy 340 W (the 7A53's TDP is not published), GCD idle 45 W, network";
  // Cross-check (not an input): 340 + 8 x 250 + 160 = 2,500 W a node; under HPL Frontier drew
  // 1.206 EF / 52.59 GF/W = 22.9 MW over 8,699,904 / (64 + 4 x 220) = 9,216 nodes, 2,490 W
  // (https://top500.org/lists/top500/2024/06/highs/).
  p.source =
      "OLCF Frontier. 9,856 nodes, 1x 64-core AMD EPYC, 512 GB DDR4, 4x MI250X = 8 GCDs (one "
      "rank each), 4x HPE Slingshot 200 Gb/s (25 GB/s) NICs = 100 GB/s node injection, Orion "
      "(Lustre, 679 PB) whose default layout puts file data past 8 MB on the capacity (disk) "
      "pool: https://docs.olcf.ornl.gov/systems/frontier_user_guide.html ; disk tier 47,700 "
      "disks, 5.5 TB/s read: https://insidehpc.com/2021/05/"
      "olcf-releases-storage-specs-for-frontier-exascale/ . Estimated: 7.2 million random reads "
      "a second (47,700 disks x 150), 8 ms a random disk read (half a turn at 7,200 rpm plus a "
      "seek). Assumed (override them): latency 2 us, 0.5 us a get, 0.1 us per peer per "
      "collective fetch. Power: MI250X 500 W TDP, 250 W a GCD "
      "(https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html); the CPU as "
      "Perlmutter's EPYC 7763 (280 W; the 7A53's TDP is not published); estimated: 60 W of "
      "memory and board, 100 W an idle host, 45 W an idle GCD, 160 W of NICs and switch share. "
      "Busy node 2,500 W against 2,490 W a node under HPL (22.9 MW, 9,216 nodes: "
      "https://top500.org/lists/top500/2024/06/highs/).";
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
  p.node_idle_w = 200;  // estimated: two idle POWER9 sockets, 512 GB DDR4, board
  p.node_busy_w = 440;  // estimated: 2 x 190 W POWER9 + 60 W memory and board
  p.gpus_per_node = 6;  // V100 SXM2
  p.gpu_idle_w = 40;    // estimated
  p.gpu_busy_w = 300;   // V100 SXM2 300 W (NVIDIA datasheet)
  p.network_w = 60;     // estimated: two EDR ports and a share of the fat tree's switches
  p.power_estimated = "node idle 200 W, node busy 440 W, GPU idle 40 W, network 60 W";
  p.source =
      "OLCF Summit (2018-2024; where the MDLoader and DDStore results were measured). 4,608 IBM "
      "AC922 nodes, 2x POWER9 (22 cores, 21 for applications: 42), 6x V100 16 GB (one rank "
      "each), 512 GB DDR4 + 96 GB HBM2, dual-rail Mellanox EDR InfiniBand, 2 x 100 Gb/s = 25 GB/s "
      "per node, non-blocking fat tree; Alpine (IBM Spectrum Scale/GPFS, 250 PB, 2.5 TB/s): "
      "https://docs.olcf.ornl.gov/systems/summit_user_guide.html . Estimated as Frontier's disk "
      "tier: 4.9 million random reads a second (about 32,500 disks x 150), 8 ms a random disk "
      "read. "
      "Assumed (override them): latency 2 us, 0.5 us a get, 0.1 us per peer per collective fetch. "
      "Power: V100 SXM2 300 W (https://images.nvidia.com/content/technologies/volta/pdf/"
      "volta-v100-datasheet-update-us-1165301-r5.pdf); estimated: 190 W a POWER9, 60 W of memory "
      "and board, 200 W an idle host, 40 W an idle V100, 60 W of network a node.";
  return p;
}

// This machine: one node; the on-node transport's latency and bandwidth from the calibration.
// No power figures: it is a virtual machine without RAPL (/sys/class/powercap is absent).
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
             "; no parallel file system (file: its calibrated model only); no power figures "
             "(no RAPL here: give --node-busy-w and the other power options for an energy).";
  return p;
}

void require_positive(const std::string& what, const std::string& field, double v,
                      const std::string& option) {
  if (!(v > 0) || !std::isfinite(v))
    throw ConfigError(what + ": " + field + " = " + std::to_string(v) + " is not a positive number",
                      "set it with " + option);
}

void require_watts(const std::string& what, const std::string& field, double v,
                   const std::string& option) {
  if (!(v >= 0) || !std::isfinite(v))
    throw ConfigError(what + ": " + field + " = " + std::to_string(v) +
                          " W is not a power (a finite number >= 0)",
                      "set it with " + option);
}

}  // namespace

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
  require_watts(what, "node_idle_w", p.node_idle_w, "--node-idle-w");
  require_watts(what, "node_busy_w", p.node_busy_w, "--node-busy-w");
  require_watts(what, "gpu_idle_w", p.gpu_idle_w, "--gpu-idle-w");
  require_watts(what, "gpu_busy_w", p.gpu_busy_w, "--gpu-busy-w");
  require_watts(what, "network_w", p.network_w, "--network-w");
  if (p.gpus_per_node < 0)
    throw ConfigError(what + ": gpus_per_node = " + std::to_string(p.gpus_per_node) + " < 0",
                      "set it with --gpus-per-node (0: compute runs on the cores)");
  if (p.node_busy_w > 0 && p.node_idle_w > p.node_busy_w)
    throw ConfigError(what + ": node_idle_w " + std::to_string(p.node_idle_w) +
                          " W is above node_busy_w " + std::to_string(p.node_busy_w) + " W",
                      "set them with --node-idle-w, --node-busy-w");
  if (p.gpu_idle_w > p.gpu_busy_w)
    throw ConfigError(what + ": gpu_idle_w " + std::to_string(p.gpu_idle_w) +
                          " W is above gpu_busy_w " + std::to_string(p.gpu_busy_w) + " W",
                      "set them with --gpu-idle-w, --gpu-busy-w");
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

}  // namespace ddgnn
