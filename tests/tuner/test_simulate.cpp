// tuner/simulate: presets (an unknown one names the known ones), epoch time falling with the
// ranks while compute dominates, collective's fetch outgrowing rma's at scale, replicated refused
// when the data does not fit, auto never slower than a feasible backend, the overlap rule, the
// collective's buffer copies, the energy of an epoch, and a stable, deterministic CSV. The models
// are built from CostModel's public API alone (every term of every backend at one value), so they
// hold whatever terms cost_model.cpp has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "tuner/cost_model.h"
#include "tuner/simulate.h"

namespace ddgnn {
namespace {

// Every backend's model with every term at `value` (seconds per unit of its term).
std::map<std::string, CostModel> flat_models(double value,
                                             const std::vector<std::string>& only = {}) {
  std::map<std::string, CostModel> out;
  for (const auto& b : CostModel::backends()) {
    if (!only.empty() && std::find(only.begin(), only.end(), b) == only.end()) continue;
    std::map<std::string, double> terms;
    for (const auto& t : CostModel::backend_terms(b)) terms[t] = value;
    out.emplace(b, CostModel::from_parameters(b, terms, 1.0));
  }
  return out;
}

Platform test_platform() {
  Platform p;
  p.name = "test";
  p.nodes = 4096;
  p.ranks_per_node = 4;
  p.cores_per_node = 64;
  p.latency_us = 2;
  p.injection_gbs = 100;
  p.memory_gb = 256;  // 32 GB a rank at half the memory
  p.pfs_gbs = 5000;
  p.pfs_iops = 4e6;
  p.pfs_latency_us = 100;
  p.get_overhead_us = 0.5;
  p.peer_overhead_us = 0.1;
  return p;
}

const BackendPoint& at(const ScalePoint& pt, const std::string& backend) {
  for (const auto& bp : pt.backends)
    if (bp.backend == backend) return bp;
  throw std::runtime_error("no backend " + backend + " at P = " + std::to_string(pt.ranks));
}

TEST(PlatformPreset, UnknownNameListsTheKnownOnes) {
  try {
    platform_preset("aurora", {});
    ADD_FAILURE() << "no error for an unknown preset";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'aurora'"), std::string::npos) << e.what();
    for (const auto& name : platform_presets())
      EXPECT_NE(e.hint().find(name), std::string::npos) << e.hint();
  }
}

TEST(PlatformPreset, MachinesAreValidAndCiteTheirFigures) {
  for (const std::string name : {"perlmutter", "frontier", "summit"}) {
    const Platform p = platform_preset(name, {});
    EXPECT_NO_THROW(validate(p)) << name;
    EXPECT_NE(p.source.find("https://"), std::string::npos) << name;
    EXPECT_GT(p.pfs_gbs, 0) << name;
  }
  EXPECT_EQ(platform_preset("perlmutter", {}).ranks_per_node, 4);  // 4 A100
  EXPECT_EQ(platform_preset("frontier", {}).ranks_per_node, 8);    // 8 GCDs
  EXPECT_EQ(platform_preset("summit", {}).ranks_per_node, 6);      // 6 V100
}

TEST(PlatformPreset, LocalTakesTheTransportFromTheCalibration) {
  const Platform p = platform_preset("local", flat_models(1e-6));
  EXPECT_EQ(p.nodes, 1);
  EXPECT_NO_THROW(validate(p));
  // rma at 1e-6 a term, one remote sample of 0 bytes: a sum of terms of about a microsecond.
  EXPECT_GT(p.latency_us, 0.1);
  EXPECT_LT(p.latency_us, 10);
  // Without an rma or shm model there is nothing to derive them from: validate says which.
  const Platform bare = platform_preset("local", flat_models(1e-6, {"replicated"}));
  try {
    validate(bare);
    ADD_FAILURE() << "no error for a local platform without latency";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("latency_us"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("--latency-us"), std::string::npos) << e.hint();
  }
}

TEST(Simulate, EpochFallsWithRanksWhileComputeDominates) {
  Workload w;
  w.graphs = 1 << 20;  // 5.7 GB: every backend fits 32 GB a rank
  w.compute_s = 0.02;
  const auto points = simulate(flat_models(1e-9), test_platform(), w, default_rank_counts());
  ASSERT_EQ(points.size(), 15u);
  for (size_t k = 1; k < points.size(); ++k)
    for (const auto& bp : points[k].backends) {
      const BackendPoint& before = at(points[k - 1], bp.backend);
      ASSERT_TRUE(bp.feasible) << bp.backend << " at P = " << points[k].ranks;
      EXPECT_LT(bp.fetch_s + w.collate_s, w.compute_s) << bp.backend;  // hidden by prefetch
      EXPECT_LT(bp.epoch_s, 0.6 * before.epoch_s)
          << bp.backend << " from P = " << points[k - 1].ranks << " to " << points[k].ranks;
    }
}

TEST(Simulate, CollectiveFetchOutgrowsRmaAtScale) {
  Workload w;
  w.graphs = 1 << 24;
  const auto points = simulate(flat_models(1e-9), test_platform(), w, {2, 4, 1024, 16384});
  // One node (P <= 4 ranks per node): no network part at all.
  for (const std::string b : {"rma", "shm", "collective"}) {
    EXPECT_EQ(at(points[0], b).fetch_network_s, 0) << b;
    EXPECT_EQ(at(points[1], b).fetch_network_s, 0) << b;
    EXPECT_GT(at(points[2], b).fetch_network_s, 0) << b;
  }
  const double coll = at(points[3], "collective").fetch_s - at(points[2], "collective").fetch_s;
  const double rma = at(points[3], "rma").fetch_s - at(points[2], "rma").fetch_s;
  EXPECT_GT(coll, 0);
  EXPECT_GT(coll, 10 * std::abs(rma)) << "collective +" << coll << " s, rma +" << rma << " s";
  EXPECT_GT(at(points[3], "collective").fetch_s, at(points[3], "rma").fetch_s);
}

TEST(Simulate, ReplicatedIsInfeasibleWhenTheDataExceedsMemory) {
  Workload w;
  w.graphs = 4e7;
  w.bytes_mean = 5000;  // 200 GB of samples; a rank may hold half its node's memory share:
                        // 128 GB alone on a node, 32 GB as one of 4
  const std::vector<int64_t> ranks = {1, 4, 8, 64, 4096};
  auto points = simulate(flat_models(1e-9), test_platform(), w, ranks);
  for (const auto& pt : points) {
    EXPECT_FALSE(at(pt, "replicated").feasible) << "P = " << pt.ranks;
    EXPECT_NEAR(at(pt, "replicated").memory_bytes, 200e9 + 0.3 * 4e7, 1);  // + the split map
    EXPECT_TRUE(at(pt, "file").feasible);
    EXPECT_NE(pt.auto_pick, "replicated");
    // Stores of N S / P: 200 GB and 50 GB do not fit, 25 GB does.
    EXPECT_EQ(at(pt, "rma").feasible, pt.ranks >= 8) << "P = " << pt.ranks;
    EXPECT_EQ(at(pt, "shm").feasible, pt.ranks >= 8) << "P = " << pt.ranks;
  }
  EXPECT_EQ(points[0].auto_pick, "file");  // the only one that fits
  EXPECT_EQ(points[1].auto_pick, "file");
  Platform big = test_platform();
  big.memory_gb = 2000;  // 250 GB a rank
  points = simulate(flat_models(1e-9), big, w, ranks);
  for (const auto& pt : points) EXPECT_TRUE(at(pt, "replicated").feasible);
}

TEST(Simulate, AutoIsNeverSlowerThanAFeasibleBackend) {
  int compared = 0;
  for (double compute : {1e-5, 1e-3, 0.02})
    for (double bytes : {1e3, 5464.0, 1e6})
      for (int64_t width : {0, 16}) {
        Workload w;
        w.compute_s = compute;
        w.collate_s = 0;
        w.bytes_mean = bytes;
        w.graphs = 4e6;
        w.width = width;
        const auto points =
            simulate(flat_models(1e-8), test_platform(), w, {16, 64, 256, 1024, 4096, 16384});
        for (const auto& pt : points) {
          ASSERT_NE(pt.auto_pick, "none");
          const BackendPoint& pick = at(pt, pt.auto_pick);
          EXPECT_TRUE(pick.feasible);
          for (const auto& bp : pt.backends) {
            if (!bp.feasible) continue;
            EXPECT_LE(pick.step_s, bp.step_s) << pt.auto_pick << " vs " << bp.backend;
            if (bp.step_s == pick.step_s) {  // a tie: the one with the most slack
              EXPECT_LE(pick.fetch_s, bp.fetch_s) << pt.auto_pick << " vs " << bp.backend;
            }
            ++compared;
          }
        }
      }
  EXPECT_GT(compared, 300);
  // Nothing fits (stores and file system both absent or full): auto picks none.
  Workload huge;
  huge.graphs = 1e13;  // the split id lists alone: 80 TB a rank
  Platform no_pfs = test_platform();
  no_pfs.pfs_gbs = 0;
  const auto none = simulate(flat_models(1e-9, {"rma", "replicated"}), no_pfs, huge, {4});
  EXPECT_EQ(none[0].auto_pick, "none");
}

TEST(Simulate, PrefetchOverlapsComputeOnlyWithACoreToSpare) {
  Workload w;
  w.compute_s = 0.01;
  w.collate_s = 0.002;
  Platform p = test_platform();
  auto rma = at(simulate(flat_models(1e-9), p, w, {4})[0], "rma");
  EXPECT_DOUBLE_EQ(rma.load_s, w.compute_s);  // 64 cores for 4 ranks
  p.cores_per_node = 4;                       // a core a rank: fetch and collate take turns
  rma = at(simulate(flat_models(1e-9), p, w, {4})[0], "rma");
  EXPECT_DOUBLE_EQ(rma.load_s, w.compute_s + rma.fetch_s + w.collate_s);
  p.cores_per_node = 2;  // 4 ranks time-share 2 cores: compute and collate take twice as long
  rma = at(simulate(flat_models(1e-9), p, w, {4})[0], "rma");
  EXPECT_DOUBLE_EQ(rma.load_s, 2 * (w.compute_s + w.collate_s) + rma.fetch_s);
  p.gpus_per_node = 4;  // the compute on accelerators: not stretched
  rma = at(simulate(flat_models(1e-9), p, w, {4})[0], "rma");
  EXPECT_DOUBLE_EQ(rma.load_s, w.compute_s + rma.fetch_s + w.collate_s);
}

// A one-sided fetch from other nodes is two flushes, each a round trip of twice the one-way
// latency: 4 α in the network part, whatever else it costs.
TEST(Simulate, OneSidedFetchPaysTwoRoundTrips) {
  Platform slow = test_platform();
  slow.latency_us += 10;
  const auto base = at(simulate(flat_models(1e-9), test_platform(), Workload{}, {64})[0], "rma");
  const auto more = at(simulate(flat_models(1e-9), slow, Workload{}, {64})[0], "rma");
  ASSERT_GT(base.fetch_network_s, 0);
  EXPECT_NEAR(more.fetch_network_s - base.fetch_network_s, 4 * 10e-6, 1e-12);
}

// Off-node records of a collective fetch cross the network once and are copied twice (into the
// owner's send buffer, out of the asker's receive buffer): with every term at 1e-9, a copy of S
// bytes costs 1e-9 S (local_byte), so S bytes more a sample add n (S / b + 2e-9 S).
TEST(Simulate, CollectiveChargesTheBufferCopiesOfRemoteRecords) {
  Workload small, large;
  large.bytes_mean = small.bytes_mean + 100000;
  const auto a = at(simulate(flat_models(1e-9), test_platform(), small, {64})[0], "collective");
  const auto b = at(simulate(flat_models(1e-9), test_platform(), large, {64})[0], "collective");
  const double n_off = 2.0 * (64 - 4) / 64;  // B (g - r) / g
  const double per_rank_bandwidth = 100e9 / 4;
  EXPECT_NEAR(b.fetch_network_s - a.fetch_network_s,
              n_off * 100000 * (1 / per_rank_bandwidth + 2e-9), 1e-12);
  // rma gets into the batch: its network part has the bytes alone.
  const auto ra = at(simulate(flat_models(1e-9), test_platform(), small, {64})[0], "rma");
  const auto rb = at(simulate(flat_models(1e-9), test_platform(), large, {64})[0], "rma");
  EXPECT_NEAR(rb.fetch_network_s - ra.fetch_network_s, n_off * 100000 / per_rank_bandwidth, 1e-12);
}

TEST(Simulate, FileWithoutModelIsPricedByTheFileSystemAlone) {
  const auto models = flat_models(1e-9, {"rma", "shm", "collective", "replicated"});
  auto pt = simulate(models, test_platform(), Workload{}, {8})[0];
  const BackendPoint& file = at(pt, "file");
  EXPECT_FALSE(file.calibrated);
  EXPECT_EQ(file.fetch_node_s, 0);
  // B reads of 100 us each (8 ranks are far from 4 million reads a second), plus the bytes.
  EXPECT_NEAR(file.fetch_network_s, 2 * 100e-6 + 2 * 5464 / 25e9, 1e-12);
  Platform no_pfs = test_platform();
  no_pfs.pfs_gbs = 0;
  pt = simulate(models, no_pfs, Workload{}, {8})[0];
  for (const auto& bp : pt.backends) EXPECT_NE(bp.backend, "file");
}

TEST(Simulate, WidthSetsTheGroupAndMustDivideTheRanks) {
  Workload w;
  w.width = 8;
  const auto points = simulate(flat_models(1e-9), test_platform(), w, {4, 8, 64});
  EXPECT_EQ(points[0].group_ranks, 4);
  EXPECT_EQ(points[2].group_ranks, 8);
  // Groups of 8 span two nodes at any P: the network share is the same at 8 and 64 ranks.
  EXPECT_DOUBLE_EQ(at(points[1], "rma").fetch_network_s, at(points[2], "rma").fetch_network_s);
  w.width = 3;
  EXPECT_THROW(simulate(flat_models(1e-9), test_platform(), w, {4}), ConfigError);
  EXPECT_THROW(simulate(flat_models(1e-9), test_platform(), Workload{}, {0}), ConfigError);
  Workload bad;
  bad.batch = 0;
  EXPECT_THROW(simulate(flat_models(1e-9), test_platform(), bad, {4}), ConfigError);
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out(1);
  for (char c : line) {
    if (c == ',')
      out.emplace_back();
    else
      out.back().push_back(c);
  }
  return out;
}

TEST(SimulationCsv, HeaderRowsAndAutoAreStableAndDeterministic) {
  Platform p = test_platform();
  p.nodes = 2;  // 8 ranks: 16 are beyond the machine
  const auto models = flat_models(1e-9);
  const std::vector<int64_t> ranks = {1, 8, 16};
  const auto points = simulate(models, p, Workload{}, ranks);
  const std::string csv = simulation_csv(p, points);
  EXPECT_EQ(csv, simulation_csv(p, simulate(models, p, Workload{}, ranks)));
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, kSimulationCsvHeader);
  EXPECT_EQ(line,
            "platform,ranks,nodes,within_platform,backend,group_ranks,calibrated,feasible,"
            "memory_gb_per_rank,fetch_node_s,fetch_network_s,fetch_s,load_s,allreduce_s,step_s,"
            "steps,epoch_s,energy_j,auto_pick");
  size_t rows = 0, autos = 0;
  while (std::getline(in, line)) {
    ++rows;
    const auto f = split(line);
    ASSERT_EQ(f.size(), 19u) << line;
    EXPECT_EQ(f[0], "test");
    const int64_t ranks_here = std::stoll(f[1]);
    EXPECT_EQ(f[3], ranks_here <= 8 ? "1" : "0") << line;
    const ScalePoint& pt = *std::find_if(
        points.begin(), points.end(), [&](const ScalePoint& s) { return s.ranks == ranks_here; });
    EXPECT_EQ(f[18], pt.auto_pick) << line;
    EXPECT_EQ(f[17], "") << line;  // the test platform has no power figures
    if (f[4] == "auto") {          // the picked backend's figures
      ++autos;
      EXPECT_NEAR(std::stod(f[14]), at(pt, pt.auto_pick).step_s,
                  1e-5 * at(pt, pt.auto_pick).step_s);
    }
  }
  EXPECT_EQ(autos, ranks.size());
  EXPECT_EQ(rows, points.size() * (points[0].backends.size() + 1));
}

}  // namespace
}  // namespace ddgnn
