// The errors of one split in physical units, summed over batches and ranks: the whole-split loss,
// energy and force MAE / RMSE (model/metrics.h) and each column head's MAE / RMSE; the columns of
// metrics.csv; model-free baselines (energies from per-element references, zero forces).
#pragma once

#include <mpi.h>

#include <cstdint>
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

struct SplitMetrics {
  MetricsAccumulator ef;
  ElementForceAccumulator by_z;  // force errors per element
  std::vector<long double> col_abs, col_sq;
  std::vector<int64_t> col_n;
  double loss_sum = 0.0;
  int64_t loss_graphs = 0;
  // Atoms seen, those whose neighbour list max_neighbours cut, the most neighbours of an atom.
  int64_t atoms = 0, cut_atoms = 0, most_neighbours = 0;

  explicit SplitMetrics(size_t n_heads = 0)
      : col_abs(n_heads, 0), col_sq(n_heads, 0), col_n(n_heads, 0) {}
  // The mean loss over the split's graphs (NAN before any batch).
  double loss() const { return loss_graphs ? loss_sum / double(loss_graphs) : NAN; }

  // One batch: `loss` is its loss, counted for `loss_graphs_all` graphs (default: the batch's;
  // in a step shared by ranks, this rank's share of the step's loss counts for the step's
  // graphs). Predictions in normalised units, mapped back with setup.norm.
  void add(const Prediction& p, const PreparedBatch& b, const ModelSetup& setup, double loss,
           int64_t loss_graphs_all = -1);
  // Adds up every rank's sums (collective over `comm`).
  void reduce(MPI_Comm comm);
  // The metrics as `<split>_energy_mae_mev_atom` ... columns of `row` (only those measured), and
  // `<split>_force_by_element` {"H": {"mae_mev_a", "rmse_mev_a", "atoms"}, ...} (events only).
  void put(nlohmann::json& row, const std::string& split, const ModelSetup& setup) const;
};

// The columns of metrics.csv, fixed by the heads: epoch, lr, the losses, each split's energy /
// force / column errors, then throughput and the time of each phase.
std::vector<std::string> metric_columns(const ModelSetup& setup, bool forces);

// A model-free baseline of a split: energy(block, graph) for each graph's energy and zero forces,
// over every rank's share (collective over the data's ranks).
using BaselineEnergy = std::function<double(const GraphBlock& block, size_t graph)>;
ErrorMetrics baseline_metrics(const TrainData& data, int split, const BaselineEnergy& energy,
                              bool forces);

}  // namespace ddgnn
