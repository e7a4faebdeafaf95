// Bundled configs trained end to end: `ddgnn train` on configs/hydragnn_lj_example.json as shipped
// (HydraGNN's keys, its energy head named graph_energy, the data path relative to the repository
// root) for one epoch, with the run directory in a temporary folder.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>

#include "../common/temp_dir.h"
#include "../common/train_run.h"

namespace ddgnn {
namespace {

namespace fs = std::filesystem;
using testing::lines;
using testing::read_text;
using testing::Result;
using testing::run;
using testing::TempDir;

// The value of `column` in the last row of metrics.csv.
double last_value(const std::string& csv, const std::string& column) {
  const auto rows = lines(read_text(csv));
  std::stringstream header(rows.at(0)), row(rows.back());
  for (std::string name, value; std::getline(header, name, ',') && std::getline(row, value, ',');)
    if (name == column) return std::stod(value);
  ADD_FAILURE() << csv << " has no column " << column;
  return NAN;
}

// Trains configs/<name> for one epoch from the repository root (where its data paths start).
Result train_one_epoch(const std::string& name, const std::string& run_dir) {
  const fs::path before = fs::current_path();
  fs::current_path(DDGNN_SOURCE_DIR);
  const Result r = run("train -c configs/" + name + " --set Training.num_epoch=1 --set " +
                       "Output.run_dir=" + run_dir + " --set Output.progress=lines");
  fs::current_path(before);
  return r;
}

TEST(BundledConfigs, HydraGnnLennardJonesExampleTrainsOneEpoch) {
  TempDir dir;
  const std::string run_dir = dir.file("run");
  const Result r = train_one_epoch("hydragnn_lj_example.json", run_dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("error:"), std::string::npos) << r.out;
  const std::string csv = run_dir + "/metrics.csv";
  EXPECT_EQ(lines(read_text(csv)).size(), 2u) << "a header and one epoch";
  // graph_energy is the energy head: energy and conservative forces are reported.
  for (const char* column : {"test_energy_mae_mev_atom", "test_force_mae_mev_a"}) {
    const double v = last_value(csv, column);
    EXPECT_TRUE(std::isfinite(v) && v > 0) << column << " = " << v;
  }
  EXPECT_TRUE(fs::exists(run_dir + "/checkpoints/best.pt"));
}

}  // namespace
}  // namespace ddgnn
