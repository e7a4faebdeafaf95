// `ddgnn train` through a loss spike (train/spikes.h): a training set holding one mislabelled,
// overlapping structure (two atoms 0.05 Å apart, 50 eV too high) trains to the end with the batch
// that holds it skipped in every epoch, counted in metrics.csv, named in the log and events, the
// weights finite and the validation loss as on the set without it; with the guard off the same
// set trains to errors several times larger. On two ranks every rank skips the same steps.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "../common/lj_dataset.h"
#include "../common/temp_dir.h"
#include "../common/train_run.h"

namespace ddgnn {
namespace {

using testing::Result;
using testing::TempDir;

constexpr int kEpochs = 8;
constexpr int kBadFrame = 37;  // in the training split of seed 3

nlohmann::json spike_config(const std::string& data, const std::string& run_dir) {
  nlohmann::json c = testing::small_config(data, run_dir);
  c["Dataset"]["allow_outliers"] = true;  // the overlapping structure is an outlier
  auto& t = c["NeuralNetwork"]["Training"];
  t["num_epoch"] = kEpochs;
  t["perc_train"] = 0.8;
  t["Scheduler"]["patience"] = 2;
  return c;
}

testing::LjOptions spike_data(bool bad) {
  testing::LjOptions o;
  o.n_frames = 200;
  if (bad) o.overlapping_frame = kBadFrame;
  return o;
}

double last(const std::string& run_dir, const std::string& column) {
  return testing::last_metric(run_dir + "/metrics.csv", column);
}

double sum(const std::string& run_dir, const std::string& column) {
  double s = 0;
  for (double v : testing::metric_numbers(run_dir + "/metrics.csv", column)) s += v;
  return s;
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(SpikeTrain, AnExplodingBatchIsSkippedAndTrainingEndsAsWithoutIt) {
  TempDir dir;
  testing::write_lj_dataset(dir.file("clean.h5"), spike_data(false));
  testing::write_lj_dataset(dir.file("bad.h5"), spike_data(true));
  const std::string clean = dir.file("clean"), guarded = dir.file("guarded"), off = dir.file("off");
  const std::string cfg =
      testing::write_config(dir, "c.json", spike_config(dir.file("clean.h5"), clean));
  const std::string bad = " --set Dataset.path=" + dir.file("bad.h5");
  const Result rc = testing::run("train -c " + cfg);
  ASSERT_EQ(rc.code, 0) << rc.out;
  const Result rg = testing::run("train -c " + cfg + bad + " --set Output.run_dir=" + guarded);
  ASSERT_EQ(rg.code, 0) << rg.out;
  const Result ro = testing::run("train -c " + cfg + bad + " --set Output.run_dir=" + off +
                                 " --set Training.spike_factor=0");
  ASSERT_EQ(ro.code, 0) << ro.out;

  // The bad batch once an epoch, skipped: counted, logged with its graphs and why, in events.
  EXPECT_EQ(sum(clean, "skipped_steps"), 0.0);
  EXPECT_EQ(sum(off, "skipped_steps"), 0.0);
  const double skipped = sum(guarded, "skipped_steps");
  EXPECT_GE(skipped, kEpochs - 1) << rg.out;
  EXPECT_LE(skipped, kEpochs) << rg.out;
  EXPECT_NE(rg.out.find("skipped epoch 2 step"), std::string::npos) << rg.out;
  EXPECT_NE(rg.out.find("Training.spike_factor 20 times the median"), std::string::npos) << rg.out;
  EXPECT_NE(rg.out.find("," + std::to_string(kBadFrame) + ","), std::string::npos) << rg.out;
  EXPECT_EQ(count(testing::read_text(guarded + "/events.jsonl"), "\"event\":\"skipped_step\""),
            int(skipped));
  const nlohmann::json event = testing::last_event(guarded, "skipped_step");
  ASSERT_FALSE(event.is_null());
  EXPECT_GT(event.at("loss").get<double>(), 100.0);
  EXPECT_NE(event.at("graphs").get<std::string>().find(std::to_string(kBadFrame)),
            std::string::npos);

  // The weights finite, and the validation loss and force error as without the bad structure
  // (within what its skipped batch-mates make); without the guard several times larger. The energy
  // error is not compared with the clean set's: the 50 eV also moves the fitted mean energy per
  // atom that every prediction starts from.
  for (const auto& p : testing::checkpoint_parameters(guarded + "/checkpoints/epoch_0000" +
                                                      std::to_string(kEpochs) + ".pt"))
    EXPECT_TRUE(p.isfinite().all().item<bool>());
  for (const char* column :
       {"validate_loss", "validate_force_mae_mev_a", "validate_energy_mae_mev_atom"}) {
    SCOPED_TRACE(column);
    const double c = last(clean, column), g = last(guarded, column), o = last(off, column);
    if (std::string(column) != "validate_energy_mae_mev_atom") {
      EXPECT_LT(g, 1.5 * c) << rg.out;
    }
    EXPECT_GT(o, 2.0 * g) << ro.out;
  }
}

// Two ranks: the rank whose part holds the bad structure differentiates nan, so every rank's
// summed gradient rejects the step; the parameters stay identical (checked every step).
TEST(SpikeTrain, EveryRankSkipsTheSameSteps) {
  TempDir dir;
  testing::write_lj_dataset(dir.file("bad.h5"), spike_data(true));
  const std::string run_dir = dir.file("run");
  nlohmann::json c = spike_config(dir.file("bad.h5"), run_dir);
  c["NeuralNetwork"]["Training"]["num_epoch"] = 3;
  c["Comm"]["check_parameters_every"] = 1;
  const std::string cfg = testing::write_config(dir, "c.json", c);
  const Result r = testing::run(
      "train -c " + cfg, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 " +
                             std::string(DDGNN_MPIEXEC) + " -n 2 --oversubscribe");
  ASSERT_EQ(r.code, 0) << r.out;
  const double skipped = sum(run_dir, "skipped_steps");
  EXPECT_GE(skipped, 2.0) << r.out;
  EXPECT_LE(skipped, 3.0) << r.out;
  for (const auto& p : testing::checkpoint_parameters(run_dir + "/checkpoints/epoch_00003.pt"))
    EXPECT_TRUE(p.isfinite().all().item<bool>());
}

}  // namespace
}  // namespace ddgnn
