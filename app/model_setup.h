// The parts of a trained model that travel with its checkpoint and that `train` and `evaluate`
// share: the model spec and heads, how targets are normalised (per-species reference energies,
// one scale), how a batch is prepared from graphs in memory, and one prediction pass.
//
// Normalisation (fitted on the training split): the model learns
//   E_n = (E - sum_i e_ref(z_i) - n_atoms * mu) / s,   F_n = F / s,
// with e_ref the least-squares reference energies, mu the mean residual energy per atom and s the
// RMS force component (the residual energy spread per atom when there are no forces). Extra
// per-atom columns are standardised per component. Predictions are mapped back before any metric.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/train_settings.h"
#include "loader/dataset.h"
#include "loader/targets.h"
#include "model/batch.h"
#include "model/gnn.h"

namespace ddgnn {

struct Normalizer {
  std::array<double, 119> reference_energy{};                // eV per atom of each Z
  double mean_residual_per_atom = 0.0;                       // eV/atom
  double scale = 1.0;                                        // eV (energies) and eV/Å (forces)
  std::vector<std::vector<double>> column_mean, column_std;  // per head (empty unless kColumn)

  // sum_i e_ref(z_i) + n * mu, eV.
  double energy_offset(const uint8_t* z, int64_t n_atoms) const;
};

struct ModelSetup {
  GnnSpec spec;
  std::vector<HeadTarget> targets;
  int energy_head = -1;
  bool conservative = false;
  RadiusGraphOptions graph;
  bool periodic = false;
  c10::ScalarType dtype = c10::kFloat;
  Normalizer norm;
};

nlohmann::json to_json(const ModelSetup& setup);
ModelSetup model_setup_from_json(const nlohmann::json& j);  // DataError on a bad record

// Fits the normaliser on the training split: every graph that `visit` shows on any rank, the
// ranks' partial sums added up by `sum` (loader/targets.h).
Normalizer fit_normalizer(const VisitChunks& visit, const SumAcrossRanks& sum,
                          const std::vector<HeadTarget>& targets, bool use_forces);
// The same on this process alone: the graphs `ids` of `block`.
Normalizer fit_normalizer(const GraphBlock& block, const std::vector<int64_t>& ids,
                          const std::vector<HeadTarget>& targets, bool use_forces);

// A batch ready for the model: the GraphBatch with normalised targets (batch.energy, batch.forces
// in the model dtype), the offsets to map energies back, and one target per column head.
struct PreparedBatch {
  GraphBatch batch;
  std::vector<int64_t> ids;         // graph ids, in batch order: block-relative from prepare_batch;
                                    // the trainer sets the file ids
  std::vector<double> offset;       // [n_graphs] eV, E = s * E_n + offset
  std::vector<at::Tensor> columns;  // per head: [n_atoms, k] normalised (kColumn heads only)
  double seconds = 0.0;             // wall time of collate (gather + radius graph)
};

PreparedBatch prepare_batch(const GraphBlock& block, const std::vector<int64_t>& ids,
                            const ModelSetup& setup);

// One pass of the model on a prepared batch, in normalised units: energy [n_graphs] (undefined
// without an energy head), forces [n_atoms, 3] (conservative: -dE_n/dx; direct: the forces head;
// undefined when neither), and every head's output.
struct Prediction {
  at::Tensor energy, forces;
  std::vector<at::Tensor> outputs;
};
// create_graph keeps the graph of conservative forces (training with a force loss).
Prediction predict(Gnn& gnn, const ModelSetup& setup, const GraphBatch& batch, bool create_graph);

// This rank's part of a step that several ranks share: its graphs and atoms over those of all
// ranks. Losses are means over graphs (energy terms) or atoms (force and per-atom terms), so
// each term scaled by its share and summed over ranks is the loss of the whole step (exactly for
// mse, mae and huber; rmse's root is taken per rank). {1, 1} on one rank.
struct StepShare {
  double graphs = 1.0, atoms = 1.0;
};

// The weighted loss of all heads (normalised units): the energy head contributes
// energy_weight * L(E) + energy_peratom_weight * L(E/n) [+ force_weight * L(F) when
// conservative]; a forces head L(F); a column head L(column); each times its task weight and
// its share of the step.
at::Tensor total_loss(const Prediction& p, const PreparedBatch& b, const ModelSetup& setup,
                      const EnergyForceWeights& weights, const LossSpec& loss,
                      const StepShare& share = {});

// Physical-unit predictions of a batch (eV per graph, eV/Å per atom) from normalised ones.
std::vector<double> energies_ev(const at::Tensor& energy_n, const PreparedBatch& b,
                                const Normalizer& norm);
std::vector<double> to_doubles(const at::Tensor& t, double scale = 1.0);

}  // namespace ddgnn
