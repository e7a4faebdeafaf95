// tuner/simulate: the energy of an epoch. The arithmetic of epoch_energy_j against sums worked by
// hand (host between idle and busy by the share of busy cores, accelerators by their duty,
// accelerators without a rank at idle, the network always on), what simulate() and the CSV
// carry, the presets' power figures, and the checks of bad power figures.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "core/error.h"
#include "tuner/cost_model.h"
#include "tuner/simulate.h"

namespace ddgnn {
namespace {

// Two nodes of 8 cores and 4 accelerators; round figures for sums by hand.
Platform powered() {
  Platform p;
  p.name = "powered";
  p.nodes = 16;
  p.ranks_per_node = 4;
  p.cores_per_node = 8;
  p.latency_us = 2;
  p.injection_gbs = 100;
  p.memory_gb = 256;
  p.node_idle_w = 100;
  p.node_busy_w = 300;
  p.gpus_per_node = 4;
  p.gpu_idle_w = 50;
  p.gpu_busy_w = 250;
  p.network_w = 40;
  return p;
}

TEST(EpochEnergy, HostByBusyCoresAcceleratorsByDutyNetworkAlways) {
  // 8 ranks on 2 nodes, 10 steps of 0.1 s: 1 s. Cores at work: 4 x (0.1 + 0.02) of 8 x 0.1, u =
  // 0.6: host 100 + 200 x 0.6 = 220 W, + 40 W network, x 2 nodes = 520 W. Accelerators busy half
  // of each step: 50 + 200 x 0.5 = 150 W, x 8 = 1,200 W. 1,720 W for 1 s.
  EXPECT_NEAR(epoch_energy_j(powered(), 8, 2, 4, 10, 0.1, 0.05, 0.02), 1720, 1e-9);
  // 6 ranks on the same 2 nodes: 6 accelerators at 150 W, 2 idle at 50 W.
  EXPECT_NEAR(epoch_energy_j(powered(), 6, 2, 4, 10, 0.1, 0.05, 0.02), 520 + 900 + 100, 1e-9);
  // Twice the steps: twice the joules.
  EXPECT_NEAR(epoch_energy_j(powered(), 8, 2, 4, 20, 0.1, 0.05, 0.02), 2 * 1720, 1e-9);
}

TEST(EpochEnergy, SharesAreCappedAtOne) {
  Platform p = powered();
  p.cores_per_node = 2;  // 4 ranks with prefetch threads on 2 cores: every core busy
  // Host 300 + 40 W, x 1 node; compute longer than the step (never, but capped): 4 x 250 W;
  // 10 steps of 0.1 s.
  EXPECT_NEAR(epoch_energy_j(p, 4, 1, 4, 10, 0.1, 0.5, 0.02), 340 + 1000, 1e-9);
}

TEST(EpochEnergy, CpuOnlyAndUnknownPower) {
  Platform p = powered();
  p.gpus_per_node = 0;  // compute on the cores: host and network only
  EXPECT_NEAR(epoch_energy_j(p, 8, 2, 4, 10, 0.1, 0.05, 0.02), 520, 1e-9);
  p.node_busy_w = 0;  // power not known
  EXPECT_TRUE(std::isnan(epoch_energy_j(p, 8, 2, 4, 10, 0.1, 0.05, 0.02)));
}

std::map<std::string, CostModel> flat_models(double value) {
  std::map<std::string, CostModel> out;
  for (const auto& b : CostModel::backends()) {
    std::map<std::string, double> terms;
    for (const auto& t : CostModel::backend_terms(b)) terms[t] = value;
    out.emplace(b, CostModel::from_parameters(b, terms, 1.0));
  }
  return out;
}

TEST(EpochEnergy, SimulateCarriesItPerBackendAndInTheCsv) {
  const Platform p = powered();
  Workload w;
  w.compute_s = 0.01;
  const auto points = simulate(flat_models(1e-9), p, w, {1, 8, 64});
  for (const auto& pt : points)
    for (const auto& bp : pt.backends) {
      const int64_t rpn = std::min<int64_t>(pt.ranks, p.ranks_per_node);
      const double want = epoch_energy_j(p, pt.ranks, pt.nodes, rpn, double(pt.steps), bp.step_s,
                                         w.compute_s, bp.fetch_s + w.collate_s);
      EXPECT_NEAR(bp.energy_j, want, 1e-9 * want) << bp.backend << " at P = " << pt.ranks;
      EXPECT_GT(bp.energy_j, 0);
    }
  // One rank on one node: the node's other three accelerators idle the whole epoch.
  const double one_rank = points[0].backends[0].epoch_s;
  EXPECT_GT(points[0].backends[0].energy_j, one_rank * (100 + 40 + 50 + 3 * 50));
  EXPECT_LT(points[0].backends[0].energy_j, one_rank * (300 + 40 + 250 + 3 * 50));
  const std::string csv = simulation_csv(p, points);
  EXPECT_NE(csv.find(",energy_j,auto_pick\n"), std::string::npos);
}

TEST(PlatformPreset, MachinesHaveSourcedPowerFigures) {
  for (const std::string name : {"perlmutter", "frontier", "summit"}) {
    const Platform p = platform_preset(name, {});
    EXPECT_GT(p.node_busy_w, p.node_idle_w) << name;
    EXPECT_GT(p.gpu_busy_w, p.gpu_idle_w) << name;
    EXPECT_EQ(p.gpus_per_node, p.ranks_per_node) << name;  // one rank per GPU (GCD)
    EXPECT_NE(p.source.find("Power:"), std::string::npos) << name;
  }
  // A busy Frontier node near the 2,490 W a node that HPL drew (the preset's cross-check).
  const Platform f = platform_preset("frontier", {});
  const double busy = f.node_busy_w + double(f.gpus_per_node) * f.gpu_busy_w + f.network_w;
  EXPECT_NEAR(busy, 2490, 0.05 * 2490);
  // This machine has no power figures (no RAPL): no energy.
  EXPECT_EQ(platform_preset("local", flat_models(1e-6)).node_busy_w, 0);
}

TEST(PlatformPreset, BadPowerFiguresNameTheFieldAndTheOption) {
  auto message = [](const Platform& p) {
    try {
      validate(p);
    } catch (const ConfigError& e) {
      return std::string(e.what()) + " | " + e.hint();
    }
    return std::string("no error");
  };
  Platform p = powered();
  p.node_busy_w = -5;
  EXPECT_NE(message(p).find("node_busy_w = -5"), std::string::npos) << message(p);
  EXPECT_NE(message(p).find("--node-busy-w"), std::string::npos) << message(p);
  p = powered();
  p.gpu_idle_w = NAN;
  EXPECT_NE(message(p).find("gpu_idle_w"), std::string::npos) << message(p);
  p = powered();
  p.gpu_idle_w = 300;  // above its 250 W busy figure
  EXPECT_NE(message(p).find("above gpu_busy_w"), std::string::npos) << message(p);
  p = powered();
  p.node_idle_w = 400;
  EXPECT_NE(message(p).find("above node_busy_w"), std::string::npos) << message(p);
  p = powered();
  p.gpus_per_node = -1;
  EXPECT_NE(message(p).find("--gpus-per-node"), std::string::npos) << message(p);
  EXPECT_EQ(message(powered()), "no error");
}

}  // namespace
}  // namespace ddgnn
