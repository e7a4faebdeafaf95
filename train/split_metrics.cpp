// Split metrics, the metrics.csv columns and the model-free baselines (train/split_metrics.h).
#include "train/split_metrics.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>

#include "comm/mpi.h"
#include "core/error.h"
#include "loader/elements.h"
#include "train/train_data.h"

namespace ddgnn {

namespace {

// m_device_sums: the loss sum, |dE| and dE^2 per atom, |dσ| and dσ^2, each column head's |d| and
// d^2, then per Z = 0 (all atoms) .. kMaxAtomicNumber the force sums of ElementForceAccumulator
// (|dF| components, dF^2, |dF| vectors, atoms).
constexpr int64_t kPerZ = 4, kHeadSums = 5;
int64_t device_sums_size(size_t heads) {
  return kHeadSums + 2 * int64_t(heads) + kPerZ * (kMaxAtomicNumber + 1);
}

}  // namespace

SplitMetrics::SplitMetrics(const ModelSetup& setup)
    : m_col_abs(setup.targets.heads.size(), 0),
      m_col_sq(setup.targets.heads.size(), 0),
      m_col_n(setup.targets.heads.size(), 0),
      m_col_std(setup.targets.heads.size()) {
  for (size_t k = 0; k < m_col_std.size(); ++k)
    if (setup.targets.heads[k].source == TargetSource::kColumn)
      m_col_std[k] =
          at::tensor(setup.norm.column_std[k], at::kDouble).view({1, -1}).to(setup.device);
}

void SplitMetrics::add(const Prediction& p, const PreparedBatch& b, const ModelSetup& setup,
                       const at::Tensor& loss, int64_t loss_graphs_all) {
  c10::NoGradGuard no_grad;
  const GraphBatch& batch = b.batch;
  const size_t heads = m_col_n.size();
  m_loss_graphs += batch.real_graphs();
  atoms += batch.real_atoms();
  cut_atoms += batch.cut_atoms;
  most_neighbours = std::max(most_neighbours, batch.most_neighbours);
  const auto f64 = loss.options().dtype(at::kDouble);
  at::Tensor sums = at::zeros({device_sums_size(heads)}, f64);
  sums[0] += loss.detach().to(at::kDouble) *
             double(loss_graphs_all >= 0 ? loss_graphs_all : batch.real_graphs());
  // A padded batch's padding rows count for nothing (1 for a real row, 0 for padding).
  const auto real = [&](const at::Tensor& weight) {
    return weight.defined() ? weight.gt(0).to(at::kDouble) : at::Tensor();
  };
  const at::Tensor real_graph = real(batch.graph_weight), real_atom = real(batch.atom_weight);
  const auto masked = [](const at::Tensor& d, const at::Tensor& mask) {
    if (!mask.defined()) return d;
    std::vector<int64_t> shape(size_t(d.dim()), 1);
    shape[0] = -1;
    return d * mask.view(shape);
  };
  if (p.energy.defined()) {
    // Per-atom error; the per-element reference offsets cancel in the difference.
    const at::Tensor d =
        (p.energy.detach().to(at::kDouble) - batch.energy.to(at::kDouble)).view(-1) *
        setup.norm.scale / batch.atoms_per_graph.to(at::kDouble).clamp_min(1.0);
    const at::Tensor dm = masked(d, real_graph);
    sums.narrow(0, 1, 2).add_(at::stack({dm.abs().sum(), (dm * dm).sum()}));
    m_device_graphs += batch.real_graphs();
  }
  if (p.stress.defined() && batch.stress.defined()) {
    const at::Tensor d = (p.stress.detach().to(at::kDouble) - batch.stress.to(at::kDouble)) *
                         batch.stress_mask.to(at::kDouble).view({-1, 1, 1}) * setup.norm.scale;
    sums.narrow(0, 3, 2).add_(at::stack({d.abs().sum(), (d * d).sum()}));
    m_stress_n += 9 * batch.n_stress;
  }
  for (size_t k = 0; k < heads; ++k) {
    if (setup.targets.heads[k].source != TargetSource::kColumn) continue;
    const bool graph = setup.targets.heads[k].kind == HeadSpec::kGraph;
    const at::Tensor d = masked(
        (p.outputs[k].detach().to(at::kDouble) - b.columns[k].to(at::kDouble)) * m_col_std[k],
        graph ? real_graph : real_atom);
    sums[kHeadSums + int64_t(k)] += d.abs().sum();
    sums[kHeadSums + int64_t(heads + k)] += (d * d).sum();
    m_col_n[k] += (graph ? batch.real_graphs() : batch.real_atoms()) * d.size(1);
  }
  if (p.forces.defined() && batch.forces.defined()) {
    const at::Tensor d =
        (p.forces.detach().to(at::kDouble) - batch.forces.to(at::kDouble)) * setup.norm.scale;
    const at::Tensor sq = (d * d).sum(1);
    const at::Tensor rows =
        masked(at::stack({d.abs().sum(1), sq, sq.sqrt(), at::ones_like(sq)}, 1), real_atom);
    at::Tensor per_z =
        sums.narrow(0, kHeadSums + 2 * int64_t(heads), kPerZ * (kMaxAtomicNumber + 1))
            .view({kMaxAtomicNumber + 1, kPerZ});
    per_z.index_add_(0, batch.z.to(at::kLong), rows);
    per_z[0] += rows.sum(0);
    m_device_atoms += batch.real_atoms();
  }
  m_device_sums = m_device_sums.defined() ? m_device_sums + sums : sums;
}

void SplitMetrics::read() const {
  if (!m_device_sums.defined()) return;
  const at::Tensor host = m_device_sums.to(at::kCPU).contiguous();
  m_device_sums = at::Tensor();
  const double* v = host.data_ptr<double>();
  const size_t heads = m_col_n.size();
  const double* per_z = v + kHeadSums + 2 * heads;
  m_loss_sum += v[0];
  m_stress_abs += v[3];
  m_stress_sq += v[4];
  auto e = m_ef.sums();  // |dE|, dE^2, |dF|, dF^2, graphs, force components
  e[0] += v[1];
  e[1] += v[2];
  e[2] += per_z[0];
  e[3] += per_z[1];
  e[4] += (long double)m_device_graphs;
  e[5] += 3.0L * (long double)m_device_atoms;
  m_ef.set_sums(e);
  for (size_t k = 0; k < heads; ++k) {
    m_col_abs[k] += v[kHeadSums + k];
    m_col_sq[k] += v[kHeadSums + heads + k];
  }
  std::vector<long double> z = m_by_z.sums();
  for (size_t i = 0; i < z.size(); ++i) z[i] += per_z[i];
  m_by_z.set_sums(z);
  m_device_graphs = m_device_atoms = 0;
}

double SplitMetrics::loss() const {
  read();
  return m_loss_graphs ? double(m_loss_sum / (long double)m_loss_graphs) : NAN;
}

void SplitMetrics::reduce(MPI_Comm comm) {
  read();
  int size = 1;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  if (size == 1) return;
  std::vector<long double> v;
  const auto ef_sums = m_ef.sums();
  v.insert(v.end(), ef_sums.begin(), ef_sums.end());
  v.push_back(m_loss_sum);
  v.push_back((long double)m_loss_graphs);
  v.push_back(m_stress_abs);
  v.push_back(m_stress_sq);
  v.push_back((long double)m_stress_n);
  v.insert(v.end(), m_col_abs.begin(), m_col_abs.end());
  v.insert(v.end(), m_col_sq.begin(), m_col_sq.end());
  for (int64_t n : m_col_n) v.push_back((long double)n);
  v.push_back((long double)atoms);
  v.push_back((long double)cut_atoms);
  const std::vector<long double> z_sums = m_by_z.sums();
  v.insert(v.end(), z_sums.begin(), z_sums.end());
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v.data(), int(v.size()), MPI_LONG_DOUBLE, MPI_SUM, comm));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &most_neighbours, 1, MPI_INT64_T, MPI_MAX, comm));
  std::array<long double, MetricsAccumulator::kSums> e;
  std::copy(v.begin(), v.begin() + e.size(), e.begin());
  m_ef.set_sums(e);
  size_t k = e.size();
  m_loss_sum = v[k++];
  m_loss_graphs = int64_t(v[k++]);
  m_stress_abs = v[k++];
  m_stress_sq = v[k++];
  m_stress_n = int64_t(v[k++]);
  for (auto& x : m_col_abs) x = v[k++];
  for (auto& x : m_col_sq) x = v[k++];
  for (auto& x : m_col_n) x = int64_t(v[k++]);
  atoms = int64_t(v[k++]);
  cut_atoms = int64_t(v[k++]);
  m_by_z.set_sums(
      std::vector<long double>(v.begin() + long(k), v.begin() + long(k + z_sums.size())));
}

void SplitMetrics::put(nlohmann::json& row, const std::string& split,
                       const ModelSetup& setup) const {
  read();
  const ErrorMetrics m = m_ef.result();
  if (m.n_graphs > 0) {
    row[split + "_energy_mae_mev_atom"] = m.energy_mae_mev_per_atom;
    row[split + "_energy_rmse_mev_atom"] = m.energy_rmse_mev_per_atom;
  }
  if (m.n_force_components > 0) {
    row[split + "_force_mae_mev_a"] = m.force_mae_mev_per_a;
    row[split + "_force_rmse_mev_a"] = m.force_rmse_mev_per_a;
  }
  if (m_stress_n > 0) {
    row[split + "_stress_mae_mev_a3"] = double(1e3L * m_stress_abs / (long double)m_stress_n);
    row[split + "_stress_rmse_mev_a3"] =
        double(1e3L * std::sqrt(m_stress_sq / (long double)m_stress_n));
  }
  for (const ForceErrors& f : m_by_z.by_element())
    row[split + "_force_by_element"][element_symbol(f.z)] = {
        {"atoms", f.atoms}, {"mae_mev_a", f.mae_mev_per_a}, {"rmse_mev_a", f.rmse_mev_per_a}};
  for (size_t k = 0; k < setup.targets.heads.size(); ++k)
    if (m_col_n[k] > 0) {
      row[split + "_" + setup.targets.heads[k].name + "_mae"] = double(m_col_abs[k] / m_col_n[k]);
      row[split + "_" + setup.targets.heads[k].name + "_rmse"] =
          double(std::sqrt(m_col_sq[k] / m_col_n[k]));
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
    if (setup.targets.stress) {
      c.push_back(s + "_stress_mae_mev_a3");
      c.push_back(s + "_stress_rmse_mev_a3");
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
    if (setup.targets.stress) c.push_back(s + "_stress_mae_mev_a3");
  }
  for (const char* t : {"train_loss_median",
                        "graphs_per_s",
                        "step",
                        "graphs",
                        "steps",
                        "skipped_steps",
                        "grad_norm",
                        "load_s",
                        "fetch_s",
                        "graph_s",
                        "forward_s",
                        "forces_s",
                        "backward_s",
                        "sync_s",
                        "optimizer_s",
                        "eval_s",
                        "checkpoint_s",
                        "epoch_s",
                        "elapsed_s",
                        "peak_rss_mb",
                        "energy_j",
                        "energy_j_per_graph",
                        "energy_node_j",
                        "energy_cpu_j",
                        "energy_memory_j",
                        "energy_gpu_j"})
    c.push_back(t);
  if (setup.static_shapes) c.push_back("unpadded_steps");  // batches that fit no fixed shape
  return c;
}

Baselines baseline_metrics(const TrainData& data, int split,
                           const std::vector<BaselineEnergy>& energies, bool forces,
                           const std::array<double, 9>* stress_mean) {
  std::vector<MetricsAccumulator> acc(energies.size());
  long double stress[2] = {0, 0};  // sum of |σ - mean| (eV/Å³), components
  std::vector<double> zero;
  data.visit_local(split, [&](const GraphBlock& b, const std::vector<int64_t>& ids) {
    for (int64_t id : ids) {
      const size_t g = size_t(id);
      const int64_t n = b.n_atoms[g];
      for (size_t k = 0; k < energies.size(); ++k) {
        const double pred = energies[k](b, g);
        acc[k].add_energies(&pred, &b.energy[g], &n, 1);
      }
      if (forces && !acc.empty() && !b.forces.empty()) {
        zero.assign(size_t(3 * n), 0.0);
        acc[0].add_forces(zero.data(), b.forces.data() + 3 * b.atom_start[g], n);
      }
      if (stress_mean && b.has_stress(g)) {
        for (size_t c = 0; c < 9; ++c)
          stress[0] += std::fabs(b.stress[9 * g + c] - (*stress_mean)[c]);
        stress[1] += 9;
      }
    }
  });
  // Every sum in one reduction: the accumulators' in order, then the stress pair.
  std::vector<long double> sums;
  for (const auto& a : acc) {
    const auto s = a.sums();
    sums.insert(sums.end(), s.begin(), s.end());
  }
  sums.insert(sums.end(), {stress[0], stress[1]});
  data.sum_stats(sums.data(), int64_t(sums.size()));
  Baselines out;
  for (size_t k = 0; k < acc.size(); ++k) {
    std::array<long double, MetricsAccumulator::kSums> s{};
    std::copy_n(sums.begin() + long(k * s.size()), s.size(), s.begin());
    acc[k].set_sums(s);
    out.energy.push_back(acc[k].result());
  }
  const long double abs = sums[sums.size() - 2], count = sums.back();
  out.stress_mae_mev_a3 = count > 0 ? double(1e3L * abs / count) : 0.0;
  return out;
}

std::exception_ptr nonfinite_loss_error(const std::vector<at::Tensor>& losses,
                                        const std::vector<std::vector<int64_t>>& ids, int rank,
                                        const std::string& split, int64_t epoch) {
  const at::Tensor finite = losses.empty() ? at::Tensor() : at::stack(losses).isfinite().cpu();
  if (!finite.defined() || finite.all().item<bool>()) return nullptr;
  std::string graphs;
  int shown = 0;
  for (size_t k = 0; k < ids.size(); ++k)
    if (!finite[int64_t(k)].item<bool>())
      for (int64_t g : ids[k])
        if (shown++ < 12) graphs += (graphs.empty() ? "" : ", ") + std::to_string(g);
  return std::make_exception_ptr(TrainingError(
      "rank " + std::to_string(rank) + ": the " + split + " loss is not finite after epoch " +
          std::to_string(epoch) + ", in batches of graphs " + graphs + (shown > 12 ? ", ..." : ""),
      "the model diverged on these graphs: lower the learning rate or set Training.grad_clip, "
      "and look at them (`ddgnn info` lists outlier frames)"));
}

}  // namespace ddgnn
