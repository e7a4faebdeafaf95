// The test structures (tests/common/structures.h) as a dataset block, as the loader hands graphs
// to prepare_batch: a periodic cell with a stress and a molecule, each with its own energy and
// forces; graph columns 0 (1 and 0: a branch key) and 1 (two values a graph: "gap"), and per-atom
// column 0 (one value an atom: "charge").
#pragma once

#include <cmath>
#include <vector>

#include "loader/dataset.h"
#include "structures.h"

namespace ddgnn::testing {

inline GraphBlock block_of(const std::vector<Structure>& ss) {
  GraphBlock b;
  b.first = 0;
  b.graph_extra.resize(2);
  b.extra.resize(1);
  for (size_t g = 0; g < ss.size(); ++g) {
    const Structure& s = ss[g];
    b.atom_start.push_back(int64_t(b.z.size()));
    b.n_atoms.push_back(int32_t(s.n()));
    b.energy.push_back(-1.5 * double(s.n()) + 0.1 * double(g));
    b.cell.insert(b.cell.end(), s.cell.begin(), s.cell.end());
    b.pbc.insert(b.pbc.end(), s.pbc.begin(), s.pbc.end());
    for (int k = 0; k < 9; ++k) b.stress.push_back(s.pbc[0] ? 0.01 * (k % 4) : NAN);
    b.config_type.push_back(0);
    b.z.insert(b.z.end(), s.z.begin(), s.z.end());
    b.pos.insert(b.pos.end(), s.pos.begin(), s.pos.end());
    for (int64_t a = 0; a < 3 * s.n(); ++a) b.forces.push_back(0.05 * double((a * 7) % 11 - 5));
    b.graph_extra[0].push_back(double((g + 1) % 2));
    b.graph_extra[1].insert(b.graph_extra[1].end(), {0.3 * double(g) - 0.2, 1.0 + double(s.n())});
    for (int64_t a = 0; a < s.n(); ++a) b.extra[0].push_back(0.1 * double(s.z[size_t(a)]));
  }
  return b;
}

inline GraphBlock test_block() {
  return block_of({triclinic_cell({14, 8, 8, 14, 8, 1, 8, 14}, 11, 0.2), methanol()});
}

}  // namespace ddgnn::testing
