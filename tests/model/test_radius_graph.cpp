// model/radius_graph: cell lists against a brute-force O(n^2 x images) reference on periodic,
// triclinic, small (cutoff > cell), mixed-periodicity and cell-free structures; fcc shells;
// max_neighbours; sorting and batching; gradients of edge lengths; errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "model/radius_graph.h"

namespace ddgnn {
namespace {

using Key = std::tuple<double, int64_t, int64_t, std::array<int32_t, 3>>;  // d2, i, j, image

struct Structure {
  std::vector<double> pos;  // [n, 3] Å
  std::array<double, 9> cell{};
  std::array<uint8_t, 3> pbc{};
  int64_t n() const { return static_cast<int64_t>(pos.size() / 3); }
};

// r_ij = (pos[j] - pos[i]) + sum_k image_k cell_k, the same arithmetic the library promises.
std::array<double, 3> vec_ij(const Structure& s, int64_t i, int64_t j,
                             const std::array<int32_t, 3>& img) {
  std::array<double, 3> shift{0.0, 0.0, 0.0}, r{};
  for (int k = 0; k < 3; ++k) {
    if (!s.pbc[k] || img[k] == 0) continue;
    for (int c = 0; c < 3; ++c) shift[c] += img[k] * s.cell[3 * k + c];
  }
  for (int c = 0; c < 3; ++c) r[c] = (s.pos[3 * j + c] - s.pos[3 * i + c]) + shift[c];
  return r;
}

double norm2(const std::array<double, 3>& r) {
  return r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
}

// Every (i, j, image) with 0 < |r_ij| < radius, by trying all pairs and enough images.
std::vector<Key> brute_force(const Structure& s, double radius) {
  // Non-periodic rows replaced by unit vectors orthogonal to the rest (Gram-Schmidt on the
  // Cartesian axis with the largest orthogonal remainder): only periodic images are searched.
  std::array<double, 9> cell = s.cell;
  std::vector<std::array<double, 3>> q;  // orthonormal basis of the rows chosen so far
  auto remainder = [&q](std::array<double, 3> v) {
    for (const auto& u : q) {
      const double d = v[0] * u[0] + v[1] * u[1] + v[2] * u[2];
      for (int c = 0; c < 3; ++c) v[c] -= d * u[c];
    }
    return v;
  };
  auto push = [&q](std::array<double, 3> v) {
    const double l = std::sqrt(norm2(v));
    for (int c = 0; c < 3; ++c) v[c] /= l;
    q.push_back(v);
  };
  for (int k = 0; k < 3; ++k) {
    if (s.pbc[k]) push(remainder({cell[3 * k], cell[3 * k + 1], cell[3 * k + 2]}));
  }
  for (int k = 0; k < 3; ++k) {
    if (s.pbc[k]) continue;
    std::array<double, 3> best{};
    for (int axis = 0; axis < 3; ++axis) {
      std::array<double, 3> e{};
      e[axis] = 1.0;
      const auto r = remainder(e);
      if (norm2(r) > norm2(best)) best = r;
    }
    push(best);
    for (int c = 0; c < 3; ++c) cell[3 * k + c] = q.back()[c];
  }
  const double* m = cell.data();
  std::array<std::array<double, 3>, 3> b{};  // reciprocal rows of the (periodic) cell
  const double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                     m[2] * (m[3] * m[7] - m[4] * m[6]);
  for (int k = 0; k < 3; ++k) {
    const double* u = m + 3 * ((k + 1) % 3);
    const double* v = m + 3 * ((k + 2) % 3);
    b[k] = {(u[1] * v[2] - u[2] * v[1]) / det, (u[2] * v[0] - u[0] * v[2]) / det,
            (u[0] * v[1] - u[1] * v[0]) / det};
  }
  std::array<int, 3> reach{0, 0, 0};
  for (int k = 0; k < 3; ++k) {
    if (s.pbc[k]) reach[k] = static_cast<int>(std::ceil(radius * std::sqrt(norm2(b[k])))) + 1;
  }
  std::vector<Key> keys;
  for (int64_t i = 0; i < s.n(); ++i) {
    for (int64_t j = 0; j < s.n(); ++j) {
      std::array<int, 3> center{0, 0, 0};  // image bringing j next to i (unwrapped positions)
      for (int k = 0; k < 3; ++k) {
        if (!s.pbc[k]) continue;
        double f = 0.0;
        for (int c = 0; c < 3; ++c) f += (s.pos[3 * i + c] - s.pos[3 * j + c]) * b[k][c];
        center[k] = static_cast<int>(std::lround(f));
      }
      std::array<int32_t, 3> img{};
      for (img[0] = center[0] - reach[0]; img[0] <= center[0] + reach[0]; ++img[0]) {
        for (img[1] = center[1] - reach[1]; img[1] <= center[1] + reach[1]; ++img[1]) {
          for (img[2] = center[2] - reach[2]; img[2] <= center[2] + reach[2]; ++img[2]) {
            const double d2 = norm2(vec_ij(s, i, j, img));
            if (d2 > 0.0 && d2 < radius * radius) keys.emplace_back(d2, i, j, img);
          }
        }
      }
    }
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return std::tie(std::get<1>(a), std::get<0>(a), std::get<2>(a), std::get<3>(a)) <
           std::tie(std::get<1>(b), std::get<0>(b), std::get<2>(b), std::get<3>(b));
  });
  return keys;
}

Edges build(const Structure& s, double radius, int64_t max_neighbours = 0) {
  return radius_graph(s.pos.data(), s.n(), s.cell.data(), s.pbc.data(),
                      RadiusGraphOptions{radius, max_neighbours});
}

// Edges as keys in library order; checks shift = image . cell and 0 < |r_ij| < radius.
std::vector<Key> keys_of(const Structure& s, const Edges& e, double radius) {
  std::vector<Key> keys;
  for (int64_t k = 0; k < e.size(); ++k) {
    const std::array<int32_t, 3> img{e.image[3 * k], e.image[3 * k + 1], e.image[3 * k + 2]};
    const auto r = vec_ij(s, e.dst[k], e.src[k], img);
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(s.pos[3 * e.src[k] + c] - s.pos[3 * e.dst[k] + c] + e.shift[3 * k + c], r[c],
                  1e-12);
    }
    const double d2 = norm2(r);
    EXPECT_GT(d2, 0.0);
    EXPECT_LT(d2, radius * radius);
    keys.emplace_back(d2, e.dst[k], e.src[k], img);
  }
  return keys;
}

void expect_matches_brute_force(const Structure& s, double radius) {
  const Edges e = build(s, radius);
  ASSERT_EQ(e.src.size(), e.dst.size());
  ASSERT_EQ(e.shift.size(), 3 * e.src.size());
  ASSERT_EQ(e.image.size(), 3 * e.src.size());
  const auto got = keys_of(s, e, radius);
  const auto want = brute_force(s, radius);
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(got.size(), want.size());
  // Same order: by receiver, then distance, then (j, image).
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k], want[k]) << "edge " << k;
  }
}

Structure random_structure(int n, const std::array<double, 9>& cell, std::array<uint8_t, 3> pbc,
                           double frac_lo, double frac_hi, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(frac_lo, frac_hi);
  Structure s;
  s.cell = cell;
  s.pbc = pbc;
  for (int a = 0; a < n; ++a) {
    const double f[3] = {u(rng), u(rng), u(rng)};
    for (int c = 0; c < 3; ++c) {
      s.pos.push_back(f[0] * cell[c] + f[1] * cell[3 + c] + f[2] * cell[6 + c]);
    }
  }
  return s;
}

Structure fcc_cu(int reps) {
  const double a = 3.615;
  const double basis[4][3] = {{0, 0, 0}, {0, .5, .5}, {.5, 0, .5}, {.5, .5, 0}};
  Structure s;
  s.cell = {a * reps, 0, 0, 0, a * reps, 0, 0, 0, a * reps};
  s.pbc = {1, 1, 1};
  for (int x = 0; x < reps; ++x)
    for (int y = 0; y < reps; ++y)
      for (int z = 0; z < reps; ++z)
        for (const auto& p : basis) {
          s.pos.insert(s.pos.end(), {(x + p[0]) * a, (y + p[1]) * a, (z + p[2]) * a});
        }
  return s;
}

const std::array<double, 9> kCubic{9, 0, 0, 0, 9, 0, 0, 0, 9};
const std::array<double, 9> kSkewed{8.0, 0.0, 0.0, 6.5, 4.0, 0.0, -5.0, 3.5, 5.5};
const std::array<uint8_t, 3> kAll{1, 1, 1};

TEST(RadiusGraph, PeriodicCubicMatchesBruteForce) {
  expect_matches_brute_force(random_structure(40, kCubic, kAll, 0, 1, 1), 4.0);
}

TEST(RadiusGraph, SkewedTriclinicMatchesBruteForce) {
  expect_matches_brute_force(random_structure(30, kSkewed, kAll, 0, 1, 2), 4.5);
}

TEST(RadiusGraph, CutoffBeyondHalfAndWholeCell) {
  // Plane spacings ~3.4-5.5 Å: radius 4 exceeds half of every axis.
  expect_matches_brute_force(random_structure(8, kSkewed, kAll, 0, 1, 3), 4.0);
  // A 2.5 Å triclinic cell with 2 atoms at radius 6: many images of every atom, itself included.
  const std::array<double, 9> tiny{2.5, 0, 0, 0.8, 2.4, 0, 0.3, -0.5, 2.6};
  expect_matches_brute_force(random_structure(2, tiny, kAll, 0, 1, 4), 6.0);
}

TEST(RadiusGraph, RandomCellsAndPeriodicityMatchBruteForce) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int trial = 0; trial < 40; ++trial) {
    std::array<double, 9> cell{};
    const double scale = 2.0 + 4.0 * (u(rng) + 1.0);  // 2-10 Å
    for (int k = 0; k < 3; ++k) {
      for (int c = 0; c < 3; ++c) cell[3 * k + c] = scale * ((k == c ? 1.0 : 0.0) + 0.45 * u(rng));
    }
    const std::array<uint8_t, 3> pbc{uint8_t(trial & 1), uint8_t((trial >> 1) & 1),
                                     uint8_t(trial % 3 != 0)};
    const int n = 1 + trial % 13;
    const double radius = 1.5 + 2.5 * (u(rng) + 1.0);  // 1.5-6.5 Å
    const Structure s = random_structure(n, cell, pbc, -1.5, 2.5, 100 + trial);
    SCOPED_TRACE("trial " + std::to_string(trial));
    const auto want = brute_force(s, radius);
    EXPECT_EQ(keys_of(s, build(s, radius), radius), want);
  }
}

TEST(RadiusGraph, FccPrimitiveCellHas42NeighboursAt5) {
  const double h = 3.615 / 2;
  Structure s;
  s.cell = {0, h, h, h, 0, h, h, h, 0};
  s.pbc = kAll;
  s.pos = {0.1, -0.2, 0.05};
  const Edges e = build(s, 5.0);
  EXPECT_EQ(e.size(), 42);
  for (int64_t k = 0; k < e.size(); ++k) EXPECT_EQ(e.src[k], 0);
  expect_matches_brute_force(s, 5.0);
}

TEST(RadiusGraph, FccCopperShells) {
  const Structure s = fcc_cu(3);
  const std::vector<std::pair<double, int>> shells{{3.0, 12}, {4.0, 18}, {5.0, 42}};
  for (const auto& [radius, want] : shells) {
    const Edges e = build(s, radius);
    ASSERT_EQ(e.size(), s.n() * want) << "radius " << radius;
    for (int64_t i = 0; i < s.n(); ++i) {
      EXPECT_EQ(std::count(e.dst.begin(), e.dst.end(), i), want);
    }
  }
}

TEST(RadiusGraph, MixedPeriodicityMatchesBruteForce) {
  // Slab T T F with no third lattice vector; atoms spread beyond z in [0, 1).
  std::array<double, 9> slab{7.0, 0, 0, 2.0, 6.0, 0, 0, 0, 0};
  Structure s = random_structure(30, {7.0, 0, 0, 2.0, 6.0, 0, 0, 0, 12.0}, {1, 1, 0}, -0.2, 1.2, 5);
  s.cell = slab;
  expect_matches_brute_force(s, 4.0);
  // The same slab with a tilted (ignored) third vector gives the same edges.
  Structure tilted = s;
  tilted.cell[6] = 3.0, tilted.cell[7] = -1.0, tilted.cell[8] = 9.0;
  EXPECT_EQ(build(s, 4.0).image, build(tilted, 4.0).image);
  // Wire F F T and a non-periodic axis in the middle (T F T).
  expect_matches_brute_force(random_structure(20, kSkewed, {0, 0, 1}, -0.5, 1.5, 6), 4.0);
  expect_matches_brute_force(random_structure(20, kSkewed, {1, 0, 1}, -0.5, 1.5, 7), 4.0);
}

TEST(RadiusGraph, MoleculesWithoutCell) {
  Structure s = random_structure(50, {12, 0, 0, 0, 12, 0, 0, 0, 12}, {0, 0, 0}, 0, 1, 8);
  s.cell = {};
  expect_matches_brute_force(s, 3.5);
  // Far-apart clusters: binning stays bounded, isolated atoms are counted, not rejected.
  s.pos.insert(s.pos.end(), {1e4, -2e4, 5e3, 1e4 + 1.0, -2e4, 5e3, -3e4, 0, 0});
  expect_matches_brute_force(s, 3.5);
  Structure huge = s;  // extents far beyond any bin count
  huge.pos.insert(huge.pos.end(), {1e30, 0, 0, 1e30, 0, 1.0});
  EXPECT_EQ(build(huge, 3.5).size(), build(s, 3.5).size() + 2);
  const Edges no_cell = radius_graph(s.pos.data(), s.n(), nullptr, nullptr, {3.5, 0});
  EXPECT_EQ(no_cell.src, build(s, 3.5).src);
  std::vector<int64_t> receivers;
  for (const Key& k : brute_force(s, 3.5)) receivers.push_back(std::get<1>(k));
  receivers.erase(std::unique(receivers.begin(), receivers.end()), receivers.end());
  const int64_t isolated = s.n() - static_cast<int64_t>(receivers.size());
  EXPECT_GE(isolated, 1);  // the atom at x = -3e4
  EXPECT_EQ(count_isolated_atoms(no_cell, s.n()), isolated);
}

TEST(RadiusGraph, UnwrappedPositionsMatchBruteForce) {
  // Positions from -3 to +4 cells away along each axis, negative coordinates included.
  expect_matches_brute_force(random_structure(25, kSkewed, kAll, -3, 4, 9), 4.5);
  // Moving one atom by lattice vectors changes images, not the vectors r_ij.
  Structure s = random_structure(20, kSkewed, kAll, 0, 1, 10);
  Structure moved = s;
  for (int c = 0; c < 3; ++c) moved.pos[3 * 4 + c] += 2 * kSkewed[c] - kSkewed[6 + c];
  const Edges a = build(s, 4.5), b = build(moved, 4.5);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(a.image, b.image);
  for (int64_t k = 0; k < a.size(); ++k) {
    ASSERT_EQ(a.src[k], b.src[k]);
    for (int c = 0; c < 3; ++c) {
      const double ra = s.pos[3 * a.src[k] + c] - s.pos[3 * a.dst[k] + c] + a.shift[3 * k + c];
      const double rb =
          moved.pos[3 * b.src[k] + c] - moved.pos[3 * b.dst[k] + c] + b.shift[3 * k + c];
      EXPECT_NEAR(ra, rb, 1e-10);
    }
  }
}

TEST(RadiusGraph, MaxNeighboursKeepsTheNearestDeterministically) {
  const Structure s = random_structure(40, kSkewed, kAll, 0, 1, 11);
  const int64_t max_n = 5;
  const Edges e = build(s, 5.0, max_n);
  const auto want_all = brute_force(s, 5.0);  // sorted by (i, d2, j, image)
  std::vector<Key> want;
  for (size_t k = 0; k < want_all.size(); ++k) {
    const int64_t i = std::get<1>(want_all[k]);
    const auto taken =
        std::count_if(want.begin(), want.end(), [i](const Key& w) { return std::get<1>(w) == i; });
    if (taken < max_n) want.push_back(want_all[k]);
  }
  EXPECT_EQ(keys_of(s, e, 5.0), want);
  EXPECT_EQ(e.size(), s.n() * max_n);
  const Edges again = build(s, 5.0, max_n);
  EXPECT_EQ(again.src, e.src);
  EXPECT_EQ(again.image, e.image);
  // Exact ties (perfect fcc: 12 equidistant first neighbours) are broken by (j, image).
  const Structure fcc = fcc_cu(2);
  const Edges tied = build(fcc, 3.0, 4);
  const Edges full = build(fcc, 3.0);
  ASSERT_EQ(tied.size(), fcc.n() * 4);
  const auto full_keys = keys_of(fcc, full, 3.0);
  const auto tied_keys = keys_of(fcc, tied, 3.0);
  for (int64_t i = 0; i < fcc.n(); ++i) {
    for (int k = 0; k < 4; ++k) EXPECT_EQ(tied_keys[4 * i + k], full_keys[12 * i + k]);
  }
  // The cut is counted: every fcc atom has 12 neighbours within 3 Å, 4 kept.
  EXPECT_EQ(tied.cut_atoms, fcc.n());
  EXPECT_EQ(tied.most_neighbours, 12);
  EXPECT_EQ(full.cut_atoms, 0);
  EXPECT_EQ(full.most_neighbours, 12);
  EXPECT_EQ(build(fcc, 3.0, 12).cut_atoms, 0);
}

TEST(RadiusGraph, BatchEqualsEachGraphAloneWithOffsets) {
  const Structure a = random_structure(12, kSkewed, kAll, -1, 2, 12);
  Structure b = random_structure(9, kCubic, {0, 0, 0}, 0, 0.5, 13);
  b.cell = {};
  const Structure c = random_structure(7, kCubic, {1, 1, 0}, 0, 1, 14);
  std::vector<double> pos = a.pos;
  pos.insert(pos.end(), b.pos.begin(), b.pos.end());
  pos.insert(pos.end(), c.pos.begin(), c.pos.end());
  const std::vector<int64_t> offsets{0, a.n(), a.n() + b.n(), a.n() + b.n() + c.n()};
  std::vector<double> cells(a.cell.begin(), a.cell.end());
  cells.insert(cells.end(), b.cell.begin(), b.cell.end());
  cells.insert(cells.end(), c.cell.begin(), c.cell.end());
  const std::vector<uint8_t> pbc{1, 1, 1, 0, 0, 0, 1, 1, 0};
  const Edges batch =
      radius_graph_batch(pos.data(), offsets.data(), 3, cells.data(), pbc.data(), {4.0, 0});
  Edges want;
  const Structure* parts[3] = {&a, &b, &c};
  for (int g = 0; g < 3; ++g) {
    const Edges e = build(*parts[g], 4.0);
    EXPECT_EQ(batch.edges_per_graph[g], e.size());
    for (int64_t k = 0; k < e.size(); ++k) {
      want.src.push_back(e.src[k] + offsets[g]);
      want.dst.push_back(e.dst[k] + offsets[g]);
    }
    want.shift.insert(want.shift.end(), e.shift.begin(), e.shift.end());
    want.image.insert(want.image.end(), e.image.begin(), e.image.end());
  }
  ASSERT_GT(batch.size(), 0);
  EXPECT_EQ(batch.src, want.src);
  EXPECT_EQ(batch.dst, want.dst);
  EXPECT_EQ(batch.shift, want.shift);
  EXPECT_EQ(batch.image, want.image);
  EXPECT_TRUE(std::is_sorted(batch.dst.begin(), batch.dst.end()));
}

TEST(RadiusGraph, EdgeLengthGradientMatchesFiniteDifferences) {
  const Structure s = random_structure(16, kSkewed, kAll, -1, 2, 15);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  at::Tensor pos = at::from_blob(const_cast<double*>(s.pos.data()), {s.n(), 3}, opts).clone();
  pos.requires_grad_(true);
  const Edges e = radius_graph(pos, s.cell.data(), s.pbc.data(), {4.5, 0});
  ASSERT_GT(e.size(), 0);
  const at::Tensor index = edge_index_tensor(e);
  const at::Tensor shift = edge_shift_tensor(e, at::kDouble);
  EXPECT_FALSE(shift.requires_grad());
  // f = sum_e |r_e| + 0.1 sum_e (r_e . (1,2,3)): distances and vectors both get checked.
  const at::Tensor weights = at::arange(1, 4, opts);
  auto f_of = [&](const at::Tensor& p) {
    const at::Tensor vec = edge_vectors(p, index, shift);
    return edge_lengths(vec).sum() + 0.1 * vec.mul(weights).sum();
  };
  f_of(pos).backward();
  const at::Tensor grad = pos.grad();
  const double h = 1e-6;
  at::NoGradGuard no_grad;
  for (int64_t a = 0; a < s.n(); ++a) {
    for (int c = 0; c < 3; ++c) {
      at::Tensor plus = pos.detach().clone(), minus = pos.detach().clone();
      plus[a][c] += h;
      minus[a][c] -= h;
      const double fd = (f_of(plus).item<double>() - f_of(minus).item<double>()) / (2 * h);
      EXPECT_NEAR(grad[a][c].item<double>(), fd, 1e-6) << "atom " << a << " axis " << c;
    }
  }
  // The vectors are r_ij = pos[j] - pos[i] + shift, and float32 works the same way.
  const at::Tensor vec = edge_vectors(pos.detach(), index, shift);
  for (int64_t k = 0; k < e.size(); k += 7) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_DOUBLE_EQ(vec[k][c].item<double>(),
                       s.pos[3 * e.src[k] + c] - s.pos[3 * e.dst[k] + c] + e.shift[3 * k + c]);
    }
  }
  const at::Tensor pos32 = pos.detach().to(at::kFloat);
  const at::Tensor len32 =
      edge_lengths(edge_vectors(pos32, index, edge_shift_tensor(e, at::kFloat)));
  EXPECT_EQ(len32.scalar_type(), at::kFloat);
  EXPECT_LT(len32.max().item<double>(), 4.5 + 1e-5);
  EXPECT_THROW(edge_vectors(pos32, index, shift), Error);  // dtype mismatch
}

TEST(RadiusGraph, Errors) {
  Structure s = random_structure(5, kCubic, kAll, 0, 1, 16);
  EXPECT_THROW(build(s, 0.0), ConfigError);
  EXPECT_THROW(build(s, -1.0), ConfigError);
  EXPECT_THROW(build(s, std::nan("")), ConfigError);
  EXPECT_THROW(build(s, 3.0, -1), ConfigError);
  Structure bad = s;
  bad.pos[7] = std::nan("");
  try {
    build(bad, 3.0);
    FAIL() << "NaN position accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("atom 2"), std::string::npos) << e.what();
  }
  Structure flat = s;  // third vector in the plane of the first two
  flat.cell = {9, 0, 0, 0, 9, 0, 4.5, 4.5, 0};
  EXPECT_THROW(build(flat, 3.0), DataError);
  Structure zero = s;  // periodic axes without a cell
  zero.cell = {};
  EXPECT_THROW(build(zero, 3.0), DataError);
  zero.pbc = {0, 0, 0};  // fine without periodicity
  EXPECT_NO_THROW(build(zero, 3.0));
  Structure wire = s;  // a zero lattice vector on a periodic axis only matters if periodic
  wire.cell = {9, 0, 0, 0, 0, 0, 0, 0, 0};
  wire.pbc = {1, 1, 0};
  EXPECT_THROW(build(wire, 3.0), DataError);
  wire.pbc = {1, 0, 0};
  EXPECT_NO_THROW(build(wire, 3.0));
}

TEST(RadiusGraph, CountsIsolatedAtoms) {
  Structure s;
  s.pos = {0, 0, 0, 1.0, 0, 0, 10, 0, 0, 0, 20, 0};
  const Edges e = build(s, 2.0);
  EXPECT_EQ(e.size(), 2);
  EXPECT_EQ(count_isolated_atoms(e, s.n()), 2);
  EXPECT_EQ(e.edges_per_graph, std::vector<int64_t>{2});
}

}  // namespace
}  // namespace ddgnn
