// Collate: graphs picked from a dataset block in any order become one batch whose atoms,
// targets and radius graph equal those of each graph collated alone.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../common/temp_dir.h"
#include "core/error.h"
#include "train/collate.h"

namespace ddgnn {
namespace {

Frame cell_frame(int n_rep, double a, double energy, unsigned seed) {
  // Simple cubic crystal of n_rep^3 atoms with small deterministic displacements.
  Frame f;
  unsigned s = seed;
  auto next = [&] { return double((s = s * 1103515245u + 12345u) % 1000) / 1000.0 - 0.5; };
  for (int i = 0; i < n_rep; ++i)
    for (int j = 0; j < n_rep; ++j)
      for (int k = 0; k < n_rep; ++k) {
        f.z.push_back(14);
        f.pos.insert(f.pos.end(),
                     {i * a + 0.1 * next(), j * a + 0.1 * next(), k * a + 0.1 * next()});
        f.forces.insert(f.forces.end(), {next(), next(), next()});
      }
  f.has_cell = true;
  f.cell = {n_rep * a, 0, 0, 0, n_rep * a, 0, 0, 0, n_rep * a};
  f.pbc = {true, true, true};
  f.has_energy = true;
  f.energy = energy;
  return f;
}

TEST(Collate, AnyOrderEqualsEachGraphAlone) {
  testing::TempDir dir;
  {
    DatasetWriter w(dir.file("d.h5"), {});
    w.add(cell_frame(2, 2.5, -1.0, 1), "a");
    w.add(cell_frame(3, 2.4, -2.0, 2), "b");
    w.add(cell_frame(2, 2.6, -3.0, 3), "c");
    w.commit();
  }
  Dataset ds(dir.file("d.h5"));
  const GraphBlock block = ds.read(0, 3);
  RadiusGraphOptions opt;
  opt.radius = 3.0;
  const GraphBatch b = collate(block, {2, 1}, opt, at::kDouble);
  const GraphBatch c = collate(block, {2}, opt, at::kDouble);
  const GraphBatch d = collate(block, {1}, opt, at::kDouble);
  EXPECT_EQ(b.n_graphs, 2);
  EXPECT_EQ(b.n_atoms(), 8 + 27);
  EXPECT_DOUBLE_EQ(b.energy[0].item<double>(), -3.0);
  EXPECT_DOUBLE_EQ(b.energy[1].item<double>(), -2.0);
  EXPECT_EQ(b.n_edges(), c.n_edges() + d.n_edges());
  EXPECT_TRUE(at::equal(b.pos.slice(0, 0, 8), c.pos));
  EXPECT_TRUE(at::equal(b.forces.slice(0, 8), d.forces));
  EXPECT_TRUE(at::equal(b.edge_index.slice(1, c.n_edges()), d.edge_index + 8));
  EXPECT_THROW(collate(block, {3}, opt, at::kDouble), Error);
}

// The stress labels are the batch's own memory in every precision: the float64 batch once held a
// view of a vector freed when collate returned, so its labels became whatever was allocated there
// next.
TEST(Collate, StressLabelsOutliveTheCall) {
  testing::TempDir dir;
  {
    DatasetWriter w(dir.file("d.h5"), {});
    for (unsigned g = 0; g < 3; ++g) {
      Frame f = cell_frame(2, 2.5, -1.0 - g, 1 + g);
      f.has_stress = true;
      for (size_t k = 0; k < 9; ++k) f.stress[k] = 0.01 * double(10 * g + k + 1);
      w.add(f, "a");
    }
    w.commit();
  }
  Dataset ds(dir.file("d.h5"));
  const GraphBlock block = ds.read(0, 3);
  RadiusGraphOptions opt;
  opt.radius = 3.0;
  for (const auto dtype : {at::kDouble, at::kFloat}) {
    const GraphBatch b = collate(block, {2, 0}, opt, dtype);
    // Allocations of the freed size, written with something else.
    std::vector<std::vector<double>> junk;
    for (int k = 0; k < 8; ++k) junk.emplace_back(18, -7.0);
    ASSERT_TRUE(b.stress.defined());
    ASSERT_EQ(b.stress.sizes(), (at::IntArrayRef{2, 3, 3}));
    EXPECT_EQ(b.stress.scalar_type(), dtype);
    EXPECT_EQ(b.n_stress, 2);
    const at::Tensor s = b.stress.to(at::kDouble);
    for (int64_t g = 0; g < 2; ++g)
      for (int64_t k = 0; k < 9; ++k)
        EXPECT_NEAR(s[g].view(-1)[k].item<double>(), 0.01 * double(10 * (g == 0 ? 2 : 0) + k + 1),
                    1e-7);
    EXPECT_TRUE(at::equal(b.stress_mask.to(at::kDouble), at::ones({2}, at::kDouble)));
  }
}

}  // namespace
}  // namespace ddgnn
