// tuner/energy_fit: the platform's powers fitted to a run's measured joules. Runs written here
// with joules made from known powers (the fit must find them), one whose busy share does not
// vary (only the mean power is known then), accelerators fitted over their duty, and the run
// directories it refuses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "tuner/energy_fit.h"
#include "tuner/simulate.h"

namespace ddgnn {
namespace {

namespace fs = std::filesystem;

class RunDir {
 public:
  RunDir() {
    char name[] = "/tmp/ddgnn_fit_XXXXXX";
    m_dir = mkdtemp(name);
  }
  ~RunDir() { fs::remove_all(m_dir); }
  const std::string& path() const { return m_dir; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(m_dir + "/" + name) << text;
  }
  void start(int ranks, const std::string& device) const {
    write("events.jsonl", "{\"event\":\"run_start\",\"device\":\"" + device +
                              "\",\"loader\":{\"ranks\":" + std::to_string(ranks) + "}}\n");
  }

 private:
  std::string m_dir;
};

Platform four_cores() {
  Platform p;
  p.name = "box";
  p.ranks_per_node = 1;
  p.cores_per_node = 4;
  p.node_idle_w = 100;
  p.node_busy_w = 300;
  p.network_w = 0;
  p.power_estimated = "all of it";
  return p;
}

const char* kHeader =
    "epoch,epoch_s,forward_s,forces_s,backward_s,optimizer_s,eval_s,fetch_s,graph_s,energy_j,"
    "energy_j_per_graph,energy_node_j,energy_cpu_j,energy_memory_j,energy_gpu_j\n";

// One rank on four cores: u = (epoch + prefetch) / (4 epoch), from 0.25 to 0.5 as the prefetch
// grows to the epoch's length. The CPUs and memory (RAPL) draw 80 W idle, 200 W busy.
TEST(EnergyFit, IdleAndBusyPowerAreFoundWhereTheBusyShareVaries) {
  RunDir run;
  run.start(1, "cpu");
  std::string csv = kHeader;
  for (int e = 1; e <= 6; ++e) {
    const double epoch = 10.0 + e, prefetch = epoch * (e - 1) / 5.0;
    const double u = (epoch + prefetch) / (4 * epoch);
    const double joules = epoch * (80 + 120 * u);
    char row[400];
    std::snprintf(row, sizeof row, "%d,%.17g,1,0,1,0.1,0.5,%.17g,0,%.17g,,,%.17g,%.17g,\n", e,
                  epoch, prefetch, joules, 0.75 * joules, 0.25 * joules);
    csv += row;
  }
  csv += "7,12,1,0,1,0.1,0.5,1,0,,,,,,\n";  // an epoch the meter missed: left out
  run.write("metrics.csv", csv);
  const MeasuredRun measured = read_measured_run(run.path());
  EXPECT_EQ(measured.epochs.size(), 6u);
  EXPECT_EQ(measured.device, "cpu");
  const PowerFit fit = fit_power(four_cores(), measured, 1);
  ASSERT_TRUE(fit.host_measured);
  ASSERT_TRUE(fit.host_separable);
  EXPECT_FALSE(fit.host_includes_network);
  EXPECT_NEAR(fit.host_idle_w, 80, 1e-6);
  EXPECT_NEAR(fit.host_busy_w, 200, 1e-6);
  EXPECT_NEAR(fit.u_min, 0.25, 1e-12);
  EXPECT_NEAR(fit.u_max, 0.5, 1e-12);
  EXPECT_NEAR(fit.fitted_j, fit.measured_j, 1e-6 * fit.measured_j);
  EXPECT_GT(fit.preset_j, fit.measured_j);  // 100/300 W where 80/200 were drawn
  const Platform fitted = with_fitted_power(four_cores(), fit);
  EXPECT_NEAR(fitted.node_idle_w, 80, 1e-6);
  EXPECT_NEAR(fitted.node_busy_w, 200, 1e-6);
  const std::string text = describe(fit, four_cores(), measured);
  EXPECT_NE(text.find("idle 80 W, busy 200 W a node"), std::string::npos) << text;
  EXPECT_NE(text.find("(partly estimated) model"), std::string::npos) << text;
  EXPECT_NE(text.find("RAPL sees no board or network"), std::string::npos) << text;
}

TEST(EnergyFit, ASteadyRunGivesItsMeanPowerAndKeepsThePresets) {
  RunDir run;
  run.start(1, "cpu");
  std::string csv = kHeader;
  for (int e = 1; e <= 4; ++e)  // the same shares every epoch: 150 W of node energy
    csv += std::to_string(e) + ",10,1,0,1,0,0,2,0,1500,,1500,,,\n";
  run.write("metrics.csv", csv);
  const MeasuredRun measured = read_measured_run(run.path());
  const PowerFit fit = fit_power(four_cores(), measured, 1);
  ASSERT_TRUE(fit.host_measured);
  EXPECT_FALSE(fit.host_separable);
  EXPECT_TRUE(fit.host_includes_network);  // a node counter (Cray's) sees its NICs too
  EXPECT_NEAR(fit.host_mean_w, 150, 1e-9);
  const Platform kept = with_fitted_power(four_cores(), fit);
  EXPECT_EQ(kept.node_idle_w, 100);
  EXPECT_EQ(kept.node_busy_w, 300);
  const std::string text = describe(fit, four_cores(), measured);
  EXPECT_NE(text.find("150 W a node on average"), std::string::npos) << text;
  EXPECT_NE(text.find("too narrow"), std::string::npos) << text;
}

TEST(EnergyFit, AcceleratorsAreFittedOverTheirDuty) {
  // Two ranks on a node of four accelerators: two work for compute/epoch of the time, two idle.
  // Each draws 40 W idle, 300 W busy.
  Platform p = four_cores();
  p.ranks_per_node = 4;
  p.gpus_per_node = 4;
  p.gpu_idle_w = 50;
  p.gpu_busy_w = 400;
  RunDir run;
  run.start(2, "cuda");
  std::string csv = kHeader;
  for (int e = 1; e <= 5; ++e) {
    const double epoch = 20, compute = 2.0 * e;  // duty 0.1 ... 0.5
    const double gpu = epoch * (4 * 40 + 2 * 260 * compute / epoch);
    char row[400];
    std::snprintf(row, sizeof row, "%d,%.17g,%.17g,0,0,0,0,0,0,%.17g,,,,,%.17g\n", e, epoch,
                  compute, gpu, gpu);
    csv += row;
  }
  run.write("metrics.csv", csv);
  const PowerFit fit = fit_power(p, read_measured_run(run.path()), 1);
  EXPECT_EQ(fit.gpus_with_rank, 2);
  ASSERT_TRUE(fit.gpu_measured);
  ASSERT_TRUE(fit.gpu_separable);
  EXPECT_NEAR(fit.gpu_idle_w, 40, 1e-6);
  EXPECT_NEAR(fit.gpu_busy_w, 300, 1e-6);
  EXPECT_NEAR(fit.d_min, 0.1, 1e-12);
  EXPECT_NEAR(fit.d_max, 0.5, 1e-12);
  EXPECT_FALSE(fit.host_measured);
}

TEST(EnergyFit, RunsWithoutMeasuredEnergyAreRefusedNamingTheFile) {
  const auto refused = [](const RunDir& run, const std::string& needle) {
    try {
      read_measured_run(run.path());
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  RunDir none;
  refused(none, "cannot read " + none.path() + "/metrics.csv");
  RunDir old;
  old.write("metrics.csv", "epoch,epoch_s,forward_s\n1,2,3\n");
  refused(old, "metrics.csv:1: no column energy_j");
  RunDir unmeasured;
  unmeasured.start(1, "cpu");
  unmeasured.write("metrics.csv", std::string(kHeader) + "1,10,1,0,1,0,0,2,0,,,,,,\n");
  refused(unmeasured, "no epoch has a measured energy_j");
  RunDir edited;
  edited.start(1, "cpu");
  edited.write("metrics.csv", std::string(kHeader) + "1,10,1,0,1,0,0,2,0,12kJ,,,,,\n");
  refused(edited, "metrics.csv:2: column energy_j is not a number: '12kJ'");
  RunDir no_events;
  no_events.write("metrics.csv", std::string(kHeader) + "1,10,1,0,1,0,0,2,0,5,,,,,\n");
  refused(no_events, "no run_start event in " + no_events.path() + "/events.jsonl");
}

}  // namespace
}  // namespace ddgnn
