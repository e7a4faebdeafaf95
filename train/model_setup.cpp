// The model of a run: heads bound to the data, normalisation, the PNA degree histogram, the
// checkpoint record of all that, and batch preparation.
#include "train/model_setup.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "core/log.h"
#include "loader/elements.h"
#include "loader/targets.h"
#include "model/device_graph.h"
#include "model/gnn.h"
#include "model/layers/dimenet.h"
#include "model/precision.h"
#include "train/collate.h"
#include "train/run_log.h"
#include "train/static_shapes.h"
#include "train/train_data.h"
#include "train/upload.h"

namespace ddgnn {

namespace {

// Appends the mean and the spread (1 where there is none) of each of d components to `mean` and
// `std`, from acc = [sum (d), sum of squares (d), count].
void standardisation(const std::vector<long double>& acc, std::vector<double>& mean,
                     std::vector<double>& std) {
  const size_t d = (acc.size() - 1) / 2;
  const long double count = std::max(acc.back(), 1.0L);
  for (size_t c = 0; c < d; ++c) {
    const double m = double(acc[c] / count), var = double(acc[d + c] / count) - m * m;
    mean.push_back(m);
    std.push_back(var > 1e-24 ? std::sqrt(var) : 1.0);
  }
}

// Input value (source, component) of atom `a` (block-relative) of `block`.
double node_input(const GraphBlock& block, std::pair<int, int> source, int64_t a) {
  if (source.first < 0) return block.forces[size_t(3 * a + source.second)];
  const auto& col = block.extra[size_t(source.first)];
  const int64_t w = int64_t(col.size()) / std::max<int64_t>(int64_t(block.z.size()), 1);
  return col[size_t(a * w + source.second)];
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
    most = std::max(most, double(b.batch.triplets.size(1)) / double(graphs));
  });
  return most;
}

// The atoms of each element in the splits' graphs over every rank: [split * 256 + z].
std::vector<long double> element_counts(const TrainData& data) {
  std::vector<long double> n(3 * 256, 0.0L);
  for (int split : {kTrain, kValidate, kTest})
    data.visit_local_light(split, [&](const GraphBlock& block, const std::vector<int64_t>& ids) {
      for (int64_t id : ids) {
        const int64_t a0 = block.atom_start[size_t(id)];
        for (int64_t a = a0; a < a0 + block.n_atoms[size_t(id)]; ++a)
          n[size_t(split * 256 + block.z[size_t(a)])] += 1;
      }
    });
  data.sum_stats(n.data(), int64_t(n.size()));
  return n;
}

}  // namespace

std::string element_list(const std::vector<int64_t>& elements) {
  std::string out;
  for (int64_t z : elements) {
    const std::string& symbol = element_symbol(int(z));
    out += (out.empty() ? "" : ", ") + (symbol.empty() ? "Z=" + std::to_string(z) : symbol);
  }
  return out;
}

void check_elements_known(const GnnSpec& spec, const std::vector<uint8_t>& z,
                          const std::string& where) {
  if (spec.elements.empty()) return;  // every atomic number 0..max_z (checked by the model)
  bool seen[256] = {};
  for (uint8_t v : z) seen[v] = true;
  std::vector<int64_t> missing;
  for (int v = 0; v < 256; ++v)
    if (seen[v] && !std::binary_search(spec.elements.begin(), spec.elements.end(), int64_t(v)))
      missing.push_back(v);
  if (!missing.empty())
    throw DataError(where + " holds " + element_list(missing) +
                        ", which the model has no weights for (it was trained on " +
                        element_list(spec.elements) + ")",
                    "use a model trained on data that holds these elements");
}

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

ModelSetup make_model_setup(const TrainSettings& s, const TrainData& data,
                            const nlohmann::json* resume) {
  ModelSetup setup;
  setup.spec = s.gnn;
  setup.targets = s.targets;
  setup.graph = s.graph;
  setup.periodic = s.periodic;
  setup.precision = s.precision;
  setup.branch_column = s.branch_column;
  setup.graph_attr_column = s.graph_attr_column;
  auto sum = [&](long double* v, int64_t n) { data.sum_stats(v, n); };
  if (resume) {
    const ModelSetup saved = model_setup_from_json(resume->at("model"));
    nlohmann::json mine = spec_to_json(setup.spec), theirs = spec_to_json(saved.spec);
    for (const char* fitted : {"pna_deg", "avg_num_neighbors", "elements"}) {  // from the data
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
    setup.spec.elements = saved.spec.elements;
    const std::vector<long double> counts = element_counts(data);
    std::vector<uint8_t> present;
    for (int z = 0; z < 256; ++z)
      if (counts[size_t(z)] + counts[size_t(256 + z)] + counts[size_t(512 + z)] > 0)
        present.push_back(uint8_t(z));
    check_elements_known(setup.spec, present, "the run's data");
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
    standardisation(acc, setup.inputs.mean, setup.inputs.std);
  }
  setup.norm = fit_normalizer([&](const auto& f) { data.visit_local(kTrain, f); }, sum,
                              setup.targets.heads, s.needs_forces(), s.e0s);
  // The elements of the data, each with its own rows of the element-indexed weights.
  const std::vector<long double> counts = element_counts(data);
  for (int64_t z = 0; z < 256; ++z)
    if (counts[size_t(z)] + counts[size_t(256 + z)] + counts[size_t(512 + z)] > 0) {
      if (z > setup.spec.max_z)
        throw DataError("the data holds atomic number " + std::to_string(z) + ", above " +
                            std::to_string(setup.spec.max_z),
                        "check the dataset's species (`ddgnn info`)");
      setup.spec.elements.push_back(z);
      if (counts[size_t(z)] == 0) setup.untrained_elements.push_back(z);
    }
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
    standardisation(acc, n.column_mean[k], n.column_std[k]);
  }
  return n;
}

Normalizer fit_normalizer(const GraphBlock& block, const std::vector<int64_t>& ids,
                          const std::vector<HeadTarget>& targets, bool use_forces) {
  return fit_normalizer([&](const auto& f) { f(block, ids); }, [](long double*, int64_t) {},
                        targets, use_forces);
}

PreparedBatch prepare_batch(const GraphBlock& block, const std::vector<int64_t>& ids,
                            const ModelSetup& setup, const StepShare* step) {
  const auto t0 = std::chrono::steady_clock::now();
  // Built on the host (cell lists, segment maps, graph inputs, padding), then put on the device at
  // once: what the host must know it computes before the upload, and never reads back.
  const c10::Device host(c10::kCPU);
  const auto dtype = to_dtype(setup.precision);
  PreparedBatch p;
  p.ids = ids;
  p.batch = collate(block, ids, setup.graph, dtype, setup.periodic, host);
  // An atom without a neighbour within the radius exchanges no message: its energy would be a
  // constant of its species and its force zero, whatever the data says.
  const at::Tensor ptr_host = p.batch.receivers->ptr.contiguous();
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
  p.batch.energy = at::tensor(e, at::kDouble).to(dtype);
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
    p.batch.node_inputs = at::tensor(v, at::kDouble).view({-1, int64_t(k)}).to(dtype);
  }
  if (setup.spec.num_branches() > 1 && setup.branch_column >= 0) {
    const auto& col = block.graph_extra[size_t(setup.branch_column)];
    std::vector<int64_t> branch(ids.size());
    for (size_t g = 0; g < ids.size(); ++g) {
      const double v = col[size_t(ids[g])];
      if (!names_a_branch(v, setup.spec.num_branches()))
        throw DataError("graph " + std::to_string(block.id_of(size_t(ids[g]))) + ": " + kBranchKey +
                            " " + fmt("%g", v) + " is not a branch of the heads (0 to " +
                            std::to_string(setup.spec.num_branches() - 1) + ")",
                        std::string("number each structure's data set from 0 in ") + kBranchKey +
                            ", one branch of output_heads for each");
      branch[g] = int64_t(v);
    }
    p.batch.branch = at::tensor(branch, at::kLong);
  }
  if (!setup.spec.graph_attr_mode.empty()) {
    const auto& col = block.graph_extra.at(size_t(setup.graph_attr_column));
    const int64_t k = setup.spec.graph_attr_dim;
    std::vector<double> v;
    v.reserve(ids.size() * size_t(k));
    for (int64_t id : ids) v.insert(v.end(), &col[size_t(id * k)], &col[size_t((id + 1) * k)]);
    p.batch.graph_attr = at::tensor(v, at::kDouble).view({-1, k}).to(dtype);
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
    p.columns[k] = at::tensor(v, at::kDouble).view({-1, d}).to(dtype);
  }
  // What the model reads that depends on the graph alone (DimeNet's triplets, GPS's encodings),
  // made here on the loader's thread rather than inside the step.
  add_graph_inputs(p.batch, setup.spec);
  if (step && setup.static_shapes) pad_to_static_shape(p, setup, *step);
  if (setup.uploader && !setup.device.is_cpu()) {
    setup.uploader->upload(p);
  } else if (!setup.device.is_cpu()) {
    p.batch = to_device(p.batch, setup.device);
    for (at::Tensor& c : p.columns)
      if (c.defined()) c = to_device(c, setup.device);
    if (p.share.defined()) p.share = to_device(p.share, setup.device);
  }
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

void pad_to_static_shape(PreparedBatch& p, const ModelSetup& setup, const StepShare& share) {
  const StaticShapes& shapes = *setup.static_shapes;
  const int k = fit_bucket(shapes.buckets, sizes_of(p.batch));
  if (k < 0) return;  // runs as it is
  const GraphBatch& b = p.batch;
  const int64_t pad_graphs = shapes.buckets[size_t(k)].graphs - b.n_graphs,
                pad_atoms = shapes.buckets[size_t(k)].atoms - b.n_atoms();
  p.batch = pad_batch(b, shapes.buckets[size_t(k)], shapes.pad);
  for (size_t h = 0; h < p.columns.size(); ++h) {
    at::Tensor& c = p.columns[h];
    if (!c.defined()) continue;
    const int64_t extra = setup.targets.heads[h].kind == HeadSpec::kGraph ? pad_graphs : pad_atoms;
    c = at::cat({c, at::zeros({extra, c.size(1)}, c.options())});
  }
  p.share = at::tensor(std::vector<double>{share.graphs, share.atoms}, at::kDouble)
                .to(p.batch.pos.scalar_type());
  p.bucket = k;
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
