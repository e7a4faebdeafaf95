// One atomic structure as read from an input file (extxyz) and written into the dataset.
// Units: Å, eV, eV/Å, eV/Å^3. Shapes: n_atoms atoms; per-atom arrays are row-major [n_atoms, k].
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ddgnn {

// A per-atom column beyond species/positions/forces (e.g. charges:R:1, magmoms:R:3).
struct ExtraColumn {
  std::string name;
  int n_cols = 1;
  std::vector<double> values;  // [n_atoms, n_cols]
};

struct Frame {
  std::vector<uint8_t> z;      // [n_atoms] atomic numbers, 1..118
  std::vector<double> pos;     // [n_atoms, 3] Å
  std::vector<double> forces;  // [n_atoms, 3] eV/Å; empty when the file has none
  bool has_energy = false;
  double energy = 0.0;  // eV, total energy of the structure
  bool has_stress = false;
  std::array<double, 9> stress{};  // eV/Å^3, 3x3 row-major (ASE sign: positive is tensile)
  bool has_cell = false;
  std::array<double, 9> cell{};  // Å, rows are the lattice vectors a, b, c
  std::array<bool, 3> pbc{false, false, false};
  std::string config_type;         // "" when absent
  std::vector<ExtraColumn> extra;  // in the order the file lists them
  // Per-structure numbers from comment-line keys (ExtxyzKeys::info_keys), each values [n_cols],
  // in the order the keys were asked for.
  std::vector<ExtraColumn> info;
  long long line = 0;  // 1-based line of the frame's count line (for messages)

  size_t n_atoms() const { return z.size(); }
  void clear();
};

inline void Frame::clear() {
  z.clear();
  pos.clear();
  forces.clear();
  has_energy = has_stress = has_cell = false;
  energy = 0.0;
  stress = {};
  cell = {};
  pbc = {false, false, false};
  config_type.clear();
  extra.clear();
  info.clear();
  line = 0;
}

}  // namespace ddgnn
