// Binding a run's settings to its data (train/model_setup.h): which column each head learns and
// each per-atom input reads, checked against what the dataset holds; whether the stress is
// predicted.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "config/hydragnn_compat.h"
#include "core/error.h"
#include "core/log.h"
#include "train/model_setup.h"
#include "train/run_log.h"
#include "train/train_data.h"

namespace ddgnn {

namespace {

const std::string kArch = "NeuralNetwork.Architecture.";
const std::string kVars = "NeuralNetwork.Variables_of_interest.";

// The index of the column called `name` in `cols`, -1 when there is none.
int column_index(const std::vector<ColumnInfo>& cols, const std::string& name) {
  for (size_t k = 0; k < cols.size(); ++k)
    if (cols[k].name == name) return int(k);
  return -1;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

// With Dataset.node_features: per-atom input column `col` (ddgnn's `src`, the forces when
// `column_name` is empty, else that extra column, `width` values an atom) must be the same column
// in HydraGNN's description, entry and component; a ConfigError naming both otherwise.
void check_input_feature(const TrainSettings& s, int64_t col, std::pair<int, int> src,
                         const std::string& column_name, int64_t width) {
  if (s.node_features.empty()) return;
  const auto at = feature_at_column(s.node_features, col);
  if (!at) return;  // train_settings refused a column past them
  const FeatureEntry& e = s.node_features[at->entry];
  const bool same =
      (column_name.empty() ? feature_meaning(e.name, /*node_level=*/true) == FeatureMeaning::kForces
                           : e.name == column_name) &&
      at->component == src.second;
  if (same) return;
  const auto component = [](const std::string& name, int64_t c, int64_t dim) {
    return "'" + name + "'" + (dim > 1 ? " value " + std::to_string(c + 1) : "");
  };
  throw ConfigError(
      kVars + "input_node_features: column " + std::to_string(col) +
          " is Dataset.node_features entry " + component(e.name, at->component, e.dim) +
          ", but the data's column " + std::to_string(col) + " is " +
          component(column_name.empty() ? "forces" : column_name, src.second, width),
      "ddgnn numbers the per-atom columns 0 the atomic number, 1-3 the positions, then the "
      "forces and the file's --extra-columns, in the file's order; describe them in that order "
      "in Dataset.node_features");
}

// Maps input_node_features after the positions to the data's per-atom columns, numbered as
// HydraGNN numbers its node features: 0 the atomic number, 1-3 the positions, then the forces
// (when the data has them) and each extra column, k values each, in the dataset's order.
void bind_inputs(TrainSettings& s, const Dataset& ds) {
  std::vector<std::pair<int, int>> layout;  // column 4 + i -> (source, component)
  std::string have = "0 the atomic number, 1-3 the positions";
  const auto add = [&](int source, int width, const std::string& name) {
    const size_t first = 4 + layout.size();
    for (int c = 0; c < width; ++c) layout.emplace_back(source, c);
    have += ", " +
            (width == 1 ? std::to_string(first)
                        : std::to_string(first) + "-" + std::to_string(first + width - 1)) +
            " " + name;
  };
  if (ds.has_forces()) add(-1, 3, "the forces");
  const auto& columns = ds.extra_columns();
  for (size_t k = 0; k < columns.size(); ++k) add(int(k), columns[k].n_cols, columns[k].name);
  s.input_sources.clear();
  s.input_names.clear();
  for (int64_t col : s.input_columns) {
    if (col - 4 >= int64_t(layout.size()))
      throw ConfigError(kVars + "input_node_features: column " + std::to_string(col) +
                            " is not in the data: the per-atom columns of " + ds.path() + " are " +
                            have,
                        "store per-atom inputs with `ddgnn convert --extra-columns NAME` (they "
                        "follow the forces, in the order of the file's columns), or leave the "
                        "column out");
    const auto src = layout[size_t(col - 4)];
    if (src.first < 0)
      check_input_feature(s, col, src, "", 3);
    else
      check_input_feature(s, col, src, columns[size_t(src.first)].name,
                          columns[size_t(src.first)].n_cols);
    if (src.first < 0 && s.targets.predicts_forces())
      throw ConfigError(kVars + "input_node_features: column " + std::to_string(col) +
                            " is a force component, which this model also predicts",
                        "a target cannot be an input: leave columns 4-6 out");
    s.input_sources.push_back(src);
    s.input_names.push_back(src.first < 0 ? "forces" : columns[size_t(src.first)].name);
  }
}

// A head of direct forces (`what` names it in messages): none with conservative forces, the data
// must have forces, and the head must be a node head of 3 values.
void check_forces_head(const HeadTarget& t, const TrainSettings& s, const Dataset& ds,
                       const std::string& what, const std::string& hint_have) {
  const std::string key = kVars + (t.feature_index >= 0 ? "output_index: " : "output_names: ");
  if (s.targets.conservative)
    throw ConfigError(
        key + what + " is redundant: with " +
            (s.gnn.interatomic_potential ? "enable_interatomic_potential" : "compute_grad_energy") +
            " forces are -dE/dx of the energy head",
        "remove the '" + t.name + "' head (force_weight sets the weight of the forces)");
  if (!ds.has_forces())
    throw ConfigError(key + what + ": " + ds.path() + " has no forces",
                      "convert a file with a forces column, or remove the head; " + hint_have);
  if (t.kind != HeadSpec::kNode || t.dim != 3)
    throw ConfigError(kVars + "type: " + what +
                      " (the forces) must be type \"node\" with output_dim 3");
}

// A head bound by output_index to an entry of Dataset.node_features / graph_features
// (t.data_name, checked against its meaning by train_settings): the energy, the forces, or the
// data's column of that name at the head's level, of the head's width.
void bind_by_index(HeadTarget& t, const TrainSettings& s, const Dataset& ds,
                   const std::string& hint_have) {
  const bool node = t.kind == HeadSpec::kNode;
  const std::string what = "head '" + t.name + "' (output_index " +
                           std::to_string(t.feature_index) + ": Dataset." +
                           (node ? "node" : "graph") + "_features entry '" + t.data_name +
                           "', dim " + std::to_string(t.dim) + ")";
  switch (feature_meaning(t.data_name, node)) {
    case FeatureMeaning::kEnergy:
      t.source = TargetSource::kEnergy;
      return;
    case FeatureMeaning::kForces:
      check_forces_head(t, s, ds, what, hint_have);
      t.source = TargetSource::kForces;
      return;
    default:
      break;
  }
  const auto& cols = node ? ds.extra_columns() : ds.graph_columns();
  const int k = column_index(cols, t.data_name);
  if (k < 0)
    throw ConfigError(kVars + "output_index: " + what + " is not in the data",
                      hint_have + "; convert the data with " +
                          (node ? "--extra-columns " : "--info-keys ") + t.data_name + " (" +
                          (node ? "a per-atom column" : "a number per structure") +
                          "), or point output_index at an entry the file holds");
  if (cols[size_t(k)].n_cols != t.dim)
    throw ConfigError(kVars + "output_index: " + what + ": the " +
                          (node ? "per-atom column" : "per-structure key") + " '" + t.data_name +
                          "' of " + ds.path() + " has " + std::to_string(cols[size_t(k)].n_cols) +
                          " value(s)",
                      "write dim " + std::to_string(cols[size_t(k)].n_cols) + " for '" +
                          t.data_name + "' in Dataset." + (node ? "node" : "graph") +
                          "_features (and the head's output_dim), or convert the data again");
  t.source = TargetSource::kColumn;
  t.column = k;
}

}  // namespace

void bind_targets(TrainSettings& s, const Dataset& ds) {
  const auto& columns = ds.extra_columns();
  const auto& graph_columns = ds.graph_columns();
  std::vector<std::string> have = {"energy (graph, 1)"};
  if (ds.has_forces()) have.push_back("forces (node, 3)");
  for (const auto& col : columns)
    have.push_back(col.name + " (node, " + std::to_string(col.n_cols) + ")");
  for (const auto& col : graph_columns)
    have.push_back(col.name + " (graph, " + std::to_string(col.n_cols) + ")");
  const std::string hint_have = ds.path() + " holds: " + join(have);
  for (auto& t : s.targets.heads) {
    if (t.feature_index >= 0) {
      bind_by_index(t, s, ds, hint_have);
      continue;
    }
    if (is_energy_head_name(t.name)) {
      t.source = TargetSource::kEnergy;
      continue;
    }
    if (is_forces_head_name(t.name)) {
      check_forces_head(t, s, ds, "head '" + t.name + "'", hint_have);
      t.source = TargetSource::kForces;
      continue;
    }
    const int atom_col = column_index(columns, t.name);
    const int graph_col = column_index(graph_columns, t.name);
    if (atom_col < 0 && graph_col < 0)
      throw ConfigError(kVars + "output_names: head '" + t.name + "' is not in the data",
                        hint_have + "; convert the data with --info-keys " + t.name +
                            " (a number per structure, for a graph head) or --extra-columns " +
                            t.name + " (a per-atom column, for a node head)");
    const bool per_atom = atom_col >= 0;
    const int n_cols =
        per_atom ? columns[size_t(atom_col)].n_cols : graph_columns[size_t(graph_col)].n_cols;
    if (t.kind != (per_atom ? HeadSpec::kNode : HeadSpec::kGraph) || t.dim != n_cols)
      throw ConfigError(kVars + "type: head '" + t.name + "' is a " +
                            (per_atom ? "per-atom column" : "per-structure key") + " of " +
                            std::to_string(n_cols) + " value(s): it must be type \"" +
                            (per_atom ? "node" : "graph") + "\" with output_dim " +
                            std::to_string(n_cols),
                        hint_have);
    t.source = TargetSource::kColumn;
    t.column = per_atom ? atom_col : graph_col;
  }
  bind_inputs(s, ds);
  s.branch_column = -1;
  const int branch = column_index(graph_columns, kBranchKey);
  if (s.gnn.num_branches() > 1 && branch >= 0) {
    if (graph_columns[size_t(branch)].n_cols != 1)
      throw ConfigError(ds.path() + ": the per-structure key " + kBranchKey +
                            " that names each structure's branch of the heads has " +
                            std::to_string(graph_columns[size_t(branch)].n_cols) +
                            " values; it must have one",
                        "write one integer per structure, 0 for the first branch");
    s.branch_column = branch;
  }
  if (!s.gnn.graph_attr_mode.empty()) {
    const int attr = column_index(graph_columns, kGraphAttrKey);
    if (attr < 0)
      throw ConfigError(kArch + "use_graph_attr_conditioning: " + ds.path() +
                            " has no per-structure key " + kGraphAttrKey +
                            " (the attributes each structure is conditioned on)",
                        "convert the data with --info-keys " + std::string(kGraphAttrKey) +
                            " (e.g. graph_attr=\"0 1\" on each frame's comment line: charge and "
                            "spin), or set use_graph_attr_conditioning false; " +
                            hint_have);
    s.graph_attr_column = attr;
    s.gnn.graph_attr_dim = graph_columns[size_t(attr)].n_cols;
  }
  if (s.targets.conservative && s.weights.force_weight > 0.0 && !ds.has_forces())
    throw ConfigError(kArch + "force_weight: the loss has a force term (force_weight " +
                          std::to_string(s.weights.force_weight) + ") but " + ds.path() +
                          " has no forces",
                      "set Architecture.force_weight 0 to train on energies only, or convert a "
                      "file with a forces column");
}

bool names_a_branch(double value, int64_t n_branches) {
  return value >= 0 && value < double(n_branches) && value == std::floor(value);
}

BranchReport check_branches(const TrainSettings& s, const TrainData& data) {
  BranchReport report;
  const int64_t n = s.gnn.num_branches();
  if (n == 1) return report;
  if (s.branch_column < 0) {
    report.warning = std::to_string(n) + " branches of output_heads, but " +
                     data.dataset(kTrain).path() + " has no per-structure key " + kBranchKey +
                     ": every structure goes through branch-0 (as in HydraGNN), the other " +
                     "branches are not trained; convert the data with --info-keys " + kBranchKey +
                     " (0, 1, ... naming each structure's data set)";
    return report;
  }
  // Per split: graphs per branch, then the graphs whose value is not a branch.
  std::vector<long double> count(size_t(3 * (n + 1)), 0.0L);
  std::string example;
  for (int split : {kTrain, kValidate, kTest})
    data.visit_local_light(split, [&](const GraphBlock& block, const std::vector<int64_t>& ids) {
      const auto& col = block.graph_extra[size_t(s.branch_column)];
      for (int64_t id : ids) {
        const double v = col[size_t(id)];
        const bool ok = names_a_branch(v, n);
        count[size_t(split * (n + 1) + (ok ? int64_t(v) : n))] += 1;
        if (!ok && example.empty())
          example = "graph " + std::to_string(block.id_of(size_t(id))) + " has " + kBranchKey +
                    " " + fmt("%g", v) + "; ";
      }
    });
  data.sum_stats(count.data(), int64_t(count.size()));
  const long double bad = count[size_t(n)] + count[size_t(2 * n + 1)] + count[size_t(3 * n + 2)];
  if (bad > 0)
    throw DataError(data.dataset(kTrain).path() + ": " + std::to_string(int64_t(bad)) +
                        " structure(s) name no branch of the heads in " + kBranchKey + " (" +
                        example + "the branches are 0 to " + std::to_string(n - 1) + ")",
                    std::string("number each structure's data set from 0 in ") + kBranchKey +
                        ", with one branch of output_heads for each");
  for (int64_t b = 0; b < n; ++b) report.train_graphs.push_back(int64_t(count[size_t(b)]));
  return report;
}

void bind_to_dataset(ModelSetup& setup, const Dataset& ds) {
  std::string have = ds.has_forces() ? "forces (3)" : "no forces";
  for (const auto& c : ds.extra_columns())
    have += ", " + c.name + " (per atom, " + std::to_string(c.n_cols) + ")";
  for (const auto& c : ds.graph_columns())
    have += ", " + c.name + " (per structure, " + std::to_string(c.n_cols) + ")";
  for (HeadTarget& t : setup.targets.heads) {
    if (t.source != TargetSource::kColumn) continue;
    const bool per_atom = t.kind == HeadSpec::kNode;
    const auto& cols = per_atom ? ds.extra_columns() : ds.graph_columns();
    const int k = column_index(cols, t.target_name());
    if (k < 0 || cols[size_t(k)].n_cols != t.dim)
      throw DataError(ds.path() + ": the model's head '" + t.name + "' needs a " +
                          (per_atom ? "per-atom" : "per-structure") + " column '" +
                          t.target_name() + "' of " + std::to_string(t.dim) +
                          " value(s); the file holds " + have,
                      "evaluate a file converted with the same --extra-columns / --info-keys");
    t.column = k;
  }
  for (size_t i = 0; i < setup.inputs.sources.size(); ++i) {
    const std::string& name = setup.inputs.names[i];
    auto& src = setup.inputs.sources[i];
    const bool forces = name == "forces";
    const int k = forces ? -1 : column_index(ds.extra_columns(), name);  // -1: forces, or not found
    const int width =
        forces ? (ds.has_forces() ? 3 : 0) : (k >= 0 ? ds.extra_columns()[size_t(k)].n_cols : 0);
    if (src.second >= width)
      throw DataError(ds.path() + ": the model reads per-atom input '" + name + "' (value " +
                          std::to_string(src.second + 1) + "); the file holds " + have,
                      "evaluate a file converted with the same --extra-columns");
    src.first = k;
  }
  if (!setup.spec.graph_attr_mode.empty()) {
    setup.graph_attr_column = column_index(ds.graph_columns(), kGraphAttrKey);
    if (setup.graph_attr_column < 0 ||
        ds.graph_columns()[size_t(setup.graph_attr_column)].n_cols != setup.spec.graph_attr_dim)
      throw DataError(ds.path() + ": the model is conditioned on " +
                          std::to_string(setup.spec.graph_attr_dim) +
                          " attribute(s) per structure, the per-structure key " + kGraphAttrKey +
                          "; the file holds " + have,
                      "evaluate a file converted with --info-keys " + std::string(kGraphAttrKey));
  }
  setup.branch_column = -1;
  if (setup.spec.num_branches() > 1) {
    const int k = column_index(ds.graph_columns(), kBranchKey);
    if (k >= 0 && ds.graph_columns()[size_t(k)].n_cols == 1) setup.branch_column = k;
  }
}

std::string bind_stress(TrainSettings& s, const TrainData& data) {
  // Graphs with a stress and a bulk cell; the sum and sum of squares of their volumes.
  long double v[3] = {0, 0, 0};
  data.visit_local_light(kTrain, [&](const GraphBlock& block, const std::vector<int64_t>& ids) {
    for (int64_t id : ids) {
      if (!block.has_stress(size_t(id))) continue;
      const long double vol = block.volume(size_t(id));
      v[0] += 1;
      v[1] += vol;
      v[2] += vol * vol;
    }
  });
  data.sum_stats(v, 3);
  const long double with_stress = v[0];
  s.targets.stress = s.targets.conservative && s.periodic && with_stress > 0;
  if (s.max_stress_weight() > 0 && !s.targets.stress)
    throw ConfigError(
        s.max_stress_weight_key() + ": " + fmt("%g", s.max_stress_weight()) +
            ", but no graph of the train split of " + data.dataset(kTrain).path() +
            " has a stress and a cell periodic in three directions" +
            (s.periodic ? "" : " (periodic_boundary_conditions is false)"),
        "convert the data with its stress (ddgnn convert --stress-key KEY), or set stress_weight "
        "0");
  if (!s.targets.stress) return "";
  // One volume for every graph: energies and forces say nothing of the pressure.
  const long double mean = v[1] / with_stress;
  const long double spread = std::sqrt(std::max(0.0L, v[2] / with_stress - mean * mean));
  if (spread > 1e-6L * mean) return "";
  return "every train graph with a stress has the same cell volume (" + fmt("%.6g", double(mean)) +
         " Å³): energies and forces say nothing of how the energy changes with volume, so the "
         "mean pressure is set by the stress labels alone" +
         (s.max_stress_weight() > 0
              ? ""
              : "; the stress is reported but not trained (Architecture.stress_weight 0): expect "
                "its mean to be off (results/stress.md)");
}

}  // namespace ddgnn
