// Small test structures shared by the model tests: a perturbed triclinic periodic cell, a
// molecule, and a batch builder over any list of them (targets kept when every one has them).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <random>
#include <vector>

#include "model/batch.h"

namespace ddgnn::testing {

struct Structure {
  std::vector<uint8_t> z;
  std::vector<double> pos;     // [n, 3] Å
  std::vector<double> cell;    // [9], rows = lattice vectors
  std::vector<uint8_t> pbc;    // [3]
  double energy = 0.0;         // eV (target)
  std::vector<double> forces;  // [n, 3] eV/Å (target), or empty
  int64_t n() const { return static_cast<int64_t>(z.size()); }
};

// 8 atoms with atomic numbers `z`: a 2x2x2 lattice in a triclinic periodic cell, each atom
// displaced by up to `amplitude` (fractional) with a seeded generator.
inline Structure triclinic_cell(const std::vector<uint8_t>& z, unsigned seed, double amplitude) {
  Structure s;
  s.z = z;
  s.cell = {4.0, 0.0, 0.0, 0.4, 4.1, 0.0, 0.3, -0.2, 4.2};
  s.pbc = {1, 1, 1};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-amplitude, amplitude);
  for (int a = 0; a < 8; ++a) {
    const double fr[3] = {0.5 * (a & 1) + u(rng), 0.5 * ((a >> 1) & 1) + u(rng),
                          0.5 * ((a >> 2) & 1) + u(rng)};
    for (int c = 0; c < 3; ++c)
      s.pos.push_back(fr[0] * s.cell[c] + fr[1] * s.cell[3 + c] + fr[2] * s.cell[6 + c]);
  }
  return s;
}

// A small non-periodic molecule (methanol-like, 5 atoms).
inline Structure methanol() {
  Structure s;
  s.z = {6, 8, 1, 1, 1};
  s.pos = {0.0, 0.0, 0.0, 1.43, 0.05, -0.02, -0.36, 1.03, 0.1, -0.38, -0.5, 0.9, -0.35, -0.6, -0.8};
  s.cell = std::vector<double>(9, 0.0);
  s.pbc = {0, 0, 0};
  return s;
}

// One batch of the structures; energies and forces as targets when every structure has forces.
inline GraphBatch batch_of(const std::vector<Structure>& ss, double radius,
                           c10::ScalarType dtype = c10::ScalarType::Double,
                           c10::Device device = c10::Device(c10::kCPU), int64_t max_neighbours = 0,
                           bool smooth_cap = false) {
  std::vector<uint8_t> z, pbc;
  std::vector<double> pos, cells, energy, forces;
  std::vector<int64_t> offsets = {0};
  bool targets = true;
  for (const auto& s : ss) {
    z.insert(z.end(), s.z.begin(), s.z.end());
    pos.insert(pos.end(), s.pos.begin(), s.pos.end());
    cells.insert(cells.end(), s.cell.begin(), s.cell.end());
    pbc.insert(pbc.end(), s.pbc.begin(), s.pbc.end());
    offsets.push_back(offsets.back() + s.n());
    energy.push_back(s.energy);
    forces.insert(forces.end(), s.forces.begin(), s.forces.end());
    targets = targets && !s.forces.empty();
  }
  RadiusGraphOptions opt;
  opt.radius = radius;
  opt.max_neighbours = max_neighbours;
  opt.smooth_cap = smooth_cap;
  return make_batch(z.data(), pos.data(), offsets.data(), static_cast<int64_t>(ss.size()),
                    cells.data(), pbc.data(), targets ? energy.data() : nullptr,
                    targets ? forces.data() : nullptr, opt, dtype, device);
}

}  // namespace ddgnn::testing
