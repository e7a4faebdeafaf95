// Reference energies by least squares over the training split, then residual and force spread.
#include "loader/targets.h"

#include <cmath>

#include "core/error.h"
#include "loader/stats.h"

namespace ddgnn {

double TargetStats::residual(const uint8_t* z, int64_t n_atoms, double energy) const {
  double ref = 0;
  for (int64_t a = 0; a < n_atoms; ++a) ref += reference_energy[z[a]];
  return energy - ref;
}

TargetStats compute_target_stats(const GraphBlock& block, const std::vector<int64_t>& ids) {
  if (ids.empty()) throw DataError("target statistics need at least one training graph");
  TargetStats st;
  st.n_graphs = int64_t(ids.size());
  // Species present, and the normal equations of E_g = sum_z n_gz e_z.
  std::array<int, 119> col;
  col.fill(-1);
  std::vector<int> species;
  for (int64_t id : ids) {
    const size_t s = size_t(block.atom_start[size_t(id)]);
    for (int32_t a = 0; a < block.n_atoms[size_t(id)]; ++a) {
      const uint8_t z = block.z[s + size_t(a)];
      if (col[z] < 0) {
        col[z] = int(species.size());
        species.push_back(z);
      }
    }
  }
  const size_t ns = species.size();
  std::vector<long double> ata(ns * ns, 0.0L), atb(ns, 0.0L);
  std::vector<long double> counts(ns);
  for (int64_t id : ids) {
    std::fill(counts.begin(), counts.end(), 0.0L);
    const size_t s = size_t(block.atom_start[size_t(id)]);
    for (int32_t a = 0; a < block.n_atoms[size_t(id)]; ++a)
      counts[size_t(col[block.z[s + size_t(a)]])] += 1;
    for (size_t p = 0; p < ns; ++p) {
      atb[p] += counts[p] * block.energy[size_t(id)];
      for (size_t q = 0; q < ns; ++q) ata[p * ns + q] += counts[p] * counts[q];
    }
  }
  const std::vector<double> e0 = solve_normal_equations(ata, atb, st.composition_rank);
  for (size_t p = 0; p < ns; ++p) st.reference_energy[size_t(species[p])] = e0[p];

  long double sum = 0, sq = 0, f_sq = 0;
  int64_t n_force = 0;
  for (int64_t id : ids) {
    const size_t g = size_t(id), s = size_t(block.atom_start[g]);
    const int32_t n = block.n_atoms[g];
    const double r = st.residual(&block.z[s], n, block.energy[g]) / n;
    sum += r;
    sq += (long double)r * r;
    if (!block.forces.empty())
      for (size_t k = 3 * s; k < 3 * (s + size_t(n)); ++k) {
        f_sq += (long double)block.forces[k] * block.forces[k];
        ++n_force;
      }
  }
  const long double m = sum / st.n_graphs;
  st.residual_mean_per_atom = double(m);
  st.residual_std_per_atom = double(std::sqrt(std::max(0.0L, sq / st.n_graphs - m * m)));
  st.force_rms = n_force ? double(std::sqrt(f_sq / n_force)) : 0.0;
  return st;
}

}  // namespace ddgnn
