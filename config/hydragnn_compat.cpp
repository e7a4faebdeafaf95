// HydraGNN's configs read the ddgnn way (config/hydragnn_compat.h): head names, the names of the
// feature entries heads select by output_index, the list form of output heads, the node-input
// columns and edge features HydraGNN's examples write, and the schema entries of HydraGNN's global
// attention and of features that ddgnn does not implement.
#include "config/hydragnn_compat.h"

#include <algorithm>
#include <array>
#include <map>
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

// The names of Dataset.node_features / graph_features entries that mean what a ddgnn file holds
// apart from its named columns, as HydraGNN's examples and raw formats write them (LSMS's node
// entry 0 is num_of_protons; its graph entry the free energy).
const std::array<const char*, 4> kEnergyFeatures = {"energy", "graph_energy", "total_energy",
                                                    "free_energy"};
const std::array<const char*, 3> kForcesFeatures = {"forces", "force", "atomic_forces"};
const std::array<const char*, 6> kAtomicNumberFeatures = {
    "atom_type", "atom_types", "atomic_number", "atomic_numbers", "Z", "num_of_protons"};
// Not "x", "y", "z": HydraGNN's CI configs name synthetic per-atom values so (and heads learn
// them); an entry of those names is a column of the file like any other.
const std::array<const char*, 4> kPositionFeatures = {"pos", "positions", "coordinates",
                                                      "cartesian_coordinates"};

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

FeatureMeaning feature_meaning(const std::string& name, bool node_level) {
  if (one_of(name, kEnergyFeatures)) return FeatureMeaning::kEnergy;
  if (one_of(name, kForcesFeatures)) return FeatureMeaning::kForces;
  if (node_level && one_of(name, kAtomicNumberFeatures)) return FeatureMeaning::kAtomicNumber;
  if (node_level && one_of(name, kPositionFeatures)) return FeatureMeaning::kPosition;
  return FeatureMeaning::kColumn;
}

std::string feature_names(FeatureMeaning meaning) {
  switch (meaning) {
    case FeatureMeaning::kEnergy:
      return quoted_or(kEnergyFeatures);
    case FeatureMeaning::kForces:
      return quoted_or(kForcesFeatures);
    case FeatureMeaning::kAtomicNumber:
      return quoted_or(kAtomicNumberFeatures);
    case FeatureMeaning::kPosition:
      return quoted_or(kPositionFeatures);
    case FeatureMeaning::kColumn:
      break;
  }
  return "any other name";
}

void check_feature_columns(const json& value, const std::string& where) {
  const std::string hint =
      "write {\"name\": [\"atom_type\", \"forces\"], \"dim\": [1, 3]} (\"column_index\" "
      "optional), one entry per column";
  if (!value.is_object())
    throw ConfigError(where +
                          ": an object of lists \"name\", \"dim\" and \"column_index\", found " +
                          short_value(value),
                      hint);
  for (const auto& item : value.items())
    if (item.key() != "name" && item.key() != "dim" && item.key() != "column_index")
      throw ConfigError(where + "." + item.key() +
                            ": unknown key (the entries are described by \"name\", \"dim\" and "
                            "\"column_index\")",
                        hint);
  if (!value.contains("name"))
    throw ConfigError(where + ": no \"name\" list (the names of the entries)", hint);
  const json& names = value["name"];
  if (!names.is_array())  // empty: no entries at this level (HydraGNN's EAM examples)
    throw ConfigError(where + ".name: a list of names, found " + short_value(names), hint);
  for (const json& n : names)
    if (!n.is_string() || n.get<std::string>().empty())
      throw ConfigError(where + ".name: " + short_value(n) + " is not a name", hint);
  if (!value.contains("dim"))
    throw ConfigError(where + ": no \"dim\" list (the number of values of each entry)", hint);
  for (const char* list : {"dim", "column_index"}) {
    if (!value.contains(list)) continue;
    const json& v = value[list];
    const bool dim = std::string(list) == "dim";
    if (!v.is_array() || v.size() != names.size())
      throw ConfigError(
          where + "." + list + ": " +
              (v.is_array() ? std::to_string(v.size()) + " entries" : "found " + short_value(v)) +
              ", but \"name\" has " + std::to_string(names.size()),
          "give one " + std::string(dim ? "size" : "column") + " per name; " + hint);
    for (const json& d : v)
      if (!d.is_number_integer() || d.get<int64_t>() < (dim ? 1 : 0))
        throw ConfigError(where + "." + list + ": " + short_value(d) +
                              " must be an integer >= " + (dim ? "1" : "0"),
                          hint);
  }
}

FeatureEntry feature_entry(const json& features, size_t index) {
  return {features.at("name").at(index).get<std::string>(),
          features.at("dim").at(index).get<int64_t>()};
}

std::optional<FeatureColumn> feature_at_column(const std::vector<FeatureEntry>& features,
                                               int64_t column) {
  int64_t first = 0;
  for (size_t i = 0; i < features.size(); ++i) {
    if (column < first + features[i].dim) return FeatureColumn{i, column - first};
    first += features[i].dim;
  }
  return std::nullopt;
}

void check_inputs_against_features(const std::vector<int64_t>& columns,
                                   const std::vector<FeatureEntry>& features) {
  const std::string key = "NeuralNetwork.Variables_of_interest.input_node_features";
  const std::string order =
      "ddgnn numbers the per-atom columns 0 the atomic number, 1-3 the positions, then the "
      "forces and the file's --extra-columns; describe them in that order in "
      "Dataset.node_features";
  int64_t width = 0;
  for (const FeatureEntry& e : features) width += e.dim;
  for (int64_t col : columns) {
    const auto at = feature_at_column(features, col);
    if (!at)
      throw ConfigError(key + ": column " + std::to_string(col) + " is past the " +
                            std::to_string(width) + " columns Dataset.node_features describes",
                        order);
    // Columns 0-3 are not checked by name: ddgnn embeds the atomic number and reads the
    // geometry whatever HydraGNN's entries there are called (its CI configs put synthetic
    // features "x", "x2" first).
  }
}

bool reads_output_index(const std::string& head_name, bool conservative) {
  return !(conservative && is_energy_head_name(head_name));
}

namespace {

// The head layers of a branch after branch 0: `arch` of output_heads.<level>, at `at`.
void check_branch_level(const json& arch, const std::string& level, const std::string& at,
                        const std::string& hint) {
  const std::map<std::string, std::set<std::string>> known = {
      {"graph", {"num_sharedlayers", "dim_sharedlayers", "num_headlayers", "dim_headlayers"}},
      {"node", {"num_headlayers", "dim_headlayers"}}};
  if (!known.count(level) || !arch.is_object())
    throw ConfigError(at + ": not a level of heads (\"graph\" or \"node\" with an object)", hint);
  for (const auto& [name, v] : arch.items()) {
    const std::string here = at + "." + name;
    if (name == "type") continue;  // the node type is branch 0's (checked by the caller)
    if (!known.at(level).count(name)) throw ConfigError(here + ": unknown key", hint);
    const bool list = name == "dim_headlayers";
    const json items = list ? v : json::array({v});
    if ((list && !v.is_array()) || items.empty())
      throw ConfigError(here + ": a list of widths, found " + short_value(v), "e.g. [50, 25]");
    for (const json& w : items)
      if (!w.is_number_integer() || w.get<int64_t>() < 1)
        throw ConfigError(here + ": " + short_value(v) + " must be " +
                              (list ? "integers" : "an integer") + " >= 1",
                          "e.g. 2 layers of width 50");
  }
  if (arch.contains("dim_headlayers") && arch.contains("num_headlayers") &&
      arch["dim_headlayers"].size() != arch["num_headlayers"].get<size_t>())
    throw ConfigError(at + ".dim_headlayers: " + std::to_string(arch["dim_headlayers"].size()) +
                          " widths, but num_headlayers is " + arch["num_headlayers"].dump(),
                      "give one width per head layer");
}

const char* kBranchesHint =
    "write a list of {\"graph\": {...}, \"node\": {...}}, the head layers of branch 1, 2, ... "
    "(or HydraGNN's list form of output_heads.graph and .node)";

}  // namespace

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
  // Each level written as a list: its branches' architectures, by branch number.
  std::map<std::string, std::vector<json>> lists;
  size_t n_branches = 1;
  for (const char* level : {"graph", "node"}) {
    const auto it = heads->find(level);
    if (it == heads->end() || !it->is_array()) continue;
    const std::string key = std::string("NeuralNetwork.Architecture.output_heads.") + level;
    if (it->empty()) throw ConfigError(where(key) + ": an empty list of branches", object_form);
    std::vector<json> arch(it->size());
    for (size_t b = 0; b < it->size(); ++b) {
      const json& branch = (*it)[b];
      const std::string at = where(key) + "[" + std::to_string(b) + "]";
      if (!branch.is_object() || !branch.contains("architecture") ||
          !branch["architecture"].is_object())
        throw ConfigError(at +
                              ": a branch of HydraGNN's heads is {\"type\": \"branch-0\", "
                              "\"architecture\": {...}}, found " +
                              short_value(branch),
                          object_form);
      for (const auto& item : branch.items())
        if (item.key() != "type" && item.key() != "architecture")
          throw ConfigError(
              at + "." + item.key() + ": unknown key (a branch has \"type\" and \"architecture\")",
              object_form);
      // HydraGNN finds a structure's branch by name, "branch-" and its data set's number.
      size_t number = b;
      if (it->size() > 1) {
        const std::string type = branch.value("type", json()).is_string() ? branch["type"] : "";
        const std::string prefix = "branch-";
        size_t used = 0;
        bool ok = type.rfind(prefix, 0) == 0 && type.size() > prefix.size();
        if (ok) try {
            number = std::stoul(type.substr(prefix.size()), &used);
            ok = used == type.size() - prefix.size() && number < it->size();
          } catch (const std::exception&) {
            ok = false;
          }
        if (!ok || !arch[number].is_null())
          throw ConfigError(at + ".type: " + short_value(branch.value("type", json())) +
                                (ok ? " appears twice" : " is not a branch of the list"),
                            "name the branches \"branch-0\" to \"branch-" +
                                std::to_string(it->size() - 1) +
                                "\", one for each data set number");
      }
      if (it->size() > 1 && number > 0)
        check_branch_level(branch["architecture"], level, at + ".architecture", object_form);
      arch[number] = branch["architecture"];
    }
    if (n_branches > 1 && arch.size() > 1 && arch.size() != n_branches)
      throw ConfigError(where(key) + ": " + std::to_string(arch.size()) +
                            " branches, but output_heads.graph has " + std::to_string(n_branches),
                        "give the graph and node heads the same branches");
    n_branches = std::max(n_branches, arch.size());
    *it = arch[0];  // branch 0: the object form
    lists[level] = std::move(arch);
  }
  if (n_branches == 1) return;
  // Branches 1, 2, ...: a level written as an object (or as a list of one) is the same in each.
  const std::string node_type = (*heads)["node"].is_object() && (*heads)["node"].contains("type")
                                    ? (*heads)["node"]["type"].dump()
                                    : "\"mlp\"";
  json more = json::array();
  for (size_t b = 1; b < n_branches; ++b) {
    json branch = json::object();
    for (const auto& [level, arch] : lists) {
      json a = arch.size() > 1 ? arch[b] : arch[0];
      if (level == "node" && a.contains("type") && a["type"].dump() != node_type)
        throw ConfigError(where("NeuralNetwork.Architecture.output_heads.node") + "[" +
                              std::to_string(b) + "].architecture.type: " + a["type"].dump() +
                              ", but branch-0's node heads are " + node_type,
                          "give every branch's node heads the same type (as HydraGNN assumes)");
      a.erase("type");
      branch[level] = std::move(a);
    }
    more.push_back(std::move(branch));
  }
  (*heads)["branches"] = std::move(more);
}

void check_head_branches(const json& value, const std::string& where) {
  if (!value.is_array())
    throw ConfigError(where + ": a list of branches, found " + short_value(value), kBranchesHint);
  for (size_t b = 0; b < value.size(); ++b) {
    const json& branch = value[b];
    const std::string at =
        where + "[" + std::to_string(b) + "] (branch-" + std::to_string(b + 1) + ")";
    if (!branch.is_object())
      throw ConfigError(at + ": found " + short_value(branch), kBranchesHint);
    for (const auto& [level, arch] : branch.items())
      check_branch_level(arch, level, at + "." + level, kBranchesHint);
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
  const std::string attention = "used only with global_attn_engine GPS";
  auto add = [&s](KeySpec spec) { s.push_back(std::move(spec)); };
  auto key = [&arch](const std::string& name, KeyType type, std::string description) {
    return make_key_spec(arch + name, type, std::move(description));
  };
  add(key("global_attn_engine", T::kEnum,
          "global attention next to the message-passing layers: \"\" none, GPS (multi-head "
          "self-attention among each graph's atoms beside every layer, from Laplacian "
          "positional encodings; with SchNet, GIN, SAGE or MFC)")
          .def("")
          .one_of({"", "GPS"})
          .refuses({"EquivariantTransformer"})
          .with_hint("write \"GPS\", or \"\" for none"));
  add(key("global_attn_type", T::kEnum, "GPS's attention: multihead; " + attention)
          .def("")
          .one_of({"", "multihead"})
          .refuses({"performer"})
          .with_hint("write \"multihead\""));
  add(key("global_attn_heads", T::kInt, "attention heads, dividing hidden_dim; " + attention)
          .def(0)
          .ge(0));
  add(key("pe_dim", T::kInt, "Laplacian eigenvector positional encodings per atom; " + attention)
          .def(0)
          .ge(0));
  for (const char* name :
       {"equivariant_attn_lmax", "equivariant_attn_num_radial",
        "equivariant_attn_feedforward_multiplier", "equivariant_attn_allow_scalar_only",
        "equivariant_attn_require_tensor_coupling", "equivariant_attn_chunk_size",
        "equivariant_attn_coupling_mode"})
    add(key(name, T::kAny, "used only with global_attn_engine EquivariantTransformer; any value")
            .not_implemented_any_value());
  add(key("use_graph_attr_conditioning", T::kBool,
          "each structure's attributes (e.g. charge and spin: the per-structure key graph_attr, "
          "`ddgnn convert --info-keys graph_attr`) fed to the layers or the pooled features")
          .def(false));
  add(key("graph_attr_conditioning_mode", T::kEnum,
          "film (each layer's output scaled and shifted per structure), concat_node (each "
          "layer's output and the attributes through one Linear), fuse_pool (the pooled "
          "features and the attributes through an MLP); with use_graph_attr_conditioning")
          .def("concat_node")
          .one_of({"film", "concat_node", "fuse_pool"}));
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
