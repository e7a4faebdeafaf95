// Sums of absolute and squared errors in long double, reported in meV.
#include "model/metrics.h"

#include <cmath>

namespace ddgnn {

void MetricsAccumulator::add_energies(const double* energy_pred, const double* energy_ref,
                                      const int64_t* atoms_per_graph, int64_t n_graphs) {
  for (int64_t g = 0; g < n_graphs; ++g) {
    const long double d = (energy_pred[g] - energy_ref[g]) / double(atoms_per_graph[g]);
    m_e_abs += std::fabs(d);
    m_e_sq += d * d;
  }
  m_graphs += n_graphs;
}

void MetricsAccumulator::add_forces(const double* force_pred, const double* force_ref,
                                    int64_t n_atoms) {
  for (int64_t k = 0; k < 3 * n_atoms; ++k) {
    const long double d = force_pred[k] - force_ref[k];
    m_f_abs += std::fabs(d);
    m_f_sq += d * d;
  }
  m_components += 3 * n_atoms;
}

ErrorMetrics MetricsAccumulator::result() const {
  ErrorMetrics m;
  m.n_graphs = m_graphs;
  m.n_force_components = m_components;
  if (m_graphs > 0) {
    m.energy_mae_mev_per_atom = double(1e3L * m_e_abs / m_graphs);
    m.energy_rmse_mev_per_atom = double(1e3L * std::sqrt(m_e_sq / m_graphs));
  }
  if (m_components > 0) {
    m.force_mae_mev_per_a = double(1e3L * m_f_abs / m_components);
    m.force_rmse_mev_per_a = double(1e3L * std::sqrt(m_f_sq / m_components));
  }
  return m;
}

void ElementForceAccumulator::add(const double* force_pred, const double* force_ref,
                                  const uint8_t* z, int64_t n_atoms) {
  for (int64_t a = 0; a < n_atoms; ++a) {
    long double abs = 0, sq = 0;
    for (int c = 0; c < 3; ++c) {
      const long double d = force_pred[3 * a + c] - force_ref[3 * a + c];
      abs += std::fabs(d);
      sq += d * d;
    }
    for (size_t zi : {size_t(0), size_t(z[a])}) {  // all elements, then this atom's
      long double* s = &m_sums[kPerZ * zi];
      s[0] += abs;
      s[1] += sq;
      s[2] += std::sqrt(sq);
      s[3] += 1;
    }
  }
}

ForceErrors ElementForceAccumulator::result(int z) const {
  const long double* s = &m_sums[size_t(kPerZ * z)];
  ForceErrors e;
  e.z = z;
  e.atoms = int64_t(s[3]);
  if (e.atoms == 0) return e;
  e.mae_mev_per_a = double(1e3L * s[0] / (3 * s[3]));
  e.rmse_mev_per_a = double(1e3L * std::sqrt(s[1] / (3 * s[3])));
  e.vector_mae_mev_per_a = double(1e3L * s[2] / s[3]);
  e.vector_rmse_mev_per_a = double(1e3L * std::sqrt(s[1] / s[3]));
  return e;
}

std::vector<ForceErrors> ElementForceAccumulator::by_element() const {
  std::vector<ForceErrors> out;
  for (int z = 1; size_t(kPerZ * z) < m_sums.size(); ++z)
    if (m_sums[size_t(kPerZ * z + 3)] > 0) out.push_back(result(z));
  return out;
}

std::array<long double, MetricsAccumulator::kSums> MetricsAccumulator::sums() const {
  return {m_e_abs, m_e_sq, m_f_abs, m_f_sq, (long double)m_graphs, (long double)m_components};
}

void MetricsAccumulator::set_sums(const std::array<long double, kSums>& s) {
  m_e_abs = s[0];
  m_e_sq = s[1];
  m_f_abs = s[2];
  m_f_sq = s[3];
  m_graphs = int64_t(s[4]);
  m_components = int64_t(s[5]);
}

}  // namespace ddgnn
