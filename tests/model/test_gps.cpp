// GPS global attention (model/gps.h), float64: the Laplacian positional encodings against the
// Laplacian built edge by edge here (eigenpairs, order, sign, zero columns past a small graph's
// atoms); attention among the atoms of each graph only; a GPS model's energy invariant under
// rotation and translation, its forces -dE/dx, each graph predicted as alone in eval mode; and
// the mpnn_types GPS supports.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../common/small_spec.h"
#include "../common/structures.h"
#include "core/error.h"
#include "model/batch.h"
#include "model/gnn.h"
#include "model/gps.h"
#include "model/layer.h"
#include "model/predict.h"

namespace ddgnn {
namespace {

constexpr double kRadius = 3.0;

using testing::Structure;

GraphBatch batch_of(const std::vector<Structure>& ss) {
  return testing::batch_of(ss, kRadius);
}
Structure cell(unsigned seed) {
  return testing::triclinic_cell({14, 8, 8, 14, 8, 1, 8, 14}, seed, 0.2);
}

double max_abs(const at::Tensor& t) {
  return t.numel() ? t.abs().max().item<double>() : 0.0;
}

// The symmetric normalised Laplacian of graph `g` of `b`, from its edges one by one.
std::vector<std::vector<double>> laplacian_of(const GraphBatch& b, int64_t g) {
  const int64_t first = b.graphs->ptr[g].item<int64_t>(), n = b.atoms_per_graph[g].item<int64_t>();
  std::vector<std::vector<double>> a(size_t(n), std::vector<double>(size_t(n), 0.0));
  for (int64_t e = 0; e < b.n_edges(); ++e) {
    const int64_t j = b.edge_index[0][e].item<int64_t>() - first;
    const int64_t i = b.edge_index[1][e].item<int64_t>() - first;
    if (i < 0 || i >= n || i == j) continue;
    a[size_t(i)][size_t(j)] += 1.0;
  }
  std::vector<double> deg(size_t(n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) deg[size_t(i)] += a[size_t(i)][size_t(j)];
  std::vector<std::vector<double>> l(size_t(n), std::vector<double>(size_t(n), 0.0));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double norm = deg[size_t(i)] > 0 && deg[size_t(j)] > 0
                              ? 1.0 / std::sqrt(deg[size_t(i)] * deg[size_t(j)])
                              : 0.0;
      l[size_t(i)][size_t(j)] = (i == j ? 1.0 : 0.0) - a[size_t(i)][size_t(j)] * norm;
    }
  return l;
}

TEST(GpsEncodings, AreTheLaplaciansEigenvectorsAfterTheFirst) {
  const GraphBatch b = batch_of({cell(3), testing::methanol(), cell(5)});
  const int64_t k = 3;
  const at::Tensor pe = laplacian_pe(b, k);
  ASSERT_EQ(pe.sizes(), (std::vector<int64_t>{b.n_atoms(), k}));
  for (int64_t g = 0; g < b.n_graphs; ++g) {
    const auto l = laplacian_of(b, g);
    const int64_t n = int64_t(l.size()), first = b.graphs->ptr[g].item<int64_t>();
    double previous = 1e-9;  // above the first eigenvalue, 0
    for (int64_t c = 0; c < k; ++c) {
      const size_t rows = l.size();
      std::vector<double> v(rows), lv(rows, 0.0);
      for (int64_t i = 0; i < n; ++i) v[size_t(i)] = pe[first + i][c].item<double>();
      double norm = 0, lambda = 0, first_entry = 0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < n; ++j) lv[size_t(i)] += l[size_t(i)][size_t(j)] * v[size_t(j)];
        norm += v[size_t(i)] * v[size_t(i)];
        lambda += v[size_t(i)] * lv[size_t(i)];
        if (first_entry == 0 && std::abs(v[size_t(i)]) > 1e-6) first_entry = v[size_t(i)];
      }
      EXPECT_NEAR(norm, 1.0, 1e-10) << "graph " << g << " column " << c;
      for (int64_t i = 0; i < n; ++i)
        EXPECT_NEAR(lv[size_t(i)], lambda * v[size_t(i)], 1e-10) << "graph " << g << " col " << c;
      EXPECT_GE(lambda, previous - 1e-10) << "graph " << g << ": eigenvalues ascending";
      EXPECT_GT(first_entry, 0.0) << "graph " << g << ": the first entry is positive";
      previous = lambda;
    }
  }
  // Each graph's encodings do not depend on the others in the batch.
  const GraphBatch alone = batch_of({testing::methanol()});
  EXPECT_LE(max_abs(laplacian_pe(alone, k) - pe.narrow(0, 8, 5)), 1e-12);
  // Methanol's 5 atoms have 4 encodings after the first: the fifth and sixth columns are zero.
  const at::Tensor wide = laplacian_pe(alone, 6);
  EXPECT_GT(max_abs(wide.narrow(1, 3, 1)), 0.1);
  EXPECT_EQ(max_abs(wide.narrow(1, 4, 2)), 0.0);
}

GnnSpec gps_spec(const std::string& type) {
  GnnSpec s = testing::small_spec(type, kRadius);
  s.gps_heads = 4;
  s.pe_dim = 3;
  return s;
}

std::shared_ptr<Gnn> build(const GnnSpec& spec) {
  at::manual_seed(11);
  auto g = std::make_shared<Gnn>(spec);
  g->to(at::kDouble);
  return g;
}

TEST(GpsAttention, SeesTheAtomsOfItsOwnGraphOnly) {
  const GraphBatch both = batch_of({cell(3), testing::methanol()});
  const GraphBatch alone = batch_of({testing::methanol()});
  at::manual_seed(2);
  GpsLayer layer(make_layer("GIN", testing::small_spec("GIN", kRadius).layer), 16, 4, 0.0);
  layer.to(at::kDouble);
  const at::Tensor x = at::randn({both.n_atoms(), 16}, at::kDouble);
  const at::Tensor out = layer.attention(x, both);
  EXPECT_LE(max_abs(layer.attention(x.narrow(0, 8, 5), alone) - out.narrow(0, 8, 5)), 1e-12);
  // A change to the cell's atoms leaves methanol's attention as it was, and changes the cell's.
  at::Tensor y = x.clone();
  y.narrow(0, 0, 8).add_(1.0);
  const at::Tensor moved = layer.attention(y, both);
  EXPECT_LE(max_abs(moved.narrow(0, 8, 5) - out.narrow(0, 8, 5)), 1e-12);
  EXPECT_GT(max_abs(moved.narrow(0, 0, 8) - out.narrow(0, 0, 8)), 1e-6);
  EXPECT_THROW(GpsLayer(nullptr, 16, 3, 0.0), ConfigError);
}

at::Tensor rotation() {
  const double a = 0.7, b = -0.4;
  const at::Tensor rz =
      at::tensor({std::cos(a), -std::sin(a), 0.0, std::sin(a), std::cos(a), 0.0, 0.0, 0.0, 1.0},
                 at::kDouble)
          .view({3, 3});
  const at::Tensor rx =
      at::tensor({1.0, 0.0, 0.0, 0.0, std::cos(b), -std::sin(b), 0.0, std::sin(b), std::cos(b)},
                 at::kDouble)
          .view({3, 3});
  return at::matmul(rz, rx);
}

TEST(GpsModel, InvariantEnergyConservativeForcesAndGraphsAsAlone) {
  for (const std::string type : {"SchNet", "GIN"}) {
    GnnSpec spec = gps_spec(type);
    auto gnn = build(spec);
    EXPECT_NE(gnn->named_parameters().find("conv1.attn_in.weight"), nullptr) << type;
    EXPECT_EQ(gnn->named_parameters().find("rel_pos_emb.weight") != nullptr, type == "SchNet");
    gnn->eval();  // batch norms from their running statistics: each graph as alone
    const TargetSpec targets = testing::targets_of(spec, true);
    const GraphBatch b = batch_of({testing::methanol(), cell(3)});
    const Prediction p = predict(*gnn, targets, b, false);
    const Prediction alone = predict(*gnn, targets, batch_of({testing::methanol()}), false);
    EXPECT_NEAR(p.energy[0].item<double>(), alone.energy[0].item<double>(), 1e-10) << type;
    if (type == "SchNet") {  // GIN reads the graph's edges, not its distances: no forces
      EXPECT_GT(max_abs(p.forces), 1e-3) << "SchNet's energy depends on the positions";
    }

    // Rotated and translated molecule: the same edges, the same energy, rotated forces.
    Structure m = testing::methanol();
    const at::Tensor r = rotation();
    const at::Tensor pos = at::tensor(m.pos, at::kDouble).view({-1, 3});
    const at::Tensor turned = at::matmul(pos, r.t()) + at::tensor({0.3, -1.2, 2.0}, at::kDouble);
    m.pos.assign(turned.data_ptr<double>(), turned.data_ptr<double>() + turned.numel());
    const Prediction q = predict(*gnn, targets, batch_of({m}), false);
    EXPECT_NEAR(q.energy[0].item<double>(), alone.energy[0].item<double>(), 1e-10) << type;
    EXPECT_LE(max_abs(q.forces - at::matmul(alone.forces, r.t())), 1e-9) << type;

    // Forces against central differences of the energy, the batch's edges fixed.
    const double h = 1e-5;
    at::NoGradGuard no_grad;
    for (int64_t a : {0, 9})
      for (int64_t c = 0; c < 3; ++c) {
        GraphBatch plus = b, minus = b;
        plus.pos = b.pos.clone();
        minus.pos = b.pos.clone();
        plus.pos[a][c] += h;
        minus.pos[a][c] -= h;
        const double ep = gnn->forward(plus, plus.pos)[0].sum().item<double>();
        const double em = gnn->forward(minus, minus.pos)[0].sum().item<double>();
        EXPECT_NEAR(p.forces[a][c].item<double>(), -(ep - em) / (2 * h), 1e-6)
            << type << " atom " << a << " component " << c;
      }
  }
  GnnSpec egnn = gps_spec("EGNN");
  EXPECT_THROW(Gnn{egnn}, ConfigError);
  GnnSpec uneven = gps_spec("SchNet");
  uneven.gps_heads = 3;
  EXPECT_THROW(Gnn{uneven}, ConfigError);
}

}  // namespace
}  // namespace ddgnn
