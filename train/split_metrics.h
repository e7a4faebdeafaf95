// The errors of one split in physical units, summed over batches and ranks: the whole-split loss,
// energy and force MAE / RMSE (model/metrics.h) and each column head's MAE / RMSE; the columns of
// metrics.csv; model-free baselines (energies from per-element references, zero forces).
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/metrics.h"
#include "model/predict.h"
#include "train/model_setup.h"

namespace ddgnn {

class TrainData;
struct GraphBlock;

class SplitMetrics {
 public:
  SplitMetrics() = default;
  // The metrics of `setup`'s heads, its column heads' scales put on its device now (not inside a
  // step).
  explicit SplitMetrics(const ModelSetup& setup);
  // The mean loss over the split's graphs (NAN before any batch).
  double loss() const;

  // One batch: `loss` (0-dim) is its loss, counted for `loss_graphs_all` graphs (default: the
  // batch's; in a step shared by ranks, this rank's share of the step's loss counts for the
  // step's graphs). Predictions in normalised units, mapped back with setup.norm. The error sums
  // are added up on the batch's device (float64) and reach the host when read: loss(), put() or
  // reduce() (one copy), so that adding a batch never waits for the device.
  void add(const Prediction& p, const PreparedBatch& b, const ModelSetup& setup,
           const at::Tensor& loss, int64_t loss_graphs_all = -1);
  // Adds up every rank's sums (collective over `comm`).
  void reduce(MPI_Comm comm);
  // The metrics as `<split>_energy_mae_mev_atom` ... columns of `row` (only those measured), and
  // `<split>_force_by_element` {"H": {"mae_mev_a", "rmse_mev_a", "atoms"}, ...} (events only);
  // stress errors per component in meV/Å³ over the graphs with a stress.
  void put(nlohmann::json& row, const std::string& split, const ModelSetup& setup) const;

  // Atoms seen, those whose neighbour list max_neighbours cut, the most neighbours of an atom.
  int64_t atoms = 0, cut_atoms = 0, most_neighbours = 0;

 private:
  // Moves the device sums into the host accumulators.
  void read() const;
  mutable MetricsAccumulator m_ef;
  mutable ElementForceAccumulator m_by_z;  // force errors per element (Z = 0: all atoms)
  mutable std::vector<long double> m_col_abs, m_col_sq;
  mutable long double m_loss_sum = 0;
  mutable long double m_stress_abs = 0, m_stress_sq = 0;  // eV/Å³
  int64_t m_stress_n = 0;                                 // stress components
  std::vector<int64_t> m_col_n;
  std::vector<at::Tensor> m_col_std;  // per head: [1, k] float64 on the device (column heads)
  int64_t m_loss_graphs = 0;
  // Sums not read yet: float64 on the device (layout in split_metrics.cpp), and on the host the
  // number of graphs with energy errors and of atoms with force errors in them.
  mutable at::Tensor m_device_sums;
  mutable int64_t m_device_graphs = 0, m_device_atoms = 0;
};

// After a split is evaluated: a TrainingError naming the graphs (up to 12) of the batches whose
// loss is not finite, from one read of every batch's flag (`losses` one scalar per batch, `ids` its
// graphs); null when all are finite. `epoch` is the epoch the model has just trained.
std::exception_ptr nonfinite_loss_error(const std::vector<at::Tensor>& losses,
                                        const std::vector<std::vector<int64_t>>& ids, int rank,
                                        const std::string& split, int64_t epoch);

// The columns of metrics.csv, fixed by the heads: epoch, lr, the losses, each split's energy /
// force / column errors, then throughput and the time of each phase.
std::vector<std::string> metric_columns(const ModelSetup& setup, bool forces);

// Model-free baselines of a split, in one walk over its graphs on every rank's share (collective
// over the data's ranks): for each of `energies` the errors of energy(block, graph) as each
// graph's energy (for the first also those of zero forces, when `forces`), and, with
// `stress_mean` [9] eV/Å³, the MAE over the 9 components of predicting it for every graph with a
// stress.
using BaselineEnergy = std::function<double(const GraphBlock& block, size_t graph)>;
struct Baselines {
  std::vector<ErrorMetrics> energy;  // one per BaselineEnergy
  double stress_mae_mev_a3 = 0.0;    // 0 without stress_mean or graphs with a stress
};
Baselines baseline_metrics(const TrainData& data, int split,
                           const std::vector<BaselineEnergy>& energies, bool forces,
                           const std::array<double, 9>* stress_mean);

}  // namespace ddgnn
