// Error metrics of energy and force predictions, accumulated over batches: energy MAE / RMSE per
// atom (meV/atom) and force component MAE / RMSE (meV/Å), as MACE and NequIP report them.
// Plain arrays in eV and eV/Å; no torch, so evaluation code can feed it from anything.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/units.h"

namespace ddgnn {

struct ErrorMetrics {
  double energy_mae_mev_per_atom = 0, energy_rmse_mev_per_atom = 0;
  double force_mae_mev_per_a = 0, force_rmse_mev_per_a = 0;
  int64_t n_graphs = 0, n_force_components = 0;
};

class MetricsAccumulator {
 public:
  // energy_pred, energy_ref [n_graphs] eV; atoms_per_graph [n_graphs].
  void add_energies(const double* energy_pred, const double* energy_ref,
                    const int64_t* atoms_per_graph, int64_t n_graphs);
  // force_pred, force_ref [n_atoms, 3] eV/Å.
  void add_forces(const double* force_pred, const double* force_ref, int64_t n_atoms);
  ErrorMetrics result() const;
  void reset() { *this = MetricsAccumulator(); }
  // The running sums (|dE|, dE^2, |dF|, dF^2, graphs, force components) as one array, so that
  // ranks can add theirs up (element-wise) and set the total back.
  static constexpr int kSums = 6;
  std::array<long double, kSums> sums() const;
  void set_sums(const std::array<long double, kSums>& s);

 private:
  long double m_e_abs = 0, m_e_sq = 0, m_f_abs = 0, m_f_sq = 0;
  int64_t m_graphs = 0, m_components = 0;
};

// Force errors per element and as vectors: per component (MAE, RMSE, as MetricsAccumulator) and
// per atom as the norm |F_pred - F_ref| (MAE, RMSE), meV/Å, for all atoms and for each Z.
struct ForceErrors {
  int z = 0;  // 0: all elements
  int64_t atoms = 0;
  double mae_mev_per_a = 0, rmse_mev_per_a = 0;                // per component
  double vector_mae_mev_per_a = 0, vector_rmse_mev_per_a = 0;  // |dF| per atom
};

class ElementForceAccumulator {
 public:
  // force_pred, force_ref [n_atoms, 3] eV/Å; z [n_atoms].
  void add(const double* force_pred, const double* force_ref, const uint8_t* z, int64_t n_atoms);
  ForceErrors all() const { return result(0); }
  // One entry per element present, by increasing Z.
  std::vector<ForceErrors> by_element() const;
  // The sums as one array (per Z 0..kMaxAtomicNumber: |dF|, dF^2, |dF| of vectors, atoms), so
  // that ranks can add theirs up element-wise and set the total back.
  std::vector<long double> sums() const { return m_sums; }
  void set_sums(const std::vector<long double>& s) { m_sums = s; }

 private:
  ForceErrors result(int z) const;
  static constexpr int kPerZ = 4;
  std::vector<long double> m_sums =
      std::vector<long double>(size_t(kPerZ * (kMaxAtomicNumber + 1)), 0.0L);
};

}  // namespace ddgnn
