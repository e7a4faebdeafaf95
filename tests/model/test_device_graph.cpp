// model/device_graph: the radius graph from tensor ops (run here on the CPU device) against the
// cell lists of model/radius_graph on molecules, cubic, triclinic and tiny periodic cells, mixed
// periodicity, unwrapped positions, max_neighbours, batches and chunking; make_batch with both
// builds; the same errors. On a CUDA device: tests/gpu/.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <array>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "model/batch.h"
#include "model/device_graph.h"
#include "model/radius_graph.h"

namespace ddgnn {
namespace {

// Structures concatenated as radius_graph_batch takes them.
struct Batch {
  std::vector<double> pos;  // [n_atoms, 3] Å
  std::vector<int64_t> offsets{0};
  std::vector<double> cells;  // [n_graphs, 9] Å
  std::vector<uint8_t> pbc;   // [n_graphs, 3]
  int64_t n_graphs() const { return static_cast<int64_t>(offsets.size()) - 1; }
  int64_t n_atoms() const { return offsets.back(); }
};

using Cell = std::array<double, 9>;
using Pbc = std::array<uint8_t, 3>;

const Cell kCubic{9, 0, 0, 0, 9, 0, 0, 0, 9};
const Cell kSkewed{8.0, 0.0, 0.0, 6.5, 4.0, 0.0, -5.0, 3.5, 5.5};
const Cell kTiny{2.5, 0, 0, 0.8, 2.4, 0, 0.3, -0.5, 2.6};
const Pbc kAll{1, 1, 1}, kNone{0, 0, 0};

// Appends n atoms at uniform fractional coordinates in [lo, hi) of `frame` (which need not be
// the stored cell), with the stored cell and pbc.
void add(Batch& b, int n, const Cell& frame, const Cell& cell, Pbc pbc, double lo, double hi,
         unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int a = 0; a < n; ++a) {
    const double f[3] = {u(rng), u(rng), u(rng)};
    for (int c = 0; c < 3; ++c)
      b.pos.push_back(f[0] * frame[c] + f[1] * frame[3 + c] + f[2] * frame[6 + c]);
  }
  b.offsets.push_back(b.offsets.back() + n);
  b.cells.insert(b.cells.end(), cell.begin(), cell.end());
  b.pbc.insert(b.pbc.end(), pbc.begin(), pbc.end());
}
void add(Batch& b, int n, const Cell& cell, Pbc pbc, double lo, double hi, unsigned seed) {
  add(b, n, cell, cell, pbc, lo, hi, seed);
}

// A perfect fcc copper crystal of reps^3 cubic cells (exact distance ties).
void add_fcc(Batch& b, int reps) {
  const double a = 3.615;
  const double basis[4][3] = {{0, 0, 0}, {0, .5, .5}, {.5, 0, .5}, {.5, .5, 0}};
  for (int x = 0; x < reps; ++x)
    for (int y = 0; y < reps; ++y)
      for (int z = 0; z < reps; ++z)
        for (const auto& p : basis)
          b.pos.insert(b.pos.end(), {(x + p[0]) * a, (y + p[1]) * a, (z + p[2]) * a});
  b.offsets.push_back(b.offsets.back() + 4 * reps * reps * reps);
  const double l = a * reps;
  b.cells.insert(b.cells.end(), {l, 0, 0, 0, l, 0, 0, 0, l});
  b.pbc.insert(b.pbc.end(), {1, 1, 1});
}

at::Tensor pos_tensor(const Batch& b, c10::Device device = c10::Device(c10::kCPU)) {
  return at::from_blob(const_cast<double*>(b.pos.data()), {b.n_atoms(), 3}, at::kDouble)
      .to(device, at::kDouble, false, /*copy=*/true);
}

DeviceEdges tensors(const Batch& b, RadiusGraphOptions opt, int64_t chunk = 0,
                    c10::Device device = c10::Device(c10::kCPU)) {
  return radius_graph_tensors(pos_tensor(b, device), b.pos.data(), b.offsets.data(), b.n_graphs(),
                              b.cells.data(), b.pbc.data(), opt, chunk);
}

// Both builds agree exactly: edge_index, shifts (1e-12 Å), per-graph counts and the cut counts.
// Returns the number of edges.
int64_t expect_same(const Batch& b, RadiusGraphOptions opt, int64_t chunk = 0,
                    c10::Device device = c10::Device(c10::kCPU)) {
  const Edges want = radius_graph_batch(b.pos.data(), b.offsets.data(), b.n_graphs(),
                                        b.cells.data(), b.pbc.data(), opt);
  const DeviceEdges got = tensors(b, opt, chunk, device);
  EXPECT_EQ(got.edge_index.device(), device);
  EXPECT_EQ(got.shift.device(), device);
  EXPECT_EQ(got.edge_index.scalar_type(), at::kLong);
  EXPECT_EQ(got.shift.scalar_type(), at::kDouble);
  EXPECT_EQ(got.edge_index.size(0), 2);
  EXPECT_EQ(got.edge_index.size(1), want.size());
  EXPECT_EQ(got.shift.size(0), want.size());
  EXPECT_EQ(got.edges_per_graph, want.edges_per_graph);
  EXPECT_EQ(got.cut_atoms, want.cut_atoms);
  EXPECT_EQ(got.most_neighbours, want.most_neighbours);
  if (got.edge_index.size(1) != want.size()) return want.size();
  EXPECT_TRUE(at::equal(got.edge_index.cpu(), edge_index_tensor(want)));
  if (want.size() > 0) {
    const double diff =
        (got.shift.cpu() - edge_shift_tensor(want, at::kDouble)).abs().max().item<double>();
    EXPECT_LE(diff, 1e-12);
  }
  return want.size();
}

TEST(DeviceGraph, MoleculesWithoutCell) {
  Batch b;
  add(b, 50, {12, 0, 0, 0, 12, 0, 0, 0, 12}, Cell{}, kNone, 0, 1, 1);
  add(b, 7, {5, 0, 0, 0, 5, 0, 0, 0, 5}, Cell{}, kNone, 0, 1, 2);
  // A cell given but no periodic axis: ignored.
  add(b, 20, kSkewed, kNone, -0.5, 1.5, 3);
  EXPECT_GT(expect_same(b, {3.5, 0}), 100);
  // Far-apart atoms and coordinates far beyond any cell: isolated, not errors.
  Batch far = b;
  far.pos.insert(far.pos.end() - 3, {1e4, -2e4, 5e3, 1e30, 0, 0});
  far.offsets.back() += 2;
  expect_same(far, {3.5, 0});
}

TEST(DeviceGraph, CubicAndTriclinicCells) {
  for (unsigned seed = 0; seed < 3; ++seed) {
    Batch cubic, skewed;
    add(cubic, 40, kCubic, kAll, 0, 1, 10 + seed);
    add(skewed, 30, kSkewed, kAll, 0, 1, 20 + seed);
    EXPECT_GT(expect_same(cubic, {4.0, 0}), 0);
    EXPECT_GT(expect_same(skewed, {4.5, 0}), 0);
  }
}

TEST(DeviceGraph, CellsSmallerThanTheRadius) {
  Batch b;
  add(b, 8, kSkewed, kAll, 0, 1, 30);  // radius 4 beyond half of every axis
  add(b, 2, kTiny, kAll, 0, 1, 31);    // 2.5 Å cell, radius 6: many images, self-images too
  add(b, 1, kTiny, kAll, 0, 1, 32);    // one atom: its own images only
  EXPECT_GT(expect_same(b, {6.0, 0}), 500);
  // A primitive fcc cell: 42 neighbours within 5 Å, all images of the one atom.
  Batch fcc;
  const double h = 3.615 / 2;
  fcc.pos = {0.1, -0.2, 0.05};
  fcc.offsets = {0, 1};
  fcc.cells = {0, h, h, h, 0, h, h, h, 0};
  fcc.pbc = {1, 1, 1};
  EXPECT_EQ(expect_same(fcc, {5.0, 0}), 42);
}

TEST(DeviceGraph, RandomCellsPeriodicityAndUnwrappedPositions) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Batch all;
  for (int trial = 0; trial < 40; ++trial) {
    Cell cell{};
    const double scale = 2.0 + 4.0 * (u(rng) + 1.0);  // 2-10 Å
    for (int k = 0; k < 3; ++k)
      for (int c = 0; c < 3; ++c) cell[3 * k + c] = scale * ((k == c ? 1.0 : 0.0) + 0.45 * u(rng));
    const Pbc pbc{uint8_t(trial & 1), uint8_t((trial >> 1) & 1), uint8_t(trial % 3 != 0)};
    const double radius = 1.5 + 2.5 * (u(rng) + 1.0);  // 1.5-6.5 Å
    Batch one;
    add(one, 1 + trial % 13, cell, pbc, -1.5, 2.5, 100 + trial);
    add(all, 1 + trial % 13, cell, pbc, -1.5, 2.5, 100 + trial);
    SCOPED_TRACE("trial " + std::to_string(trial));
    expect_same(one, {radius, 0});
  }
  EXPECT_GT(expect_same(all, {4.0, 0}), 0);  // one batch of all 40
}

TEST(DeviceGraph, MixedPeriodicity) {
  Batch b;
  // Slab T T F without a third lattice vector, atoms beyond z in [0, 1).
  add(b, 30, {7.0, 0, 0, 2.0, 6.0, 0, 0, 0, 12.0}, {7.0, 0, 0, 2.0, 6.0, 0, 0, 0, 0}, {1, 1, 0},
      -0.2, 1.2, 40);
  add(b, 20, kSkewed, {0, 0, 1}, -0.5, 1.5, 41);  // wire
  add(b, 20, kSkewed, {1, 0, 1}, -0.5, 1.5, 42);  // the non-periodic axis in the middle
  add(b, 20, kSkewed, {0, 1, 0}, -0.5, 1.5, 43);
  add(b, 5, kTiny, {1, 0, 1}, -0.5, 1.5, 44);  // small cell along two axes
  EXPECT_GT(expect_same(b, {4.0, 0}), 0);
}

TEST(DeviceGraph, UnwrappedPositions) {
  Batch b;
  add(b, 25, kSkewed, kAll, -3, 4, 50);  // -3 to +4 cells away, negative coordinates included
  add(b, 10, kTiny, kAll, -5, 5, 51);
  add(b, 25, kCubic, {1, 0, 1}, -2, 3, 52);
  EXPECT_GT(expect_same(b, {4.5, 0}), 0);
}

TEST(DeviceGraph, MaxNeighboursKeepsTheSameNearest) {
  Batch b;
  add(b, 40, kSkewed, kAll, 0, 1, 60);
  add(b, 30, {10, 0, 0, 0, 10, 0, 0, 0, 10}, Cell{}, kNone, 0, 1, 61);
  add(b, 6, kTiny, kAll, -1, 2, 62);
  for (int64_t max_n : {1, 5, 12, 1000}) {
    SCOPED_TRACE("max_neighbours " + std::to_string(max_n));
    const Edges full = radius_graph_batch(b.pos.data(), b.offsets.data(), b.n_graphs(),
                                          b.cells.data(), b.pbc.data(), {5.0, 0});
    ASSERT_GT(full.most_neighbours, 12);
    const int64_t n = expect_same(b, {5.0, max_n});
    if (max_n < full.most_neighbours) {
      EXPECT_LT(n, full.size());
    }
  }
  // Exact ties (perfect fcc, 12 equidistant first neighbours) break alike: by (j, image).
  Batch fcc;
  add_fcc(fcc, 2);
  add_fcc(fcc, 3);
  EXPECT_EQ(expect_same(fcc, {3.0, 4}), (32 + 108) * 4);
  EXPECT_EQ(expect_same(fcc, {5.0, 0}), (32 + 108) * 42);
  EXPECT_EQ(expect_same(fcc, {5.0, 20}), (32 + 108) * 20);
  // A smooth cap keeps one more, the boundary edge, of every center it caps.
  EXPECT_EQ(expect_same(fcc, {5.0, 20, true}), (32 + 108) * 21);
  EXPECT_EQ(expect_same(fcc, {5.0, 42, true}), (32 + 108) * 42);
  for (int64_t max_n : {1, 5, 12}) {
    SCOPED_TRACE("smooth, max_neighbours " + std::to_string(max_n));
    const Edges hard = radius_graph_batch(b.pos.data(), b.offsets.data(), b.n_graphs(),
                                          b.cells.data(), b.pbc.data(), {5.0, max_n});
    EXPECT_EQ(expect_same(b, {5.0, max_n, true}), hard.size() + hard.cut_atoms);
  }
}

TEST(DeviceGraph, BatchesWithEmptyAndSingleAtomGraphs) {
  Batch b;
  add(b, 12, kSkewed, kAll, -1, 2, 70);
  add(b, 0, kCubic, kAll, 0, 1, 71);   // no atoms
  add(b, 1, kCubic, kNone, 0, 1, 72);  // one atom, no neighbour
  add(b, 9, kCubic, kNone, 0, 0.5, 73);
  add(b, 0, kCubic, kNone, 0, 1, 74);
  EXPECT_GT(expect_same(b, {4.0, 0}), 0);
  Batch empty;
  add(empty, 0, kCubic, kAll, 0, 1, 75);
  EXPECT_EQ(expect_same(empty, {4.0, 0}), 0);
  Batch lonely;
  add(lonely, 2, {30, 0, 0, 0, 30, 0, 0, 0, 30}, Cell{}, kNone, 0, 1, 76);
  EXPECT_EQ(expect_same(lonely, {1.0, 3}), 0);
}

TEST(DeviceGraph, ChunksGiveTheSameEdges) {
  Batch b;
  add(b, 30, kSkewed, kAll, -1, 2, 80);
  add(b, 7, kTiny, kAll, 0, 1, 81);  // 125 images per pair at radius 5
  add(b, 25, kCubic, Cell{}, kNone, 0, 1, 82);
  add(b, 12, kCubic, kAll, 0, 1, 83);
  // From one chunk to one center per chunk, and chunks smaller than one center.
  for (int64_t chunk : {int64_t(0), kChunkCandidates, int64_t(5000), int64_t(700), int64_t(1)}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    EXPECT_GT(expect_same(b, {5.0, 0}, chunk), 0);
    expect_same(b, {5.0, 6}, chunk);
  }
}

// The same input errors as radius_graph_batch, with the same messages.
void expect_same_error(const Batch& b, RadiusGraphOptions opt) {
  std::string want, got;
  try {
    radius_graph_batch(b.pos.data(), b.offsets.data(), b.n_graphs(), b.cells.data(), b.pbc.data(),
                       opt);
  } catch (const Error& e) {
    want = e.what();
  }
  try {
    tensors(b, opt);
  } catch (const Error& e) {
    got = e.what();
  }
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(got, want);
}

TEST(DeviceGraph, SameErrors) {
  Batch good;
  add(good, 5, kCubic, kAll, 0, 1, 90);
  add(good, 5, kCubic, kAll, 0, 1, 91);
  expect_same_error(good, {0.0, 0});
  expect_same_error(good, {-1.0, 0});
  expect_same_error(good, {3.0, -1});
  EXPECT_THROW(tensors(good, {0.0, 0}), ConfigError);
  Batch nan = good;
  nan.pos[3 * 5 + 7] = std::nan("");  // graph 1, atom 2
  expect_same_error(nan, {3.0, 0});
  EXPECT_THROW(tensors(nan, {3.0, 0}), DataError);
  Batch flat = good;  // graph 1's third vector in the plane of the first two
  const Cell degenerate{9, 0, 0, 0, 9, 0, 4.5, 4.5, 0};
  std::copy(degenerate.begin(), degenerate.end(), flat.cells.begin() + 9);
  expect_same_error(flat, {3.0, 0});
  EXPECT_THROW(tensors(flat, {3.0, 0}), DataError);
  Batch tiny = good;  // a cell far too small for the radius
  const Cell speck{1e-3, 0, 0, 0, 1e-3, 0, 0, 0, 1e-3};
  std::copy(speck.begin(), speck.end(), tiny.cells.begin());
  expect_same_error(tiny, {3.0, 0});
  Batch offsets = good;
  offsets.offsets[1] = 7, offsets.offsets[2] = 6;
  expect_same_error(offsets, {3.0, 0});
  // Positions that do not fit the offsets, or not float64.
  EXPECT_THROW(
      radius_graph_tensors(pos_tensor(good).slice(0, 1), good.pos.data(), good.offsets.data(), 2,
                           good.cells.data(), good.pbc.data(), {3.0, 0}),
      Error);
  EXPECT_THROW(
      radius_graph_tensors(pos_tensor(good).to(at::kFloat), good.pos.data(), good.offsets.data(), 2,
                           good.cells.data(), good.pbc.data(), {3.0, 0}),
      Error);
  EXPECT_THROW(tensors(good, {3.0, 0}, /*chunk=*/-1), Error);
}

// make_batch with both builds of the graph: the same batch, tensor for tensor.
void expect_same_batch(const GraphBatch& a, const GraphBatch& b) {
  EXPECT_EQ(a.n_graphs, b.n_graphs);
  EXPECT_EQ(a.cut_atoms, b.cut_atoms);
  EXPECT_EQ(a.most_neighbours, b.most_neighbours);
  const std::vector<std::pair<at::Tensor, at::Tensor>> tensors{
      {a.z, b.z},
      {a.pos, b.pos},
      {a.edge_index, b.edge_index},
      {a.edge_shift, b.edge_shift},
      {a.graph_of_atom, b.graph_of_atom},
      {a.atoms_per_graph, b.atoms_per_graph},
      {a.energy, b.energy},
      {a.forces, b.forces},
      {a.cap_boundary, b.cap_boundary}};
  for (const auto& [x, y] : tensors) {
    ASSERT_EQ(x.defined(), y.defined());
    if (!x.defined()) continue;
    EXPECT_EQ(x.scalar_type(), y.scalar_type());
    EXPECT_TRUE(at::equal(x.cpu(), y.cpu()));
  }
  using Segments = std::shared_ptr<const SegmentIndex>;
  const std::vector<std::pair<Segments, Segments>> segments{
      {a.receivers, b.receivers}, {a.senders, b.senders}, {a.graphs, b.graphs}};
  for (const auto& [s, t] : segments) {
    EXPECT_EQ(s->n_rows, t->n_rows);
    EXPECT_TRUE(at::equal(s->index.cpu(), t->index.cpu()));
    EXPECT_TRUE(at::equal(s->ptr.cpu(), t->ptr.cpu()));
    ASSERT_EQ(s->order.defined(), t->order.defined());
    if (s->order.defined()) {
      EXPECT_TRUE(at::equal(s->order.cpu(), t->order.cpu()));
    }
  }
}

TEST(DeviceGraph, MakeBatchBuildsTheSameBatchEitherWay) {
  Batch b;
  add(b, 20, kSkewed, kAll, -1, 2, 100);
  add(b, 9, kCubic, Cell{}, kNone, 0, 0.5, 101);
  add(b, 4, kTiny, {1, 0, 1}, 0, 1, 102);
  std::vector<uint8_t> z(b.n_atoms());
  for (int64_t a = 0; a < b.n_atoms(); ++a) z[a] = static_cast<uint8_t>(1 + a % 30);
  const std::vector<double> energy{-3.0, -1.5, -0.5};
  std::vector<double> forces(3 * b.n_atoms());
  for (size_t k = 0; k < forces.size(); ++k) forces[k] = 0.01 * static_cast<double>(k);
  const c10::Device cpu(c10::kCPU);
  for (const c10::ScalarType dtype : {at::kFloat, at::kDouble}) {
    for (const auto& [max_n, smooth] :
         std::vector<std::pair<int64_t, bool>>{{0, false}, {7, false}, {7, true}}) {
      const RadiusGraphOptions opt{4.5, max_n, smooth};
      auto batch = [&](GraphBuild build, bool targets) {
        return make_batch(z.data(), b.pos.data(), b.offsets.data(), b.n_graphs(), b.cells.data(),
                          b.pbc.data(), targets ? energy.data() : nullptr,
                          targets ? forces.data() : nullptr, opt, dtype, cpu, build);
      };
      const GraphBatch cells = batch(GraphBuild::kCellList, true);
      ASSERT_GT(cells.n_edges(), 0);
      EXPECT_EQ(cells.pos.scalar_type(), dtype);
      EXPECT_EQ(cells.edge_shift.scalar_type(), dtype);
      expect_same_batch(cells, batch(GraphBuild::kTensors, true));
      expect_same_batch(cells, batch(GraphBuild::kAuto, true));
      expect_same_batch(batch(GraphBuild::kCellList, false), batch(GraphBuild::kTensors, false));
      if (max_n > 0) {
        EXPECT_GT(cells.cut_atoms, 0);
      }
      EXPECT_EQ(cells.cap_boundary.defined(), smooth);
    }
  }
}

}  // namespace
}  // namespace ddgnn
