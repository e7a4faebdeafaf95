// HydraGNN's configs in ddgnn: what HydraGNN's examples write for what ddgnn does (the edge length,
// the node-input columns of atomic number and positions, output heads as a list of branches, the
// energy head named graph_energy, Checkpoint 0/1, a stratified split, GPS attention,
// graph-attribute conditioning) is accepted and means the same; what ddgnn lacks (other edge
// features, other global attention, a start epoch) is refused naming the feature, the features that
// would change the model even with --allow-unimplemented.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config/hydragnn_compat.h"
#include "config/train_settings.h"
#include "core/error.h"

namespace ddgnn {
namespace {

using json = nlohmann::json;

const ConfigOptions kAllow{/*allow_unimplemented=*/true};

// The smallest config that validates (an EGNN energy model on one file).
json minimal() {
  return json::parse(R"({
    "Dataset": {"path": "data/cu_eam.h5"},
    "NeuralNetwork": {
      "Architecture": {"mpnn_type": "EGNN", "hidden_dim": 16, "num_conv_layers": 2,
                       "radius": 5.0},
      "Variables_of_interest": {"output_names": ["energy"], "output_index": [0],
                                "type": ["graph"]},
      "Training": {"num_epoch": 1, "batch_size": 4, "Optimizer": {"learning_rate": 0.001}}
    }
  })");
}

Config resolve(const json& raw, ConfigOptions options = {}) {
  return resolve_config(raw, "test.json", {}, options);
}

// The message and hint of the ConfigError that resolving (and reading the training settings
// of) `raw` throws, "" when none.
std::string error_of(const json& raw, ConfigOptions options = {}) {
  try {
    train_settings(resolve(raw, options));
  } catch (const ConfigError& e) {
    return std::string(e.what()) + " || hint: " + e.hint();
  }
  return "";
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

json& arch(json& raw) {
  return raw["NeuralNetwork"]["Architecture"];
}
json& voi(json& raw) {
  return raw["NeuralNetwork"]["Variables_of_interest"];
}

TEST(HydraGnnConfig, EdgeLengthIsTheDistanceAndOtherEdgeFeaturesAreRefused) {
  for (const json& distance : {json::array(), json::array({"length"}), json::array({"lengths"}),
                               json::array({"bond_length"})}) {
    json raw = minimal();
    arch(raw)["edge_features"] = distance;
    EXPECT_EQ(error_of(raw), "") << distance;
    EXPECT_TRUE(resolve(raw).warnings.empty()) << distance;
  }
  json raw = minimal();
  arch(raw)["edge_features"] = {"length", "bond_type"};
  std::string e = error_of(raw);
  EXPECT_HAS(e,
             "NeuralNetwork.Architecture.edge_features: edge feature \"bond_type\" is not "
             "implemented");
  EXPECT_HAS(e, "write [\"length\"]");
  EXPECT_HAS(error_of(raw, kAllow), "\"bond_type\" is not implemented");  // changes the model
  arch(raw)["edge_features"] = {"length", "length"};
  EXPECT_HAS(error_of(raw), "2 edge features, all the interatomic distance");
}

// Columns after the positions are the data's per-atom columns, checked when training binds the
// data (tests/train/test_hydragnn_train.cpp).
TEST(HydraGnnConfig, InputNodeFeaturesStartWithTheAtomicNumberAndAllThreePositions) {
  for (const json& columns :
       {json::array({0}), json::array({0, 1, 2, 3}), json::array({3, 0, 2, 1}),
        json::array({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), json::array({0, 9})}) {
    json raw = minimal();
    voi(raw)["input_node_features"] = columns;
    arch(raw)["input_dim"] = columns.size();  // HydraGNN's derived length agrees
    EXPECT_EQ(error_of(raw), "") << columns;
  }
  json raw = minimal();
  voi(raw)["input_node_features"] = {1, 2, 3};
  EXPECT_HAS(error_of(raw), "no column 0");
  voi(raw)["input_node_features"] = {0, 1};
  EXPECT_HAS(error_of(raw), "columns 1, 2, 3 are the positions x, y, z");
  voi(raw)["input_node_features"] = {0, 0};
  EXPECT_HAS(error_of(raw), "column 0 appears twice");
  voi(raw)["input_node_features"] = json::array();
  EXPECT_HAS(error_of(raw), "no column 0");
}

// HydraGNN's SMILES examples build bond graphs and give no radius: the refusal says why.
TEST(HydraGnnConfig, NoRadiusSaysThatGraphsComeFromDistancesNotBonds) {
  json raw = minimal();
  arch(raw).erase("radius");
  const std::string e = error_of(raw);
  EXPECT_HAS(e, "missing required key NeuralNetwork.Architecture.radius");
  EXPECT_HAS(e, "--set NeuralNetwork.Architecture.radius=VALUE");
  EXPECT_HAS(e, "from chemical bonds (SMILES read by RDKit), which ddgnn does not");
}

TEST(HydraGnnConfig, CheckpointZeroOrOneIsABool) {
  json raw = minimal();
  raw["NeuralNetwork"]["Training"]["Checkpoint"] = 1;
  EXPECT_TRUE(train_settings(resolve(raw)).checkpoint);
  raw["NeuralNetwork"]["Training"]["Checkpoint"] = 0;
  EXPECT_FALSE(train_settings(resolve(raw)).checkpoint);
  raw["NeuralNetwork"]["Training"]["Checkpoint"] = 2;
  EXPECT_HAS(error_of(raw), "Training.Checkpoint: expected true/false or 0/1");
}

TEST(HydraGnnConfig, EpochStartZeroIsAcceptedAndAnotherStartIsRefused) {
  json raw = minimal();
  raw["NeuralNetwork"]["Training"]["epoch_start"] = 0;
  EXPECT_EQ(error_of(raw), "");
  EXPECT_TRUE(resolve(raw).warnings.empty());
  raw["NeuralNetwork"]["Training"]["epoch_start"] = 5;
  const std::string e = error_of(raw);
  EXPECT_HAS(e, "NeuralNetwork.Training.epoch_start: ddgnn does not implement this HydraGNN key");
  EXPECT_HAS(e, "Training.continue");
  const Config c = resolve(raw, kAllow);  // a warning: the checkpoint holds the epoch
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_HAS(c.warnings[0], "epoch_start");
}

TEST(HydraGnnConfig, OutputHeadsAsOneBranchAreTheHeads) {
  const json graph = {{"num_sharedlayers", 1},
                      {"dim_sharedlayers", 20},
                      {"num_headlayers", 1},
                      {"dim_headlayers", {30}}};
  const json node = {{"num_headlayers", 2}, {"dim_headlayers", {40, 10}}, {"type", "mlp"}};
  json object_form = minimal();
  arch(object_form)["output_heads"] = {{"graph", graph}, {"node", node}};
  json branch_form = minimal();
  arch(branch_form)["output_heads"] = {{"graph", {{{"type", "branch-0"}, {"architecture", graph}}}},
                                       {"node", {{{"type", "branch-0"}, {"architecture", node}}}}};
  EXPECT_EQ(resolve(branch_form).resolved, resolve(object_form).resolved);
  EXPECT_EQ(train_settings(resolve(branch_form)).gnn.head.dim_headlayers,
            (std::vector<int64_t>{30}));
  EXPECT_EQ(train_settings(resolve(branch_form)).gnn.num_branches(), 1);

  json bad = minimal();
  arch(bad)["output_heads"] = {{"node", {{{"type", "branch-0"}, {"arch", node}}}}};
  EXPECT_HAS(error_of(bad), "output_heads.node[0]: a branch of HydraGNN's heads is");
  arch(bad)["output_heads"] = {{"node", json::array()}};
  EXPECT_HAS(error_of(bad), "output_heads.node: an empty list of branches");
  arch(bad)["output_heads"] = {{"graph",
                                {{"type", "mlp"},
                                 {"num_headlayers", 1},
                                 {"dim_headlayers", {8}}}}};  // HydraGNN ignores type
  EXPECT_EQ(error_of(bad), "");
}

TEST(HydraGnnConfig, MultiBranchHeadsGiveEachBranchItsOwnHeadLayers) {
  const auto graph = [](int shared, int width) {
    return json{{"num_sharedlayers", shared},
                {"dim_sharedlayers", width},
                {"num_headlayers", 1},
                {"dim_headlayers", {width + 1}}};
  };
  const json node = {{"num_headlayers", 1}, {"dim_headlayers", {12}}, {"type", "mlp"}};
  json raw = minimal();
  // Listed out of order: HydraGNN finds a branch by its name.
  arch(raw)["output_heads"] = {{"graph",
                                {{{"type", "branch-2"}, {"architecture", graph(1, 7)}},
                                 {{"type", "branch-0"}, {"architecture", graph(2, 20)}},
                                 {{"type", "branch-1"}, {"architecture", graph(1, 9)}}}},
                               {"node", node}};  // an object: the same node heads in every branch
  const TrainSettings s = train_settings(resolve(raw));
  ASSERT_EQ(s.gnn.num_branches(), 3);
  EXPECT_EQ(s.gnn.head.dim_sharedlayers, 20);
  EXPECT_EQ(s.gnn.head.num_sharedlayers, 2);
  EXPECT_EQ(s.gnn.branch(1).dim_sharedlayers, 9);
  EXPECT_EQ(s.gnn.branch(2).dim_sharedlayers, 7);
  EXPECT_EQ(s.gnn.branch(2).dim_headlayers, (std::vector<int64_t>{8}));
  EXPECT_EQ(s.gnn.branch(2).node_dim_headlayers, (std::vector<int64_t>{12}));

  json twice = raw;
  arch(twice)["output_heads"]["graph"][2]["type"] = "branch-0";
  EXPECT_HAS(error_of(twice), "output_heads.graph[2].type: branch-0 appears twice");
  json unnamed = raw;
  arch(unnamed)["output_heads"]["graph"][0]["type"] = "qm9";
  EXPECT_HAS(error_of(unnamed), "output_heads.graph[0].type: qm9 is not a branch");
  EXPECT_HAS(error_of(unnamed), "\"branch-0\" to \"branch-2\"");
  json uneven = raw;
  arch(uneven)["output_heads"]["node"] = {{{"type", "branch-0"}, {"architecture", node}},
                                          {{"type", "branch-1"}, {"architecture", node}}};
  EXPECT_HAS(error_of(uneven), "output_heads.node: 2 branches, but output_heads.graph has 3");
  json mixed = raw;
  json conv = node;
  conv["type"] = "conv";
  arch(mixed)["output_heads"]["node"] = {{{"type", "branch-0"}, {"architecture", node}},
                                         {{"type", "branch-1"}, {"architecture", conv}},
                                         {{"type", "branch-2"}, {"architecture", node}}};
  EXPECT_HAS(error_of(mixed), "output_heads.node[1].architecture.type: \"conv\"");
  json narrow = raw;
  arch(narrow)["output_heads"]["graph"][0]["architecture"]["dim_headlayers"] = {0};
  EXPECT_HAS(error_of(narrow),
             "output_heads.graph[0].architecture.dim_headlayers: [0] must be integers >= 1");
  json counted = raw;
  arch(counted)["output_heads"]["graph"][0]["architecture"]["dim_headlayers"] = {4, 4};
  EXPECT_HAS(error_of(counted), "2 widths, but num_headlayers is 1");
}

TEST(HydraGnnConfig, GraphEnergyIsTheEnergyHead) {
  EXPECT_TRUE(is_energy_head_name("energy") && is_energy_head_name("graph_energy"));
  EXPECT_TRUE(is_forces_head_name("forces") && is_forces_head_name("force"));
  EXPECT_FALSE(is_energy_head_name("free_energy") || is_forces_head_name("atomic_forces"));
  json raw = minimal();
  arch(raw)["enable_interatomic_potential"] = true;
  voi(raw) = {{"output_names", {"graph_energy"}},
              {"output_index", {0}},
              {"type", {"node"}},
              {"output_dim", {1}}};
  const TrainSettings s = train_settings(resolve(raw));
  EXPECT_EQ(s.targets.energy_head, 0);
  EXPECT_TRUE(s.targets.conservative);

  voi(raw)["output_names"] = {"total"};
  std::string e = error_of(raw);
  EXPECT_HAS(e, "output_names has none (\"energy\" or \"graph_energy\")");
  voi(raw) = {{"output_names", {"energy", "graph_energy"}},
              {"output_index", {0, 0}},
              {"type", {"node", "node"}}};
  EXPECT_HAS(error_of(raw), "two energy heads, 'energy' and 'graph_energy'");
}

// GPS with multi-head attention is read into the spec; the other engine and attention type are
// refused with or without --allow-unimplemented, and so are GPS's keys out of range and an
// mpnn_type whose HydraGNN layers read GPS's edge encodings in a way ddgnn does not.
TEST(HydraGnnConfig, GpsAttentionIsReadAndItsLimitsAreErrors) {
  json raw = minimal();
  arch(raw)["mpnn_type"] = "SchNet";
  arch(raw)["hidden_dim"] = 64;
  arch(raw)["global_attn_engine"] = "";
  arch(raw)["global_attn_type"] = "";
  arch(raw)["global_attn_heads"] = 8;  // read only with an engine
  arch(raw)["pe_dim"] = 6;
  arch(raw)["equivariant_attn_lmax"] = 1;
  EXPECT_EQ(error_of(raw), "");
  EXPECT_TRUE(resolve(raw).warnings.empty());
  EXPECT_EQ(train_settings(resolve(raw)).gnn.gps_heads, 0);
  arch(raw)["global_attn_engine"] = "GPS";
  arch(raw)["global_attn_type"] = "multihead";
  const TrainSettings s = train_settings(resolve(raw));
  EXPECT_EQ(s.gnn.gps_heads, 8);
  EXPECT_EQ(s.gnn.pe_dim, 6);

  const auto refused = [&](const char* key, json value, const std::string& part) {
    json bad = raw;
    arch(bad)[key] = std::move(value);
    const std::string e = error_of(bad);
    EXPECT_HAS(e, part);
    EXPECT_EQ(error_of(bad, kAllow), e);  // not a warning: it would train another model
  };
  refused("global_attn_engine", "EquivariantTransformer",
          "\"EquivariantTransformer\" is a HydraGNN value that ddgnn does not implement");
  refused("global_attn_type", "performer", "\"performer\" is a HydraGNN value");
  refused("global_attn_type", "", "global_attn_type: global_attn_engine GPS needs \"multihead\"");
  refused("global_attn_heads", 0, "global_attn_heads: global_attn_engine GPS needs at least one");
  refused("global_attn_heads", 6, "global_attn_heads: 6 heads do not divide hidden_dim 64");
  refused("pe_dim", 0, "pe_dim: global_attn_engine GPS needs positional encodings");
  refused("mpnn_type", "EGNN", "GPS with mpnn_type EGNN");
}

// An interatomic potential with a graph energy head (HydraGNN's foundation-model MLIP configs):
// the energy of sum-pooled features, forces its gradient; other pooling is refused, as HydraGNN
// refuses it.
TEST(HydraGnnConfig, AGraphEnergyHeadOfAnInteratomicPotentialNeedsSumPooling) {
  json raw = minimal();
  arch(raw)["enable_interatomic_potential"] = true;
  voi(raw)["output_names"] = {"graph_energy"};
  arch(raw)["graph_pooling"] = "add";
  const TrainSettings s = train_settings(resolve(raw));
  EXPECT_TRUE(s.targets.conservative);
  EXPECT_EQ(s.targets.heads.at(0).kind, HeadSpec::kGraph);
  arch(raw)["graph_pooling"] = "mean";
  EXPECT_HAS(error_of(raw),
             "enable_interatomic_potential: a graph energy head needs graph_pooling "
             "\"add\"");
}

TEST(HydraGnnConfig, GraphAttributeConditioningReadsItsMode) {
  json raw = minimal();
  arch(raw)["use_graph_attr_conditioning"] = false;
  arch(raw)["graph_attr_conditioning_mode"] = "film";
  EXPECT_EQ(train_settings(resolve(raw)).gnn.graph_attr_mode, "");
  arch(raw)["use_graph_attr_conditioning"] = true;
  EXPECT_EQ(train_settings(resolve(raw)).gnn.graph_attr_mode, "film");
  arch(raw).erase("graph_attr_conditioning_mode");  // HydraGNN's default
  EXPECT_EQ(train_settings(resolve(raw)).gnn.graph_attr_mode, "concat_node");
  arch(raw)["graph_attr_conditioning_mode"] = "gate";
  EXPECT_HAS(error_of(raw), "graph_attr_conditioning_mode: \"gate\" is not an allowed value");
}

TEST(HydraGnnConfig, CompositionalStratifiedSplittingSplitsByComposition) {
  json raw = minimal();
  EXPECT_EQ(train_settings(resolve(raw)).split_by, SplitBy::kFrame);
  raw["Dataset"]["compositional_stratified_splitting"] = true;
  EXPECT_EQ(train_settings(resolve(raw)).split_by, SplitBy::kComposition);
  raw["Dataset"]["split_by"] = "composition";
  EXPECT_EQ(train_settings(resolve(raw)).split_by, SplitBy::kComposition);
  raw["Dataset"]["split_by"] = "block";
  EXPECT_HAS(error_of(raw),
             "compositional_stratified_splitting: true asks for a split by "
             "composition, but Dataset.split_by is block");
  raw["Dataset"].erase("split_by");
  raw["Dataset"]["path"] = {{"train", "a.h5"}, {"validate", "b.h5"}, {"test", "c.h5"}};
  const Config c = resolve(raw);  // nothing to split: ignored, as by HydraGNN
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_HAS(c.warnings[0], "compositional_stratified_splitting is ignored");
  EXPECT_EQ(train_settings(c).split_by, SplitBy::kFrame);
}

TEST(HydraGnnConfig, EquivarianceOfAnInvariantModelIsAWarning) {
  json raw = minimal();
  arch(raw)["mpnn_type"] = "PNA";
  arch(raw)["equivariance"] = true;
  const Config c = resolve(raw);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_HAS(c.warnings[0], "equivariance = true changes nothing for PNA");
}

TEST(HydraGnnConfig, TheLennardJonesExampleReadsItsEnergyHead) {
  const Config c =
      load_config(std::string(DDGNN_SOURCE_DIR) + "/configs/hydragnn_lj_example.json", {}, {});
  const TrainSettings s = train_settings(c);
  EXPECT_EQ(s.targets.heads.at(0).name, "graph_energy");
  EXPECT_EQ(s.targets.energy_head, 0);
  EXPECT_TRUE(s.gnn.interatomic_potential);
}

TEST(HydraGnnConfig, MaceKeysAreReadAndCheckedBeforeTraining) {
  json raw = minimal();
  arch(raw)["mpnn_type"] = "MACE";
  arch(raw)["max_ell"] = 2;
  arch(raw)["node_max_ell"] = 1;
  arch(raw)["correlation"] = json::array({3, 3});  // HydraGNN's list: one per layer
  arch(raw)["radial_type"] = "gaussian";
  arch(raw)["envelope_exponent"] = 6;
  EXPECT_EQ(error_of(raw), "");
  TrainSettings s = train_settings(resolve(raw));
  EXPECT_EQ(s.gnn.mpnn_type, "MACE");
  EXPECT_EQ(s.gnn.layer.max_ell, 2);
  EXPECT_EQ(s.gnn.layer.node_max_ell, 1);
  EXPECT_EQ(s.gnn.layer.correlation, 3);
  EXPECT_EQ(s.gnn.layer.radial_type, "gaussian");
  EXPECT_EQ(s.gnn.layer.envelope.p, 6);
  EXPECT_EQ(s.gnn.layer.avg_num_neighbors, 0.0);  // fitted to the training set
  arch(raw)["avg_num_neighbors"] = 12.5;
  EXPECT_EQ(train_settings(resolve(raw)).gnn.layer.avg_num_neighbors, 12.5);

  // Each bad value: an error naming the key, before any data is read.
  auto with = [&](const char* key, json value) {
    json bad = raw;
    arch(bad)[key] = std::move(value);
    return error_of(bad);
  };
  EXPECT_HAS(with("max_ell", 4), "max_ell");
  EXPECT_HAS(with("node_max_ell", 3), "node_max_ell 3");
  EXPECT_HAS(with("correlation", 0), "correlation");
  EXPECT_HAS(with("correlation", 4), "correlation");
  EXPECT_HAS(with("correlation", json::array({2, 3})), "gives the layers different correlations");
  EXPECT_HAS(with("correlation", json::array()), "must start with an integer");
  EXPECT_HAS(with("radial_type", "spline"), "radial_type");
  EXPECT_HAS(with("distance_transform", "Agnesi"), "distance_transform");
  EXPECT_NE(error_of(
                [&] {
                  json bad = raw;
                  arch(bad)["distance_transform"] = "Soft";
                  return bad;
                }(),
                kAllow),
            "");  // not even with --allow-unimplemented: another model
  EXPECT_HAS(with("avg_num_neighbors", 0), "avg_num_neighbors");
}

TEST(HydraGnnConfig, AnInteratomicPotentialOfAGraphOnlyModelIsAWarning) {
  json raw = minimal();
  arch(raw)["enable_interatomic_potential"] = true;
  voi(raw)["type"] = json::array({"node"});
  for (const char* model : {"SAGE", "MFC", "GIN"}) {
    arch(raw)["mpnn_type"] = model;
    const Config c = resolve(raw);
    ASSERT_EQ(c.warnings.size(), 1u) << model;
    EXPECT_HAS(c.warnings[0], "forces and stress are zero");
  }
  arch(raw)["mpnn_type"] = "GAT";
  EXPECT_TRUE(resolve(raw).warnings.empty());
}

}  // namespace
}  // namespace ddgnn
