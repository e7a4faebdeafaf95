// Split metrics, the metrics.csv columns and the model-free baselines (train/split_metrics.h).
#include "train/split_metrics.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "comm/mpi.h"
#include "loader/elements.h"
#include "train/train_data.h"

namespace ddgnn {

void SplitMetrics::add(const Prediction& p, const PreparedBatch& b, const ModelSetup& setup,
                       double loss, int64_t loss_graphs_all) {
  const GraphBatch& batch = b.batch;
  loss_sum += loss * double(loss_graphs_all >= 0 ? loss_graphs_all : batch.n_graphs);
  loss_graphs += batch.n_graphs;
  atoms += batch.n_atoms();
  cut_atoms += batch.cut_atoms;
  most_neighbours = std::max(most_neighbours, batch.most_neighbours);
  if (p.energy.defined()) {
    const std::vector<double> pred = energies_ev(p.energy, b, setup.norm);
    const std::vector<double> ref = energies_ev(batch.energy, b, setup.norm);
    const at::Tensor n = batch.atoms_per_graph.cpu().contiguous();
    ef.add_energies(pred.data(), ref.data(), n.data_ptr<int64_t>(), batch.n_graphs);
  }
  if (p.forces.defined() && batch.forces.defined()) {
    const std::vector<double> pred = to_doubles(p.forces, setup.norm.scale);
    const std::vector<double> ref = to_doubles(batch.forces, setup.norm.scale);
    ef.add_forces(pred.data(), ref.data(), batch.n_atoms());
    const at::Tensor z = batch.z.to(at::kCPU, at::kByte).contiguous();
    by_z.add(pred.data(), ref.data(), z.data_ptr<uint8_t>(), batch.n_atoms());
  }
  for (size_t k = 0; k < setup.targets.heads.size(); ++k) {
    if (setup.targets.heads[k].source != TargetSource::kColumn) continue;
    const at::Tensor std_t =
        at::tensor(setup.norm.column_std[k], at::kDouble).view({1, -1}).to(b.columns[k].device());
    const at::Tensor d =
        (p.outputs[k].detach().to(at::kDouble) - b.columns[k].to(at::kDouble)) * std_t;
    col_abs[k] += d.abs().sum().item<double>();
    col_sq[k] += (d * d).sum().item<double>();
    col_n[k] += d.numel();
  }
}

void SplitMetrics::reduce(MPI_Comm comm) {
  int size = 1;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  if (size == 1) return;
  std::vector<long double> v;
  const auto ef_sums = ef.sums();
  v.insert(v.end(), ef_sums.begin(), ef_sums.end());
  v.push_back(loss_sum);
  v.push_back((long double)loss_graphs);
  v.insert(v.end(), col_abs.begin(), col_abs.end());
  v.insert(v.end(), col_sq.begin(), col_sq.end());
  for (int64_t n : col_n) v.push_back((long double)n);
  v.push_back((long double)atoms);
  v.push_back((long double)cut_atoms);
  const std::vector<long double> z_sums = by_z.sums();
  v.insert(v.end(), z_sums.begin(), z_sums.end());
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v.data(), int(v.size()), MPI_LONG_DOUBLE, MPI_SUM, comm));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &most_neighbours, 1, MPI_INT64_T, MPI_MAX, comm));
  std::array<long double, MetricsAccumulator::kSums> e;
  std::copy(v.begin(), v.begin() + e.size(), e.begin());
  ef.set_sums(e);
  size_t k = e.size();
  loss_sum = double(v[k++]);
  loss_graphs = int64_t(v[k++]);
  for (auto& x : col_abs) x = v[k++];
  for (auto& x : col_sq) x = v[k++];
  for (auto& x : col_n) x = int64_t(v[k++]);
  atoms = int64_t(v[k++]);
  cut_atoms = int64_t(v[k++]);
  by_z.set_sums(std::vector<long double>(v.begin() + long(k), v.begin() + long(k + z_sums.size())));
}

void SplitMetrics::put(nlohmann::json& row, const std::string& split,
                       const ModelSetup& setup) const {
  const ErrorMetrics m = ef.result();
  if (m.n_graphs > 0) {
    row[split + "_energy_mae_mev_atom"] = m.energy_mae_mev_per_atom;
    row[split + "_energy_rmse_mev_atom"] = m.energy_rmse_mev_per_atom;
  }
  if (m.n_force_components > 0) {
    row[split + "_force_mae_mev_a"] = m.force_mae_mev_per_a;
    row[split + "_force_rmse_mev_a"] = m.force_rmse_mev_per_a;
  }
  for (const ForceErrors& f : by_z.by_element())
    row[split + "_force_by_element"][element_symbol(f.z)] = {
        {"atoms", f.atoms}, {"mae_mev_a", f.mae_mev_per_a}, {"rmse_mev_a", f.rmse_mev_per_a}};
  for (size_t k = 0; k < setup.targets.heads.size(); ++k)
    if (col_n[k] > 0) {
      row[split + "_" + setup.targets.heads[k].name + "_mae"] = double(col_abs[k] / col_n[k]);
      row[split + "_" + setup.targets.heads[k].name + "_rmse"] =
          double(std::sqrt(col_sq[k] / col_n[k]));
    }
}

std::vector<std::string> metric_columns(const ModelSetup& setup, bool forces) {
  std::vector<std::string> c = {"epoch", "lr", "train_loss", "validate_loss", "test_loss"};
  for (const char* split : {"train", "validate", "test"}) {
    const std::string s = split;
    if (setup.targets.energy_head >= 0) {
      c.push_back(s + "_energy_mae_mev_atom");
      c.push_back(s + "_energy_rmse_mev_atom");
    }
    if (forces) {
      c.push_back(s + "_force_mae_mev_a");
      c.push_back(s + "_force_rmse_mev_a");
    }
    for (const auto& t : setup.targets.heads)
      if (t.source == TargetSource::kColumn) {
        c.push_back(s + "_" + t.name + "_mae");
        c.push_back(s + "_" + t.name + "_rmse");
      }
  }
  // The model-free baseline (train/report.h), the same in every row: the scale of each error.
  for (const char* split : {"train", "validate", "test"}) {
    const std::string s = std::string("baseline_") + split;
    if (setup.targets.energy_head >= 0) c.push_back(s + "_energy_mae_mev_atom");
    if (forces) c.push_back(s + "_force_mae_mev_a");
  }
  for (const char* t : {"graphs_per_s", "steps", "grad_norm", "load_s", "fetch_s", "graph_s",
                        "forward_s", "forces_s", "backward_s", "sync_s", "optimizer_s", "eval_s",
                        "checkpoint_s", "epoch_s", "elapsed_s", "peak_rss_mb"})
    c.push_back(t);
  return c;
}

ErrorMetrics baseline_metrics(const TrainData& data, int split, const BaselineEnergy& energy,
                              bool forces) {
  MetricsAccumulator acc;
  data.visit_local(split, [&](const GraphBlock& b, const std::vector<int64_t>& ids) {
    for (int64_t id : ids) {
      const int64_t n = b.n_atoms[size_t(id)];
      const double pred = energy(b, size_t(id));
      acc.add_energies(&pred, &b.energy[size_t(id)], &n, 1);
      if (forces && !b.forces.empty()) {
        const std::vector<double> zero(size_t(3 * n), 0.0);
        acc.add_forces(zero.data(), b.forces.data() + 3 * b.atom_start[size_t(id)], n);
      }
    }
  });
  auto sums = acc.sums();
  data.sum_stats(sums.data(), int64_t(sums.size()));
  acc.set_sums(sums);
  return acc.result();
}

}  // namespace ddgnn
