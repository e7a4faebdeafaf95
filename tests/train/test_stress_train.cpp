// Stress end to end through the `ddgnn` binary, on periodic Lennard-Jones cells whose stress is
// exact: predicted and reported whenever the data has it, trained with Architecture.stress_weight,
// written by evaluate; and each kind of bad input (no stress in the data, direct forces) as one
// clear error line.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/lj_dataset.h"
#include "../common/temp_dir.h"
#include "../common/train_run.h"

namespace ddgnn {
namespace {

namespace fs = std::filesystem;
using testing::last_event;
using testing::LjOptions;
using testing::read_text;
using testing::Result;
using testing::run;
using testing::small_config;
using testing::TempDir;
using testing::write_config;
using testing::write_lj_dataset;

LjOptions periodic_lj() {
  LjOptions o;
  o.periodic = true;
  o.n_frames = 60;
  return o;
}

nlohmann::json periodic_config(const std::string& data, const std::string& run_dir) {
  nlohmann::json c = small_config(data, run_dir);
  c["NeuralNetwork"]["Architecture"]["periodic_boundary_conditions"] = true;
  c["NeuralNetwork"]["Training"]["num_epoch"] = 10;
  return c;
}

std::vector<nlohmann::json> epoch_rows(const std::string& run_dir) {
  std::vector<nlohmann::json> rows;
  for (const auto& l : testing::lines(read_text(run_dir + "/events.jsonl"))) {
    nlohmann::json e = nlohmann::json::parse(l);
    if (e.at("event") == "epoch") rows.push_back(std::move(e));
  }
  return rows;
}

// The labels the tests train on: the trace of the LJ stress against the energy of the cell
// scaled by 1 ± h (positions and cell together), (E+ - E-) / 2h / V.
TEST(StressTrain, LennardJonesStressLabelsMatchTheEnergyUnderStrain) {
  Frame f;
  f.z = {18, 10, 18, 18, 10, 18};
  f.pos = {0.4, 0.6, 0.3, 4.1, 0.5, 0.7, 0.2, 4.3, 0.5,
           3.9, 4.0, 0.4, 0.5, 0.3, 4.0, 4.2, 0.6, 3.8};
  testing::lj_label(f, true, 7.0);
  ASSERT_TRUE(f.has_stress);
  const double h = 1e-6;
  double e[2];
  for (int k = 0; k < 2; ++k) {
    Frame g = f;
    const double s = 1 + (k ? -h : h);
    for (double& x : g.pos) x *= s;
    testing::lj_label(g, true, 7.0 * s);
    e[k] = g.energy;
  }
  const double fd = (e[0] - e[1]) / (2 * h) / (7.0 * 7.0 * 7.0);
  const double trace = f.stress[0] + f.stress[4] + f.stress[8];
  EXPECT_NEAR(trace, fd, 1e-6 * std::fabs(fd) + 1e-12);
  EXPECT_GT(std::fabs(trace), 1e-6);
  EXPECT_DOUBLE_EQ(f.stress[1], f.stress[3]);  // symmetric
}

TEST(StressTrain, PredictedAndReportedAlwaysTrainedWhenWeighted) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), periodic_lj());
  nlohmann::json c = periodic_config(dir.file("lj.h5"), dir.file("plain"));
  const Result plain = run("train -c " + write_config(dir, "a.json", c));
  ASSERT_EQ(plain.code, 0) << plain.out;
  EXPECT_NE(plain.out.find(" S "), std::string::npos) << plain.out;  // the epoch line has it
  // Every cell the same: the pressure is not in the energies, and the log says so.
  EXPECT_NE(plain.out.find("the same cell volume (343 Å³)"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("reported but not trained"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("the train split's mean stress): train"), std::string::npos)
      << plain.out;
  // Trained on the stress alone: only the strain derivative's gradient moves the weights.
  c["NeuralNetwork"]["Architecture"]["stress_weight"] = 1.0;
  c["NeuralNetwork"]["Architecture"]["energy_weight"] = 0.0;
  c["NeuralNetwork"]["Architecture"]["force_weight"] = 0.0;
  c["Output"]["run_dir"] = dir.file("stress");
  const Result trained = run("train -c " + write_config(dir, "b.json", c));
  ASSERT_EQ(trained.code, 0) << trained.out;
  EXPECT_NE(trained.out.find("stress MAE"), std::string::npos) << trained.out;  // the last line
  // Reported without being trained on; trained on alone, the loss and the stress error fall.
  const auto plain_rows = epoch_rows(dir.file("plain")), rows = epoch_rows(dir.file("stress"));
  ASSERT_EQ(rows.size(), 10u);
  EXPECT_GT(plain_rows.back().at("validate_stress_mae_mev_a3").get<double>(), 0.0);
  EXPECT_LT(rows.back().at("train_loss").get<double>(),
            0.6 * rows.front().at("train_loss").get<double>());
  const nlohmann::json best = last_event(dir.file("stress"), "run_end").at("best");
  EXPECT_LT(best.at("validate_stress_mae_mev_a3").get<double>(),
            0.8 * rows.front().at("validate_stress_mae_mev_a3").get<double>());
  const std::string header = read_text(dir.file("stress") + "/metrics.csv").substr(0, 2000);
  EXPECT_NE(header.find("test_stress_rmse_mev_a3"), std::string::npos);
  // evaluate: the stress of every graph and its errors.
  const Result e = run("evaluate --run " + dir.file("stress") + " --split all");
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("stress"), std::string::npos) << e.out;
  const nlohmann::json errors =
      nlohmann::json::parse(read_text(dir.file("stress") + "/eval_all/errors.json"));
  EXPECT_EQ(errors.at("stress").at("graphs").get<int>(), 60);
  EXPECT_GT(errors.at("stress").at("mae_gpa").get<double>(), 0.0);
  EXPECT_EQ(testing::lines(read_text(dir.file("stress") + "/eval_all/stress.csv")).size(), 61u);
  EXPECT_NE(read_text(dir.file("stress") + "/eval_all/predictions.extxyz").find("pred_stress=\""),
            std::string::npos);
}

// Training.stage_two: its weights from its epoch on, in the loss and the validation loss, the
// best checkpoint chosen afresh, and a resumed run inside stage two continuing it exactly.
TEST(StressTrain, StageTwoChangesTheWeightsFromItsEpoch) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), periodic_lj());
  nlohmann::json c = periodic_config(dir.file("lj.h5"), dir.file("one"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 4;
  ASSERT_EQ(run("train -c " + write_config(dir, "one.json", c)).code, 0);
  c["NeuralNetwork"]["Training"]["stage_two"] = {
      {"start_epoch", 3}, {"force_weight", 1000.0}, {"stress_weight", 1.0}};
  c["Output"]["run_dir"] = dir.file("two");
  const std::string two = write_config(dir, "two.json", c);
  const Result r = run("train -c " + two);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("stage two from epoch 3: loss weights energy 1, energy per atom 0, "
                       "forces 1000, stress 1"),
            std::string::npos)
      << r.out;
  const nlohmann::json event = last_event(dir.file("two"), "stage_two");
  EXPECT_EQ(event.at("epoch"), 3);
  EXPECT_EQ(event.at("force_weight"), 1000.0);
  const auto one = epoch_rows(dir.file("one")), rows = epoch_rows(dir.file("two"));
  ASSERT_EQ(one.size(), 4u);
  ASSERT_EQ(rows.size(), 4u);
  for (int e : {0, 1}) {  // stage one: the same run
    EXPECT_EQ(rows[e].at("train_loss"), one[e].at("train_loss")) << e;
    EXPECT_EQ(rows[e].at("validate_loss"), one[e].at("validate_loss")) << e;
  }
  // Force weight ×100: the loss with it, although the model has hardly changed.
  for (int e : {2, 3})
    EXPECT_GT(rows[e].at("validate_loss").get<double>(),
              20 * one[e].at("validate_loss").get<double>())
        << e;
  EXPECT_GE(last_event(dir.file("two"), "run_end").at("best_epoch").get<int>(), 3);
  // Stopped after epoch 3 and resumed: epoch 4 as in the run that went through.
  c["Output"]["run_dir"] = dir.file("resumed");
  const std::string resumed = write_config(dir, "resumed.json", c);
  ASSERT_EQ(run("train -c " + resumed + " --set Training.num_epoch=3").code, 0);
  const Result again = run("train -c " + resumed + " --set Training.continue=1");
  ASSERT_EQ(again.code, 0) << again.out;
  const auto cont = epoch_rows(dir.file("resumed"));
  ASSERT_EQ(cont.size(), 4u);
  EXPECT_EQ(cont[3].at("train_loss"), rows[3].at("train_loss"));
  EXPECT_EQ(cont[3].at("validate_loss"), rows[3].at("validate_loss"));
}

TEST(StressTrainBadInput, StageTwoThatCannotRun) {
  TempDir dir;
  write_lj_dataset(dir.file("cluster.h5"), LjOptions{});  // no cell: no stress
  nlohmann::json c = small_config(dir.file("cluster.h5"), dir.file("r"));
  nlohmann::json& t = c["NeuralNetwork"]["Training"];
  t["stage_two"] = {{"start_epoch", 3}, {"stress_weight", 1.0}};
  testing::expect_error(run("train -c " + write_config(dir, "a.json", c)),
                        "Training.stage_two.stress_weight: 1, but no graph of the train split");
  EXPECT_FALSE(fs::exists(dir.file("r") + "/checkpoints"));
  t["stage_two"] = {{"start_epoch", 1}, {"force_weight", 1.0}};
  testing::expect_error(run("train -c " + write_config(dir, "b.json", c)),
                        "NeuralNetwork.Training.stage_two.start_epoch");
  // Past the last epoch (a short trial of a long config): trained, with a warning.
  t["stage_two"] = {{"start_epoch", 9}, {"force_weight", 1.0}};
  const Result past = run("train -c " + write_config(dir, "e.json", c));
  ASSERT_EQ(past.code, 0) << past.out;
  EXPECT_NE(past.out.find("start_epoch 9 is past Training.num_epoch 4: stage two never starts"),
            std::string::npos)
      << past.out;
  EXPECT_FALSE(last_event(dir.file("r"), "stage_two").is_object());
  t["stage_two"] = {{"start_epoch", 2}, {"force_weight", 10.0}};  // the Architecture's
  testing::expect_error(run("train -c " + write_config(dir, "c.json", c)),
                        "stage two changes no loss weight");
  t["stage_two"] = {{"force_weight", 1.0}};
  testing::expect_error(run("train -c " + write_config(dir, "d.json", c)),
                        "Training.stage_two has weights but no start_epoch");
}

TEST(StressTrainBadInput, WeightWithoutStressOrWithDirectForces) {
  TempDir dir;
  write_lj_dataset(dir.file("cluster.h5"), LjOptions{});  // no cell: no stress
  nlohmann::json c = small_config(dir.file("cluster.h5"), dir.file("r"));
  c["NeuralNetwork"]["Architecture"]["stress_weight"] = 1.0;
  const Result none = run("train -c " + write_config(dir, "a.json", c));
  testing::expect_error(none, "stress_weight: 1, but no graph of the train split");
  EXPECT_NE(none.out.find("--stress-key"), std::string::npos) << none.out;
  EXPECT_FALSE(fs::exists(dir.file("r") + "/checkpoints"));
  // Periodic data with stress, but the cells ignored: no stress either.
  write_lj_dataset(dir.file("lj.h5"), periodic_lj());
  c["Dataset"]["path"] = dir.file("lj.h5");
  testing::expect_error(run("train -c " + write_config(dir, "b.json", c)),
                        "periodic_boundary_conditions is false");
  // Direct forces: no energy to differentiate.
  nlohmann::json d = periodic_config(dir.file("lj.h5"), dir.file("d"));
  d["NeuralNetwork"]["Architecture"]["stress_weight"] = 1.0;
  d["NeuralNetwork"]["Architecture"]["enable_interatomic_potential"] = false;
  d["NeuralNetwork"]["Variables_of_interest"] = {{"output_names", {"energy", "forces"}},
                                                 {"output_index", {0, 0}},
                                                 {"type", {"graph", "node"}},
                                                 {"output_dim", {1, 3}}};
  testing::expect_error(run("train -c " + write_config(dir, "d.json", d)),
                        "stress_weight: the stress is (1/V) dE/dε of the energy");
}

}  // namespace
}  // namespace ddgnn
