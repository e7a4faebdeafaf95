// Dataset statistics for `ddgnn info`: sizes, species counts, energy and force statistics,
// per-species reference energies by least squares, and neighbour counts within a radius.
// Units: eV, Å, eV/Å.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "loader/dataset.h"
#include "loader/frame.h"
#include "loader/outliers.h"

namespace ddgnn {

struct DatasetStats {
  int64_t n_graphs = 0, n_atoms = 0;
  int64_t atoms_min = 0, atoms_max = 0;
  double atoms_mean = 0;
  std::array<int64_t, 119> species_count{};  // atoms per atomic number
  std::vector<uint8_t> species;              // atomic numbers present, sorted
  int64_t n_periodic = 0;                    // graphs with any periodic axis
  int64_t n_with_stress = 0;
  // Energies (eV) and energies per atom (eV/atom).
  double energy_mean = 0, energy_std = 0, energy_min = 0, energy_max = 0;
  double epa_mean = 0, epa_std = 0;
  // Least-squares reference energies E ≈ Σ_s n_s e_s (eV per atom of species s, same order as
  // `species`), the RMS of the residual per atom, and the rank of the composition matrix.
  std::vector<double> ref_energy;
  double ref_residual_rms_per_atom = 0;
  int ref_rank = 0;
  // Forces (eV/Å): mean norm and RMS of the components; zero when the dataset has none.
  double force_norm_mean = 0, force_rms = 0, force_max = 0;
  // Mean neighbours per atom within `radius`, over `neighbour_graphs` sampled graphs.
  double radius = 0, neighbours_mean = 0;
  int64_t neighbours_min = 0, neighbours_max = 0, neighbour_graphs = 0;
  // Outlier frames (loader/outliers.h, default thresholds), and the frames whose energy was not
  // judged (too few frames of their composition and config_type).
  std::vector<Outlier> outliers;
  int64_t energy_unjudged = 0;
};

// One pass over the dataset (in blocks); neighbours are counted on up to `max_neighbour_graphs`
// graphs spread evenly over the file.
DatasetStats compute_stats(const Dataset& ds, double radius, int64_t max_neighbour_graphs);

// Number of neighbours of each atom within `radius` (Å), counting every periodic image along
// periodic axes (also when the radius exceeds half the cell). Brute force over images: for
// statistics, not for training. out[i] = neighbours of atom i. A periodic frame whose cell is
// so small for the radius that the search would take billions of pair distances is a DataError.
std::vector<int> count_neighbours(const Frame& frame, double radius);

// Minimum-norm least-squares solution of A x = b for a small dense system given as the normal
// equations (ata [n,n] row-major, atb [n]); returns x and sets `rank`.
std::vector<double> solve_normal_equations(const std::vector<long double>& ata,
                                           const std::vector<long double>& atb, int& rank);

}  // namespace ddgnn
