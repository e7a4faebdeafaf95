// Bundled configs trained end to end: `ddgnn train` on each config of configs/ as shipped, for one
// epoch, with only the data (a small Lennard-Jones set written here: periodic with stress for the
// crystal configs, clusters for the molecule's) and the run directory replaced. The data sets the
// configs name are made by jobs/data/generate.sh, which the suite does not run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "../common/lj_dataset.h"
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

// Trains configs/<name> for one epoch from the repository root (where its paths start) on a
// Lennard-Jones set of 500 frames written into `dir`, in groups of 5 frames (a config_type each,
// for the split by group).
Result train_one_epoch(const std::string& name, const TempDir& dir, bool periodic,
                       const std::string& extra = "") {
  testing::LjOptions lj;
  lj.n_frames = 500;  // ten blocks of 50 for the split by block
  lj.periodic = periodic;
  lj.frames_per_group = 5;
  const std::string data = dir.file("lj.h5");
  testing::write_lj_dataset(data, lj);
  const fs::path before = fs::current_path();
  fs::current_path(DDGNN_SOURCE_DIR);
  const Result r = run("train -c configs/" + name + " --set Training.num_epoch=1 --set " +
                       "Dataset.path=" + data + " --set Output.run_dir=" + dir.file("run") +
                       " --set Output.progress=lines " + extra);
  fs::current_path(before);
  return r;
}

// One epoch trained, the test split's energy and force errors reported (and the stress's when
// `stress`), the best checkpoint saved.
void expect_one_epoch_with_forces(const Result& r, const std::string& run_dir,
                                  bool stress = false) {
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("error:"), std::string::npos) << r.out;
  const std::string csv = run_dir + "/metrics.csv";
  EXPECT_EQ(lines(read_text(csv)).size(), 2u) << "a header and one epoch";
  std::vector<std::string> columns = {"test_energy_mae_mev_atom", "test_force_mae_mev_a"};
  if (stress) columns.push_back("test_stress_mae_mev_a3");
  for (const std::string& column : columns) {
    const double v = last_value(csv, column);
    EXPECT_TRUE(std::isfinite(v) && v > 0) << column << " = " << v;
  }
  EXPECT_TRUE(fs::exists(run_dir + "/checkpoints/best.pt"));
}

TEST(BundledConfigs, EveryConfigIsTrainedHere) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(std::string(DDGNN_SOURCE_DIR) + "/configs"))
    if (e.path().extension() == ".json") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  const std::vector<std::string> trained = {
      "cu_eam_mace.json",      "cu_eam_schnet.json",       "cu_eam_stress_schnet.json",
      "ethanol_dimenet.json",  "ethanol_mace.json",        "ethanol_mace_gpu.json",
      "ethanol_schnet.json",   "hydragnn_lj_example.json", "molecules_mace.json",
      "molecules_schnet.json", "si_sw_painn.json",         "si_sw_stress_mace.json",
      "three_sets_schnet.json"};
  EXPECT_EQ(names, trained) << "a new config needs its one-epoch test below";
}

TEST(BundledConfigs, CuEamSchnetTrainsOneEpoch) {
  TempDir dir;
  expect_one_epoch_with_forces(train_one_epoch("cu_eam_schnet.json", dir, true), dir.file("run"));
}

TEST(BundledConfigs, CuEamStressSchnetTrainsOneEpochWithTheStress) {
  TempDir dir;
  expect_one_epoch_with_forces(train_one_epoch("cu_eam_stress_schnet.json", dir, true),
                               dir.file("run"), /*stress=*/true);
}

TEST(BundledConfigs, CuEamMaceTrainsOneEpochWithTheStress) {
  const TempDir dir;
  expect_one_epoch_with_forces(train_one_epoch("cu_eam_mace.json", dir, true), dir.file("run"),
                               true);
}

TEST(BundledConfigs, EthanolDimeNetTrainsOneEpoch) {
  const TempDir dir;
  expect_one_epoch_with_forces(train_one_epoch("ethanol_dimenet.json", dir, false),
                               dir.file("run"));
}

TEST(BundledConfigs, DimeNetWithTooManyTripletsStopsBeforeTheFirstStep) {
  const TempDir dir;
  const Result r = train_one_epoch("ethanol_dimenet.json", dir, false,
                                   "--set NeuralNetwork.Architecture.max_triplets=100");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("triplets, above Architecture.max_triplets (100)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("lower Training.batch_size"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("epoch 1/"), std::string::npos) << "no step was taken: " << r.out;
}

// The varied-chemistry configs split by molecule (config_type): every group in one split.
TEST(BundledConfigs, MoleculesConfigsTrainOneEpochSplitByGroup) {
  for (const char* name : {"molecules_schnet.json", "molecules_mace.json"}) {
    SCOPED_TRACE(name);
    const TempDir dir;
    const Result r = train_one_epoch(name, dir, false);
    expect_one_epoch_with_forces(r, dir.file("run"));
    EXPECT_NE(r.out.find("split by group (config_type): 80/10/10 groups"), std::string::npos)
        << r.out;
  }
}

// The list of three files: two more Lennard-Jones sets beside the one train_one_epoch writes
// (other structures, energies 0.3 and 0.6 eV per atom higher), one branch each.
TEST(BundledConfigs, ThreeSetsSchnetTrainsOneEpochWithABranchPerFile) {
  const TempDir dir;
  std::string list = "[\\\"" + dir.file("lj.h5") + "\\\"";
  for (int f = 1; f <= 2; ++f) {
    testing::LjOptions lj;
    lj.n_frames = 500;
    lj.periodic = true;
    lj.frames_per_group = 5;
    lj.seed = unsigned(1 + f);
    lj.energy_shift = 0.3 * f;
    const std::string path = dir.file("lj" + std::to_string(f) + ".h5");
    testing::write_lj_dataset(path, lj);
    list += ",\\\"" + path + "\\\"";
  }
  const Result r =
      train_one_epoch("three_sets_schnet.json", dir, true, "--set \"Dataset.path=" + list + "]\"");
  expect_one_epoch_with_forces(r, dir.file("run"));
  EXPECT_NE(r.out.find("branches of the heads (dataset_name), train graphs: 0: 400 1: 400 2: 400"),
            std::string::npos)
      << r.out;
}

TEST(BundledConfigs, EthanolMaceTrainsOneEpoch) {
  const TempDir dir;
  expect_one_epoch_with_forces(train_one_epoch("ethanol_mace.json", dir, false), dir.file("run"));
}

// The GPU config: where no GPU is (a CPU build, or none visible) it is refused in one line naming
// the device; with the device set to the CPU and the step eager (CUDA graphs need a GPU), its
// static shapes train an epoch.
TEST(BundledConfigs, EthanolMaceGpuTrainsOneEpochOnTheCpuWithStaticShapes) {
  const TempDir dir;
  const Result as_shipped = train_one_epoch("ethanol_mace_gpu.json", dir, false);
  if (as_shipped.out.find("device: cuda") == std::string::npos) {  // no GPU here
    testing::expect_error(as_shipped, "Runtime.device: \"cuda\"");
    EXPECT_EQ(lines(as_shipped.out).size(), 1u) << as_shipped.out;
  }
  const TempDir cpu;
  const Result r = train_one_epoch("ethanol_mace_gpu.json", cpu, false,
                                   "--set Runtime.device=cpu --set Runtime.cuda_graphs=false");
  expect_one_epoch_with_forces(r, cpu.file("run"));
  EXPECT_NE(r.out.find("static shapes: 2 shape(s)"), std::string::npos) << r.out;
}

TEST(BundledConfigs, EthanolSchnetTrainsOneEpoch) {
  TempDir dir;
  expect_one_epoch_with_forces(train_one_epoch("ethanol_schnet.json", dir, false), dir.file("run"));
}

TEST(BundledConfigs, SiSwPainnTrainsOneEpochWithTheStress) {
  TempDir dir;
  expect_one_epoch_with_forces(train_one_epoch("si_sw_painn.json", dir, true), dir.file("run"),
                               /*stress=*/true);
}

TEST(BundledConfigs, SiSwStressMaceTrainsOneEpochWithTheStress) {
  TempDir dir;
  expect_one_epoch_with_forces(train_one_epoch("si_sw_stress_mace.json", dir, true),
                               dir.file("run"), /*stress=*/true);
}

TEST(BundledConfigs, HydraGnnLennardJonesExampleTrainsOneEpoch) {
  // HydraGNN's keys as shipped; graph_energy is the energy head: energy and conservative forces
  // are reported.
  TempDir dir;
  expect_one_epoch_with_forces(train_one_epoch("hydragnn_lj_example.json", dir, true),
                               dir.file("run"));
}

}  // namespace
}  // namespace ddgnn
