// HydraGNN's configs in ddgnn: what HydraGNN's examples write for what ddgnn does (the edge length,
// the node-input columns of atomic number and positions, output heads as a list of branches, the
// energy head named graph_energy, heads bound by output_index to Dataset.node_features and
// graph_features, Checkpoint 0/1, a stratified split, GPS attention,
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

// HydraGNN's description of its data's columns, Dataset.node_features and graph_features, in the
// forms its configs write (with and without column_index); a malformed one is one line naming the
// key.
TEST(HydraGnnConfig, FeatureListsOfTheDatasetValidateInHydraGnnsForms) {
  const json node = {{"name", {"atom_type", "x", "y", "z", "forces"}},
                     {"dim", {1, 1, 1, 1, 3}},
                     {"column_index", {0, 1, 2, 3, 4}}};
  const json graph = {{"name", {"energy"}}, {"dim", {1}}};
  json raw = minimal();
  raw["Dataset"]["node_features"] = node;
  raw["Dataset"]["graph_features"] = graph;
  EXPECT_EQ(error_of(raw), "");
  EXPECT_TRUE(resolve(raw).warnings.empty());

  const auto error_with = [](const char* key, const json& value) {
    json bad = minimal();
    bad["Dataset"][key] = value;
    const std::string e = error_of(bad);
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    return e;
  };
  EXPECT_HAS(error_with("node_features", json::array({"atom_type"})),
             "Dataset.node_features: an object of lists \"name\", \"dim\" and \"column_index\", "
             "found");
  EXPECT_HAS(error_with("graph_features", {{"dim", {1}}}),
             "Dataset.graph_features: no \"name\" list");
  EXPECT_HAS(error_with("graph_features", {{"name", "energy"}, {"dim", {1}}}),
             "Dataset.graph_features.name: a list of names, found energy");
  EXPECT_HAS(error_with("node_features", {{"name", {"atom_type", 3}}, {"dim", {1, 1}}}),
             "Dataset.node_features.name: 3 is not a name");
  EXPECT_HAS(error_with("node_features", {{"name", {"atom_type"}}}),
             "Dataset.node_features: no \"dim\" list");
  EXPECT_HAS(error_with("node_features", {{"name", {"atom_type", "forces"}}, {"dim", {1}}}),
             "Dataset.node_features.dim: 1 entries, but \"name\" has 2");
  EXPECT_HAS(error_with("node_features", {{"name", {"atom_type"}}, {"dim", 1}}),
             "Dataset.node_features.dim: found 1, but \"name\" has 1");
  EXPECT_HAS(error_with("graph_features", {{"name", {"energy"}}, {"dim", {0}}}),
             "Dataset.graph_features.dim: 0 must be an integer >= 1");
  EXPECT_HAS(error_with("graph_features", {{"name", {"energy"}}, {"dim", {1.5}}}),
             "Dataset.graph_features.dim: 1.5 must be an integer >= 1");
  EXPECT_HAS(
      error_with("node_features", {{"name", {"atom_type"}}, {"dim", {1}}, {"column_index", {-1}}}),
      "Dataset.node_features.column_index: -1 must be an integer >= 0");
  EXPECT_HAS(error_with("node_features",
                        {{"name", {"atom_type"}}, {"dim", {1}}, {"column_index", {0, 1}}}),
             "Dataset.node_features.column_index: 2 entries, but \"name\" has 1");
  EXPECT_HAS(error_with("node_features", {{"name", {"atom_type"}}, {"dims", {1}}}),
             "Dataset.node_features.dims: unknown key");

  // HydraGNN's copies in Variables_of_interest must agree with them.
  voi(raw)["graph_feature_names"] = {"energy"};
  voi(raw)["graph_feature_dims"] = {1};
  voi(raw)["node_feature_names"] = node["name"];
  EXPECT_EQ(error_of(raw), "");
  voi(raw)["graph_feature_names"] = {"free_energy"};
  EXPECT_HAS(error_of(raw),
             "graph_feature_names: [\"free_energy\"] disagrees with Dataset.graph_features.name");
}

// The names an entry may have, read as what a ddgnn file holds.
TEST(HydraGnnConfig, FeatureNamesAreReadAsTheEnergyTheForcesTheInputsOrAColumn) {
  using M = FeatureMeaning;
  for (const char* name : {"energy", "graph_energy", "total_energy", "free_energy"}) {
    EXPECT_EQ(feature_meaning(name, /*node_level=*/false), M::kEnergy) << name;
    EXPECT_EQ(feature_meaning(name, /*node_level=*/true), M::kEnergy) << name;
  }
  for (const char* name : {"forces", "force", "atomic_forces"})
    EXPECT_EQ(feature_meaning(name, true), M::kForces) << name;
  for (const char* name :
       {"atom_type", "atom_types", "atomic_number", "atomic_numbers", "Z", "num_of_protons"}) {
    EXPECT_EQ(feature_meaning(name, true), M::kAtomicNumber) << name;
    EXPECT_EQ(feature_meaning(name, false), M::kColumn) << name;  // a per-structure key
  }
  for (const char* name : {"pos", "positions", "coordinates", "cartesian_coordinates"})
    EXPECT_EQ(feature_meaning(name, true), M::kPosition) << name;
  // HydraGNN's CI configs learn synthetic per-atom values named x, x2, x3: columns of the file.
  for (const char* name : {"charges", "gap", "Energy", "magnetic_moment", "x", "y", "z", "x2"})
    EXPECT_EQ(feature_meaning(name, true), M::kColumn) << name;
  EXPECT_EQ(feature_names(M::kForces), "\"forces\", \"force\" or \"atomic_forces\"");
}

// With the feature lists, a head learns the entry its output_index selects, whatever its name,
// and takes its output_dim from it; without them heads are bound by name as before.
TEST(HydraGnnConfig, HeadsAreBoundByOutputIndexWhenTheDatasetDescribesItsColumns) {
  json raw = minimal();
  raw["Dataset"]["node_features"] = {{"name", {"atom_type", "x", "y", "z", "forces", "charges"}},
                                     {"dim", {1, 1, 1, 1, 3, 1}}};
  raw["Dataset"]["graph_features"] = {{"name", {"total_energy", "gap"}}, {"dim", {1, 2}}};
  voi(raw) = {{"output_names", {"total", "atomic_forces", "y", "band"}},
              {"output_index", {0, 4, 5, 1}},
              {"type", {"graph", "node", "node", "graph"}}};
  TrainSettings s = train_settings(resolve(raw));
  ASSERT_EQ(s.targets.heads.size(), 4u);
  const std::vector<std::string> data_names = {"total_energy", "forces", "charges", "gap"};
  const std::vector<int64_t> dims = {1, 3, 1, 2}, index = {0, 4, 5, 1};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(s.targets.heads[k].data_name, data_names[k]) << k;
    EXPECT_EQ(s.targets.heads[k].feature_index, index[k]) << k;
    EXPECT_EQ(s.targets.heads[k].dim, dims[k]) << k;  // output_dim from the entry
    EXPECT_EQ(s.gnn.heads[k].output_dim, dims[k]) << k;
  }
  EXPECT_EQ(s.targets.energy_head, 0);
  EXPECT_EQ(s.node_features.size(), 6u);

  // Without the lists: by name (output_index not read), as before.
  json plain = minimal();
  voi(plain) = {{"output_names", {"energy", "forces"}},
                {"output_index", {0, 0}},
                {"type", {"graph", "node"}},
                {"output_dim", {1, 3}}};
  s = train_settings(resolve(plain));
  EXPECT_EQ(s.targets.heads[1].data_name, "forces");
  EXPECT_EQ(s.targets.heads[1].feature_index, -1);
  EXPECT_EQ(s.targets.energy_head, 0);
  // Only graph_features: the node head keeps its binding by name.
  plain["Dataset"]["graph_features"] = {{"name", {"free_energy"}}, {"dim", {1}}};
  voi(plain)["output_names"] = {"E", "forces"};
  s = train_settings(resolve(plain));
  EXPECT_EQ(s.targets.heads[0].data_name, "free_energy");
  EXPECT_EQ(s.targets.energy_head, 0);
  EXPECT_EQ(s.targets.heads[1].feature_index, -1);

  // What a head may not select, each one line naming the head, its index and the entry.
  const auto error_with = [&raw](const std::vector<int64_t>& output_index,
                                 const json& output_dim = nullptr) {
    json bad = raw;
    voi(bad)["output_index"] = output_index;
    if (!output_dim.is_null()) voi(bad)["output_dim"] = output_dim;
    const std::string e = error_of(bad);
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    return e;
  };
  EXPECT_HAS(error_with({0, 6, 5, 1}),
             "Variables_of_interest.output_index: head 1 ('atomic_forces', node) selects entry 6 "
             "of Dataset.node_features, which has 6");
  EXPECT_HAS(error_with({2, 4, 5, 1}), "which has 2");
  EXPECT_HAS(error_with({0, 4, 0, 1}),
             "output_index: head 'y' (output_index 0) selects Dataset.node_features entry "
             "'atom_type', the atomic number: ddgnn's models read it as their input");
  json positions = raw;
  positions["Dataset"]["node_features"]["name"] = {"atom_type", "pos",    "y",
                                                   "z",         "forces", "charges"};
  {
    const std::string e = error_of(positions);  // head 'y' at index 5 reads charges: fine
    EXPECT_EQ(e, "");
    voi(positions)["output_index"] = {0, 4, 1, 1};
    EXPECT_HAS(error_of(positions), "entry 'pos', a position: ddgnn's models read it");
  }
  EXPECT_HAS(error_with({0, 4, 5, 1}, {1, 1, 1, 2}),
             "output_dim: head 'atomic_forces' (output_index 4) selects Dataset.node_features "
             "entry 'forces' of dim 3, but the head's output_dim is 1");
  json bad = raw;
  bad["Dataset"]["node_features"]["dim"] = {1, 1, 1, 1, 1, 1};
  EXPECT_HAS(error_of(bad),
             "Dataset.node_features.dim: entry 'forces' (the forces) has dim 1; it must be 3");
  bad = raw;
  bad["Dataset"]["graph_features"]["dim"] = {2, 2};
  EXPECT_HAS(error_of(bad),
             "Dataset.graph_features.dim: entry 'total_energy' (the energy) has dim 2; it must "
             "be 1");
  // ddgnn's names of the energy and the forces keep their meaning.
  bad = raw;
  voi(bad)["output_names"] = {"total", "atomic_forces", "y", "energy"};
  EXPECT_HAS(error_of(bad),
             "head 'energy' (output_index 1) selects Dataset.graph_features entry 'gap', which "
             "is not the energy, but the head is named as the energy");
  voi(bad)["output_names"] = {"total", "atomic_forces", "forces", "band"};
  EXPECT_HAS(error_of(bad), "entry 'charges', which is not the forces");
  // Two entries of the energy are two energy heads.
  voi(bad)["output_names"] = {"total", "atomic_forces", "y", "band"};
  voi(bad)["output_index"] = {0, 4, 5, 0};
  voi(bad)["output_dim"] = {1, 3, 1, 1};
  EXPECT_HAS(error_of(bad), "two energy heads, 'total' and 'band'");
}

// HydraGNN's interatomic potentials train their energy head on the data's energy whatever its
// output_index selects (its examples select node entry 0, the atom type): a head named as the
// energy does so in ddgnn too; any other head still reads its index.
TEST(HydraGnnConfig, TheEnergyHeadOfAnInteratomicPotentialLearnsTheEnergyWhateverItsIndex) {
  json raw = minimal();
  arch(raw)["enable_interatomic_potential"] = true;
  raw["Dataset"]["node_features"] = {{"name", {"atom_type"}}, {"dim", {1}}, {"column_index", {0}}};
  raw["Dataset"]["graph_features"] = {{"name", {"total_energy"}}, {"dim", {1}}};
  voi(raw) = {{"input_node_features", {0}},
              {"output_names", {"graph_energy"}},
              {"output_index", {0}},
              {"type", {"node"}},
              {"output_dim", {1}}};
  const TrainSettings s = train_settings(resolve(raw));
  EXPECT_EQ(s.targets.energy_head, 0);
  EXPECT_EQ(s.targets.heads[0].feature_index, -1);
  EXPECT_TRUE(s.targets.conservative);
  voi(raw)["output_names"] = {"y"};
  EXPECT_HAS(error_of(raw),
             "head 'y' (output_index 0) selects Dataset.node_features entry "
             "'atom_type', the atomic number");
  // A graph head of the energy entry is the energy head of a potential too.
  voi(raw)["type"] = {"graph"};
  arch(raw)["graph_pooling"] = "add";
  EXPECT_EQ(error_of(raw), "");
  EXPECT_EQ(train_settings(resolve(raw)).targets.energy_head, 0);
  raw["Dataset"]["graph_features"]["name"] = {"gap"};
  EXPECT_HAS(error_of(raw),
             "output_names has none (\"energy\" or \"graph_energy\"), and no graph head's "
             "output_index selects the energy in Dataset.graph_features");
}

// input_node_features with the feature lists: each column must be in range; columns 0-3 are
// ddgnn's atomic number and positions whatever the entries there are called (HydraGNN's CI
// configs put synthetic features first).
TEST(HydraGnnConfig, InputNodeFeaturesMustAgreeWithTheNodeFeatures) {
  json raw = minimal();
  raw["Dataset"]["node_features"] = {{"name", {"atom_type", "x", "y", "z", "forces"}},
                                     {"dim", {1, 1, 1, 1, 3}}};
  for (const json& columns : {json::array({0}), json::array({0, 1, 2, 3}), json::array({0, 6})}) {
    voi(raw)["input_node_features"] = columns;
    EXPECT_EQ(error_of(raw), "") << columns;
  }
  voi(raw)["input_node_features"] = {0, 7};
  EXPECT_HAS(error_of(raw),
             "input_node_features: column 7 is past the 7 columns Dataset.node_features "
             "describes");
  raw["Dataset"]["node_features"] = {{"name", {"atom_type", "pos", "charges"}}, {"dim", {1, 3, 1}}};
  voi(raw)["input_node_features"] = {0, 1, 2, 3};
  EXPECT_EQ(error_of(raw), "");
  raw["Dataset"]["node_features"] = {{"name", {"x", "x2", "x3", "y"}}, {"dim", {1, 1, 1, 1}}};
  EXPECT_EQ(error_of(raw), "") << "entries 0-3 of other names";
  voi(raw)["input_node_features"] = {0, 4};
  EXPECT_HAS(error_of(raw), "input_node_features: column 4 is past the 4 columns");
  // No entry at a level: an empty list (HydraGNN's EAM examples' graph_features) is accepted;
  // a graph head then selects an entry that is not there.
  voi(raw)["input_node_features"] = {0};
  raw["Dataset"]["graph_features"] = {{"name", json::array()}, {"dim", json::array()}};
  EXPECT_HAS(error_of(raw),
             "output_index: head 0 ('energy', graph) selects entry 0 of Dataset.graph_features, "
             "which has 0");
  raw["Dataset"].erase("graph_features");
  // Not given: ddgnn embeds the atomic number, whatever entry 0 is called.
  voi(raw).erase("input_node_features");
  EXPECT_EQ(error_of(raw), "");
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
