// The stress of a conservative model, (1/V) dE/dε from one backward through a strain of the
// positions and periodic shifts (model/predict.h), checked in float64 against finite differences of
// the energy of strained structures (graphs rebuilt), under rotation (σ' = R σ Rᵀ), and for
// molecules: zero without a cell, and in a large periodic box the virial of the molecule's own
// forces, -(1/V) Σ r ⊗ F. Every mpnn_type, and EGNN moving the atoms (equivariance).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <string>
#include <vector>

#include "../common/small_spec.h"
#include "../common/structures.h"
#include "model/device.h"
#include "model/gnn.h"
#include "model/layer.h"
#include "model/predict.h"

namespace ddgnn {
namespace {

using testing::Structure;

constexpr double kRadius = 3.0;

// Positions and cell rows times m (3x3, row-major): r -> r m.
Structure transformed(const Structure& s, const double* m) {
  Structure t = s;
  const auto apply = [&](std::vector<double>& rows) {
    for (size_t r = 0; r + 2 < rows.size(); r += 3) {
      const double x = rows[r], y = rows[r + 1], z = rows[r + 2];
      for (int c = 0; c < 3; ++c) rows[r + size_t(c)] = x * m[c] + y * m[3 + c] + z * m[6 + c];
    }
  };
  apply(t.pos);
  apply(t.cell);
  return t;
}

double volume(const Structure& s) {
  const double* c = s.cell.data();
  return std::fabs(c[0] * (c[4] * c[8] - c[5] * c[7]) - c[1] * (c[3] * c[8] - c[5] * c[6]) +
                   c[2] * (c[3] * c[7] - c[4] * c[6]));
}

TargetSpec stress_targets(const GnnSpec& spec) {
  TargetSpec t = testing::targets_of(spec, /*conservative=*/true);
  t.stress = true;
  return t;
}

Prediction predict_of(Gnn& gnn, const std::vector<Structure>& ss) {
  const GraphBatch b = testing::batch_of(ss, kRadius);
  return predict(gnn, stress_targets(gnn.spec()), b, /*create_graph=*/false);
}

double energy_of(Gnn& gnn, const Structure& s) {
  return predict_of(gnn, {s}).energy.item<double>();
}

// An mpnn_type, or "EGNN_equivariant": EGNN moving the atoms, its coord2 weights set to size 1
// (from HydraGNN's gain 0.001) so that they move by tenths of an Å.
std::shared_ptr<Gnn> model(const std::string& type) {
  const bool moving = type == "EGNN_equivariant";
  at::manual_seed(7);
  GnnSpec spec = testing::small_spec(moving ? "EGNN" : type, kRadius);
  spec.layer.equivariance = moving;
  auto gnn = std::make_shared<Gnn>(spec);
  gnn->to(at::kDouble);
  at::NoGradGuard no_grad;
  for (auto& item : gnn->named_parameters())
    if (item.key().find("coord2.weight") != std::string::npos) item.value().normal_(0.0, 1.0);
  return gnn;
}

std::vector<std::string> model_cases() {
  std::vector<std::string> c = known_layers();
  c.push_back("EGNN_equivariant");
  return c;
}

// GIN, SAGE and MFC read only the graph (as in HydraGNN): zero forces and stress.
bool reads_geometry(const std::string& type) {
  return type != "GIN" && type != "SAGE" && type != "MFC";
}

class Stress : public ::testing::TestWithParam<std::string> {};

TEST_P(Stress, EqualsFiniteDifferencesOfTheEnergyUnderStrain) {
  auto gnn = model(GetParam());
  const std::vector<Structure> ss = {testing::triclinic_cell({6, 8, 1, 1, 6, 8, 1, 1}, 3, 0.15),
                                     testing::triclinic_cell({14, 14, 8, 8, 14, 8, 14, 8}, 4, 0.1)};
  const Prediction p = predict_of(*gnn, ss);
  ASSERT_TRUE(p.stress.defined());
  ASSERT_EQ(p.stress.sizes(), (at::IntArrayRef{2, 3, 3}));
  EXPECT_LT((p.stress - p.stress.transpose(1, 2)).abs().max().item<double>(), 1e-14);
  const double h = 1e-5;
  double largest = 0;
  for (size_t g = 0; g < ss.size(); ++g)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        // The symmetric strain with ε_ij = ε_ji = h / 2 (ε_ii = h on the diagonal).
        double plus[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, minus[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
        plus[3 * i + j] += h / 2;
        plus[3 * j + i] += h / 2;
        minus[3 * i + j] -= h / 2;
        minus[3 * j + i] -= h / 2;
        const double fd = (energy_of(*gnn, transformed(ss[g], plus)) -
                           energy_of(*gnn, transformed(ss[g], minus))) /
                          (2 * h) / volume(ss[g]);
        const double got = p.stress[long(g)][i][j].item<double>();
        EXPECT_NEAR(got, fd, 1e-7 + 1e-6 * std::fabs(fd)) << "graph " << g << " σ" << i << j;
        largest = std::max(largest, std::fabs(got));
      }
  if (reads_geometry(GetParam())) {  // else no geometry: the stress is zero
    EXPECT_GT(largest, 1e-6);        // a real stress, not zeros (GAT: ~6e-6 here)
  }
}

TEST_P(Stress, RotatesWithTheStructure) {
  auto gnn = model(GetParam());
  const Structure s = testing::triclinic_cell({6, 8, 1, 1, 6, 8, 1, 1}, 5, 0.15);
  // A rotation R by 0.7 rad about (1, 2, 2)/3; rows rotate as r Rᵀ.
  const double c = std::cos(0.7), sn = std::sin(0.7), u[3] = {1 / 3.0, 2 / 3.0, 2 / 3.0};
  double r[9];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      const double cross = i == j ? 0.0 : ((j - i + 3) % 3 == 1 ? -1 : 1) * u[3 - i - j];
      r[3 * i + j] = (i == j ? c : 0.0) + (1 - c) * u[i] * u[j] + sn * cross;
    }
  double rt[9];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) rt[3 * i + j] = r[3 * j + i];
  const at::Tensor rot = at::from_blob(r, {3, 3}, at::kDouble).clone();
  EXPECT_LT((rot.matmul(rot.t()) - at::eye(3, at::kDouble)).abs().max().item<double>(), 1e-12);
  const at::Tensor a = predict_of(*gnn, {s}).stress[0];
  const at::Tensor b = predict_of(*gnn, {transformed(s, rt)}).stress[0];
  const at::Tensor expected = rot.matmul(a).matmul(rot.t());
  EXPECT_LT((b - expected).abs().max().item<double>(), 1e-10 * (1 + a.abs().max().item<double>()));
  if (reads_geometry(GetParam())) {
    EXPECT_GT((b - a).abs().max().item<double>(), 1e-6);  // the rotation changed the components
  }
}

TEST_P(Stress, MoleculeHasNoneWithoutACellAndItsForcesVirialInABox) {
  auto gnn = model(GetParam());
  Structure boxed = testing::methanol();
  boxed.cell = {20, 0, 0, 0, 20, 0, 0, 0, 20};  // no image within the radius
  boxed.pbc = {1, 1, 1};
  const Prediction p = predict_of(
      *gnn,
      {testing::methanol(), boxed, testing::triclinic_cell({6, 8, 1, 1, 6, 8, 1, 1}, 3, 0.1)});
  EXPECT_EQ(p.stress[0].abs().max().item<double>(), 0.0);  // no cell: no stress
  // An isolated molecule strained as a whole: dE/dε = Σ_i r_i ⊗ dE/dr_i = -Σ r ⊗ F.
  const at::Tensor pos = at::from_blob(boxed.pos.data(), {5, 3}, at::kDouble);
  const at::Tensor f = p.forces.narrow(0, 5, 5);
  const at::Tensor virial = -pos.t().matmul(f) / volume(boxed);
  const at::Tensor expected = 0.5 * (virial + virial.t());
  const double scale = expected.abs().max().item<double>();
  EXPECT_LT((p.stress[1] - expected).abs().max().item<double>(), 1e-12 + 1e-9 * scale);
  if (reads_geometry(GetParam())) {  // else zero forces, zero stress
    EXPECT_GT(scale, 0.0);
    // The periodic crystal in the same batch keeps its own stress.
    EXPECT_GT(p.stress[2].abs().max().item<double>(), 0.0);
  }
}

// What training differentiates: a loss of the stress (with create_graph) by the parameters, the
// fused CPU kernels against their generic versions (each one's double backward).
TEST_P(Stress, ParameterGradientOfAStressLossIsTheSameWithGenericKernels) {
  auto gnn = model(GetParam());
  const GraphBatch b = testing::batch_of(
      {testing::triclinic_cell({6, 8, 1, 1, 6, 8, 1, 1}, 3, 0.15), testing::methanol()}, kRadius);
  if (!reads_geometry(GetParam())) {  // the stress is zero and depends on no parameter
    const Prediction p = predict(*gnn, stress_targets(gnn->spec()), b, /*create_graph=*/true);
    EXPECT_EQ(p.stress.abs().max().item<double>(), 0.0);
    return;
  }
  const auto grads = [&] {
    const Prediction p = predict(*gnn, stress_targets(gnn->spec()), b, /*create_graph=*/true);
    const at::Tensor loss = (p.stress * p.stress).sum() + 0.1 * (p.forces * p.forces).sum();
    return torch::autograd::grad({loss}, gnn->parameters(), {}, false, false, true);
  };
  const auto fused = grads();
  std::vector<at::Tensor> generic;
  {
    GenericKernels force;
    generic = grads();
  }
  double largest = 0;
  for (size_t k = 0; k < fused.size(); ++k) {
    if (!fused[k].defined()) continue;
    ASSERT_TRUE(generic[k].defined()) << k;
    const double scale = fused[k].abs().max().template item<double>();
    largest = std::max(largest, scale);
    EXPECT_LE((fused[k] - generic[k]).abs().max().item<double>(), 1e-9 * (scale + 1e-12))
        << "parameter " << k;
  }
  EXPECT_GT(largest, 0.0);
}

// Training's backward reaches the parameters only (not the positions and the strain behind the
// forces and the stress): every parameter's gradient is the one autograd gives the loss.
TEST_P(Stress, BackwardToParametersGivesEveryParametersGradient) {
  auto gnn = model(GetParam());
  const GraphBatch b = testing::batch_of(
      {testing::triclinic_cell({6, 8, 1, 1, 6, 8, 1, 1}, 3, 0.15), testing::methanol()}, kRadius);
  const std::vector<at::Tensor> params = gnn->parameters();
  const auto loss_of = [&] {
    const Prediction p = predict(*gnn, stress_targets(gnn->spec()), b, /*create_graph=*/true);
    return (p.energy * p.energy).sum() + (p.stress * p.stress).sum() +
           0.1 * (p.forces * p.forces).sum();
  };
  const auto expected = torch::autograd::grad({loss_of()}, params, {}, false, false, true);
  for (const at::Tensor& p : params) ASSERT_FALSE(p.grad().defined());
  backward_to_parameters(loss_of(), params);
  double largest = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    if (!expected[k].defined()) {  // a parameter the loss does not reach keeps no gradient
      EXPECT_FALSE(params[k].grad().defined()) << "parameter " << k;
      continue;
    }
    ASSERT_TRUE(params[k].grad().defined()) << "parameter " << k;
    const double scale = expected[k].abs().max().item<double>();
    largest = std::max(largest, scale);
    EXPECT_LE((params[k].grad() - expected[k]).abs().max().item<double>(), 1e-12 * (scale + 1e-12))
        << "parameter " << k;
  }
  EXPECT_GT(largest, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Models, Stress, ::testing::ValuesIn(model_cases()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ddgnn
