// tuner/simulate: the energy of an epoch. The arithmetic of epoch_energy_j against sums worked by
// hand (host between idle and busy by the share of busy cores, accelerators by their duty,
// accelerators without a rank at idle, the network always on), what simulate() and the CSV
// carry, the presets' power figures, the checks of bad power figures, and the time-energy plan at
// a fixed global batch (its Pareto front and least-energy choice, and its refusals).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "tuner/cost_model.h"
#include "tuner/plan.h"
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

TEST(TimeEnergyPlan, TheBatchSplitsOverTheRanksAndTheComputeFollowsIt) {
  Workload w;
  w.batch = 2;
  w.compute_s = 0.012;
  w.collate_s = 0.002;
  const Workload at8 = workload_at_batch(w, 8, 0.010);
  EXPECT_DOUBLE_EQ(at8.batch, 8);
  EXPECT_NEAR(at8.compute_s, 0.010 + 0.002 * 4, 1e-15);  // the fixed part once, the rest x 4
  EXPECT_NEAR(at8.collate_s, 0.008, 1e-15);
  EXPECT_NEAR(workload_at_batch(w, 1, 0).compute_s, 0.006, 1e-15);
}

TEST(TimeEnergyPlan, FrontIsUndominatedAndTheChoiceIsTheLeastEnergyWithinTheBound) {
  const Platform p = powered();
  Workload w;
  w.graphs = 6400;
  w.compute_s = 0.02;
  const std::vector<int64_t> ranks = {1, 2, 3, 4, 8, 16, 32, 64, 128};
  const Plan all = time_energy_plan(flat_models(1e-9), p, w, ranks, 64, 0.005, 0);
  ASSERT_FALSE(all.points.empty());
  std::set<int64_t> seen;
  for (const PlanPoint& q : all.points) {
    seen.insert(q.ranks);
    EXPECT_DOUBLE_EQ(q.batch_per_rank * double(q.ranks), 64);  // the global batch, every P
  }
  EXPECT_EQ(seen, (std::set<int64_t>{1, 2, 4, 8, 16, 32, 64}));  // 3 and 128 do not divide 64
  size_t on_front = 0;
  for (const PlanPoint& q : all.points) {
    bool dominated = false;
    for (const PlanPoint& o : all.points)
      dominated |= o.epoch_s <= q.epoch_s && o.energy_j <= q.energy_j &&
                   (o.epoch_s < q.epoch_s || o.energy_j < q.energy_j);
    EXPECT_EQ(q.pareto, !dominated) << q.ranks << " " << q.backend;
    on_front += q.pareto;
  }
  EXPECT_GT(on_front, 1u);  // more ranks are faster and cost more: a trade-off, not one point
  ASSERT_GE(all.choice, 0);
  ASSERT_GE(all.fastest, 0);
  double least = INFINITY, fastest = INFINITY;
  for (const PlanPoint& q : all.points) {
    least = std::min(least, q.energy_j);
    fastest = std::min(fastest, q.epoch_s);
  }
  EXPECT_EQ(all.points[size_t(all.choice)].energy_j, least);
  EXPECT_EQ(all.points[size_t(all.fastest)].epoch_s, fastest);

  // A bound between the fastest and the frugal choice: the least energy among the fast enough.
  const double bound = 0.5 * (fastest + all.points[size_t(all.choice)].epoch_s);
  const Plan bounded = time_energy_plan(flat_models(1e-9), p, w, ranks, 64, 0.005, bound);
  ASSERT_GE(bounded.choice, 0);
  const PlanPoint& pick = bounded.points[size_t(bounded.choice)];
  EXPECT_LE(pick.epoch_s, bound);
  EXPECT_GT(pick.energy_j, least);
  for (const PlanPoint& q : bounded.points)
    if (q.epoch_s <= bound) {
      EXPECT_GE(q.energy_j, pick.energy_j) << q.ranks << " " << q.backend;
    }
  EXPECT_TRUE(pick.pareto);
  const std::string csv = plan_csv(p, bounded);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), kPlanCsvHeader);
  EXPECT_NE(csv.find(",1,1,1\n"), std::string::npos);  // the choice: on the front, within, chosen

  // Faster than any: no choice, and the fastest named.
  const Plan none = time_energy_plan(flat_models(1e-9), p, w, ranks, 64, 0.005, 0.5 * fastest);
  EXPECT_EQ(none.choice, -1);
  EXPECT_EQ(none.points[size_t(none.fastest)].epoch_s, fastest);
}

TEST(TimeEnergyPlan, BadRequestsAreRefusedNamingTheOption) {
  const Platform p = powered();
  const Workload w;
  const auto models = flat_models(1e-9);
  const auto refused = [&](const Platform& pl, double batch, double fixed, double bound,
                           const std::vector<int64_t>& ranks, const std::string& needle) {
    try {
      time_energy_plan(models, pl, w, ranks, batch, fixed, bound);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused(p, 0, 0, 0, {1, 2}, "--global-batch 0");
  refused(p, 2.5, 0, 0, {1, 2}, "a whole number");
  refused(p, 64, 1.0, 0, {1, 2}, "--compute-fixed-s");
  refused(p, 64, 0, -1, {1, 2}, "--time-bound");
  refused(p, 64, 0, 0, {3, 5}, "no rank count of --ranks (3,5) divides it");
  Platform unpowered = p;
  unpowered.node_busy_w = 0;
  refused(unpowered, 64, 0, 0, {1, 2}, "needs the platform's power figures");
}

}  // namespace
}  // namespace ddgnn
