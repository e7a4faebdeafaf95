// Training with Output.energy_meter on a counter tree the test writes and keeps counting
// (DDGNN_ENERGY_ROOT): every epoch's joules in metrics.csv and on the epoch line (J, or kJ from
// 1,000), one reader per node when several ranks share it, and a machine whose counters cannot be
// read trains as before after one notice.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/lj_dataset.h"
#include "../common/temp_dir.h"
#include "../common/train_run.h"

namespace ddgnn {
namespace {

namespace fs = std::filesystem;
using testing::metric_column;
using testing::metric_numbers;
using testing::Result;
using testing::TempDir;

// A RAPL tree (one package and its dram zone) whose counters a thread advances while it lives:
// the package by 1 J, the dram by 0.25 J every millisecond. Each value is written to a temporary
// and renamed, as a reader of the real /sys never sees half a number either.
class CountingTree {
 public:
  explicit CountingTree(const std::string& root) : m_root(root) {
    zone("intel-rapl:0", "package-0");
    zone("intel-rapl:0:0", "dram");
    write_counters();
    m_thread = std::thread([this] {
      while (!m_stop) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        m_ticks += 1;
        write_counters();
      }
    });
  }
  ~CountingTree() {
    m_stop = true;
    m_thread.join();
  }
  // Joules the package counted so far.
  double package_j() const { return double(m_ticks); }

 private:
  void zone(const std::string& z, const std::string& name) {
    const std::string dir = m_root + "/sys/class/powercap/" + z;
    fs::create_directories(dir);
    std::ofstream(dir + "/name") << name << "\n";
    std::ofstream(dir + "/max_energy_range_uj") << "262143328850\n";
  }
  void put(const std::string& z, long long uj) {
    const std::string file = m_root + "/sys/class/powercap/" + z + "/energy_uj";
    std::ofstream(file + ".tmp") << uj << "\n";
    fs::rename(file + ".tmp", file);
  }
  void write_counters() {
    put("intel-rapl:0", m_ticks * 1000000LL);
    put("intel-rapl:0:0", m_ticks * 250000LL);
  }

  std::string m_root;
  std::atomic<long long> m_ticks{0};
  std::atomic<bool> m_stop{false};
  std::thread m_thread;
};

TEST(EnergyTrain, EveryEpochsJoulesAreInTheMetricsAndOnTheEpochLine) {
  TempDir dir;
  testing::write_lj_dataset(dir.file("lj.h5"), testing::LjOptions{});
  nlohmann::json c = testing::small_config(dir.file("lj.h5"), dir.file("run"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 3;
  const std::string config = testing::write_config(dir, "c.json", c);
  Result r;
  double written = 0;
  {
    CountingTree tree(dir.file("counters"));
    r = testing::run("train -c " + config, "DDGNN_ENERGY_ROOT=" + dir.file("counters"));
    written = tree.package_j();
  }
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("energy measured by RAPL (1 package, dram) on 1 of 1 node(s)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("J  *"), std::string::npos) << r.out;  // the epoch line's joules
  const std::string csv = dir.file("run") + "/metrics.csv";
  const std::vector<double> energy = metric_numbers(csv, "energy_j");
  const std::vector<double> cpu = metric_numbers(csv, "energy_cpu_j");
  const std::vector<double> memory = metric_numbers(csv, "energy_memory_j");
  const std::vector<double> per_graph = metric_numbers(csv, "energy_j_per_graph");
  ASSERT_EQ(energy.size(), 3u);
  ASSERT_EQ(cpu.size(), 3u);
  ASSERT_EQ(memory.size(), 3u);
  ASSERT_EQ(per_graph.size(), 3u);
  const nlohmann::json graphs =
      testing::last_event(dir.file("run"), "run_start").at("graphs").at("train");
  double sum = 0;
  for (size_t e = 0; e < energy.size(); ++e) {
    EXPECT_GT(cpu[e], 0.0) << "epoch " << e + 1;
    // The package counts four times what its dram does, over the same interval.
    EXPECT_NEAR(memory[e], cpu[e] / 4.0, 0.26) << "epoch " << e + 1;
    EXPECT_NEAR(energy[e], cpu[e] + memory[e], 1e-6 * energy[e]) << "epoch " << e + 1;
    EXPECT_NEAR(per_graph[e], energy[e] / graphs.get<double>(), 1e-6 * per_graph[e]);
    sum += cpu[e];
  }
  // Counted from the meter's start: never more than the counters advanced over the whole run.
  EXPECT_LE(sum, written + 1.0);
  EXPECT_TRUE(metric_column(csv, "energy_node_j")[0].empty());  // RAPL knows no node total
}

TEST(EnergyTrain, RanksOnOneNodeReadItsCountersOnce) {
  TempDir dir;
  testing::write_lj_dataset(dir.file("lj.h5"), testing::LjOptions{});
  nlohmann::json c = testing::small_config(dir.file("lj.h5"), dir.file("run"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 2;
  const std::string config = testing::write_config(dir, "c.json", c);
  CountingTree tree(dir.file("counters"));
  const Result r =
      testing::mpirun(2, "train -c " + config, "DDGNN_ENERGY_ROOT=" + dir.file("counters"));
  ASSERT_EQ(r.code, 0) << r.out;
  // Both ranks share this machine: its first rank reads, and the job's sum counts it once.
  EXPECT_NE(r.out.find("on 1 of 1 node(s)"), std::string::npos) << r.out;
  const std::vector<double> cpu = metric_numbers(dir.file("run") + "/metrics.csv", "energy_cpu_j");
  ASSERT_EQ(cpu.size(), 2u);
  EXPECT_LE(cpu[0] + cpu[1], tree.package_j() + 1.0);
}

TEST(EnergyTrain, NoReadableCountersIsOneNoticeAndTheRunTrainsAsBefore) {
  TempDir dir;
  testing::write_lj_dataset(dir.file("lj.h5"), testing::LjOptions{});
  nlohmann::json c = testing::small_config(dir.file("lj.h5"), dir.file("run"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 2;
  fs::create_directories(dir.file("bare"));  // a machine with no counters at all
  const std::string env = "DDGNN_ENERGY_ROOT=" + dir.file("bare");
  const Result r = testing::run("train -c " + testing::write_config(dir, "c.json", c), env);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string notice = "no energy counters readable here";
  ASSERT_NE(r.out.find(notice), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(notice), r.out.rfind(notice)) << "said more than once:\n" << r.out;
  EXPECT_EQ(r.out.find("J  *"), std::string::npos) << r.out;
  const std::string csv = dir.file("run") + "/metrics.csv";
  ASSERT_EQ(metric_column(csv, "energy_j").size(), 2u);
  for (const std::string& v : metric_column(csv, "energy_j")) EXPECT_TRUE(v.empty()) << v;
  EXPECT_EQ(metric_numbers(csv, "train_loss").size(), 2u);

  // Output.energy_meter none: not even the notice.
  c["Output"]["energy_meter"] = "none";
  c["Output"]["run_dir"] = dir.file("run_none");
  const Result n = testing::run("train -c " + testing::write_config(dir, "n.json", c), env);
  ASSERT_EQ(n.code, 0) << n.out;
  EXPECT_EQ(n.out.find(notice), std::string::npos) << n.out;
}

}  // namespace
}  // namespace ddgnn
