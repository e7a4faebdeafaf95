// HydraGNN's configs trained end to end on small Lennard-Jones sets: its head names bound to the
// data (graph_energy the energy, force the forces), heads bound by output_index to the entries of
// Dataset.node_features / graph_features, its compositional stratified split, graph heads of
// per-structure keys, per-atom inputs and multi-branch heads.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/lj_dataset.h"
#include "../common/temp_dir.h"
#include "../common/train_run.h"
#include "loader/dataset.h"
#include "train/checkpoint.h"

namespace ddgnn {
namespace {

using testing::expect_error;
using testing::last_event;
using testing::last_metric;
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

// A graph head whose target is a per-structure key of the data (convert --info-keys), as
// HydraGNN's configs that predict a gap or a spectrum: trained, reported, written by evaluate.
TEST(TrainHydraGnn, GraphHeadLearnsAPerStructureKeyAndEvaluateWritesIt) {
  TempDir dir;
  LjOptions o;
  o.gap = true;
  o.vary_atoms = 1;  // 6 and 7 atoms: the neon fraction (gap's second number) varies
  write_lj_dataset(dir.file("lj.h5"), o);
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("run"));
  c["NeuralNetwork"]["Architecture"]["enable_interatomic_potential"] = false;
  c["NeuralNetwork"]["Architecture"]["task_weights"] = {1.0, 10.0};
  c["NeuralNetwork"]["Variables_of_interest"] = {{"output_names", {"energy", "gap"}},
                                                 {"output_index", {0, 1}},
                                                 {"type", {"graph", "graph"}},
                                                 {"output_dim", {1, 2}}};
  c["NeuralNetwork"]["Training"]["num_epoch"] = 80;
  c["NeuralNetwork"]["Training"]["Optimizer"]["learning_rate"] = 0.01;
  c["NeuralNetwork"]["Training"]["Scheduler"] = {{"type", "none"}};
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string csv = dir.file("run") + "/metrics.csv";
  const std::vector<double> gap = testing::metric_numbers(csv, "train_gap_mae");
  ASSERT_EQ(gap.size(), 80u);
  EXPECT_EQ(testing::metric_column(csv, "test_gap_rmse").size(), 80u);
  // The head learns the key: its error halves (at a constant rate of 0.01 it then wanders, the
  // energy head sharing the layers), and ends below where it began.
  EXPECT_LT(*std::min_element(gap.begin(), gap.end()), 0.5 * gap.front())
      << "train gap MAE " << gap.front() << " -> " << gap.back();
  EXPECT_LT(gap.back(), gap.front()) << "train gap MAE " << gap.front() << " -> " << gap.back();

  // evaluate writes the reference and the prediction on each frame's comment line, which
  // `convert --info-keys` reads back.
  const Result ev = run("evaluate --run " + dir.file("run"));
  ASSERT_EQ(ev.code, 0) << ev.out;
  const auto errors =
      nlohmann::json::parse(read_text(dir.file("run") + "/eval_test/errors.json")).at("heads");
  EXPECT_EQ(errors.at("gap").at("values"), 2 * 8);  // 8 test graphs, 2 numbers each
  EXPECT_GT(errors.at("gap").at("mae").get<double>(), 0.0);
  EXPECT_GE(errors.at("gap").at("rmse").get<double>(), errors.at("gap").at("mae").get<double>());
  const std::string xyz = read_text(dir.file("run") + "/eval_test/predictions.extxyz");
  EXPECT_NE(xyz.find(" gap=\""), std::string::npos);
  EXPECT_NE(xyz.find(" pred_gap=\""), std::string::npos);
  const Result conv = run("convert " + dir.file("run") + "/eval_test/predictions.extxyz " +
                          dir.file("pred.h5") + " --info-keys gap,pred_gap");
  ASSERT_EQ(conv.code, 0) << conv.out;
  const Dataset pred(dir.file("pred.h5"));
  ASSERT_EQ(pred.graph_columns().size(), 2u);
  EXPECT_EQ(pred.graph_columns()[1].name, "pred_gap");
  EXPECT_EQ(pred.graph_columns()[1].n_cols, 2);

  // A model of that head alone (no energy, no forces: HydraGNN's configs that predict a gap or a
  // bulk modulus) trains too.
  nlohmann::json alone = c;
  alone["NeuralNetwork"]["Architecture"]["task_weights"] = {1.0};
  alone["NeuralNetwork"]["Variables_of_interest"] = {
      {"output_names", {"gap"}}, {"output_index", {0}}, {"type", {"graph"}}, {"output_dim", {2}}};
  alone["NeuralNetwork"]["Training"]["num_epoch"] = 2;
  alone["Output"]["run_dir"] = dir.file("run_alone");
  const Result ra = run("train -c " + write_config(dir, "alone.json", alone));
  ASSERT_EQ(ra.code, 0) << ra.out;
  EXPECT_EQ(lines(read_text(dir.file("run_alone") + "/metrics.csv")).size(), 3u);

  // The key is per structure: a node head of that name, or another width, is refused.
  nlohmann::json d = c;
  d["NeuralNetwork"]["Variables_of_interest"]["type"] = {"graph", "node"};
  d["Output"]["run_dir"] = dir.file("run_d");
  expect_error(run("train -c " + write_config(dir, "d.json", d)),
               "head 'gap' is a per-structure key of 2 value(s): it must be type \"graph\" "
               "with output_dim 2");
  // A head the data lacks names both ways to store it.
  d["NeuralNetwork"]["Variables_of_interest"]["output_names"] = {"energy", "homo"};
  const Result lacks = run("train -c " + write_config(dir, "d2.json", d));
  expect_error(lacks, "head 'homo' is not in the data");
  EXPECT_NE(lacks.out.find("gap (graph, 2)"), std::string::npos) << lacks.out;
  EXPECT_NE(lacks.out.find("--info-keys homo"), std::string::npos) << lacks.out;
}

// The line of `out` that holds `needle` (empty when none): a refusal is one line, with its hint.
std::string line_with(const std::string& out, const std::string& needle) {
  for (const std::string& l : lines(out))
    if (l.find(needle) != std::string::npos) return l;
  return "";
}

// HydraGNN binds heads by output_index to the entries of Dataset.node_features / graph_features:
// heads named as HydraGNN's examples name them (atomic_forces: direct forces; total_energy; y, a
// per-atom column) train on the entries they select, the checkpoint records what each learns,
// and evaluate reads it by the entry's name. An index that selects what the file lacks stops the
// run before training, in one line naming the head, its index, the entry and what the file holds.
TEST(TrainHydraGnn, HeadsBoundByOutputIndexTrainOnTheEntriesTheySelect) {
  TempDir dir;
  LjOptions o;
  o.charges = true;
  o.gap = true;
  write_lj_dataset(dir.file("lj.h5"), o);
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("run"));
  c["NeuralNetwork"]["Architecture"]["enable_interatomic_potential"] = false;
  c["Dataset"]["node_features"] = {{"name", {"atom_type", "x", "y", "z", "forces", "charges"}},
                                   {"dim", {1, 1, 1, 1, 3, 1}},
                                   {"column_index", {0, 1, 2, 3, 4, 7}}};
  c["Dataset"]["graph_features"] = {{"name", {"total_energy", "gap"}}, {"dim", {1, 2}}};
  c["NeuralNetwork"]["Variables_of_interest"] = {
      {"input_node_features", {0, 1, 2, 3}},
      {"output_names", {"total_energy", "atomic_forces", "y"}},
      {"output_index", {0, 4, 5}},
      {"type", {"graph", "node", "node"}}};  // output_dim: the entries' dims
  c["NeuralNetwork"]["Training"]["num_epoch"] = 1;
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string csv = dir.file("run") + "/metrics.csv";
  const std::string header = lines(read_text(csv)).at(0);
  EXPECT_NE(header.find("test_energy_mae_mev_atom"), std::string::npos) << header;
  EXPECT_NE(header.find("test_y_mae"), std::string::npos) << header;
  const double force_mae = last_metric(csv, "test_force_mae_mev_a");
  EXPECT_GT(force_mae, 0.0);
  EXPECT_LT(force_mae, 1e6);
  EXPECT_GT(last_metric(csv, "test_y_mae"), 0.0);
  const nlohmann::json targets =
      read_checkpoint_record(dir.file("run") + "/checkpoints/epoch_00001.pt")
          .at("model")
          .at("targets");
  ASSERT_EQ(targets.size(), 3u);
  EXPECT_EQ(targets[0].at("source"), "energy");
  EXPECT_EQ(targets[1].at("source"), "forces");
  EXPECT_EQ(targets[1].at("data_name"), "forces");
  EXPECT_EQ(targets[1].at("output_dim"), 3);
  EXPECT_EQ(targets[2].at("source"), "column");
  EXPECT_EQ(targets[2].at("data_name"), "charges");
  // evaluate finds the column of head 'y' by the entry's name, in this file and another.
  const Result ev = run("evaluate --run " + dir.file("run"));
  ASSERT_EQ(ev.code, 0) << ev.out;
  const auto errors = nlohmann::json::parse(read_text(dir.file("run") + "/eval_test/errors.json"));
  EXPECT_GT(errors.at("heads").at("y").at("mae").get<double>(), 0.0) << errors.dump();
  EXPECT_GT(errors.at("forces").at("mae_mev_a").get<double>(), 0.0) << errors.dump();
  LjOptions other = o;
  other.gap = false;
  other.seed = 7;
  write_lj_dataset(dir.file("other.h5"), other);
  const Result ev_other = run("evaluate --run " + dir.file("run") + " --data " +
                              dir.file("other.h5") + " --split all --out " + dir.file("ev_other"));
  ASSERT_EQ(ev_other.code, 0) << ev_other.out;

  const auto refused = [&](const nlohmann::json& config, const std::string& name,
                           const std::string& needle, const std::string& also) {
    const Result bad = run("train -c " + write_config(dir, name, config));
    expect_error(bad, needle);
    const std::string line = line_with(bad.out, needle);
    EXPECT_NE(line.find("hint:"), std::string::npos) << bad.out;
    EXPECT_NE(line.find(also), std::string::npos) << bad.out;
  };
  // A per-structure entry the file lacks.
  nlohmann::json d = c;
  d["Dataset"]["graph_features"] = {{"name", {"total_energy", "homo"}}, {"dim", {1, 1}}};
  d["NeuralNetwork"]["Variables_of_interest"]["output_names"] = {"total_energy", "atomic_forces",
                                                                 "band"};
  d["NeuralNetwork"]["Variables_of_interest"]["output_index"] = {0, 4, 1};
  d["NeuralNetwork"]["Variables_of_interest"]["type"] = {"graph", "node", "graph"};
  d["Output"]["run_dir"] = dir.file("run_d");
  refused(d, "d.json",
          "Variables_of_interest.output_index: head 'band' (output_index 1: "
          "Dataset.graph_features entry 'homo', dim 1) is not in the data",
          dir.file("lj.h5") +
              " holds: energy (graph, 1), forces (node, 3), charges (node, 1), gap (graph, 2); "
              "convert the data with --info-keys homo");
  EXPECT_FALSE(std::filesystem::exists(dir.file("run_d") + "/metrics.csv"));
  // An entry of another width than the file's column.
  d["Dataset"]["graph_features"] = {{"name", {"total_energy", "gap"}}, {"dim", {1, 1}}};
  refused(d, "d2.json",
          "head 'band' (output_index 1: Dataset.graph_features entry 'gap', dim 1): the "
          "per-structure key 'gap' of " +
              dir.file("lj.h5") + " has 2 value(s)",
          "write dim 2 for 'gap'");
  // The forces, in a file without them.
  LjOptions no_forces = o;
  no_forces.forces = false;
  write_lj_dataset(dir.file("no_forces.h5"), no_forces);
  nlohmann::json f = c;
  f["Dataset"]["path"] = dir.file("no_forces.h5");
  f["NeuralNetwork"]["Variables_of_interest"]["input_node_features"] = {0};
  f["Output"]["run_dir"] = dir.file("run_f");
  refused(f, "f.json",
          "output_index: head 'atomic_forces' (output_index 4: Dataset.node_features entry "
          "'forces', dim 3): " +
              dir.file("no_forces.h5") + " has no forces",
          "holds: energy (graph, 1), charges (node, 1)");
  // A per-atom input whose entry is not the data's column there.
  nlohmann::json in = c;
  in["Dataset"]["node_features"]["name"] = {"atom_type", "x", "y", "z", "forces", "q"};
  in["NeuralNetwork"]["Variables_of_interest"] = {{"input_node_features", {0, 7}},
                                                  {"output_names", {"total_energy"}},
                                                  {"output_index", {0}},
                                                  {"type", {"graph"}}};
  in["Output"]["run_dir"] = dir.file("run_in");
  refused(in, "in.json",
          "input_node_features: column 7 is Dataset.node_features entry 'q', but the data's "
          "column 7 is 'charges'",
          "describe them in that order in Dataset.node_features");
}

// input_node_features after the positions read the data's per-atom columns, numbered as
// HydraGNN numbers them (4-6 the forces, then the extra columns): a model with a per-atom input
// trains, its checkpoint records where the input comes from, and evaluate reads it the same way.
TEST(TrainHydraGnn, InputNodeFeaturesAfterThePositionsAreTheDatasPerAtomColumns) {
  TempDir dir;
  LjOptions o;
  o.charges = true;
  write_lj_dataset(dir.file("lj.h5"), o);
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("run"));
  c["NeuralNetwork"]["Variables_of_interest"]["input_node_features"] = {0, 1, 2, 3, 7};
  c["NeuralNetwork"]["Training"]["num_epoch"] = 2;
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json model =
      read_checkpoint_record(dir.file("run") + "/checkpoints/epoch_00002.pt").at("model");
  EXPECT_EQ(model.at("spec").at("node_inputs"), 1);
  EXPECT_EQ(model.at("node_inputs").at("sources"), nlohmann::json::parse("[[0, 0]]"));
  const double std = model.at("node_inputs").at("std")[0].get<double>();
  EXPECT_GT(std, 0.01);  // the charges' spread over the training split, not the 1.0 fallback
  EXPECT_LT(std, 0.5);
  EXPECT_EQ(model.at("node_inputs").at("names"), nlohmann::json::parse("[\"charges\"]"));
  const Result ev = run("evaluate --run " + dir.file("run"));
  ASSERT_EQ(ev.code, 0) << ev.out;
  // Another file is read by column name; one without the input is refused, naming it.
  LjOptions more = o;
  more.gap = true;  // a per-structure column before nothing else: the same charges by name
  more.seed = 5;
  write_lj_dataset(dir.file("more.h5"), more);
  const Result other = run("evaluate --run " + dir.file("run") + " --data " + dir.file("more.h5") +
                           " --split all --out " + dir.file("ev_more"));
  ASSERT_EQ(other.code, 0) << other.out;
  write_lj_dataset(dir.file("plain.h5"), LjOptions{});
  const Result plain = run("evaluate --run " + dir.file("run") + " --data " + dir.file("plain.h5") +
                           " --split all --out " + dir.file("ev_plain"));
  expect_error(plain, "the model reads per-atom input 'charges'");
  EXPECT_NE(plain.out.find("the file holds forces (3)"), std::string::npos) << plain.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("ev_plain")));

  // A column the data lacks names the columns it has; a force as input of a force model is
  // refused.
  c["NeuralNetwork"]["Variables_of_interest"]["input_node_features"] = {0, 8};
  c["Output"]["run_dir"] = dir.file("run_b");
  const Result lacks = run("train -c " + write_config(dir, "b.json", c));
  expect_error(lacks, "input_node_features: column 8 is not in the data");
  EXPECT_NE(lacks.out.find("4-6 the forces, 7 charges"), std::string::npos) << lacks.out;
  EXPECT_NE(lacks.out.find("--extra-columns"), std::string::npos) << lacks.out;
  c["NeuralNetwork"]["Variables_of_interest"]["input_node_features"] = {0, 5};
  expect_error(run("train -c " + write_config(dir, "f.json", c)),
               "column 5 is a force component, which this model also predicts");
}

// Multi-branch node heads, `n` branches of `node`, trained 30 epochs at a constant rate.
void set_branch_heads(nlohmann::json& c, const nlohmann::json& node, int n) {
  nlohmann::json branches = nlohmann::json::array();
  for (int b = 0; b < n; ++b)
    branches.push_back({{"type", "branch-" + std::to_string(b)}, {"architecture", node}});
  c["NeuralNetwork"]["Architecture"]["output_heads"] = {{"node", branches}};
  c["NeuralNetwork"]["Architecture"]["force_weight"] = 1.0;
  c["NeuralNetwork"]["Training"]["num_epoch"] = 30;
  c["NeuralNetwork"]["Training"]["Optimizer"]["learning_rate"] = 0.01;
  c["NeuralNetwork"]["Training"]["Scheduler"] = {{"type", "none"}};
}

// Multi-branch heads (HydraGNN's foundation-model format): two data sets of the same structures
// whose energies differ by 0.3 eV per atom, told apart by the per-structure key dataset_name. A
// model with a branch for each learns both; the same model with one branch cannot tell them
// apart, unless it is conditioned on each structure's attributes (graph_attr). A value that names
// no branch stops training before it starts; data without the key trains every structure through
// branch 0, with a warning.
TEST(TrainHydraGnn, MultiBranchHeadsLearnEachDataSetThroughItsBranch) {
  TempDir dir;
  LjOptions o;
  o.branches = 2;
  write_lj_dataset(dir.file("two.h5"), o);
  nlohmann::json c = small_config(dir.file("two.h5"), dir.file("run"));
  const nlohmann::json node = {{"num_headlayers", 1}, {"dim_headlayers", {8}}, {"type", "mlp"}};
  set_branch_heads(c, node, 2);
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("branches of the heads (dataset_name), train graphs: 0: "),
            std::string::npos)
      << r.out;
  nlohmann::json one = c;
  one["NeuralNetwork"]["Architecture"]["output_heads"] = {{"node", node}};
  one["Output"]["run_dir"] = dir.file("run_one");
  const Result r1 = run("train -c " + write_config(dir, "one.json", one));
  ASSERT_EQ(r1.code, 0) << r1.out;
  const double two_mae = last_metric(dir.file("run") + "/metrics.csv", "train_energy_mae_mev_atom");
  const double one_mae =
      last_metric(dir.file("run_one") + "/metrics.csv", "train_energy_mae_mev_atom");
  // One branch: about half of the 300 meV/atom between the data sets.
  EXPECT_GT(one_mae, 80.0);
  EXPECT_LT(two_mae, 0.25 * one_mae) << "two branches " << two_mae << ", one " << one_mae;

  // One branch conditioned on each structure's attributes (the data set's number among them, as
  // HydraGNN's charge and spin): it tells the data sets apart too.
  LjOptions attr = o;
  attr.graph_attr = true;
  write_lj_dataset(dir.file("attr.h5"), attr);
  nlohmann::json cond = one;
  cond["Dataset"]["path"] = dir.file("attr.h5");
  cond["NeuralNetwork"]["Architecture"]["use_graph_attr_conditioning"] = true;
  cond["Output"]["run_dir"] = dir.file("run_cond");
  const Result rc = run("train -c " + write_config(dir, "cond.json", cond));
  ASSERT_EQ(rc.code, 0) << rc.out;
  const double cond_mae =
      last_metric(dir.file("run_cond") + "/metrics.csv", "train_energy_mae_mev_atom");
  EXPECT_LT(cond_mae, 0.25 * one_mae) << "conditioned " << cond_mae << ", one branch " << one_mae;
  const Result cev = run("evaluate --run " + dir.file("run_cond"));
  ASSERT_EQ(cev.code, 0) << cev.out;
  // Data without the attributes: refused before training, naming the key and how to store it.
  cond["Dataset"]["path"] = dir.file("two.h5");
  cond["Output"]["run_dir"] = dir.file("run_cond_bad");
  const Result rcb = run("train -c " + write_config(dir, "cond_bad.json", cond));
  expect_error(rcb, "use_graph_attr_conditioning: " + dir.file("two.h5") +
                        " has no per-structure key graph_attr");
  EXPECT_NE(rcb.out.find("--info-keys graph_attr"), std::string::npos) << rcb.out;

  // evaluate routes each structure through its branch too.
  const Result ev = run("evaluate --run " + dir.file("run"));
  ASSERT_EQ(ev.code, 0) << ev.out;
  const auto errors = nlohmann::json::parse(read_text(dir.file("run") + "/eval_test/errors.json"));
  EXPECT_LT(errors.at("energy").at("mae_mev_atom").get<double>(), 0.5 * one_mae) << errors.dump();

  // Four data sets for two branches: refused before the first epoch, naming a structure.
  LjOptions four = o;
  four.branches = 4;
  write_lj_dataset(dir.file("four.h5"), four);
  nlohmann::json bad = c;
  bad["Dataset"]["path"] = dir.file("four.h5");
  bad["Output"]["run_dir"] = dir.file("run_bad");
  const Result rb = run("train -c " + write_config(dir, "bad.json", bad));
  expect_error(rb, "structure(s) name no branch of the heads in dataset_name (graph ");
  EXPECT_NE(rb.out.find("the branches are 0 to 1"), std::string::npos) << rb.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("run_bad") + "/metrics.csv"));

  // No dataset_name: every structure through branch 0, said in a warning.
  write_lj_dataset(dir.file("plain.h5"), LjOptions{});
  nlohmann::json plain = c;
  plain["Dataset"]["path"] = dir.file("plain.h5");
  plain["NeuralNetwork"]["Training"]["num_epoch"] = 1;
  plain["Output"]["run_dir"] = dir.file("run_plain");
  const Result rp = run("train -c " + write_config(dir, "plain.json", plain));
  ASSERT_EQ(rp.code, 0) << rp.out;
  EXPECT_NE(rp.out.find("has no per-structure key dataset_name: every structure goes through "
                        "branch-0"),
            std::string::npos)
      << rp.out;
}

// Dataset.path as a list (HydraGNN's multi-dataset training): three files of other structures
// whose energies differ by 0.3 eV per atom from one file to the next (three levels of theory), each
// split on its own, one model with a branch per file (dataset_name: the file's place in the list).
// Three branches learn what one cannot; evaluate of a file of the list takes its split and branch
// from the run; files that cannot train one model are refused by place.
TEST(TrainHydraGnn, AListOfFilesTrainsOneModelWithABranchPerFile) {
  TempDir dir;
  const std::vector<int> frames = {40, 30, 50};
  std::vector<std::string> paths;
  for (int f = 0; f < 3; ++f) {
    LjOptions o;
    o.n_frames = frames[size_t(f)];
    o.seed = unsigned(11 + f);
    o.n_atoms = 5;
    o.vary_atoms = 2;  // clusters of 5 to 7 atoms in each: the sizes do not tell the files apart
    o.energy_shift = 0.3 * f;
    paths.push_back(dir.file("part" + std::to_string(f) + ".h5"));
    write_lj_dataset(paths.back(), o);
  }
  nlohmann::json c = small_config(paths[0], dir.file("run"));
  c["Dataset"]["path"] = {paths[0], {{"path", paths[1]}, {"name", "second"}}, paths[2]};
  c["Dataset"]["allow_outliers"] = true;  // random clusters: convert flags a few as outliers
  const nlohmann::json node = {{"num_headlayers", 1}, {"dim_headlayers", {8}}, {"type", "mlp"}};
  set_branch_heads(c, node, 3);
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  // Each file split on its own (perc_train 0.6, the rest halved): 24 + 18 + 30 to training.
  const nlohmann::json graphs = last_event(dir.file("run"), "run_start").at("graphs");
  EXPECT_EQ(graphs.at("train"), 72) << graphs;
  EXPECT_EQ(graphs.at("validate").get<int>() + graphs.at("test").get<int>(), 48) << graphs;
  EXPECT_NE(r.out.find("branches of the heads (dataset_name), train graphs: 0: 24 1: 18 2: 30"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("3 files (" + paths[0] + ", " + paths[1] + ", " + paths[2] + ")"),
            std::string::npos)
      << r.out;
  // The checkpoint names the files with their names and identities.
  const nlohmann::json files =
      read_checkpoint_record(dir.file("run") + "/checkpoints/best.pt").at("split").at("files");
  ASSERT_EQ(files.size(), 3u) << files;
  EXPECT_EQ(files[1].at("name"), "second");
  EXPECT_EQ(files[2].at("name"), "part2");
  EXPECT_EQ(files[2].at("n_graphs"), 50);

  nlohmann::json one = c;
  one["NeuralNetwork"]["Architecture"]["output_heads"] = {{"node", node}};
  one["Output"]["run_dir"] = dir.file("run_one");
  const Result r1 = run("train -c " + write_config(dir, "one.json", one));
  ASSERT_EQ(r1.code, 0) << r1.out;
  const double three_mae =
      last_metric(dir.file("run") + "/metrics.csv", "train_energy_mae_mev_atom");
  const double one_mae =
      last_metric(dir.file("run_one") + "/metrics.csv", "train_energy_mae_mev_atom");
  EXPECT_GT(one_mae, 60.0);
  EXPECT_LT(three_mae, 0.3 * one_mae) << "three branches " << three_mae << ", one " << one_mae;

  // evaluate: which file must be said; the third file's test split through branch 2.
  expect_error(run("evaluate --run " + dir.file("run")), "the run trained on a list of 3 files");
  const Result ev = run("evaluate --run " + dir.file("run") + " --data " + paths[2]);
  ASSERT_EQ(ev.code, 0) << ev.out;
  const auto errors = nlohmann::json::parse(read_text(dir.file("run") + "/eval_test/errors.json"));
  EXPECT_EQ(errors.at("graphs"), 10) << errors.dump();  // the 50 graphs' test split
  EXPECT_LT(errors.at("energy").at("mae_mev_atom").get<double>(), 0.5 * one_mae) << errors.dump();

  // Files that cannot train one model, refused before training by their place in the list.
  const auto refused = [&](const nlohmann::json& list, const std::string& needle) {
    nlohmann::json bad = c;
    bad["Dataset"]["path"] = list;
    bad["Output"]["run_dir"] = dir.file("run_bad");
    expect_error(run("train -c " + write_config(dir, "bad.json", bad)), needle);
    EXPECT_FALSE(std::filesystem::exists(dir.file("run_bad") + "/metrics.csv")) << needle;
  };
  LjOptions no_forces;
  no_forces.forces = false;
  write_lj_dataset(dir.file("no_forces.h5"), no_forces);
  refused({paths[0], dir.file("no_forces.h5")},
          "Dataset.path[1] " + dir.file("no_forces.h5") + " has no forces");
  LjOptions charges;
  charges.charges = true;
  write_lj_dataset(dir.file("charges.h5"), charges);
  refused({paths[0], paths[1], dir.file("charges.h5")},
          "Dataset.path[2] " + dir.file("charges.h5") + " has the per-atom columns charges");
  LjOptions named;
  named.branches = 2;
  write_lj_dataset(dir.file("named.h5"), named);
  refused({paths[0], dir.file("named.h5")}, "has a per-structure column dataset_name of its own");
  refused({paths[0], paths[1], {{"path", paths[0]}, {"name", "again"}}},
          "Dataset.path[0] and [2] are one file");
  refused({paths[0], paths[0]}, "Dataset.path: two files named 'part0'");
  refused({paths[0], dir.file("missing.h5")}, "missing.h5: no such file");
}

// GPS attention as HydraGNN's QM9 and MD17 examples configure it (SchNet, multi-head attention,
// Laplacian encodings) trains: the loss falls, the batch norms' running statistics travel with
// the checkpoint, and evaluate predicts from them the test errors of the run's last epoch.
TEST(TrainHydraGnn, GpsAttentionTrainsAndEvaluatesFromItsCheckpoint) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("run"));
  auto& a = c["NeuralNetwork"]["Architecture"];
  a["global_attn_engine"] = "GPS";
  a["global_attn_type"] = "multihead";
  a["global_attn_heads"] = 2;
  a["pe_dim"] = 3;
  c["NeuralNetwork"]["Training"]["num_epoch"] = 30;
  c["NeuralNetwork"]["Training"]["Optimizer"]["learning_rate"] = 0.01;
  c["NeuralNetwork"]["Training"]["Scheduler"] = {{"type", "none"}};
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<std::string> loss =
      testing::metric_column(dir.file("run") + "/metrics.csv", "train_loss");
  ASSERT_EQ(loss.size(), 30u);
  std::string losses;
  for (const std::string& l : loss) losses += l + " ";
  EXPECT_LT(std::stod(loss.back()), 0.5 * std::stod(loss.front()))
      << "train loss by epoch: " << losses;
  // The last epoch's checkpoint: evaluate gives its test errors again.
  const std::string last_ck = last_event(dir.file("run"), "checkpoint").at("path");
  const Result ev = run("evaluate --checkpoint " + last_ck + " --out " + dir.file("eval"));
  ASSERT_EQ(ev.code, 0) << ev.out;
  const auto errors = nlohmann::json::parse(read_text(dir.file("eval") + "/errors.json"));
  const double eval_f = errors.at("forces").at("mae_mev_a").get<double>();
  const double run_f = last_metric(dir.file("run") + "/metrics.csv", "test_force_mae_mev_a");
  EXPECT_NEAR(eval_f, run_f, 1e-3 * run_f) << "evaluate " << eval_f << ", last epoch " << run_f;
}

}  // namespace
}  // namespace ddgnn
