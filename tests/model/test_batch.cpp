// Batches: two graphs concatenated with their radius graphs, segment maps and targets; the edge
// geometry's memoised expansions; the layer registry's error for an unknown mpnn_type and its list
// of names.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "model/batch.h"
#include "model/layer.h"

namespace ddgnn {
namespace {

// A periodic Cu4 cell (a = 3.615 Å) and a water molecule.
struct TwoGraphs {
  std::vector<uint8_t> z = {29, 29, 29, 29, 8, 1, 1};
  std::vector<double> pos = {0,      0, 0, 1.8075, 1.8075, 0,     1.8075, 0,      1.8075, 0, 1.8075,
                             1.8075, 0, 0, 0,      0.757,  0.586, 0,      -0.757, 0.586,  0};
  std::vector<int64_t> offsets = {0, 4, 7};
  std::vector<double> cells = {3.615, 0, 0, 0, 3.615, 0, 0, 0, 3.615, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  std::vector<uint8_t> pbc = {1, 1, 1, 0, 0, 0};
  std::vector<double> energy = {-14.0, -14.2};
  std::vector<double> forces = std::vector<double>(21, 0.5);
};

TEST(Batch, ConcatenatesGraphsEdgesAndTargets) {
  TwoGraphs t;
  RadiusGraphOptions opt;
  opt.radius = 3.0;
  const GraphBatch b = make_batch(t.z.data(), t.pos.data(), t.offsets.data(), 2, t.cells.data(),
                                  t.pbc.data(), t.energy.data(), t.forces.data(), opt, at::kFloat);
  EXPECT_EQ(b.n_atoms(), 7);
  EXPECT_EQ(b.n_graphs, 2);
  EXPECT_EQ(b.pos.scalar_type(), at::kFloat);
  // fcc at 3 Å: 12 neighbours per Cu atom; water: every atom sees the other two.
  EXPECT_EQ(b.n_edges(), 4 * 12 + 3 * 2);
  const at::Tensor dst = b.edge_index[1], src = b.edge_index[0];
  EXPECT_TRUE(at::equal(dst, std::get<0>(dst.sort())));  // sorted by receiver
  // No edge crosses graphs.
  EXPECT_TRUE(
      at::equal(b.graph_of_atom.index_select(0, src), b.graph_of_atom.index_select(0, dst)));
  EXPECT_EQ(b.atoms_per_graph[1].item<int64_t>(), 3);
  EXPECT_FLOAT_EQ(b.energy[1].item<float>(), -14.2f);
  EXPECT_EQ(b.receivers->n_rows, 7);
  EXPECT_EQ(b.graphs->n_rows, 2);
}

TEST(Batch, GeometryIsDifferentiableAndExpansionsAreComputedOnce) {
  TwoGraphs t;
  RadiusGraphOptions opt;
  opt.radius = 3.0;
  GraphBatch b = make_batch(t.z.data(), t.pos.data(), t.offsets.data(), 2, t.cells.data(),
                            t.pbc.data(), nullptr, nullptr, opt, at::kDouble);
  EXPECT_FALSE(b.energy.defined());
  at::Tensor pos = b.pos.clone().requires_grad_(true);
  const EdgeGeometry g(b, pos, opt.radius);
  EXPECT_LT(g.len().max().item<double>(), 3.0);
  EXPECT_NEAR(g.len().min().item<double>(), std::sqrt(0.757 * 0.757 + 0.586 * 0.586), 1e-12);
  const at::Tensor& rbf = g.gaussians(20);
  EXPECT_EQ(rbf.sizes(), (std::vector<int64_t>{b.n_edges(), 20}));
  EXPECT_EQ(g.gaussians(20).data_ptr(), rbf.data_ptr());  // memoised
  EXPECT_LE(rbf.max().item<double>(), 1.0);
  EXPECT_TRUE(at::allclose(g.unit().norm(2, 1), at::ones({b.n_edges()}, at::kDouble)));
  const at::Tensor grad = torch::autograd::grad({(g.envelope() * g.len()).sum()}, {pos})[0];
  EXPECT_NEAR(grad.sum().item<double>(), 0.0, 1e-12);  // translation invariance
}

TEST(LayerRegistry, UnknownNameIsAConfigError) {
  try {
    make_layer("SchNett", LayerSpec{});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown mpnn_type 'SchNett'"), std::string::npos);
    // The hint lists the registry's names, ", " between them.
    EXPECT_NE(e.hint().find("known types: "), std::string::npos) << e.hint();
    EXPECT_NE(e.hint().find(", SchNet"), std::string::npos) << e.hint();
  }
}

}  // namespace
}  // namespace ddgnn
