// Reference energies by least squares over the training split, then residual and force spread;
// both passes are sums over chunks and ranks.
#include "loader/targets.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "loader/elements.h"
#include "loader/stats.h"

namespace ddgnn {

double TargetStats::residual(const uint8_t* z, int64_t n_atoms, double energy) const {
  double ref = 0;
  for (int64_t a = 0; a < n_atoms; ++a) ref += reference_energy[z[a]];
  return energy - ref;
}

TargetStats compute_target_stats(const VisitChunks& visit, const SumAcrossRanks& sum,
                                 const std::array<double, kMaxAtomicNumber + 1>* fixed) {
  constexpr size_t kZ = kMaxAtomicNumber + 1;
  // Pass 1: the normal equations of E_g = sum_z n_gz e_z over all atomic numbers, then the
  // graph count (last element).
  std::vector<long double> eq(kZ * kZ + kZ + 1, 0.0L);
  long double* ata = eq.data();
  long double* atb = eq.data() + kZ * kZ;
  std::array<long double, kZ> counts{};
  std::vector<uint8_t> present;
  visit([&](const GraphBlock& block, const std::vector<int64_t>& ids) {
    for (int64_t id : ids) {
      present.clear();
      const size_t s = size_t(block.atom_start[size_t(id)]);
      for (int32_t a = 0; a < block.n_atoms[size_t(id)]; ++a) {
        const uint8_t z = block.z[s + size_t(a)];
        if (counts[z] == 0) present.push_back(z);
        counts[z] += 1;
      }
      for (uint8_t p : present) {
        atb[p] += counts[p] * block.energy[size_t(id)];
        for (uint8_t q : present) ata[p * kZ + q] += counts[p] * counts[q];
      }
      for (uint8_t p : present) counts[p] = 0;
      eq.back() += 1;
    }
  });
  sum(eq.data(), int64_t(eq.size()));
  TargetStats st;
  st.n_graphs = int64_t(eq.back());
  if (st.n_graphs == 0) throw DataError("target statistics need at least one training graph");
  std::vector<size_t> species;  // by atomic number: the same system on every rank
  for (size_t z = 0; z < kZ; ++z)
    if (ata[z * kZ + z] > 0) species.push_back(z);
  const size_t ns = species.size();
  std::vector<long double> a(ns * ns), b(ns);
  for (size_t p = 0; p < ns; ++p) {
    b[p] = atb[species[p]];
    for (size_t q = 0; q < ns; ++q) a[p * ns + q] = ata[species[p] * kZ + species[q]];
  }
  if (fixed) {
    std::string missing;
    for (size_t z : species) {
      if (std::isnan((*fixed)[z]))
        missing += (missing.empty() ? "" : ", ") + element_symbol(uint8_t(z));
      else
        st.reference_energy[z] = (*fixed)[z];
    }
    if (!missing.empty())
      throw ConfigError(
          "Dataset.e0s has no reference energy for " + missing + " (elements of the train split)",
          "give every element an isolated-atom energy in eV, or leave Dataset.e0s "
          "empty to fit them by least squares");
    st.composition_rank = int(ns);
  } else {
    const std::vector<double> e0 = solve_normal_equations(a, b, st.composition_rank);
    for (size_t p = 0; p < ns; ++p) st.reference_energy[species[p]] = e0[p];
  }

  // Pass 2: residual energy per atom (sum, sum of squares) and force components (sum of
  // squares, count).
  std::array<long double, 4> r{};
  visit([&](const GraphBlock& block, const std::vector<int64_t>& ids) {
    for (int64_t id : ids) {
      const size_t g = size_t(id), s = size_t(block.atom_start[g]);
      const int32_t n = block.n_atoms[g];
      const double e = st.residual(&block.z[s], n, block.energy[g]) / n;
      r[0] += e;
      r[1] += (long double)e * e;
      if (!block.forces.empty())
        for (size_t k = 3 * s; k < 3 * (s + size_t(n)); ++k) {
          r[2] += (long double)block.forces[k] * block.forces[k];
          r[3] += 1;
        }
    }
  });
  sum(r.data(), int64_t(r.size()));
  const long double m = r[0] / st.n_graphs;
  st.residual_mean_per_atom = double(m);
  st.residual_std_per_atom = double(std::sqrt(std::max(0.0L, r[1] / st.n_graphs - m * m)));
  st.force_rms = r[3] > 0 ? double(std::sqrt(r[2] / r[3])) : 0.0;
  return st;
}

TargetStats compute_target_stats(const GraphBlock& block, const std::vector<int64_t>& ids) {
  return compute_target_stats([&](const auto& f) { f(block, ids); }, [](long double*, int64_t) {});
}

}  // namespace ddgnn
