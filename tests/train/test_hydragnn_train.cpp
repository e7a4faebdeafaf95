// HydraGNN's configs trained end to end on small Lennard-Jones sets: its head names bound to the
// data (graph_energy the energy, force the forces) and its compositional stratified split.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "../common/lj_dataset.h"
#include "../common/temp_dir.h"
#include "../common/train_run.h"

namespace ddgnn {
namespace {

using testing::expect_error;
using testing::last_event;
using testing::lines;
using testing::LjOptions;
using testing::read_text;
using testing::Result;
using testing::run;
using testing::small_config;
using testing::TempDir;
using testing::write_config;
using testing::write_lj_dataset;

TEST(TrainHydraGnn, GraphEnergyAndForceHeadsAreTheEnergyAndTheForces) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("run"));
  c["NeuralNetwork"]["Architecture"]["enable_interatomic_potential"] = false;
  c["NeuralNetwork"]["Variables_of_interest"] = {{"output_names", {"graph_energy", "force"}},
                                                 {"output_index", {0, 0}},
                                                 {"type", {"graph", "node"}},
                                                 {"output_dim", {1, 3}}};
  c["NeuralNetwork"]["Training"]["num_epoch"] = 1;
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string header = lines(read_text(dir.file("run") + "/metrics.csv")).at(0);
  EXPECT_NE(header.find("test_energy_mae_mev_atom"), std::string::npos) << header;
  EXPECT_NE(header.find("test_force_mae_mev_a"), std::string::npos) << header;

  // With the interatomic potential the forces are -dE/dx: a force head is one too many.
  nlohmann::json d = c;
  d["NeuralNetwork"]["Architecture"]["enable_interatomic_potential"] = true;
  d["NeuralNetwork"]["Variables_of_interest"]["type"] = {"node", "node"};
  d["Output"]["run_dir"] = dir.file("run_d");
  expect_error(run("train -c " + write_config(dir, "d.json", d)), "head 'force' is redundant");
}

TEST(TrainHydraGnn, CompositionalStratifiedSplitSplitsEachComposition) {
  TempDir dir;
  LjOptions o;
  o.n_frames = 42;
  o.vary_atoms = 1;  // frames of 6 and 7 atoms alternating: two compositions of 21 frames
  write_lj_dataset(dir.file("lj.h5"), o);
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("run"));
  c["Dataset"]["compositional_stratified_splitting"] = true;
  c["NeuralNetwork"]["Training"]["num_epoch"] = 1;
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("split by frame, stratified by composition"), std::string::npos) << r.out;
  // perc_train 0.6 of each 21: 13 to training, 4 and 4 (by frame over all 42: 25, 8, 9).
  const nlohmann::json graphs = last_event(dir.file("run"), "run_start").at("graphs");
  EXPECT_EQ(graphs.at("train"), 26) << graphs;
  EXPECT_EQ(graphs.at("validate"), 8) << graphs;
  EXPECT_EQ(graphs.at("test"), 8) << graphs;
}

}  // namespace
}  // namespace ddgnn
