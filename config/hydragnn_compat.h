// HydraGNN's configs read the ddgnn way: the forms and names HydraGNN writes for what ddgnn does in
// its own way (output heads as a list of branches, the energy head named graph_energy, node-input
// columns, the edge length, heads bound by output_index to the columns Dataset.node_features and
// graph_features name), and the schema entries of HydraGNN's global attention (GPS; the other
// engine refused) and of features that ddgnn does not implement (graph-attribute conditioning).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config_schema.h"

namespace ddgnn {

// The head whose output is the total energy: "energy", or "graph_energy" (the name of the energy
// head in HydraGNN's interatomic-potential examples).
bool is_energy_head_name(const std::string& name);
// A head of direct forces: "forces", or "force".
bool is_forces_head_name(const std::string& name);
// The names above for messages: "\"energy\" or \"graph_energy\"", "\"forces\" or \"force\"".
std::string energy_head_names();
std::string forces_head_names();

// ---- heads bound by output_index ----
//
// HydraGNN binds head h to the data by Variables_of_interest.output_index[h]: the entry of
// Dataset.node_features (type[h] "node") or Dataset.graph_features ("graph") it selects, a
// {"name": [...], "dim": [...], "column_index": [...]} description of its raw files' columns.
// ddgnn does the same when the key of the head's level is present, reading the entry's name as
// what a ddgnn file holds (the table of FeatureMeaning); without the key a head is bound by its
// own name (output_names), as above.

// What an entry of Dataset.node_features / graph_features names in a ddgnn file.
enum class FeatureMeaning {
  kEnergy,        // the total energy: energy, graph_energy, total_energy, free_energy
  kForces,        // the forces: forces, force, atomic_forces
  kAtomicNumber,  // node level: atom_type(s), atomic_number(s), Z, num_of_protons
  kPosition,      // node level: x, y, z (one each), pos, positions, coordinates,
                  // cartesian_coordinates (the three)
  kColumn,        // anything else: a per-atom (node) or per-structure (graph) column by name
};
// The meaning of entry `name` of the features of a head's level ("node" or "graph"; the atomic
// number and the positions are node-level names only).
FeatureMeaning feature_meaning(const std::string& name, bool node_level);
// The names of each meaning, for messages and the key reference: "\"energy\", ... or
// \"free_energy\"".
std::string feature_names(FeatureMeaning meaning);

// Dataset.node_features / graph_features: an object with "name" (a non-empty list of names),
// "dim" (integers >= 1, one per name) and optionally "column_index" (integers >= 0, one per name;
// where HydraGNN's raw files hold the column, which a ddgnn file, naming its columns, does not
// need); ConfigError naming the key otherwise.
void check_feature_columns(const nlohmann::json& value, const std::string& where);

// The entry `index` of a checked Dataset.node_features / graph_features value.
struct FeatureEntry {
  std::string name;
  int64_t dim = 1;
};
FeatureEntry feature_entry(const nlohmann::json& features, size_t index);

// Column `column` of HydraGNN's node feature matrix (the entries of `features` side by side,
// `dim` columns each, as input_node_features numbers them): the entry that holds it and its
// component within that entry; nullopt past the last column.
struct FeatureColumn {
  size_t entry = 0;
  int64_t component = 0;
};
std::optional<FeatureColumn> feature_at_column(const std::vector<FeatureEntry>& features,
                                               int64_t column);

// Variables_of_interest.input_node_features (`columns`) against Dataset.node_features
// (`features`, non-empty): each column must be there (ConfigError naming it otherwise). Columns
// 0-3 are ddgnn's atomic number and positions whatever the entries there are called; the columns
// after the positions are checked against the data (train/model_setup.h).
void check_inputs_against_features(const std::vector<int64_t>& columns,
                                   const std::vector<FeatureEntry>& features);

// Whether a head reads its output_index when its level has features: every head but the energy
// head of a conservative potential (enable_interatomic_potential or compute_grad_energy) named as
// one (is_energy_head_name), which HydraGNN trains on the data's energy and forces whatever its
// output_index selects (its examples select e.g. node entry 0, the atom type), and so does ddgnn.
bool reads_output_index(const std::string& head_name, bool conservative);

// Before the schema walk: NeuralNetwork.Architecture.output_heads.graph / .node written as
// HydraGNN's list of branches ([{"type": "branch-0", "architecture": {...}}, ...]) become branch
// 0's architecture, in the object form; branches 1, 2, ... (multi-branch heads, named
// "branch-<number>") go to output_heads.branches as [{"graph": {...}, "node": {...}}, ...]. A level
// written as an object applies to every branch. ConfigError on a malformed list. `where` names a
// dotted key in messages ("<file>: <key>").
void normalise_hydragnn_forms(nlohmann::json& raw,
                              const std::function<std::string(const std::string&)>& where);

// Architecture.output_heads.branches: a list of {"graph": {...}, "node": {...}} with the keys of
// output_heads.graph / .node (integers >= 1, one width per head layer); ConfigError otherwise.
void check_head_branches(const nlohmann::json& value, const std::string& where);

// Variables_of_interest.input_node_features: column 0 (the atomic number), the positions 1, 2, 3
// all or none, each column once; the columns after the positions are checked against the data
// when training binds it (train/model_setup.h).
void check_input_node_features(const nlohmann::json& value, const std::string& where);

// Architecture.edge_features: the edge length (HydraGNN's "length", also "lengths" and
// "bond_length" in its examples) is the interatomic distance every ddgnn layer reads; any other
// edge feature is a ConfigError naming it.
void check_edge_features(const nlohmann::json& value, const std::string& where);

// The schema entries of HydraGNN's Architecture keys for models and features that ddgnn does not
// implement, and of its Training keys ddgnn reads otherwise (epoch_start); appended to `schema`
// where the table calls them, after their section.
void add_hydragnn_architecture_keys(std::vector<KeySpec>& schema);
void add_hydragnn_training_keys(std::vector<KeySpec>& schema);

}  // namespace ddgnn
