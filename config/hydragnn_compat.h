// HydraGNN's configs read the ddgnn way: the forms and names HydraGNN writes for what ddgnn does in
// its own way (output heads as a list of branches, the energy head named graph_energy, node-input
// columns, the edge length), and the schema entries of HydraGNN's global attention (GPS; the other
// engine refused) and of features that ddgnn does not implement (graph-attribute conditioning).
#pragma once

#include <functional>
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
