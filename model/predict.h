// The one prediction and loss path: what training, evaluation and the physics tests run. A pass of
// the model gives every head's output; the energy is the energy head's output (summed over atoms
// for a per-atom head); forces are -dE/dx by autograd (conservative) or the forces head's output
// (direct). The loss is the task-weighted sum of every head's loss. Units are whatever the targets
// are in (the trainer's normalised units; eV and eV/Å in the tests).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <vector>

#include "model/batch.h"
#include "model/gnn.h"
#include "model/spec.h"

namespace ddgnn {

// energy [n_graphs] (undefined without an energy head), forces [n_atoms, 3] (undefined when the
// model predicts none), stress [n_graphs, 3, 3] (TargetSpec::stress; zero for a graph without a
// cell), every head's output (Gnn::forward), all in the model dtype.
struct Prediction {
  at::Tensor energy, forces, stress;
  std::vector<at::Tensor> outputs;
};

// One pass on `batch`. Conservative forces differentiate the energy with respect to a copy of
// batch.pos that requires grad; the stress (targets.stress) with respect to a symmetric strain ε
// [n_graphs, 3, 3] at zero, applied to the positions and the periodic shifts as r (1 + ε), in the
// same backward: σ = (1/V) dE/dε (ASE's sign: positive under tension); create_graph keeps the graph
// of the forces so that a force loss trains the weights (training), otherwise the forces are
// constants (evaluation). The energy stays differentiable. `forward_done`, when given, receives the
// time the energy was ready (before the forces' backward), for the trainer's timing.
Prediction predict(Gnn& gnn, const TargetSpec& targets, const GraphBatch& batch, bool create_graph,
                   std::chrono::steady_clock::time_point* forward_done = nullptr);

// This rank's part of a step that several ranks share: its graphs and atoms over those of all
// ranks. Losses are means over graphs (energy terms) or atoms (force and per-atom terms), so each
// term scaled by its share and summed over ranks is the loss of the whole step (exactly for mse,
// mae and huber; rmse's root is taken per rank). {1, 1} on one rank.
struct StepShare {
  double graphs = 1.0, atoms = 1.0;
  // The same two shares as [2] on the model's device (padded batches: what a replayed step reads
  // instead of numbers fixed when it was captured); when defined, graphs and atoms are not read.
  at::Tensor device;
};

// Elementwise loss of pred against target (same shape [rows, ...]), reduced by the mean: scalar [].
// With `row_weight` [rows] (a padded batch's GraphBatch::graph_weight or atom_weight) the mean is
// the weighted sum of the rows' means, so rows of weight 0 (padding) count for nothing.
// Differentiable to any order (huber and smooth_l1 written with where/abs).
at::Tensor regression_loss(const at::Tensor& pred, const at::Tensor& target, const LossSpec& loss,
                           const at::Tensor& row_weight = {});

// Weighted sum of: energy_weight * loss(E, E_ref) over graphs; energy_peratom_weight *
// loss(E / n_atoms, E_ref / n_atoms); force_weight * loss(F, F_ref) over all force components;
// stress_weight * loss(σ V / n, σ_ref V / n) over the 9 components of every graph (the virial per
// atom: on the energy per atom's scale), those without a stress (batch.stress_mask) contributing
// zero.
// Terms with weight 0 or an undefined target (batch.energy / batch.forces) are left out. Scalar []
// in the model dtype. A padded batch's means are over its real graphs and atoms (its row weights).
// The energy and stress terms are multiplied by share's graphs, the force term by its atoms.
at::Tensor energy_force_loss(const Prediction& pred, const GraphBatch& batch,
                             const EnergyForceWeights& weights, const LossSpec& loss,
                             const StepShare& share = {});

// The loss of all heads: the energy head contributes energy_weight * L(E) + energy_peratom_weight
// * L(E/n) [+ force_weight * L(F) when conservative]; a forces head L(F); a column head L(column)
// against columns[k] ([n_atoms, dim]); each times its task weight and its share of the step.
// Targets are batch.energy and batch.forces.
at::Tensor total_loss(const Prediction& p, const GraphBatch& batch,
                      const std::vector<at::Tensor>& columns, const TargetSpec& targets,
                      const EnergyForceWeights& weights, const LossSpec& loss,
                      const StepShare& share = {});

// loss's gradients accumulated into `params` (those that require grad) and into no other leaf.
// With conservative forces the loss's graph reaches the positions (and the strain) through the
// forces' backward; a plain loss.backward() differentiates the geometry a second time for their
// gradients, which no one reads (the harmonics', bases' and tensor products' derivatives with
// respect to the positions: ~25% of a MACE step).
void backward_to_parameters(const at::Tensor& loss, const std::vector<at::Tensor>& params);

}  // namespace ddgnn
