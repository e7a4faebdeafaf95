// HydraGNN's configs read the ddgnn way (config/hydragnn_compat.h): head names, the list form of
// output heads, the node-input columns and edge features HydraGNN's examples write, and the schema
// entries of HydraGNN features that ddgnn does not implement.
#include "config/hydragnn_compat.h"

#include <algorithm>
#include <array>
#include <set>

#include "core/error.h"

namespace ddgnn {

namespace {

using json = nlohmann::json;
using T = KeyType;

const std::array<const char*, 2> kEnergyNames = {"energy", "graph_energy"};
const std::array<const char*, 2> kForcesNames = {"forces", "force"};
// What HydraGNN's examples call the edge length (all the interatomic distance: PyG's Distance
// transform, or HydraGNN's own edge lengths of its raw formats).
const std::array<const char*, 3> kDistanceNames = {"length", "lengths", "bond_length"};

template <size_t N>
bool one_of(const std::string& name, const std::array<const char*, N>& names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

template <size_t N>
std::string quoted_or(const std::array<const char*, N>& names) {
  std::string out;
  for (size_t i = 0; i < N; ++i)
    out += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + "\"" + names[i] + "\"";
  return out;
}

const char* kInputsHint = "write [0] (the atomic number) or [0, 1, 2, 3] (with the positions)";

}  // namespace

bool is_energy_head_name(const std::string& name) {
  return one_of(name, kEnergyNames);
}
bool is_forces_head_name(const std::string& name) {
  return one_of(name, kForcesNames);
}
std::string energy_head_names() {
  return quoted_or(kEnergyNames);
}
std::string forces_head_names() {
  return quoted_or(kForcesNames);
}

void normalise_hydragnn_forms(json& raw,
                              const std::function<std::string(const std::string&)>& where) {
  // MACE's correlation as a list (one per layer): HydraGNN builds every layer with its first.
  if (raw.is_object() && raw.contains("NeuralNetwork") && raw["NeuralNetwork"].is_object() &&
      raw["NeuralNetwork"].contains("Architecture") &&
      raw["NeuralNetwork"]["Architecture"].is_object()) {
    json& arch = raw["NeuralNetwork"]["Architecture"];
    const auto it = arch.find("correlation");
    if (it != arch.end() && it->is_array()) {
      const std::string key = "NeuralNetwork.Architecture.correlation";
      if (it->empty() || !(*it)[0].is_number_integer())
        throw ConfigError(where(key) + ": a list of correlations must start with an integer",
                          "write one integer, e.g. 3");
      for (const json& c : *it)
        if (c != (*it)[0])
          throw ConfigError(where(key) + ": " + short_value(*it) +
                                " gives the layers different correlations; HydraGNN builds "
                                "every layer with the first, and so does ddgnn",
                            "write one integer, e.g. " + (*it)[0].dump());
      json first = (*it)[0];
      *it = std::move(first);
    }
  }
  json* heads = &raw;
  for (const char* part : {"NeuralNetwork", "Architecture", "output_heads"}) {
    if (!heads->is_object() || !heads->contains(part)) return;
    heads = &(*heads)[part];
  }
  if (!heads->is_object()) return;  // the schema walk says what is wrong
  const std::string object_form =
      "write the head as an object, e.g. {\"num_headlayers\": 2, \"dim_headlayers\": [50, 25]}";
  for (const char* level : {"graph", "node"}) {
    const auto it = heads->find(level);
    if (it == heads->end() || !it->is_array()) continue;
    const std::string key = std::string("NeuralNetwork.Architecture.output_heads.") + level;
    if (it->empty()) throw ConfigError(where(key) + ": an empty list of branches", object_form);
    for (size_t b = 0; b < it->size(); ++b) {
      const json& branch = (*it)[b];
      if (!branch.is_object() || !branch.contains("architecture") ||
          !branch["architecture"].is_object())
        throw ConfigError(where(key) + "[" + std::to_string(b) +
                              "]: a branch of HydraGNN's heads is {\"type\": \"branch-0\", "
                              "\"architecture\": {...}}, found " +
                              short_value(branch),
                          object_form);
      for (const auto& item : branch.items())
        if (item.key() != "type" && item.key() != "architecture")
          throw ConfigError(where(key) + "[" + std::to_string(b) + "]." + item.key() +
                                ": unknown key (a branch has \"type\" and \"architecture\")",
                            object_form);
    }
    if (it->size() > 1)
      throw ConfigError(where(key) + ": " + std::to_string(it->size()) +
                            " branches: HydraGNN's multi-branch heads (one set of heads for each "
                            "branch of the data, e.g. each dataset of a foundation model) are not "
                            "implemented in ddgnn",
                        "keep one branch (a list of one, or its \"architecture\" as the head "
                        "object) and train on one dataset; refused even with "
                        "--allow-unimplemented, since ddgnn would train another model");
    json architecture = (*it)[0]["architecture"];
    *it = std::move(architecture);  // one branch: the heads of the object form
  }
}

void check_input_node_features(const json& value, const std::string& where) {
  std::set<int64_t> columns;
  for (const auto& v : value)
    if (!columns.insert(v.get<int64_t>()).second)
      throw ConfigError(where + ": column " + v.dump() + " appears twice", kInputsHint);
  if (!columns.count(0))
    throw ConfigError(where +
                          ": no column 0: ddgnn's models always embed the atomic number of "
                          "each atom (column 0)",
                      kInputsHint);
  const size_t n_positions = columns.count(1) + columns.count(2) + columns.count(3);
  if (n_positions != 0 && n_positions != 3)
    throw ConfigError(where +
                          ": columns 1, 2, 3 are the positions x, y, z, which ddgnn's layers "
                          "read together as geometry; give all three or none",
                      kInputsHint);
}

void check_edge_features(const json& value, const std::string& where) {
  for (const auto& v : value)
    if (!one_of(v.get<std::string>(), kDistanceNames))
      throw ConfigError(where + ": edge feature \"" + v.get<std::string>() +
                            "\" is not implemented: ddgnn's layers take one edge input, the "
                            "interatomic distance (HydraGNN's " +
                            quoted_or(kDistanceNames) + "), computed from the positions",
                        "write [\"length\"] or remove the key; other data on the edges cannot "
                        "be an input in ddgnn (refused even with --allow-unimplemented, since "
                        "ddgnn would train another model)");
  if (value.size() > 1)
    throw ConfigError(where + ": " + std::to_string(value.size()) +
                          " edge features, all the interatomic distance",
                      "write the distance once: [\"length\"]");
}

void add_hydragnn_architecture_keys(std::vector<KeySpec>& s) {
  const std::string arch = "NeuralNetwork.Architecture.";
  const std::string attention = "used only with global_attn_engine; any value";
  auto add = [&s](KeySpec spec) { s.push_back(std::move(spec)); };
  auto key = [&arch](const std::string& name, KeyType type, std::string description) {
    return make_key_spec(arch + name, type, std::move(description));
  };
  add(key("global_attn_engine", T::kString,
          "global attention next to the message-passing layers (GPS, EquivariantTransformer)")
          .not_implemented({""})
          .model_changing());
  add(key("global_attn_type", T::kString, attention).not_implemented_any_value());
  add(key("global_attn_heads", T::kInt, attention).not_implemented_any_value());
  add(key("pe_dim", T::kInt, "positional encodings, " + attention).not_implemented_any_value());
  for (const char* name :
       {"equivariant_attn_lmax", "equivariant_attn_num_radial",
        "equivariant_attn_feedforward_multiplier", "equivariant_attn_allow_scalar_only",
        "equivariant_attn_require_tensor_coupling", "equivariant_attn_chunk_size",
        "equivariant_attn_coupling_mode"})
    add(key(name, T::kAny, "used only with global_attn_engine EquivariantTransformer; any value")
            .not_implemented_any_value());
  add(key("use_graph_attr_conditioning", T::kBool,
          "graph-level attributes of the data (data.graph_attr, e.g. charge and spin) fed to the "
          "layers or the pooled features")
          .not_implemented({false})
          .model_changing());
  add(key("graph_attr_conditioning_mode", T::kAny,
          "film, concat_node or fuse_pool; used only with use_graph_attr_conditioning; any value")
          .not_implemented_any_value());
  add(key("freeze_conv_layers", T::kBool, "freeze the message-passing layers")
          .not_implemented({false}));
  add(key("SyncBatchNorm", T::kBool, "batch norm synchronised across ranks")
          .not_implemented({false}));
  add(key("conv_checkpointing", T::kBool, "activation checkpointing of the layers")
          .not_implemented({false}));
  std::vector<json> distance = {json::array()};
  for (const char* name : kDistanceNames) distance.push_back(json::array({name}));
  add(key("edge_features", T::kStringArray,
          "edge inputs besides the interatomic distance: HydraGNN's [\"length\"] (its examples "
          "also write \"lengths\" and \"bond_length\") is the distance, which every ddgnn layer "
          "reads already; other edge data are refused")
          .not_implemented(distance)
          .model_changing()
          .checked_by(check_edge_features));
}

void add_hydragnn_training_keys(std::vector<KeySpec>& s) {
  const std::string train = "NeuralNetwork.Training.";
  s.push_back(make_key_spec(train + "epoch_start", T::kInt,
                            "first epoch of HydraGNN's loop, which its scripts set when they "
                            "resume; ddgnn resumes at the epoch its checkpoint holds "
                            "(Training.continue) and starts a new run at the first")
                  .ge(0)
                  .not_implemented({0})
                  .with_hint("to resume, set Training.continue 1 (the checkpoint holds the "
                             "epoch)"));
  s.push_back(make_key_spec(train + "global_attn_redraw_interval", T::kAny,
                            "Performer attention's redraw interval, used only with "
                            "Architecture.global_attn_engine; any value")
                  .not_implemented_any_value());
}

}  // namespace ddgnn
