// Dataset.e0s end to end through the `ddgnn` binary: isolated-atom reference energies given in
// the config replace the least-squares fit (the baseline says so, the checkpoint keeps them), and
// each kind of bad value is one clear error line.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "../common/lj_dataset.h"
#include "../common/temp_dir.h"
#include "../common/train_run.h"
#include "train/checkpoint.h"
#include "train/model_setup.h"

namespace ddgnn {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::LjOptions;
using testing::Result;
using testing::run;
using testing::small_config;
using testing::TempDir;
using testing::write_config;
using testing::write_lj_dataset;

TEST(E0s, GivenEnergiesReplaceTheFitAndStayWithTheModel) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});  // Ar (Z 18) and Ne (Z 10)
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("r"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 1;
  c["Dataset"]["e0s"] = {{"Ar", -1.25}, {"10", -0.5}};  // by symbol and by atomic number
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("baseline (Dataset.e0s"), std::string::npos) << r.out;
  const ModelSetup setup = model_setup_from_json(
      read_checkpoint_record(dir.file("r") + "/checkpoints/epoch_00001.pt").at("model"));
  EXPECT_TRUE(setup.norm.e0s_given);
  EXPECT_EQ(setup.norm.reference_energy[18], -1.25);
  EXPECT_EQ(setup.norm.reference_energy[10], -0.5);
  // Without them: the fit, which is neither.
  c["Dataset"].erase("e0s");
  c["Output"]["run_dir"] = dir.file("fit");
  ASSERT_EQ(run("train -c " + write_config(dir, "d.json", c)).code, 0);
  const ModelSetup fit = model_setup_from_json(
      read_checkpoint_record(dir.file("fit") + "/checkpoints/epoch_00001.pt").at("model"));
  EXPECT_FALSE(fit.norm.e0s_given);
  EXPECT_NE(fit.norm.reference_energy[18], -1.25);
}

TEST(E0sBadInput, MissingElementUnknownElementAndNotANumber) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("r"));
  c["Dataset"]["e0s"] = {{"Ar", -1.5}};
  expect_error(run("train -c " + write_config(dir, "a.json", c)),
               "Dataset.e0s has no reference energy for Ne");
  EXPECT_FALSE(fs::exists(dir.file("r") + "/checkpoints/epoch_00001.pt"));
  c["Dataset"]["e0s"] = {{"Ar", -1.5}, {"Xx", -0.7}};
  expect_error(run("train -c " + write_config(dir, "b.json", c)),
               "Dataset.e0s: \"Xx\" is not an element");
  c["Dataset"]["e0s"] = {{"Ar", "-1.5"}, {"Ne", -0.7}};
  expect_error(run("train -c " + write_config(dir, "c.json", c)), "Dataset.e0s.Ar");
}

}  // namespace
}  // namespace ddgnn
