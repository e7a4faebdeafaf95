// `ddgnn info` statistics: periodic neighbour counts against fcc shells (also with a cutoff
// larger than half the cell, and a triclinic primitive cell), and reference-energy least squares.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>

#include "../common/temp_dir.h"
#include "core/error.h"
#include "loader/dataset.h"
#include "loader/stats.h"

namespace ddgnn {
namespace {

constexpr double kA = 3.615;  // fcc Cu lattice constant, Å

// fcc crystal of n x n x n conventional cells.
Frame fcc(int n) {
  Frame f;
  const double basis[4][3] = {{0, 0, 0}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5}};
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < n; ++k)
        for (const auto& b : basis) {
          f.z.push_back(29);
          f.pos.insert(f.pos.end(), {(i + b[0]) * kA, (j + b[1]) * kA, (k + b[2]) * kA});
        }
  f.has_cell = true;
  f.cell = {n * kA, 0, 0, 0, n * kA, 0, 0, 0, n * kA};
  f.pbc = {true, true, true};
  f.has_energy = true;
  return f;
}

TEST(Neighbours, FccShellsIn108AtomCell) {
  const Frame f = fcc(3);
  ASSERT_EQ(f.n_atoms(), 108u);
  for (auto [r, want] : std::vector<std::pair<double, int>>{{3.0, 12}, {4.0, 18}, {5.0, 42}}) {
    for (int c : count_neighbours(f, r)) ASSERT_EQ(c, want) << "radius " << r;
  }
}

TEST(Neighbours, CutoffLargerThanHalfTheCellCountsEveryImage) {
  const Frame f = fcc(1);  // 4 atoms, cell 3.615 Å < 2 x 5 Å
  for (int c : count_neighbours(f, 5.0)) EXPECT_EQ(c, 42);
}

TEST(Neighbours, ARadiusFarTooLargeForTheCellIsRefusedNotSearchedForMinutes) {
  const Frame f = fcc(1);  // 4 atoms, 3.615 Å cell
  const auto t0 = std::chrono::steady_clock::now();
  for (const double radius : {1000.0, 1e300}) {
    try {
      count_neighbours(f, radius);
      ADD_FAILURE() << "radius " << radius << " was searched";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("the cell is far too small for radius"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  // A radius of a few cells is still counted (about 2,800 atoms lie within 20 Å in fcc Cu).
  EXPECT_GT(count_neighbours(f, 20.0)[0], 2000);
}

TEST(Neighbours, TriclinicPrimitiveCell) {
  Frame f;
  f.z = {29};
  f.pos = {0, 0, 0};
  f.has_cell = true;
  f.cell = {0, kA / 2, kA / 2, kA / 2, 0, kA / 2, kA / 2, kA / 2, 0};
  f.pbc = {true, true, true};
  EXPECT_EQ(count_neighbours(f, 5.0)[0], 42);
  EXPECT_EQ(count_neighbours(f, 3.0)[0], 12);
}

TEST(Neighbours, MixedPeriodicityAndMolecules) {
  Frame slab = fcc(3);
  slab.pbc = {true, true, false};  // surface along z: fewer neighbours at the faces
  const auto c = count_neighbours(slab, 3.0);
  EXPECT_EQ(*std::max_element(c.begin(), c.end()), 12);
  EXPECT_EQ(*std::min_element(c.begin(), c.end()), 8);
  Frame dimer;
  dimer.z = {1, 1};
  dimer.pos = {0, 0, 0, 0.74, 0, 0};
  EXPECT_EQ(count_neighbours(dimer, 1.0), (std::vector<int>{1, 1}));
}

TEST(Stats, RecoversReferenceEnergiesByLeastSquares) {
  testing::TempDir dir;
  {
    DatasetWriter w(dir.file("d.h5"), {});
    for (int g = 0; g < 40; ++g) {
      Frame f;
      const int n_cu = 1 + g % 5, n_ni = 1 + (g * 7) % 4;
      for (int i = 0; i < n_cu + n_ni; ++i) {
        f.z.push_back(i < n_cu ? 29 : 28);
        f.pos.insert(f.pos.end(), {2.5 * i, 0.0, 0.0});
        f.forces.insert(f.forces.end(), {0.0, 0.0, 0.0});
      }
      f.has_energy = true;
      f.energy = -3.5 * n_cu - 4.4 * n_ni;
      w.add(f, "g" + std::to_string(g));
    }
    w.commit();
  }
  Dataset ds(dir.file("d.h5"));
  const DatasetStats st = compute_stats(ds, 3.0, 100);
  ASSERT_EQ(st.species, (std::vector<uint8_t>{28, 29}));
  EXPECT_EQ(st.ref_rank, 2);
  EXPECT_NEAR(st.ref_energy[0], -4.4, 1e-9);
  EXPECT_NEAR(st.ref_energy[1], -3.5, 1e-9);
  EXPECT_LT(st.ref_residual_rms_per_atom, 1e-6);
  EXPECT_NEAR(st.neighbours_mean, 2.0 * (st.n_atoms - st.n_graphs) / st.n_atoms, 1e-12);
}

TEST(Stats, FixedCompositionGivesMinimumNormSplit) {
  std::vector<long double> ata = {4, 4, 4, 4}, atb = {-16, -16};  // one graph, 2 Cu + 2 Ni, E=-8
  int rank = 0;
  const auto x = solve_normal_equations(ata, atb, rank);
  EXPECT_EQ(rank, 1);
  EXPECT_NEAR(x[0], -2.0, 1e-12);
  EXPECT_NEAR(x[1], -2.0, 1e-12);
}

}  // namespace
}  // namespace ddgnn
