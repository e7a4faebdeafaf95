// Normalisation, batch preparation, one prediction pass and the multi-head loss.
#include "app/model_setup.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <chrono>
#include <cmath>

#include "app/checkpoint.h"
#include "app/collate.h"
#include "core/error.h"
#include "loader/targets.h"
#include "model/segment.h"

namespace ddgnn {

double Normalizer::energy_offset(const uint8_t* z, int64_t n_atoms) const {
  double sum = 0.0;
  for (int64_t i = 0; i < n_atoms; ++i) sum += reference_energy[z[i]];
  return sum + double(n_atoms) * mean_residual_per_atom;
}

nlohmann::json to_json(const ModelSetup& s) {
  nlohmann::json targets = nlohmann::json::array();
  for (const auto& t : s.targets)
    targets.push_back({{"name", t.name},
                       {"type", t.kind == HeadSpec::kNode ? "node" : "graph"},
                       {"output_dim", t.dim},
                       {"source", t.source == TargetSource::kEnergy   ? "energy"
                                  : t.source == TargetSource::kForces ? "forces"
                                                                      : "column"},
                       {"column", t.column},
                       {"weight", t.weight}});
  std::vector<double> ref(s.norm.reference_energy.begin(), s.norm.reference_energy.end());
  return {{"spec", spec_to_json(s.spec)},
          {"targets", targets},
          {"energy_head", s.energy_head},
          {"conservative", s.conservative},
          {"radius", s.graph.radius},
          {"max_neighbours", s.graph.max_neighbours},
          {"periodic", s.periodic},
          {"dtype", s.dtype == c10::kDouble ? "fp64" : "fp32"},
          {"normalizer",
           {{"reference_energy", ref},
            {"mean_residual_per_atom", s.norm.mean_residual_per_atom},
            {"scale", s.norm.scale},
            {"column_mean", s.norm.column_mean},
            {"column_std", s.norm.column_std}}}};
}

ModelSetup model_setup_from_json(const nlohmann::json& j) {
  ModelSetup s;
  try {
    s.spec = spec_from_json(j.at("spec"));
    for (const auto& t : j.at("targets")) {
      HeadTarget h;
      h.name = t.at("name");
      h.kind = t.at("type") == "node" ? HeadSpec::kNode : HeadSpec::kGraph;
      h.dim = t.at("output_dim");
      const std::string src = t.at("source");
      h.source = src == "energy"   ? TargetSource::kEnergy
                 : src == "forces" ? TargetSource::kForces
                                   : TargetSource::kColumn;
      h.column = t.at("column");
      h.weight = t.at("weight");
      s.targets.push_back(h);
    }
    s.energy_head = j.at("energy_head");
    s.conservative = j.at("conservative");
    s.graph.radius = j.at("radius");
    s.graph.max_neighbours = j.at("max_neighbours");
    s.periodic = j.at("periodic");
    s.dtype = j.at("dtype") == "fp64" ? c10::kDouble : c10::kFloat;
    const auto& n = j.at("normalizer");
    const auto ref = n.at("reference_energy").get<std::vector<double>>();
    if (ref.size() != s.norm.reference_energy.size())
      throw DataError("checkpoint record: reference_energy has " + std::to_string(ref.size()) +
                      " entries, expected 119");
    std::copy(ref.begin(), ref.end(), s.norm.reference_energy.begin());
    s.norm.mean_residual_per_atom = n.at("mean_residual_per_atom");
    s.norm.scale = n.at("scale");
    s.norm.column_mean = n.at("column_mean").get<std::vector<std::vector<double>>>();
    s.norm.column_std = n.at("column_std").get<std::vector<std::vector<double>>>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("checkpoint record: ") + e.what(),
                    "the checkpoint was not written by this version of ddgnn");
  }
  return s;
}

Normalizer fit_normalizer(const VisitChunks& visit, const SumAcrossRanks& sum,
                          const std::vector<HeadTarget>& targets, bool use_forces) {
  const TargetStats st = compute_target_stats(visit, sum);
  Normalizer n;
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
    visit([&](const GraphBlock& block, const std::vector<int64_t>& ids) {
      const auto& col = block.extra[size_t(targets[k].column)];
      for (int64_t id : ids) {
        const int64_t a0 = block.atom_start[size_t(id)], na = block.n_atoms[size_t(id)];
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
  p.batch = collate(block, ids, setup.graph, setup.dtype, setup.periodic);
  // An atom without a neighbour within the radius exchanges no message: its energy would be a
  // constant of its species and its force zero, whatever the data says.
  const int64_t* ptr = p.batch.receivers->ptr.data_ptr<int64_t>();
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
  p.batch.energy = at::tensor(e, at::kDouble).to(setup.dtype);
  if (p.batch.forces.defined()) p.batch.forces = p.batch.forces / norm.scale;
  p.columns.resize(setup.targets.size());
  for (size_t k = 0; k < setup.targets.size(); ++k) {
    const HeadTarget& t = setup.targets[k];
    if (t.source != TargetSource::kColumn) continue;
    const auto& col = block.extra[size_t(t.column)];
    const int64_t d = t.dim;
    std::vector<double> v;
    v.reserve(size_t(p.batch.n_atoms() * d));
    for (int64_t id : ids) {
      const int64_t a0 = block.atom_start[size_t(id)], na = block.n_atoms[size_t(id)];
      for (int64_t a = a0; a < a0 + na; ++a)
        for (int64_t c = 0; c < d; ++c)
          v.push_back((col[size_t(a * d + c)] - norm.column_mean[k][size_t(c)]) /
                      norm.column_std[k][size_t(c)]);
    }
    p.columns[k] = at::tensor(v, at::kDouble).view({-1, d}).to(setup.dtype);
  }
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

Prediction predict(Gnn& gnn, const ModelSetup& setup, const GraphBatch& batch, bool create_graph) {
  Prediction p;
  at::Tensor pos = batch.pos;
  if (setup.conservative) pos = batch.pos.detach().clone().requires_grad_(true);
  p.outputs = gnn.forward(batch, pos);
  if (setup.energy_head >= 0) {
    const at::Tensor& out = p.outputs[size_t(setup.energy_head)];
    p.energy = setup.targets[size_t(setup.energy_head)].kind == HeadSpec::kNode
                   ? scatter_sum(out.select(1, 0), *batch.graphs)
                   : out.select(1, 0);
  }
  if (setup.conservative) {
    // allow_unused: a model that reads no geometry (GIN) has dE/dx = 0.
    auto g = torch::autograd::grad({p.energy.sum()}, {pos}, {}, /*retain_graph=*/create_graph,
                                   create_graph, /*allow_unused=*/true);
    p.forces = g[0].defined() ? -g[0] : at::zeros_like(pos);
    if (!create_graph) p.forces = p.forces.detach();
  } else {
    for (size_t k = 0; k < setup.targets.size(); ++k)
      if (setup.targets[k].source == TargetSource::kForces) p.forces = p.outputs[k];
  }
  return p;
}

at::Tensor total_loss(const Prediction& p, const PreparedBatch& b, const ModelSetup& setup,
                      const EnergyForceWeights& w, const LossSpec& loss, const StepShare& share) {
  const GraphBatch& batch = b.batch;
  at::Tensor total;
  auto add = [&](const at::Tensor& term) { total = total.defined() ? total + term : term; };
  for (size_t k = 0; k < setup.targets.size(); ++k) {
    const HeadTarget& t = setup.targets[k];
    if (t.weight == 0.0) continue;
    if (t.source == TargetSource::kEnergy) {
      EnergyForces ef;
      ef.energy = p.energy;
      ef.forces = p.forces;
      EnergyForceWeights ew = w;
      ew.energy_weight *= share.graphs;
      ew.energy_peratom_weight *= share.graphs;
      ew.force_weight = setup.conservative ? ew.force_weight * share.atoms : 0.0;
      GraphBatch targets = batch;
      if (!setup.conservative) targets.forces = at::Tensor();
      add(t.weight * energy_force_loss(ef, targets, ew, loss));
    } else {
      const double s = t.kind == HeadSpec::kGraph ? share.graphs : share.atoms;
      const at::Tensor& target = t.source == TargetSource::kForces ? batch.forces : b.columns[k];
      add((t.weight * s) * regression_loss(p.outputs[k], target, loss));
    }
  }
  if (!total.defined()) total = at::zeros({}, batch.pos.options());
  return total;
}

std::vector<double> to_doubles(const at::Tensor& t, double scale) {
  const at::Tensor d = t.detach().to(at::kDouble).contiguous();
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
