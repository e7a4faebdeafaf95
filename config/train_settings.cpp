// Config -> TrainSettings: HydraGNN's Architecture / Variables_of_interest / Training keys and
// ddgnn's Loader / Tuner / Comm / Runtime / Output keys, checked together.
#include "config/train_settings.h"

#include <algorithm>
#include <filesystem>

#include "config/hydragnn_compat.h"
#include "core/error.h"

namespace ddgnn {

namespace fs = std::filesystem;

namespace {

const std::string kArch = "NeuralNetwork.Architecture.";
const std::string kVars = "NeuralNetwork.Variables_of_interest.";
const std::string kTrain = "NeuralNetwork.Training.";

template <class T>
T get_or(const Config& c, const std::string& key, T fallback) {
  if (!c.has(key) || c.at(key).is_null()) return fallback;
  return c.get<T>(key);
}

// "auto", "cpu", "cuda" or "cuda:N" (N >= 0).
void parse_device(const std::string& v, TrainSettings& s) {
  s.device = v == "auto" ? Device::kAuto : v == "cpu" ? Device::kCpu : Device::kCuda;
  s.device_index = -1;
  if (v == "auto" || v == "cpu" || v == "cuda") return;
  const std::string digits = v.rfind("cuda:", 0) == 0 ? v.substr(5) : "";
  if (digits.empty() || digits.size() > 4 ||
      !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    throw ConfigError("Runtime.device: \"" + v + "\" is not a device",
                      "use \"auto\", \"cpu\", \"cuda\" (each rank the GPU of its node-local rank) "
                      "or \"cuda:N\"");
  s.device_index = std::stoll(digits);
}

// Whether head `t` learns the total energy: named as the energy head, or bound by output_index to
// an entry that names the energy (config/hydragnn_compat.h).
bool learns_energy(const HeadTarget& t) {
  return t.feature_index < 0
             ? is_energy_head_name(t.name)
             : feature_meaning(t.data_name, t.kind == HeadSpec::kNode) == FeatureMeaning::kEnergy;
}

// Binds head `t` by its output_index `index` to the entry of Dataset.node_features (a node head)
// or graph_features (a graph head) it selects (in range: the resolver checked it): its name is
// the target's data_name, its dim must be the head's output_dim, and the atomic number and the
// positions, the model's inputs, are refused as targets.
void bind_head_to_feature(const Config& c, HeadTarget& t, int64_t index) {
  const bool node = t.kind == HeadSpec::kNode;
  const std::string key = node ? "Dataset.node_features" : "Dataset.graph_features";
  const FeatureEntry e = feature_entry(c.at(key), size_t(index));
  t.data_name = e.name;
  t.feature_index = index;
  const std::string head = "head '" + t.name + "' (output_index " + std::to_string(index) +
                           ") selects " + key + " entry '" + e.name + "'";
  const FeatureMeaning meaning = feature_meaning(e.name, node);
  if (meaning == FeatureMeaning::kAtomicNumber || meaning == FeatureMeaning::kPosition)
    throw ConfigError(
        kVars + "output_index: " + head + ", " +
            (meaning == FeatureMeaning::kAtomicNumber ? "the atomic number" : "a position") +
            ": ddgnn's models read it as their input, it cannot be a target",
        "point output_index at the entry of the target (the forces, a per-atom "
        "column); with enable_interatomic_potential name the energy head "
        "\"energy\" or \"graph_energy\": it learns the energy whatever its "
        "output_index selects, as in HydraGNN");
  // ddgnn's own names for the energy and the forces keep their meaning: the reports and the
  // predictions evaluate writes name the energy and the forces so.
  const bool named_energy = is_energy_head_name(t.name), named_forces = is_forces_head_name(t.name);
  if ((named_energy && meaning != FeatureMeaning::kEnergy) ||
      (named_forces && meaning != FeatureMeaning::kForces))
    throw ConfigError(kVars + "output_index: " + head + ", which is not the " +
                          (named_energy ? "energy" : "forces") + ", but the head is named as " +
                          (named_energy ? "the energy (" + energy_head_names() + ")"
                                        : "the forces (" + forces_head_names() + ")"),
                      "rename the head (e.g. '" + e.name + "'), or point output_index at the " +
                          (named_energy ? "energy" : "forces"));
  const int64_t expected = meaning == FeatureMeaning::kEnergy   ? 1
                           : meaning == FeatureMeaning::kForces ? 3
                                                                : e.dim;
  if (e.dim != expected)
    throw ConfigError(key + ".dim: entry '" + e.name + "' (" +
                          (meaning == FeatureMeaning::kEnergy ? "the energy" : "the forces") +
                          ") has dim " + std::to_string(e.dim) + "; it must be " +
                          std::to_string(expected),
                      "write dim " + std::to_string(expected) + " for '" + e.name + "'");
  if (e.dim != t.dim)
    throw ConfigError(kVars + "output_dim: " + head + " of dim " + std::to_string(e.dim) +
                          ", but the head's output_dim is " + std::to_string(t.dim),
                      "give the head output_dim " + std::to_string(e.dim) +
                          " (or leave output_dim out: ddgnn takes each head's from its entry)");
}

// The loss weights Training.stage_two may change, by key.
const std::pair<const char*, double EnergyForceWeights::*> kStageTwoWeights[] = {
    {"energy_weight", &EnergyForceWeights::energy_weight},
    {"energy_peratom_weight", &EnergyForceWeights::energy_peratom_weight},
    {"force_weight", &EnergyForceWeights::force_weight},
    {"stress_weight", &EnergyForceWeights::stress_weight}};

// Training.stage_two: the epoch it starts and the loss weights it changes.
void parse_stage_two(const Config& c, TrainSettings& s) {
  const std::string k = kTrain + "stage_two.";
  const auto given = [&c](const std::string& key) { return c.has(key) && !c.at(key).is_null(); };
  const bool staged = given(k + "start_epoch");
  s.stage_two_weights = s.weights;
  bool changes = false;
  for (const auto& [name, member] : kStageTwoWeights) {
    if (!given(k + name)) continue;
    if (!staged)
      throw ConfigError(k + name + ": Training.stage_two has weights but no start_epoch",
                        "add Training.stage_two.start_epoch (the first epoch of stage two)");
    s.stage_two_weights.*member = c.get<double>(k + name);
    changes = changes || s.stage_two_weights.*member != s.weights.*member;
  }
  if (!staged) return;
  // ≥ 2 (the schema); the trainer warns when it is past num_epoch.
  s.stage_two_start = c.get<int64_t>(k + "start_epoch");
  if (!changes)
    throw ConfigError(k + "start_epoch: stage two changes no loss weight",
                      "give Training.stage_two the weights it sets (energy_weight, "
                      "energy_peratom_weight, force_weight, stress_weight), or remove it");
}

}  // namespace

double TrainSettings::max_stress_weight() const {
  return std::max(weights.stress_weight,
                  stage_two_start > 0 ? stage_two_weights.stress_weight : 0.0);
}

std::string TrainSettings::max_stress_weight_key() const {
  return stage_two_start > 0 && stage_two_weights.stress_weight > weights.stress_weight
             ? kTrain + "stage_two.stress_weight"
             : kArch + "stress_weight";
}

bool TrainSettings::needs_forces() const {
  if (targets.conservative && weights.force_weight > 0.0) return true;
  for (const auto& t : targets.heads)
    if (t.source == TargetSource::kForces) return true;
  return false;
}

TrainSettings train_settings(const Config& c) {
  TrainSettings s;
  GnnSpec& g = s.gnn;
  g.mpnn_type = c.get<std::string>(kArch + "mpnn_type");
  g.layer.hidden_dim = c.get<int64_t>(kArch + "hidden_dim");
  g.num_conv_layers = c.get<int64_t>(kArch + "num_conv_layers");
  g.layer.radius = c.get<double>(kArch + "radius");
  if (!(g.layer.radius > 0.0))
    throw ConfigError(kArch + "radius: must be > 0 Å, got " + std::to_string(g.layer.radius),
                      "a typical cutoff is 4 to 6 Å");
  g.layer.activation = c.get<std::string>(kArch + "activation_function");
  g.layer.num_gaussians = c.get<int64_t>(kArch + "num_gaussians");
  g.layer.num_filters = c.get<int64_t>(kArch + "num_filters");
  g.layer.num_radial = c.get<int64_t>(kArch + "num_radial");
  g.layer.heads = c.get<int64_t>(kArch + "heads");
  g.layer.negative_slope = c.get<double>(kArch + "negative_slope");
  g.layer.max_degree =
      get_or<int64_t>(c, kArch + "max_degree", c.get<int64_t>(kArch + "max_neighbours"));
  g.layer.equivariance = c.get<bool>(kArch + "equivariance");
  g.graph_pooling = parse_pooling(c.get<std::string>(kArch + "graph_pooling"));
  g.head.num_sharedlayers = c.get<int64_t>(kArch + "output_heads.graph.num_sharedlayers");
  g.head.dim_sharedlayers = c.get<int64_t>(kArch + "output_heads.graph.dim_sharedlayers");
  g.head.num_headlayers = c.get<int64_t>(kArch + "output_heads.graph.num_headlayers");
  g.head.dim_headlayers = c.get<std::vector<int64_t>>(kArch + "output_heads.graph.dim_headlayers");
  g.head.node_num_headlayers = c.get<int64_t>(kArch + "output_heads.node.num_headlayers");
  g.head.node_dim_headlayers =
      c.get<std::vector<int64_t>>(kArch + "output_heads.node.dim_headlayers");
  g.node_head_type = parse_node_head_type(c.get<std::string>(kArch + "output_heads.node.type"));
  if (c.get<std::string>(kArch + "global_attn_engine") == "GPS") {
    const auto need = [&](const std::string& key, const std::string& what) {
      throw ConfigError(kArch + key + ": global_attn_engine GPS needs " + what,
                        "e.g. \"global_attn_type\": \"multihead\", \"global_attn_heads\": 8, "
                        "\"pe_dim\": 6");
    };
    if (c.get<std::string>(kArch + "global_attn_type") != "multihead")
      need("global_attn_type", "\"multihead\"");
    g.gps_heads = c.get<int64_t>(kArch + "global_attn_heads");
    g.pe_dim = c.get<int64_t>(kArch + "pe_dim");
    if (g.gps_heads < 1) need("global_attn_heads", "at least one head");
    if (g.pe_dim < 1) need("pe_dim", "positional encodings (pe_dim >= 1)");
    check_gps_spec(g);
  }
  if (c.get<bool>(kArch + "use_graph_attr_conditioning"))
    g.graph_attr_mode = c.get<std::string>(kArch + "graph_attr_conditioning_mode");
  if (c.has(kArch + "output_heads.branches"))
    for (const auto& b : c.at(kArch + "output_heads.branches")) {
      HeadBranch br = g.branch(0);  // what a branch leaves out is branch 0's
      const auto graph = b.value("graph", nlohmann::json::object());
      const auto node = b.value("node", nlohmann::json::object());
      br.num_sharedlayers = graph.value("num_sharedlayers", br.num_sharedlayers);
      br.dim_sharedlayers = graph.value("dim_sharedlayers", br.dim_sharedlayers);
      br.num_headlayers = graph.value("num_headlayers", br.num_headlayers);
      br.dim_headlayers = graph.value("dim_headlayers", br.dim_headlayers);
      br.node_num_headlayers = node.value("num_headlayers", br.node_num_headlayers);
      br.node_dim_headlayers = node.value("dim_headlayers", br.node_dim_headlayers);
      g.more_branches.push_back(std::move(br));
    }
  g.dropout = c.get<double>(kArch + "dropout");
  if (c.has(kArch + "initial_bias") && !c.at(kArch + "initial_bias").is_null()) {
    g.has_initial_bias = true;
    g.initial_bias = c.get<double>(kArch + "initial_bias");
  }
  g.interatomic_potential = c.get<bool>(kArch + "enable_interatomic_potential");
  s.weights.energy_weight = c.get<double>(kArch + "energy_weight");
  s.weights.energy_peratom_weight = c.get<double>(kArch + "energy_peratom_weight");
  s.weights.force_weight = c.get<double>(kArch + "force_weight");
  s.weights.stress_weight = c.get<double>(kArch + "stress_weight");
  parse_stage_two(c, s);
  s.periodic = c.get<bool>(kArch + "periodic_boundary_conditions");
  s.graph.radius = g.layer.radius;
  s.graph.max_neighbours = c.get<int64_t>(kArch + "max_neighbours");
  s.graph.smooth_cap = c.get<bool>(kArch + "smooth_neighbour_cap");
  g.layer.envelope.kind = parse_envelope(c.get<std::string>(kArch + "radial_envelope"));
  g.layer.envelope.p = c.get<int64_t>(kArch + "envelope_exponent");
  g.layer.num_spherical = c.get<int64_t>(kArch + "num_spherical");
  g.layer.basis_emb_size = c.get<int64_t>(kArch + "basis_emb_size");
  g.layer.int_emb_size = c.get<int64_t>(kArch + "int_emb_size");
  g.layer.out_emb_size = c.get<int64_t>(kArch + "out_emb_size");
  g.layer.num_before_skip = c.get<int64_t>(kArch + "num_before_skip");
  g.layer.num_after_skip = c.get<int64_t>(kArch + "num_after_skip");
  g.layer.max_triplets = c.get<int64_t>(kArch + "max_triplets");
  if (g.mpnn_type == "DimeNet") check_dimenet_spec(g.layer);
  g.layer.max_ell = c.get<int64_t>(kArch + "max_ell");
  g.layer.node_max_ell = c.get<int64_t>(kArch + "node_max_ell");
  g.layer.correlation = c.get<int64_t>(kArch + "correlation");
  g.layer.radial_type = c.get<std::string>(kArch + "radial_type");
  g.layer.distance_transform = c.get<std::string>(kArch + "distance_transform");
  g.layer.avg_num_neighbors = get_or<double>(c, kArch + "avg_num_neighbors", 0.0);
  if (g.mpnn_type == "MACE") check_mace_spec(g.layer, /*require_avg_num_neighbors=*/false);
  // MACE's messages always end with its polynomial envelope (envelope_exponent).
  const bool has_envelope = g.mpnn_type == "SchNet" || g.mpnn_type == "PAINN" ||
                            g.mpnn_type == "MACE" || g.mpnn_type == "GAT";
  if (s.graph.smooth_cap && !has_envelope)
    throw ConfigError(kArch + "smooth_neighbour_cap: " + g.mpnn_type +
                          " has no radial envelope to end at the farthest kept neighbour",
                      "use it with mpnn_type SchNet, PAINN, MACE or GAT, or set it false");
  if (g.layer.envelope.kind != Envelope::kCosine && !has_envelope)
    throw ConfigError(kArch + "radial_envelope: " + g.mpnn_type + " has no radial envelope",
                      "use it with mpnn_type SchNet, PAINN, MACE or GAT, or leave it cosine");

  // Per-atom inputs beside the atomic number and the positions; HydraGNN's description of the
  // per-atom columns, which they must agree with.
  const auto inputs = get_or<std::vector<int64_t>>(c, kVars + "input_node_features", {0});
  for (int64_t col : inputs)
    if (col > 3) s.input_columns.push_back(col);
  g.node_inputs = int64_t(s.input_columns.size());
  if (c.has("Dataset.node_features")) {
    const nlohmann::json& f = c.at("Dataset.node_features");
    for (size_t i = 0; i < f.at("name").size(); ++i) s.node_features.push_back(feature_entry(f, i));
    // Only columns the config names: ddgnn embeds the atomic number whatever entry 0 is called.
    const auto given = c.sources.find(kVars + "input_node_features");
    if (given != c.sources.end() && given->second != "default")
      check_inputs_against_features(inputs, s.node_features);
  }

  // Heads.
  const auto names = c.get<std::vector<std::string>>(kVars + "output_names");
  const auto types = c.get<std::vector<std::string>>(kVars + "type");
  const auto dims =
      get_or<std::vector<int64_t>>(c, kVars + "output_dim", std::vector<int64_t>(names.size(), 1));
  const auto task_weights = get_or<std::vector<double>>(c, kArch + "task_weights",
                                                        std::vector<double>(names.size(), 1.0));
  if (types.size() != names.size() || dims.size() != names.size() ||
      task_weights.size() != names.size())
    throw ConfigError(kVars + "output_names: " + std::to_string(names.size()) +
                          " heads, but type, output_dim or task_weights has another length",
                      "give one entry per head in each");
  const bool grad_energy = c.get<bool>(kTrain + "compute_grad_energy");
  TargetSpec& targets = s.targets;
  targets.conservative = g.interatomic_potential || grad_energy;
  const auto output_index = c.get<std::vector<int64_t>>(kVars + "output_index");
  const bool node_features = !s.node_features.empty();
  const bool graph_features = c.has("Dataset.graph_features");
  for (size_t k = 0; k < names.size(); ++k) {
    HeadTarget t;
    t.name = names[k];
    t.data_name = names[k];
    t.kind = types[k] == "node" ? HeadSpec::kNode : HeadSpec::kGraph;
    t.dim = dims[k];
    t.weight = task_weights[k];
    if ((t.kind == HeadSpec::kNode ? node_features : graph_features) &&
        reads_output_index(t.name, targets.conservative))
      bind_head_to_feature(c, t, output_index[k]);
    targets.heads.push_back(t);
    g.heads.push_back({t.name, t.kind, t.dim});
  }
  // The conservative potential: the per-atom (interatomic potential) or graph (compute_grad_energy)
  // energy head must exist.
  for (size_t k = 0; k < targets.heads.size(); ++k)
    if (learns_energy(targets.heads[k])) {
      if (targets.energy_head >= 0)
        throw ConfigError(kVars + "output_names: two energy heads, '" +
                              targets.heads[size_t(targets.energy_head)].name + "' and '" +
                              targets.heads[k].name + "'",
                          "keep one energy head (" + energy_head_names() + ")");
      targets.energy_head = int(k);
    }
  if (s.max_stress_weight() > 0 && !targets.conservative)
    throw ConfigError(s.max_stress_weight_key() +
                          ": the stress is (1/V) dE/dε of the energy, but the "
                          "forces are not conservative",
                      "set Architecture.enable_interatomic_potential true (or "
                      "Training.compute_grad_energy), or stress_weight 0");
  if (targets.conservative && targets.energy_head < 0)
    throw ConfigError(
        std::string(g.interatomic_potential ? kArch + "enable_interatomic_potential"
                                            : kTrain + "compute_grad_energy") +
            ": forces are -dE/dx of an energy head, but output_names has none (" +
            energy_head_names() + ")" +
            (graph_features ? ", and no graph head's output_index selects the energy in "
                              "Dataset.graph_features"
                            : ""),
        "name the energy head \"energy\" (HydraGNN's \"graph_energy\" works too; type \"node\" "
        "with enable_interatomic_potential, \"graph\" with compute_grad_energy)");
  if (targets.energy_head >= 0) {
    const HeadTarget& e = targets.heads[size_t(targets.energy_head)];
    if (e.dim != 1)
      throw ConfigError(kVars + "output_dim: the energy head has output_dim " +
                            std::to_string(e.dim) + "; it must be 1",
                        "set output_dim 1 for the energy head");
    if (e.kind == HeadSpec::kNode && !g.interatomic_potential)
      throw ConfigError(kVars +
                            "type: a node-level energy head is summed into the total "
                            "energy only with enable_interatomic_potential",
                        "set Architecture.enable_interatomic_potential true, or make the energy "
                        "head type \"graph\"");
    // A graph energy head of an interatomic potential (HydraGNN's MLIP examples): the energy of
    // the sum-pooled features, forces -dE/dx, as with compute_grad_energy.
    if (e.kind == HeadSpec::kGraph && g.interatomic_potential && g.graph_pooling != Pooling::kAdd)
      throw ConfigError(kArch +
                            "enable_interatomic_potential: a graph energy head needs "
                            "graph_pooling \"add\" (the energy of a sum over atoms; HydraGNN "
                            "requires it too), not \"" +
                            to_string(g.graph_pooling) + "\"",
                        "set Architecture.graph_pooling \"add\", or make the energy head type "
                        "\"node\" (per-atom energies, summed)");
  }
  s.precision = parse_precision(c.get<std::string>(kTrain + "precision"));
  s.loss.type = parse_loss_type(c.get<std::string>(kTrain + "loss_function_type"));
  s.loss.huber_delta = c.get<double>(kTrain + "huber_delta");

  // Data and training loop.
  const nlohmann::json& path = c.at("Dataset.path");
  if (path.is_string()) {
    s.data.single = path.get<std::string>();
  } else if (path.is_array()) {  // the schema checked the entries and their names
    for (const auto& entry : path) {
      DatasetPaths::File f;
      f.path = entry.is_string() ? entry.get<std::string>() : entry.at("path").get<std::string>();
      f.name = entry.is_object() && entry.contains("name") ? entry["name"].get<std::string>()
                                                           : fs::path(f.path).stem().string();
      for (const auto& other : s.data.files)
        if (other.name == f.name)
          throw ConfigError(
              "Dataset.path: two files named '" + f.name + "' (" + other.path + ", " + f.path + ")",
              "name them: {\"path\": \"" + f.path + "\", \"name\": \"...\"}");
      s.data.files.push_back(f);
    }
  } else {
    for (const char* part : {"train", "validate", "test"})
      if (!path.contains(part) || !path[part].is_string())
        throw ConfigError(
            "Dataset.path: an object needs string entries \"train\", "
            "\"validate\" and \"test\"",
            "give one file, or all three");
    s.data.train = path["train"];
    s.data.validate = path["validate"];
    s.data.test = path["test"];
  }
  s.dataset_name = c.get<std::string>("Dataset.name");
  s.split_by = *find_split_by(c.get<std::string>("Dataset.split_by"));  // the schema checked it
  if (c.get<bool>("Dataset.compositional_stratified_splitting") && !s.data.explicit_split()) {
    if (s.split_by != SplitBy::kFrame && s.split_by != SplitBy::kComposition)
      throw ConfigError(
          "Dataset.compositional_stratified_splitting: true asks for a split by "
          "composition, but Dataset.split_by is " +
              to_string(s.split_by),
          "keep one: Dataset.split_by " + to_string(s.split_by) +
              ", or compositional_stratified_splitting true");
    s.split_by = SplitBy::kComposition;
  }
  const nlohmann::json e0s = c.get<nlohmann::json>("Dataset.e0s");
  for (const auto& item : e0s.items()) s.e0s[item.key()] = item.value().get<double>();
  s.split_block = c.get<int64_t>("Dataset.split_block");
  s.train_fraction = c.get<double>("Dataset.train_fraction");
  if (s.train_fraction < 1.0 && s.data.explicit_split())
    throw ConfigError(
        "Dataset.train_fraction thins the split of one file, but Dataset.path names "
        "train, validate and test files",
        "give a smaller train file, or Dataset.path one file");
  s.allow_outliers = c.get<bool>("Dataset.allow_outliers");
  if (s.split_by != SplitBy::kFrame && s.data.explicit_split())
    throw ConfigError("Dataset.split_by " + to_string(s.split_by) +
                          " splits one file, but Dataset.path names train, validate and test files",
                      "remove Dataset.split_by, or give Dataset.path one file");
  if (c.get<std::string>("Dataset.format") != "ddgnn")  // the schema allows no other value
    throw ConfigError("Dataset.format: only \"ddgnn\" datasets are read",
                      "convert the data with `ddgnn convert in.extxyz... out.h5`");
  s.num_epoch = c.get<int64_t>(kTrain + "num_epoch");
  s.batch_size = c.get<int64_t>(kTrain + "batch_size");
  s.eval_batch_size = c.get<int64_t>(kTrain + "eval_batch_size");
  if (s.eval_batch_size == 0) s.eval_batch_size = s.batch_size;
  s.perc_train = c.get<double>(kTrain + "perc_train");
  s.seed = c.get<uint64_t>(kTrain + "seed");
  s.split_seed = uint64_t(get_or<int64_t>(c, "Dataset.split_seed", int64_t(s.seed)));
  s.optimizer = parse_optimizer_type(c.get<std::string>(kTrain + "Optimizer.type"));
  s.learning_rate = c.get<double>(kTrain + "Optimizer.learning_rate");
  s.weight_decay = get_or<double>(c, kTrain + "Optimizer.weight_decay",
                                  s.optimizer == OptimizerType::kAdamW ? 0.01 : 0.0);
  s.grad_clip = c.get<double>(kTrain + "grad_clip");
  s.ema_decay = c.get<double>(kTrain + "ema_decay");
  s.warmup_steps = c.get<int64_t>(kTrain + "warmup_steps");
  s.spike_factor = c.get<double>(kTrain + "spike_factor");
  if (s.spike_factor > 0 && s.spike_factor <= 1)
    throw ConfigError(kTrain + "spike_factor: " + nlohmann::json(s.spike_factor).dump() +
                          " would skip every step above the median",
                      "use a factor well above 1 (the default is 20), or 0 to skip none");
  s.divergence_factor = c.get<double>(kTrain + "divergence_factor");
  if (s.divergence_factor > 0 && s.divergence_factor <= 1)
    throw ConfigError(kTrain + "divergence_factor: " + nlohmann::json(s.divergence_factor).dump() +
                          " would stop a run whose loss is not falling in every epoch",
                      "write a factor above 1 (the default 1000), or 0 to never stop");
  const std::string schedule = c.get<std::string>(kTrain + "Scheduler.type");
  s.schedule = schedule == "ReduceLROnPlateau" ? Schedule::kPlateau
               : schedule == "ExponentialLR"   ? Schedule::kExponential
               : schedule == "TimeExponential" ? Schedule::kTimeExponential
                                               : Schedule::kNone;
  s.exponential_gamma = c.get<double>(kTrain + "Scheduler.gamma");
  s.plateau.factor = c.get<double>(kTrain + "Scheduler.factor");
  s.plateau.patience = c.get<int>(kTrain + "Scheduler.patience");
  s.plateau.min_lr = c.get<double>(kTrain + "Scheduler.min_lr");
  if (s.schedule == Schedule::kTimeExponential) {
    if (c.get<double>(kTrain + "time_limit_s") <= 0)
      throw ConfigError(kTrain +
                            "Scheduler.type: TimeExponential anneals over time_limit_s, "
                            "which is not set",
                        "set " + kTrain + "time_limit_s (seconds), or use ExponentialLR");
    if (!(s.plateau.min_lr > 0 && s.plateau.min_lr < s.learning_rate))
      throw ConfigError(kTrain +
                            "Scheduler.min_lr: TimeExponential needs 0 < min_lr < "
                            "learning_rate, got " +
                            std::to_string(s.plateau.min_lr),
                        "set Scheduler.min_lr to the final learning rate");
  }
  s.early_stopping = c.get<bool>(kTrain + "EarlyStopping");
  s.patience = c.get<int>(kTrain + "patience");
  s.time_limit_s = c.get<double>(kTrain + "time_limit_s");
  s.eval_every_steps = c.get<int64_t>(kTrain + "eval_every_steps");
  s.checkpoint = c.get<bool>(kTrain + "Checkpoint");
  s.checkpoint_warmup = c.get<int64_t>(kTrain + "checkpoint_warmup");
  const nlohmann::json& cont = c.at(kTrain + "continue");
  s.resume = cont.is_boolean() ? cont.get<bool>() : cont.get<int64_t>() != 0;
  s.startfrom = c.get<std::string>(kTrain + "startfrom");

  s.shuffle = c.get<bool>("Loader.shuffle");
  s.drop_remainder = c.get<bool>("Loader.drop_remainder");
  s.atom_budget = c.get<int64_t>("Loader.atom_budget");
  s.prefetch_depth = c.get<int64_t>("Loader.prefetch_depth");
  s.compact_records = c.get<bool>("Loader.compact_records");
  s.static_shapes = c.get<bool>("Loader.static_shapes");
  s.static_buckets = c.get<int64_t>("Loader.static_buckets");
  const std::string backend = c.get<std::string>("Loader.backend");
  if (backend != "auto") s.backend = parse_backend(backend, "Loader.backend");
  if (s.backend == Backend::kNccl)
    throw ConfigError(
        "Loader.backend: \"nccl\" (GPU-resident partitions exchanged with NCCL) is not "
        "available in this version",
        "use \"shm\", \"rma\", \"collective\", \"replicated\" or \"file\"");
  s.width = c.get<int64_t>("Loader.width");
  s.memory_budget_gb = c.get<double>("Loader.memory_budget_gb");
  s.tuner.enabled = c.get<bool>("Tuner.enabled");
  s.tuner.candidates =
      parse_backends(c.get<std::vector<std::string>>("Tuner.candidates"), "Tuner.candidates");
  s.tuner.explore_batches = c.get<int64_t>("Tuner.explore_batches");
  s.tuner.check_every = c.get<int64_t>("Tuner.check_every_steps");
  s.tuner.recheck_every_epochs = c.get<int64_t>("Tuner.recheck_every_epochs");
  s.tuner.drift = c.get<double>("Tuner.drift_threshold");
  s.tuner.models = c.get<std::string>("Tuner.models");
  s.tuner.method = parse_fit_method(c.get<std::string>("Tuner.models_fit"));
  s.bucket_mb = c.get<double>("Comm.bucket_mb");
  const std::string grad_sync = c.get<std::string>("Comm.grad_sync");
  s.grad_sync = grad_sync == "nccl"  ? GradSync::kNccl
                : grad_sync == "mpi" ? GradSync::kMpi
                                     : GradSync::kAuto;
  s.check_parameters_every = c.get<int64_t>("Comm.check_parameters_every");
  s.timeout_s = c.get<double>("Comm.timeout_s");
  s.threads = c.get<int64_t>("Runtime.intra_op_threads");
  s.deterministic = c.get<bool>("Runtime.deterministic");
  parse_device(c.get<std::string>("Runtime.device"), s);
  s.allow_gpu_sharing = c.get<bool>("Runtime.allow_gpu_sharing");
  s.cuda_graphs = c.get<bool>("Runtime.cuda_graphs");
  if (s.cuda_graphs) {
    if (s.device == Device::kCpu)
      throw ConfigError("Runtime.cuda_graphs: CUDA graphs need a GPU, and Runtime.device is cpu",
                        "set Runtime.device to auto or cuda, or Runtime.cuda_graphs to false");
    if (s.optimizer != OptimizerType::kAdam && s.optimizer != OptimizerType::kAdamW)
      throw ConfigError(
          "Runtime.cuda_graphs: a replayed step needs Adam or AdamW (they read "
          "their step count and rate from the device); the optimizer is " +
              to_string(s.optimizer),
          "set NeuralNetwork.Training.Optimizer.type to Adam or AdamW, or "
          "Runtime.cuda_graphs to false");
    s.static_shapes = true;  // graphs replay fixed shapes
  }
  s.run_dir = c.get<std::string>("Output.run_dir");
  s.trace_steps = c.get<int64_t>("Output.trace_steps");
  s.read_every_steps = c.get<int64_t>("Output.read_every_steps");
  s.checkpoint_every = c.get<int64_t>("Output.checkpoint_every_epochs");
  s.checkpoint_every_steps = c.get<int64_t>("Output.checkpoint_every_steps");
  s.keep_checkpoints = c.get<int64_t>("Output.keep_checkpoints");
  const std::string log_level = c.get<std::string>("Output.log_level");
  if (c.sources.count("Output.log_level") && c.sources.at("Output.log_level") != "default")
    s.log_level = log_level;
  s.log_all_ranks = c.get<bool>("Output.log_all_ranks");
  s.print_test_every_epoch = c.get<bool>("Output.print_test_every_epoch");
  s.energy_meter = *parse_energy_source(c.get<std::string>("Output.energy_meter"));
  const std::string progress = c.get<std::string>("Output.progress");
  s.progress = progress == "bar"     ? Progress::kBar
               : progress == "lines" ? Progress::kLines
                                     : Progress::kAuto;
  s.verbosity = c.get<int>("Verbosity.level");
  return s;
}

}  // namespace ddgnn
