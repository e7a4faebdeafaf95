// Config -> TrainSettings: HydraGNN's Architecture / Variables_of_interest / Training keys and
// ddgnn's Loader / Runtime / Output keys, checked together.
#include "app/train_settings.h"

#include <algorithm>

#include "core/error.h"
#include "loader/dataset.h"

namespace ddgnn {

namespace {

const std::string kArch = "NeuralNetwork.Architecture.";
const std::string kVars = "NeuralNetwork.Variables_of_interest.";
const std::string kTrain = "NeuralNetwork.Training.";

template <class T>
T get_or(const Config& c, const std::string& key, T fallback) {
  if (!c.has(key) || c.at(key).is_null()) return fallback;
  return c.get<T>(key);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

}  // namespace

bool TrainSettings::needs_forces() const {
  if (conservative && weights.force_weight > 0.0) return true;
  for (const auto& t : targets)
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
  g.layer.equivariance = c.get<bool>(kArch + "equivariance");
  g.graph_pooling = c.get<std::string>(kArch + "graph_pooling");
  g.num_sharedlayers = c.get<int64_t>(kArch + "output_heads.graph.num_sharedlayers");
  g.dim_sharedlayers = c.get<int64_t>(kArch + "output_heads.graph.dim_sharedlayers");
  g.num_headlayers = c.get<int64_t>(kArch + "output_heads.graph.num_headlayers");
  g.dim_headlayers = c.get<std::vector<int64_t>>(kArch + "output_heads.graph.dim_headlayers");
  g.node_num_headlayers = c.get<int64_t>(kArch + "output_heads.node.num_headlayers");
  g.node_dim_headlayers = c.get<std::vector<int64_t>>(kArch + "output_heads.node.dim_headlayers");
  g.node_head_type = c.get<std::string>(kArch + "output_heads.node.type");
  g.dropout = c.get<double>(kArch + "dropout");
  if (c.has(kArch + "initial_bias") && !c.at(kArch + "initial_bias").is_null()) {
    g.has_initial_bias = true;
    g.initial_bias = c.get<double>(kArch + "initial_bias");
  }
  g.interatomic_potential = c.get<bool>(kArch + "enable_interatomic_potential");
  s.weights.energy_weight = c.get<double>(kArch + "energy_weight");
  s.weights.energy_peratom_weight = c.get<double>(kArch + "energy_peratom_weight");
  s.weights.force_weight = c.get<double>(kArch + "force_weight");
  s.periodic = c.get<bool>(kArch + "periodic_boundary_conditions");
  s.graph.radius = g.layer.radius;
  s.graph.max_neighbours = c.get<int64_t>(kArch + "max_neighbours");

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
  s.conservative = g.interatomic_potential || grad_energy;
  for (size_t k = 0; k < names.size(); ++k) {
    HeadTarget t;
    t.name = names[k];
    t.kind = types[k] == "node" ? HeadSpec::kNode : HeadSpec::kGraph;
    t.dim = dims[k];
    t.weight = task_weights[k];
    s.targets.push_back(t);
    g.heads.push_back({t.name, t.kind, t.dim});
  }
  // The conservative potential: the per-atom (interatomic potential) or graph (compute_grad_energy)
  // energy head must exist.
  for (size_t k = 0; k < s.targets.size(); ++k)
    if (s.targets[k].name == "energy") {
      if (s.energy_head >= 0)
        throw ConfigError(kVars + "output_names: 'energy' appears twice", "keep one energy head");
      s.energy_head = int(k);
    }
  if (s.conservative && s.energy_head < 0)
    throw ConfigError(
        std::string(g.interatomic_potential ? kArch + "enable_interatomic_potential"
                                            : kTrain + "compute_grad_energy") +
            ": forces are -dE/dx of an energy head, but output_names has no 'energy'",
        "add a head named \"energy\" (type \"node\" with enable_interatomic_potential, \"graph\" "
        "with compute_grad_energy)");
  if (s.energy_head >= 0) {
    const HeadTarget& e = s.targets[size_t(s.energy_head)];
    if (e.dim != 1)
      throw ConfigError(kVars + "output_dim: the energy head has output_dim " +
                            std::to_string(e.dim) + "; it must be 1",
                        "set output_dim 1 for \"energy\"");
    if (e.kind == HeadSpec::kNode && !g.interatomic_potential)
      throw ConfigError(kVars +
                            "type: a node-level 'energy' head is summed into the total "
                            "energy only with enable_interatomic_potential",
                        "set Architecture.enable_interatomic_potential true, or make the energy "
                        "head type \"graph\"");
    if (e.kind == HeadSpec::kGraph && g.interatomic_potential)
      throw ConfigError(kArch +
                            "enable_interatomic_potential: the energy head must be type "
                            "\"node\" (per-atom energies, summed)",
                        "set type [\"node\"] for the energy head, or use "
                        "Training.compute_grad_energy with a graph head");
  }
  s.dtype = c.get<std::string>(kTrain + "precision") == "fp64" ? c10::kDouble : c10::kFloat;
  s.loss.type = c.get<std::string>(kTrain + "loss_function_type");
  s.loss.huber_delta = c.get<double>(kTrain + "huber_delta");

  // Data and training loop.
  const nlohmann::json& path = c.at("Dataset.path");
  if (path.is_string()) {
    s.data.single = path.get<std::string>();
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
  s.num_epoch = c.get<int64_t>(kTrain + "num_epoch");
  s.batch_size = c.get<int64_t>(kTrain + "batch_size");
  s.eval_batch_size = c.get<int64_t>(kTrain + "eval_batch_size");
  if (s.eval_batch_size == 0) s.eval_batch_size = s.batch_size;
  s.perc_train = c.get<double>(kTrain + "perc_train");
  s.seed = c.get<uint64_t>(kTrain + "seed");
  s.optimizer = c.get<std::string>(kTrain + "Optimizer.type");
  s.learning_rate = c.get<double>(kTrain + "Optimizer.learning_rate");
  s.weight_decay =
      get_or<double>(c, kTrain + "Optimizer.weight_decay", s.optimizer == "AdamW" ? 0.01 : 0.0);
  s.grad_clip = c.get<double>(kTrain + "grad_clip");
  s.ema_decay = c.get<double>(kTrain + "ema_decay");
  const std::string schedule = c.get<std::string>(kTrain + "Scheduler.type");
  s.scheduler = schedule == "ReduceLROnPlateau";
  if (schedule == "ExponentialLR") s.exponential_gamma = c.get<double>(kTrain + "Scheduler.gamma");
  s.plateau.factor = c.get<double>(kTrain + "Scheduler.factor");
  s.plateau.patience = c.get<int>(kTrain + "Scheduler.patience");
  s.plateau.min_lr = c.get<double>(kTrain + "Scheduler.min_lr");
  if (schedule == "TimeExponential") {
    s.time_exponential = true;
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
  s.checkpoint = c.get<bool>(kTrain + "Checkpoint");
  s.checkpoint_warmup = c.get<int64_t>(kTrain + "checkpoint_warmup");
  const nlohmann::json& cont = c.at(kTrain + "continue");
  s.resume = cont.is_boolean() ? cont.get<bool>() : cont.get<int64_t>() != 0;
  s.startfrom = c.get<std::string>(kTrain + "startfrom");

  s.shuffle = c.get<bool>("Loader.shuffle");
  s.drop_remainder = c.get<bool>("Loader.drop_remainder");
  s.atom_budget = c.get<int64_t>("Loader.atom_budget");
  s.prefetch_depth = c.get<int64_t>("Loader.prefetch_depth");
  s.backend = c.get<std::string>("Loader.backend");
  s.width = c.get<int64_t>("Loader.width");
  s.memory_budget_gb = c.get<double>("Loader.memory_budget_gb");
  s.tuner.enabled = c.get<bool>("Tuner.enabled");
  s.tuner.candidates = c.get<std::vector<std::string>>("Tuner.candidates");
  s.tuner.explore_batches = c.get<int64_t>("Tuner.explore_batches");
  s.tuner.check_every = c.get<int64_t>("Tuner.check_every_steps");
  s.tuner.recheck_every_epochs = c.get<int64_t>("Tuner.recheck_every_epochs");
  s.tuner.drift = c.get<double>("Tuner.drift_threshold");
  s.tuner.models = c.get<std::string>("Tuner.models");
  s.tuner.method = c.get<std::string>("Tuner.models_fit");
  s.bucket_mb = c.get<double>("Comm.bucket_mb");
  s.grad_sync = c.get<std::string>("Comm.grad_sync");
  s.check_parameters_every = c.get<int64_t>("Comm.check_parameters_every");
  s.threads = c.get<int64_t>("Runtime.intra_op_threads");
  s.deterministic = c.get<bool>("Runtime.deterministic");
  s.device = c.get<std::string>("Runtime.device");
  s.run_dir = c.get<std::string>("Output.run_dir");
  s.trace_steps = c.get<int64_t>("Output.trace_steps");
  s.checkpoint_every = c.get<int64_t>("Output.checkpoint_every_epochs");
  s.keep_checkpoints = c.get<int64_t>("Output.keep_checkpoints");
  s.verbosity = c.get<int>("Verbosity.level");
  check_gnn_spec(g);
  return s;
}

void bind_targets(TrainSettings& s, const Dataset& ds) {
  const auto& columns = ds.extra_columns();
  std::vector<std::string> have = {"energy (graph, 1)"};
  if (ds.has_forces()) have.push_back("forces (node, 3)");
  for (const auto& col : columns)
    have.push_back(col.name + " (node, " + std::to_string(col.n_cols) + ")");
  const std::string hint_have = ds.path() + " holds: " + join(have);
  for (auto& t : s.targets) {
    if (t.name == "energy") {
      t.source = TargetSource::kEnergy;
      continue;
    }
    if (t.name == "forces") {
      if (s.conservative)
        throw ConfigError(kVars + "output_names: head 'forces' is redundant: with " +
                              (s.gnn.interatomic_potential ? "enable_interatomic_potential"
                                                           : "compute_grad_energy") +
                              " forces are -dE/dx of the energy head",
                          "remove the 'forces' head (force_weight sets the weight of the forces)");
      if (!ds.has_forces())
        throw ConfigError(kVars + "output_names: head 'forces': " + ds.path() + " has no forces",
                          "convert a file with a forces column, or remove the head; " + hint_have);
      if (t.kind != HeadSpec::kNode || t.dim != 3)
        throw ConfigError(kVars + "type: head 'forces' must be type \"node\" with output_dim 3");
      t.source = TargetSource::kForces;
      continue;
    }
    const auto it = std::find_if(columns.begin(), columns.end(),
                                 [&](const ColumnInfo& col) { return col.name == t.name; });
    if (it == columns.end())
      throw ConfigError(kVars + "output_names: head '" + t.name + "' is not in the data",
                        hint_have);
    if (t.kind != HeadSpec::kNode || t.dim != it->n_cols)
      throw ConfigError(kVars + "type: head '" + t.name + "' is a per-atom column of " +
                        std::to_string(it->n_cols) +
                        " values: it must be type \"node\" "
                        "with output_dim " +
                        std::to_string(it->n_cols));
    t.source = TargetSource::kColumn;
    t.column = int(it - columns.begin());
  }
  if (s.conservative && s.weights.force_weight > 0.0 && !ds.has_forces())
    throw ConfigError(kArch + "force_weight: the loss has a force term (force_weight " +
                          std::to_string(s.weights.force_weight) + ") but " + ds.path() +
                          " has no forces",
                      "set Architecture.force_weight 0 to train on energies only, or convert a "
                      "file with a forces column");
}

}  // namespace ddgnn
