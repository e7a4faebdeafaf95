// Target statistics of a training split, used to normalise what the model learns: per-species
// reference energies by least squares (subtracted before training, added back at prediction),
// the spread of the remaining energy per atom, and the RMS force component. Units: eV, eV/Å.
// The statistics are sums, so a split spread over ranks (or read in chunks) is handled by
// TargetStatsBuilder: two passes, each summed over every chunk and then over the ranks.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/units.h"
#include "loader/dataset.h"

namespace ddgnn {

struct TargetStats {
  std::array<double, kMaxAtomicNumber + 1>
      reference_energy{};    // eV per atom of each atomic number (0 if absent)
  int composition_rank = 0;  // rank of the composition matrix (< species: minimum-norm split)
  double residual_mean_per_atom = 0;  // eV/atom, mean of (E - sum_z n_z e_z) / n_atoms
  double residual_std_per_atom = 0;   // eV/atom, its standard deviation
  double force_rms = 0;               // eV/Å, RMS of the force components (0 without forces)
  int64_t n_graphs = 0;

  // E - sum_z n_z e_z for atomic numbers z [n_atoms] and total energy E, eV.
  double residual(const uint8_t* z, int64_t n_atoms, double energy) const;
};

// Sums a buffer element-wise over the ranks that share a split (in place); a no-op on one rank.
using SumAcrossRanks = std::function<void(long double* values, int64_t n)>;

// Calls `visit(block, ids)` for every chunk of the training graphs this rank holds.
using VisitChunks =
    std::function<void(const std::function<void(const GraphBlock&, const std::vector<int64_t>&)>&)>;

// Statistics over every graph that `visit` shows on any rank; `sum` adds up the ranks' partial
// sums (species are ordered by atomic number, so every rank solves the same system). Throws
// DataError when there is no graph at all. With `fixed` (eV per atomic number, NaN where none
// is given) the reference energies are those instead of the least-squares fit: ConfigError
// naming the elements of the split that have none.
TargetStats compute_target_stats(const VisitChunks& visit, const SumAcrossRanks& sum,
                                 const std::array<double, kMaxAtomicNumber + 1>* fixed = nullptr);

// Statistics over the graphs `ids` (block-relative) of `block`, on this process alone.
TargetStats compute_target_stats(const GraphBlock& block, const std::vector<int64_t>& ids);

}  // namespace ddgnn
