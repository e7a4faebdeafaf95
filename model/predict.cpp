// Energy, forces and the multi-head loss of one pass of the model (model/predict.h).
#include "model/predict.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "core/error.h"
#include "model/segment.h"

namespace ddgnn {

namespace {

// |det| of each cell [n, 3, 3]: the volumes (zero for a zero cell).
at::Tensor volumes(const at::Tensor& c) {
  const auto e = [&](int64_t i, int64_t j) { return c.select(1, i).select(1, j); };
  return (e(0, 0) * (e(1, 1) * e(2, 2) - e(1, 2) * e(2, 1)) -
          e(0, 1) * (e(1, 0) * e(2, 2) - e(1, 2) * e(2, 0)) +
          e(0, 2) * (e(1, 0) * e(2, 1) - e(1, 1) * e(2, 0)))
      .abs();
}

// rows [n, 3] times per-row matrices [n, 3, 3]: r (1 + ε).
at::Tensor strained(const at::Tensor& rows, const at::Tensor& strain) {
  return rows + at::bmm(rows.unsqueeze(1), strain).squeeze(1);
}

}  // namespace

Prediction predict(Gnn& gnn, const TargetSpec& targets, const GraphBatch& batch, bool create_graph,
                   std::chrono::steady_clock::time_point* forward_done) {
  Prediction p;
  at::Tensor pos = batch.pos;
  if (targets.conservative) pos = batch.pos.detach().clone().requires_grad_(true);
  const bool stress = targets.conservative && targets.stress && batch.cell.defined();
  at::Tensor strain;
  GraphBatch strained_batch;
  if (stress) {
    // A zero strain to differentiate against: positions and periodic shifts times (1 + ε) of
    // their graph (the shift of an edge is a lattice vector of its receiver's graph).
    strain = at::zeros({batch.n_graphs, 3, 3}, pos.options()).requires_grad_(true);
    const at::Tensor sym = 0.5 * (strain + strain.transpose(1, 2));
    strained_batch = batch;
    const at::Tensor edge_graph = batch.graph_of_atom.index_select(0, batch.edge_index[1]);
    strained_batch.edge_shift = strained(batch.edge_shift, sym.index_select(0, edge_graph));
    p.outputs =
        gnn.forward(strained_batch, strained(pos, sym.index_select(0, batch.graph_of_atom)));
  } else {
    p.outputs = gnn.forward(batch, pos);
  }
  if (targets.energy_head >= 0) {
    const at::Tensor& out = p.outputs[size_t(targets.energy_head)];
    p.energy = targets.heads[size_t(targets.energy_head)].kind == HeadSpec::kNode
                   ? scatter_sum(out.select(1, 0), *batch.graphs)
                   : out.select(1, 0);
  }
  if (forward_done) *forward_done = std::chrono::steady_clock::now();
  if (targets.conservative) {
    if (!p.energy.defined())
      throw ConfigError("conservative forces need an energy head",
                        "add a head named \"energy\" to Variables_of_interest.output_names");
    std::vector<at::Tensor> inputs = {pos};
    if (stress) inputs.push_back(strain);
    // allow_unused: a model that reads no geometry (GIN) has dE/dx = 0.
    // A padded batch: the energies of its own graphs only (batch statistics, as GPS's batch
    // norms, would let the padding's energy depend on the real atoms' positions).
    const at::Tensor total =
        batch.padded() ? (p.energy * batch.graph_weight.gt(0).to(p.energy.scalar_type())).sum()
                       : p.energy.sum();
    auto g = torch::autograd::grad({total}, inputs, /*grad_outputs=*/{},
                                   /*retain_graph=*/create_graph, create_graph,
                                   /*allow_unused=*/true);
    p.forces = g[0].defined() ? -g[0] : at::zeros_like(pos);
    if (stress) {
      const at::Tensor v = volumes(batch.cell);
      // Graphs without a cell (volume 0) get zero, not their molecule's dE/dε.
      const at::Tensor has = (v > 0).to(v.scalar_type());
      const at::Tensor de = g[1].defined() ? g[1] : at::zeros_like(strain);
      p.stress = de * (has / at::where(v > 0, v, at::ones_like(v))).view({-1, 1, 1});
    }
    if (!create_graph) {
      p.forces = p.forces.detach();
      if (stress) p.stress = p.stress.detach();
    }
  } else if (targets.forces_head() >= 0) {
    p.forces = p.outputs[size_t(targets.forces_head())];
  }
  return p;
}

at::Tensor regression_loss(const at::Tensor& pred, const at::Tensor& target, const LossSpec& loss,
                           const at::Tensor& row_weight) {
  const at::Tensor d = pred - target;
  // The mean of each row's elements times its weight, summed; the plain mean without weights.
  const auto mean = [&](const at::Tensor& l) {
    if (!row_weight.defined()) return l.mean();
    const at::Tensor rows = l.dim() > 1 ? l.flatten(1).mean(1) : l;
    return (rows * row_weight).sum();
  };
  switch (loss.type) {
    case LossType::kMse:
      return mean(d * d);
    case LossType::kRmse:
      return at::sqrt(mean(d * d));
    case LossType::kMae:
      return mean(d.abs());
    case LossType::kHuber:
    case LossType::kSmoothL1: {
      const double delta = loss.huber_delta;
      if (!(delta > 0)) throw ConfigError("huber_delta: must be > 0");
      const at::Tensor a = d.abs();
      at::Tensor l = at::where(a <= delta, 0.5 * d * d, delta * (a - 0.5 * delta));
      if (loss.type == LossType::kSmoothL1) l = l / delta;
      return mean(l);
    }
  }
  throw ConfigError("loss_function_type: unknown value",
                    "allowed: mse, mae, rmse, smooth_l1, huber");
}

namespace {

// term times this rank's share of the step's graphs (k = 0) or atoms (k = 1).
at::Tensor shared(const at::Tensor& term, const StepShare& share, int64_t k) {
  if (share.device.defined()) return term * share.device[k];
  const double s = k == 0 ? share.graphs : share.atoms;
  return s == 1.0 ? term : term * s;
}

}  // namespace

at::Tensor energy_force_loss(const Prediction& pred, const GraphBatch& batch,
                             const EnergyForceWeights& weights, const LossSpec& loss,
                             const StepShare& share) {
  const at::Tensor& gw = batch.graph_weight;
  at::Tensor graph_terms, atom_terms;
  const auto add = [](at::Tensor& sum, const at::Tensor& term) {
    sum = sum.defined() ? sum + term : term;
  };
  if (batch.energy.defined()) {
    const at::Tensor target = batch.energy.to(pred.energy.scalar_type());
    if (weights.energy_weight != 0.0)
      add(graph_terms, weights.energy_weight * regression_loss(pred.energy, target, loss, gw));
    if (weights.energy_peratom_weight != 0.0) {
      const at::Tensor n = batch.atoms_per_graph.to(pred.energy.scalar_type()).clamp_min(1.0);
      add(graph_terms,
          weights.energy_peratom_weight * regression_loss(pred.energy / n, target / n, loss, gw));
    }
  }
  if (batch.forces.defined() && weights.force_weight != 0.0)
    add(atom_terms, weights.force_weight *
                        regression_loss(pred.forces, batch.forces.to(pred.forces.scalar_type()),
                                        loss, batch.atom_weight));
  if (batch.stress.defined() && pred.stress.defined() && weights.stress_weight != 0.0) {
    // As the virial per atom, σ V / n (energy per atom: the energy terms' scale), graphs without a
    // stress masked out.
    const at::Tensor per_atom = batch.stress_mask.to(pred.stress.scalar_type()) *
                                volumes(batch.cell) /
                                batch.atoms_per_graph.to(pred.stress.scalar_type()).clamp_min(1.0);
    const at::Tensor f = per_atom.view({-1, 1, 1});
    add(graph_terms, weights.stress_weight *
                         regression_loss(pred.stress * f,
                                         batch.stress.to(pred.stress.scalar_type()) * f, loss, gw));
  }
  at::Tensor total = at::zeros({}, pred.energy.options());
  if (graph_terms.defined()) total = total + shared(graph_terms, share, 0);
  if (atom_terms.defined()) total = total + shared(atom_terms, share, 1);
  return total;
}

at::Tensor total_loss(const Prediction& p, const GraphBatch& batch,
                      const std::vector<at::Tensor>& columns, const TargetSpec& targets,
                      const EnergyForceWeights& w, const LossSpec& loss, const StepShare& share) {
  at::Tensor total;
  auto add = [&](const at::Tensor& term) { total = total.defined() ? total + term : term; };
  for (size_t k = 0; k < targets.heads.size(); ++k) {
    const HeadTarget& t = targets.heads[k];
    if (t.weight == 0.0) continue;
    if (t.source == TargetSource::kEnergy) {
      EnergyForceWeights ew = w;
      if (!targets.conservative) ew.force_weight = ew.stress_weight = 0.0;
      GraphBatch target = batch;
      if (!targets.conservative) target.forces = at::Tensor();
      add(t.weight * energy_force_loss(p, target, ew, loss, share));
    } else {
      const bool graph = t.kind == HeadSpec::kGraph;
      const at::Tensor& target = t.source == TargetSource::kForces ? batch.forces : columns.at(k);
      const at::Tensor& rows = graph ? batch.graph_weight : batch.atom_weight;
      add(t.weight *
          shared(regression_loss(p.outputs[k], target, loss, rows), share, graph ? 0 : 1));
    }
  }
  if (!total.defined()) total = at::zeros({}, batch.pos.options());
  return total;
}

void backward_to_parameters(const at::Tensor& loss, const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> inputs;
  for (const at::Tensor& p : params)
    if (p.requires_grad()) inputs.push_back(p);
  if (inputs.empty()) return;
  torch::autograd::backward({loss}, /*grad_tensors=*/{}, /*retain_graph=*/c10::nullopt,
                            /*create_graph=*/false, inputs);
}

}  // namespace ddgnn
