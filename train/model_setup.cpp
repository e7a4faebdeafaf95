// The model of a run: heads bound to the data, normalisation, the PNA degree histogram, the
// checkpoint record of all that, and batch preparation.
#include "train/model_setup.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "config/hydragnn_compat.h"
#include "core/error.h"
#include "loader/elements.h"
#include "loader/targets.h"
#include "model/layers/dimenet.h"
#include "model/precision.h"
#include "train/collate.h"
#include "train/run_log.h"
#include "train/train_data.h"

namespace ddgnn {

namespace {

const std::string kArch = "NeuralNetwork.Architecture.";
const std::string kVars = "NeuralNetwork.Variables_of_interest.";

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

// Calls f with each batch of up to 64 graphs of this rank's training split, the first
// `max_graphs` graphs in all, and the batch's graph count.
template <class F>
void visit_train_batches(const TrainData& data, const ModelSetup& setup, int64_t max_graphs,
                         F&& f) {
  int64_t seen = 0;
  data.visit_local(kTrain, [&](const GraphBlock& block, const std::vector<int64_t>& all) {
    for (size_t i = 0; i < all.size() && seen < max_graphs; i += 64) {
      const size_t end = std::min(all.size(), i + size_t(std::min<int64_t>(64, max_graphs - seen)));
      const std::vector<int64_t> ids(all.begin() + long(i), all.begin() + long(end));
      seen += int64_t(ids.size());
      f(prepare_batch(block, ids, setup), int64_t(ids.size()));
    }
  });
}

// The in-degree histogram over (at most `max_graphs` graphs of) the training split (PNA's degrees,
// MACE's mean), this rank's share of them; summed over the ranks by the caller.
std::vector<int64_t> degree_histogram(const TrainData& data, const ModelSetup& setup,
                                      int64_t max_graphs) {
  std::vector<int64_t> hist;
  visit_train_batches(data, setup, max_graphs, [&](const PreparedBatch& b, int64_t) {
    const at::Tensor deg = at::bincount(b.batch.edge_index[1], {}, b.batch.n_atoms());
    const at::Tensor h = at::bincount(deg);
    const int64_t* hp = h.data_ptr<int64_t>();
    if (hist.size() < size_t(h.numel())) hist.resize(size_t(h.numel()), 0);
    for (int64_t k = 0; k < h.numel(); ++k) hist[size_t(k)] += hp[k];
  });
  return hist;
}

// DimeNet: triplets per graph over (at most `max_graphs` graphs of) this rank's training split,
// the largest mean of a batch of 64 (a training batch of B graphs has about B times it).
double max_triplets_per_graph(const TrainData& data, const ModelSetup& setup, int64_t max_graphs) {
  double most = 0.0;
  visit_train_batches(data, setup, max_graphs, [&](const PreparedBatch& b, int64_t graphs) {
    most = std::max(most, double(dimenet_triplets(b.batch).kj.size(0)) / double(graphs));
  });
  return most;
}

}  // namespace

double Normalizer::energy_offset(const uint8_t* z, int64_t n_atoms) const {
  double sum = 0.0;
  for (int64_t i = 0; i < n_atoms; ++i) sum += reference_energy[z[i]];
  return sum + double(n_atoms) * mean_residual_per_atom;
}

nlohmann::json to_json(const ModelSetup& s) {
  nlohmann::json targets = nlohmann::json::array();
  for (const auto& t : s.targets.heads) targets.push_back(to_json(t));
  std::vector<double> ref(s.norm.reference_energy.begin(), s.norm.reference_energy.end());
  return {{"spec", spec_to_json(s.spec)},
          {"targets", targets},
          {"energy_head", s.targets.energy_head},
          {"conservative", s.targets.conservative},
          {"stress", s.targets.stress},
          {"radius", s.graph.radius},
          {"max_neighbours", s.graph.max_neighbours},
          {"smooth_neighbour_cap", s.graph.smooth_cap},
          {"periodic", s.periodic},
          {"dtype", to_string(s.precision)},
          {"node_inputs",
           {{"sources", s.inputs.sources},
            {"names", s.inputs.names},
            {"mean", s.inputs.mean},
            {"std", s.inputs.std}}},
          {"normalizer",
           {{"reference_energy", ref},
            {"mean_residual_per_atom", s.norm.mean_residual_per_atom},
            {"scale", s.norm.scale},
            {"column_mean", s.norm.column_mean},
            {"column_std", s.norm.column_std},
            {"e0s_given", s.norm.e0s_given}}}};
}

ModelSetup model_setup_from_json(const nlohmann::json& j) {
  ModelSetup s;
  try {
    s.spec = spec_from_json(j.at("spec"));
    for (const auto& t : j.at("targets")) s.targets.heads.push_back(head_target_from_json(t));
    s.targets.energy_head = j.at("energy_head");
    s.targets.conservative = j.at("conservative");
    s.targets.stress = j.value("stress", false);
    s.graph.radius = j.at("radius");
    s.graph.max_neighbours = j.at("max_neighbours");
    s.graph.smooth_cap = j.value("smooth_neighbour_cap", false);
    s.periodic = j.at("periodic");
    s.precision = parse_precision(j.at("dtype"));
    if (j.contains("node_inputs")) {
      const auto& in = j.at("node_inputs");
      s.inputs.sources = in.at("sources").get<std::vector<std::pair<int, int>>>();
      s.inputs.names = in.at("names").get<std::vector<std::string>>();
      s.inputs.mean = in.at("mean").get<std::vector<double>>();
      s.inputs.std = in.at("std").get<std::vector<double>>();
    }
    if (int64_t(s.inputs.sources.size()) != s.spec.node_inputs ||
        s.inputs.mean.size() != s.inputs.sources.size() ||
        s.inputs.names.size() != s.inputs.sources.size() ||
        s.inputs.std.size() != s.inputs.sources.size())
      throw DataError("checkpoint record: the model reads " + std::to_string(s.spec.node_inputs) +
                      " per-atom input(s) but the record maps " +
                      std::to_string(s.inputs.sources.size()));
    const auto& n = j.at("normalizer");
    const auto ref = n.at("reference_energy").get<std::vector<double>>();
    if (ref.size() != s.norm.reference_energy.size())
      throw DataError("checkpoint record: reference_energy has " + std::to_string(ref.size()) +
                      " entries, expected " + std::to_string(s.norm.reference_energy.size()));
    std::copy(ref.begin(), ref.end(), s.norm.reference_energy.begin());
    s.norm.mean_residual_per_atom = n.at("mean_residual_per_atom");
    s.norm.scale = n.at("scale");
    s.norm.column_mean = n.at("column_mean").get<std::vector<std::vector<double>>>();
    s.norm.column_std = n.at("column_std").get<std::vector<std::vector<double>>>();
    s.norm.e0s_given = n.value("e0s_given", false);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("checkpoint record: ") + e.what(),
                    "the checkpoint was not written by this version of ddgnn");
  }
  return s;
}

namespace {

// Input value (source, component) of atom `a` (block-relative) of `block`.
double node_input(const GraphBlock& block, std::pair<int, int> source, int64_t a) {
  if (source.first < 0) return block.forces[size_t(3 * a + source.second)];
  const auto& col = block.extra[size_t(source.first)];
  const int64_t w = int64_t(col.size()) / std::max<int64_t>(int64_t(block.z.size()), 1);
  return col[size_t(a * w + source.second)];
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
    if (src.first < 0 && s.targets.predicts_forces())
      throw ConfigError(kVars + "input_node_features: column " + std::to_string(col) +
                            " is a force component, which this model also predicts",
                        "a target cannot be an input: leave columns 4-6 out");
    s.input_sources.push_back(src);
    s.input_names.push_back(src.first < 0 ? "forces" : columns[size_t(src.first)].name);
  }
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
    if (is_energy_head_name(t.name)) {
      t.source = TargetSource::kEnergy;
      continue;
    }
    if (is_forces_head_name(t.name)) {
      if (s.targets.conservative)
        throw ConfigError(
            kVars + "output_names: head '" + t.name + "' is redundant: with " +
                (s.gnn.interatomic_potential ? "enable_interatomic_potential"
                                             : "compute_grad_energy") +
                " forces are -dE/dx of the energy head",
            "remove the '" + t.name + "' head (force_weight sets the weight of the forces)");
      if (!ds.has_forces())
        throw ConfigError(
            kVars + "output_names: head '" + t.name + "': " + ds.path() + " has no forces",
            "convert a file with a forces column, or remove the head; " + hint_have);
      if (t.kind != HeadSpec::kNode || t.dim != 3)
        throw ConfigError(kVars + "type: head '" + t.name +
                          "' (the forces) must be type \"node\" with output_dim 3");
      t.source = TargetSource::kForces;
      continue;
    }
    const auto named = [&](const ColumnInfo& col) { return col.name == t.name; };
    const auto it = std::find_if(columns.begin(), columns.end(), named);
    const auto git = std::find_if(graph_columns.begin(), graph_columns.end(), named);
    if (it == columns.end() && git == graph_columns.end())
      throw ConfigError(kVars + "output_names: head '" + t.name + "' is not in the data",
                        hint_have + "; convert the data with --info-keys " + t.name +
                            " (a number per structure, for a graph head) or --extra-columns " +
                            t.name + " (a per-atom column, for a node head)");
    const bool per_atom = it != columns.end();
    const int n_cols = per_atom ? it->n_cols : git->n_cols;
    if (t.kind != (per_atom ? HeadSpec::kNode : HeadSpec::kGraph) || t.dim != n_cols)
      throw ConfigError(kVars + "type: head '" + t.name + "' is a " +
                            (per_atom ? "per-atom column" : "per-structure key") + " of " +
                            std::to_string(n_cols) + " value(s): it must be type \"" +
                            (per_atom ? "node" : "graph") + "\" with output_dim " +
                            std::to_string(n_cols),
                        hint_have);
    t.source = TargetSource::kColumn;
    t.column = int(per_atom ? it - columns.begin() : git - graph_columns.begin());
  }
  bind_inputs(s, ds);
  if (s.targets.conservative && s.weights.force_weight > 0.0 && !ds.has_forces())
    throw ConfigError(kArch + "force_weight: the loss has a force term (force_weight " +
                          std::to_string(s.weights.force_weight) + ") but " + ds.path() +
                          " has no forces",
                      "set Architecture.force_weight 0 to train on energies only, or convert a "
                      "file with a forces column");
}

void bind_to_dataset(ModelSetup& setup, const Dataset& ds) {
  const auto find = [](const std::vector<ColumnInfo>& cols, const std::string& name) {
    for (size_t k = 0; k < cols.size(); ++k)
      if (cols[k].name == name) return int(k);
    return -1;
  };
  std::string have = ds.has_forces() ? "forces (3)" : "no forces";
  for (const auto& c : ds.extra_columns())
    have += ", " + c.name + " (per atom, " + std::to_string(c.n_cols) + ")";
  for (const auto& c : ds.graph_columns())
    have += ", " + c.name + " (per structure, " + std::to_string(c.n_cols) + ")";
  for (HeadTarget& t : setup.targets.heads) {
    if (t.source != TargetSource::kColumn) continue;
    const bool per_atom = t.kind == HeadSpec::kNode;
    const auto& cols = per_atom ? ds.extra_columns() : ds.graph_columns();
    const int k = find(cols, t.name);
    if (k < 0 || cols[size_t(k)].n_cols != t.dim)
      throw DataError(ds.path() + ": the model's head '" + t.name + "' needs a " +
                          (per_atom ? "per-atom" : "per-structure") + " column '" + t.name +
                          "' of " + std::to_string(t.dim) + " value(s); the file holds " + have,
                      "evaluate a file converted with the same --extra-columns / --info-keys");
    t.column = k;
  }
  for (size_t i = 0; i < setup.inputs.sources.size(); ++i) {
    const std::string& name = setup.inputs.names[i];
    auto& src = setup.inputs.sources[i];
    const bool forces = name == "forces";
    const int k = forces ? -1 : find(ds.extra_columns(), name);  // -1: forces, or not found
    const int width =
        forces ? (ds.has_forces() ? 3 : 0) : (k >= 0 ? ds.extra_columns()[size_t(k)].n_cols : 0);
    if (src.second >= width)
      throw DataError(ds.path() + ": the model reads per-atom input '" + name + "' (value " +
                          std::to_string(src.second + 1) + "); the file holds " + have,
                      "evaluate a file converted with the same --extra-columns");
    src.first = k;
  }
}

std::string bind_stress(TrainSettings& s, const TrainData& data) {
  // Graphs with a stress and a bulk cell; the sum and sum of squares of their volumes.
  long double v[3] = {0, 0, 0};
  data.visit_local(kTrain, [&](const GraphBlock& block, const std::vector<int64_t>& ids) {
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
  if (s.weights.stress_weight > 0 && !s.targets.stress)
    throw ConfigError(
        "NeuralNetwork.Architecture.stress_weight: " + fmt("%g", s.weights.stress_weight) +
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
         (s.weights.stress_weight > 0
              ? ""
              : "; the stress is reported but not trained (Architecture.stress_weight 0): expect "
                "its mean to be off (results/stress.md)");
}

ModelSetup make_model_setup(const TrainSettings& s, const TrainData& data,
                            const nlohmann::json* resume) {
  ModelSetup setup;
  setup.spec = s.gnn;
  setup.targets = s.targets;
  setup.graph = s.graph;
  setup.periodic = s.periodic;
  setup.precision = s.precision;
  auto sum = [&](long double* v, int64_t n) { data.sum_stats(v, n); };
  if (resume) {
    const ModelSetup saved = model_setup_from_json(resume->at("model"));
    nlohmann::json mine = spec_to_json(setup.spec), theirs = spec_to_json(saved.spec);
    for (const char* fitted : {"pna_deg", "avg_num_neighbors"}) {  // fitted to the training set
      mine.erase(fitted);
      theirs.erase(fitted);
    }
    mine["precision"] = to_string(setup.precision);
    theirs["precision"] = to_string(saved.precision);
    const auto diff = spec_differences(theirs, mine);
    if (!diff.empty()) {
      std::string what;
      for (const auto& d : diff) what += (what.empty() ? "" : "; ") + d;
      throw DataError("the checkpoint holds another model (checkpoint vs config): " + what,
                      "resume with the config that wrote it, or start a new Output.run_dir");
    }
    setup.spec.layer.pna_deg = saved.spec.layer.pna_deg;
    setup.spec.layer.avg_num_neighbors = saved.spec.layer.avg_num_neighbors;
    setup.norm = saved.norm;
    setup.inputs = saved.inputs;
    setup.targets.stress = saved.targets.stress;
    return setup;
  }
  setup.inputs.sources = s.input_sources;
  setup.inputs.names = s.input_names;
  if (!s.input_sources.empty()) {  // mean and spread of each input over the training split
    const size_t k = s.input_sources.size();
    std::vector<long double> acc(2 * k + 1, 0.0L);
    data.visit_local(kTrain, [&](const GraphBlock& block, const std::vector<int64_t>& ids) {
      for (int64_t id : ids) {
        const int64_t a0 = block.atom_start[size_t(id)], na = block.n_atoms[size_t(id)];
        for (int64_t a = a0; a < a0 + na; ++a, acc.back() += 1)
          for (size_t i = 0; i < k; ++i) {
            const double v = node_input(block, s.input_sources[i], a);
            acc[i] += v;
            acc[k + i] += (long double)v * v;
          }
      }
    });
    sum(acc.data(), int64_t(acc.size()));
    for (size_t i = 0; i < k; ++i) {
      const long double n = std::max(acc.back(), 1.0L);
      const double mean = double(acc[i] / n), var = double(acc[k + i] / n) - mean * mean;
      setup.inputs.mean.push_back(mean);
      setup.inputs.std.push_back(var > 1e-24 ? std::sqrt(var) : 1.0);
    }
  }
  setup.norm = fit_normalizer([&](const auto& f) { data.visit_local(kTrain, f); }, sum,
                              setup.targets.heads, s.needs_forces(), s.e0s);
  if (setup.spec.mpnn_type == "DimeNet") {  // the triplets' memory, before the first step
    // Every rank checks its share of the training split; all stop if any share exceeds.
    const double batch = max_triplets_per_graph(data, setup, 2000) * double(s.batch_size);
    const bool over = batch > double(setup.spec.layer.max_triplets);
    long double tally[2] = {over ? 1.0L : 0.0L, over ? (long double)batch : 0.0L};
    sum(tally, 2);
    if (tally[0] > 0)
      throw ConfigError("DimeNet: batches of " + std::to_string(s.batch_size) + " graphs of " +
                            "this training set have up to about " +
                            std::to_string(int64_t(tally[1] / tally[0])) + " triplets, above " +
                            "Architecture.max_triplets (" +
                            std::to_string(setup.spec.layer.max_triplets) + ")",
                        "lower Training.batch_size or Architecture.radius, or raise "
                        "Architecture.max_triplets if the memory allows (about 1 KB per triplet "
                        "at int_emb_size 64)");
  }
  const bool fit_avg = setup.spec.mpnn_type == "MACE" && setup.spec.layer.avg_num_neighbors == 0.0;
  const bool pna = setup.spec.mpnn_type == "PNA" || setup.spec.mpnn_type == "PNAPlus" ||
                   setup.spec.mpnn_type == "PNAEq";
  if (pna || fit_avg) {
    const std::vector<int64_t> local = degree_histogram(data, setup, 2000);
    long double n = (long double)local.size();
    sum(&n, 1);
    std::vector<long double> h(size_t(n), 0.0L);
    for (size_t k = 0; k < local.size(); ++k) h[k] = (long double)local[k];
    sum(h.data(), int64_t(h.size()));  // histograms are padded to the longest first
    std::vector<int64_t>& deg = setup.spec.layer.pna_deg;
    deg.assign(h.size(), 0);
    for (size_t k = 0; k < h.size(); ++k) deg[k] = int64_t(h[k]);
    while (deg.size() > 1 && deg.back() == 0) deg.pop_back();
    if (fit_avg) {  // MACE: the mean in-degree (1 when the sample has no edges)
      long double atoms = 0, edges = 0;
      for (size_t k = 0; k < h.size(); ++k) atoms += h[k], edges += (long double)k * h[k];
      setup.spec.layer.avg_num_neighbors = edges > 0 ? double(edges / atoms) : 1.0;
    }
    if (!pna) deg.clear();
  }
  return setup;
}

namespace {

// Dataset.e0s by atomic number (NaN where none is given); ConfigError naming an unknown element.
std::array<double, kMaxAtomicNumber + 1> e0s_by_z(const std::map<std::string, double>& e0s) {
  std::array<double, kMaxAtomicNumber + 1> out;
  out.fill(std::nan(""));
  for (const auto& [name, energy] : e0s) {
    int z = atomic_number(name);
    if (z <= 0 && !name.empty() &&
        std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        name.size() <= 3)
      z = std::stoi(name);
    if (z < 1 || z > kMaxAtomicNumber)
      throw ConfigError("Dataset.e0s: \"" + name + "\" is not an element",
                        "key each energy by an element symbol (\"Cu\") or atomic number (\"29\")");
    if (!std::isfinite(energy))
      throw ConfigError("Dataset.e0s." + name + ": the energy is not finite");
    out[size_t(z)] = energy;
  }
  return out;
}

}  // namespace

Normalizer fit_normalizer(const VisitChunks& visit, const SumAcrossRanks& sum,
                          const std::vector<HeadTarget>& targets, bool use_forces,
                          const std::map<std::string, double>& e0s) {
  const auto fixed = e0s_by_z(e0s);
  const TargetStats st = compute_target_stats(visit, sum, e0s.empty() ? nullptr : &fixed);
  Normalizer n;
  n.e0s_given = !e0s.empty();
  n.reference_energy = st.reference_energy;
  n.mean_residual_per_atom = st.residual_mean_per_atom;
  const double spread = use_forces && st.force_rms > 0 ? st.force_rms : st.residual_std_per_atom;
  n.scale = spread > 1e-12 && std::isfinite(spread) ? spread : 1.0;
  n.column_mean.resize(targets.size());
  n.column_std.resize(targets.size());
  for (size_t k = 0; k < targets.size(); ++k) {
    if (targets[k].source != TargetSource::kColumn) continue;
    const int64_t d = targets[k].dim;
    // [sum (d), sum of squares (d), count]
    std::vector<long double> acc(size_t(2 * d + 1), 0.0L);
    const bool per_atom = targets[k].kind == HeadSpec::kNode;
    visit([&](const GraphBlock& block, const std::vector<int64_t>& ids) {
      const auto& col = (per_atom ? block.extra : block.graph_extra)[size_t(targets[k].column)];
      for (int64_t id : ids) {
        const int64_t a0 = per_atom ? block.atom_start[size_t(id)] : id;
        const int64_t na = per_atom ? block.n_atoms[size_t(id)] : 1;
        for (int64_t a = a0; a < a0 + na; ++a, acc.back() += 1)
          for (int64_t c = 0; c < d; ++c) {
            const double v = col[size_t(a * d + c)];
            acc[size_t(c)] += v;
            acc[size_t(d + c)] += (long double)v * v;
          }
      }
    });
    sum(acc.data(), int64_t(acc.size()));
    const long double count = acc.back();
    for (int64_t c = 0; c < d; ++c) {
      const double mean = count > 0 ? double(acc[size_t(c)] / count) : 0.0;
      const double var = count > 0 ? double(acc[size_t(d + c)] / count) - mean * mean : 0.0;
      n.column_mean[k].push_back(mean);
      n.column_std[k].push_back(var > 1e-24 ? std::sqrt(var) : 1.0);
    }
  }
  return n;
}

Normalizer fit_normalizer(const GraphBlock& block, const std::vector<int64_t>& ids,
                          const std::vector<HeadTarget>& targets, bool use_forces) {
  return fit_normalizer([&](const auto& f) { f(block, ids); }, [](long double*, int64_t) {},
                        targets, use_forces);
}

PreparedBatch prepare_batch(const GraphBlock& block, const std::vector<int64_t>& ids,
                            const ModelSetup& setup) {
  const auto t0 = std::chrono::steady_clock::now();
  PreparedBatch p;
  p.ids = ids;
  p.batch =
      collate(block, ids, setup.graph, to_dtype(setup.precision), setup.periodic, setup.device);
  // An atom without a neighbour within the radius exchanges no message: its energy would be a
  // constant of its species and its force zero, whatever the data says. (On a GPU, one copy of
  // the receivers' offsets to the host, on the loader's thread.)
  const at::Tensor ptr_host = p.batch.receivers->ptr.cpu().contiguous();
  const int64_t* ptr = ptr_host.data_ptr<int64_t>();
  for (size_t g = 0, atom = 0; g < ids.size(); ++g) {
    const size_t id = size_t(ids[g]);
    for (int64_t a = 0; a < block.n_atoms[id]; ++a, ++atom)
      if (ptr[atom + 1] == ptr[atom]) {
        const bool alone = block.n_atoms[id] == 1;
        throw DataError(
            "graph " + std::to_string(block.id_of(id)) + ": atom " + std::to_string(a) +
                " (Z=" + std::to_string(int(block.z[size_t(block.atom_start[id] + a)])) + ") " +
                (alone ? "is the graph's only atom and has" : "has") +
                " no neighbour within the radius " + std::to_string(setup.graph.radius) +
                " Å: the model cannot learn its energy or force",
            alone ? "remove single-atom frames (e.g. isolated-atom reference energies: ddgnn fits "
                    "reference energies by least squares) from the data"
                  : "increase NeuralNetwork.Architecture.radius, or remove the structure");
      }
  }
  const Normalizer& norm = setup.norm;
  std::vector<double> e(ids.size());
  p.offset.resize(ids.size());
  for (size_t g = 0; g < ids.size(); ++g) {
    const size_t id = size_t(ids[g]);
    p.offset[g] = norm.energy_offset(block.z.data() + block.atom_start[id], block.n_atoms[id]);
    e[g] = (block.energy[id] - p.offset[g]) / norm.scale;
  }
  p.batch.energy = at::tensor(e, at::kDouble).to(setup.device, to_dtype(setup.precision));
  if (p.batch.forces.defined()) p.batch.forces = p.batch.forces / norm.scale;
  if (p.batch.stress.defined()) p.batch.stress = p.batch.stress / norm.scale;
  if (!setup.inputs.sources.empty()) {
    const size_t k = setup.inputs.sources.size();
    std::vector<double> v;
    v.reserve(size_t(p.batch.n_atoms()) * k);
    for (int64_t id : ids) {
      const int64_t a0 = block.atom_start[size_t(id)], na = block.n_atoms[size_t(id)];
      for (int64_t a = a0; a < a0 + na; ++a)
        for (size_t i = 0; i < k; ++i)
          v.push_back((node_input(block, setup.inputs.sources[i], a) - setup.inputs.mean[i]) /
                      setup.inputs.std[i]);
    }
    p.batch.node_inputs = at::tensor(v, at::kDouble)
                              .view({-1, int64_t(k)})
                              .to(setup.device, to_dtype(setup.precision));
  }
  p.columns.resize(setup.targets.heads.size());
  for (size_t k = 0; k < setup.targets.heads.size(); ++k) {
    const HeadTarget& t = setup.targets.heads[k];
    if (t.source != TargetSource::kColumn) continue;
    const bool per_atom = t.kind == HeadSpec::kNode;
    const auto& col = (per_atom ? block.extra : block.graph_extra)[size_t(t.column)];
    const int64_t d = t.dim;
    std::vector<double> v;
    v.reserve(size_t((per_atom ? p.batch.n_atoms() : int64_t(ids.size())) * d));
    for (int64_t id : ids) {
      const int64_t a0 = per_atom ? block.atom_start[size_t(id)] : id;
      const int64_t na = per_atom ? block.n_atoms[size_t(id)] : 1;
      for (int64_t a = a0; a < a0 + na; ++a)
        for (int64_t c = 0; c < d; ++c)
          v.push_back((col[size_t(a * d + c)] - norm.column_mean[k][size_t(c)]) /
                      norm.column_std[k][size_t(c)]);
    }
    p.columns[k] =
        at::tensor(v, at::kDouble).view({-1, d}).to(setup.device, to_dtype(setup.precision));
  }
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

std::vector<double> to_doubles(const at::Tensor& t, double scale) {
  const at::Tensor d = t.detach().to(at::kCPU, at::kDouble).contiguous();
  std::vector<double> out(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
  if (scale != 1.0)
    for (auto& v : out) v *= scale;
  return out;
}

std::vector<double> energies_ev(const at::Tensor& energy_n, const PreparedBatch& b,
                                const Normalizer& norm) {
  std::vector<double> e = to_doubles(energy_n, norm.scale);
  for (size_t g = 0; g < e.size(); ++g) e[g] += b.offset[g];
  return e;
}

}  // namespace ddgnn
