// The MACE layer in float64: its spherical harmonics against model/so3.h; every intermediate
// spherical-tensor feature (messages, product basis, output) of degree l transforms with the
// Wigner-D matrix of degree l under proper and improper rotations; the energy is invariant under
// rotation, translation, permutation and periodic-image shifts; forces against central finite
// differences; the force loss's parameter gradient (a second derivative) against finite
// differences of the first; a batch of two graphs equals each alone; bad MACE keys are
// ConfigErrors naming the key.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../common/layer_checks.h"
#include "../common/structures.h"
#include "core/error.h"
#include "model/batch.h"
#include "model/irreps.h"
#include "model/layer.h"
#include "model/layers/mace.h"
#include "model/so3.h"

namespace ddgnn {
namespace {

constexpr int64_t kF = 6;
constexpr double kRadius = 3.2;

using testing::expect_close;
using testing::Structure;

Structure periodic_cell() {
  return testing::triclinic_cell({8, 14, 14, 8, 14, 14, 8, 14}, 5, 0.15);
}
// A distorted CH4 and an isolated H (no neighbours), not periodic.
Structure molecule() {
  return testing::ch4_and_lone_h();
}
GraphBatch batch_of(const std::vector<Structure>& ss) {
  return testing::batch_of(ss, kRadius);
}

LayerSpec spec(int64_t max_ell = 3, int64_t node_max_ell = 2, int64_t correlation = 3) {
  LayerSpec s;
  s.hidden_dim = kF;
  s.radius = kRadius;
  s.num_radial = 5;
  s.max_ell = max_ell;
  s.node_max_ell = node_max_ell;
  s.correlation = correlation;
  s.avg_num_neighbors = 4.0;
  s.num_layers = 2;
  s.num_species = 21;
  s.envelope.p = 5;
  return s;
}

// Two MACE layers as the trunk stacks them (the first reads scalars; the second, the last,
// writes scalars only).
struct Stack {
  std::shared_ptr<MessagePassing> first, last;
  explicit Stack(const LayerSpec& s, unsigned seed = 3) {
    at::manual_seed(seed);
    LayerSpec a = s, b = s;
    a.layer_index = 0;
    b.layer_index = 1;
    first = make_layer("MACE", a);
    last = make_layer("MACE", b);
    first->to(at::kDouble);
    last->to(at::kDouble);
  }
  std::vector<at::Tensor> parameters() const {
    std::vector<at::Tensor> p = first->parameters();
    for (const auto& t : last->parameters()) p.push_back(t);
    return p;
  }
};

// Input scalars from the atomic number (they follow atoms under permutation): [n_atoms, F].
at::Tensor features(const GraphBatch& b) {
  return testing::atom_features(b, kF);
}

struct Traced {
  NodeState out;
  MaceTrace t1, t2;
};
Traced run(const Stack& s, const GraphBatch& b, const at::Tensor& pos) {
  const EdgeGeometry g(b, pos, kRadius);
  NodeState in;
  in.inv = features(b);
  Traced r;
  const NodeState mid = mace_forward_traced(*s.first, in, b, g, &r.t1);
  r.out = mace_forward_traced(*s.last, mid, b, g, &r.t2);
  return r;
}
// A scalar of the output, nonlinear in it (as a head would be).
at::Tensor energy_of(const NodeState& s) {
  return (s.inv + 0.3 * s.inv * s.inv).sum();
}
double energy(const Stack& s, const std::vector<Structure>& ss) {
  const GraphBatch b = batch_of(ss);
  return energy_of(run(s, b, b.pos).out).item<double>();
}

// The shared rotation, or its product with the inversion.
so3::Mat3 rotation(bool improper) {
  const std::vector<double> e = testing::euler_rotation();
  so3::Mat3 r{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) r[i][j] = improper ? -e[size_t(3 * i + j)] : e[size_t(3 * i + j)];
  return r;
}
void rotate(std::vector<double>& xs, const so3::Mat3& r) {
  for (size_t k = 0; k + 2 < xs.size(); k += 3) {
    const double x[3] = {xs[k], xs[k + 1], xs[k + 2]};
    for (int i = 0; i < 3; ++i) xs[k + i] = r[i][0] * x[0] + r[i][1] * x[1] + r[i][2] * x[2];
  }
}

// Applies D_l(r) to every degree of x [N, (L+1)^2, F].
at::Tensor rotate_irreps(const at::Tensor& x, const so3::Mat3& r) {
  std::vector<at::Tensor> blocks;
  const int64_t lmax = int64_t(std::lround(std::sqrt(double(x.size(1))))) - 1;
  for (int64_t l = 0; l <= lmax; ++l) {
    const at::Tensor d = at::tensor(so3::wigner_d(int(l), r)).view({2 * l + 1, 2 * l + 1});
    blocks.push_back(at::matmul(d, x.narrow(1, l * l, 2 * l + 1)));
  }
  return at::cat(blocks, 1);
}

// |a - b| <= tol * max |b| (features grow with the body order: a relative bound).
void expect_close_relative(const at::Tensor& a, const at::Tensor& b, double tol,
                           const std::string& what) {
  const double scale = b.abs().max().item<double>();
  EXPECT_GT(scale, 1e-3) << what << " carries no signal";
  expect_close(a, b, tol * std::max(1.0, scale), what + " (scale " + std::to_string(scale) + ")");
}

TEST(MaceHarmonics, MatchSo3ForEveryDegree) {
  std::mt19937 rng(4);
  std::normal_distribution<double> normal;
  for (int k = 0; k < 20; ++k) {
    so3::Vec3 v{normal(rng), normal(rng), normal(rng)};
    const double n = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    const at::Tensor unit = at::tensor({v[0] / n, v[1] / n, v[2] / n}).view({1, 3});
    const at::Tensor y = spherical_harmonics(unit, 3);
    ASSERT_EQ(y.size(1), 16);
    for (int l = 0; l <= 3; ++l) {
      const std::vector<double> ref = so3::spherical_harmonics(l, v);
      for (int m = 0; m < 2 * l + 1; ++m)
        EXPECT_NEAR(y[0][l * l + m].item<double>(), ref[size_t(m)], 1e-13) << l << " " << m;
    }
  }
}

TEST(MaceLayer, ShapesAndTheReadoutSum) {
  const Stack s(spec());
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const Traced r = run(s, b, b.pos);
  EXPECT_EQ(r.t1.messages.sizes(), (std::vector<int64_t>{b.n_atoms(), 16, kF}));
  EXPECT_EQ(r.t1.out.sizes(), (std::vector<int64_t>{b.n_atoms(), 9, kF}));
  EXPECT_EQ(r.t2.out.sizes(), (std::vector<int64_t>{b.n_atoms(), 1, kF}));
  EXPECT_EQ(r.out.inv.sizes(), (std::vector<int64_t>{b.n_atoms(), kF}));
  EXPECT_FALSE(s.first->activates_output());
  // Every degree carries signal, and the isolated atom's output depends on its element only.
  for (int64_t l = 0; l <= 2; ++l)
    EXPECT_GT(r.t1.out.narrow(1, l * l, 2 * l + 1).narrow(0, 0, 8).abs().max().item<double>(), 1e-3)
        << l;
}

class MaceEquivariance : public ::testing::TestWithParam<bool> {};

TEST_P(MaceEquivariance, EveryIntermediateDegreeTransformsWithItsWignerD) {
  const bool improper = GetParam();
  for (int64_t correlation : {1, 2, 3}) {
    const Stack s(spec(3, 2, correlation));
    const Structure cell = periodic_cell(), mol = molecule();
    Structure rc = cell, rm = mol;
    const so3::Mat3 r = rotation(improper);
    rotate(rc.pos, r), rotate(rc.cell, r), rotate(rm.pos, r);
    const GraphBatch b = batch_of({cell, mol}), br = batch_of({rc, rm});
    const Traced a = run(s, b, b.pos), ar = run(s, br, br.pos);
    const std::string c = " (correlation " + std::to_string(correlation) + ")";
    for (const auto& [x, xr, name] :
         {std::make_tuple(a.t1.messages, ar.t1.messages, "layer 1 messages"),
          std::make_tuple(a.t1.product, ar.t1.product, "layer 1 product"),
          std::make_tuple(a.t1.out, ar.t1.out, "layer 1 output"),
          std::make_tuple(a.t2.messages, ar.t2.messages, "layer 2 messages"),
          std::make_tuple(a.t2.product, ar.t2.product, "layer 2 product")})
      expect_close_relative(xr, rotate_irreps(x, r), 1e-10, name + c);
    expect_close_relative(ar.out.inv, a.out.inv, 1e-10, "readout" + c);
  }
}
INSTANTIATE_TEST_SUITE_P(ProperAndImproper, MaceEquivariance, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Improper" : "Proper"; });

TEST(MaceLayer, EnergyInvariantUnderTranslationPermutationAndImageShift) {
  const Stack s(spec());
  const Structure cell = periodic_cell(), mol = molecule();
  const double e0 = energy(s, {cell, mol});
  const double tol = 1e-10 * std::max(1.0, std::abs(e0));
  for (const auto& [what, structures] : testing::invariance_cases(cell, mol))
    if (what != "rotation") {  // rotations: the Wigner-D test above, every intermediate
      EXPECT_NEAR(energy(s, structures), e0, tol) << what;
    }
}

TEST(MaceLayer, ForcesMatchCentralFiniteDifferences) {
  const Stack s(spec());
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const at::Tensor pos = b.pos.clone().requires_grad_(true);
  const at::Tensor grad = torch::autograd::grad({energy_of(run(s, b, pos).out)}, {pos})[0];
  const double h = 1e-5;
  double worst = 0;
  for (int64_t a = 0; a < b.n_atoms(); ++a)
    for (int64_t c = 0; c < 3; ++c) {
      at::Tensor p = b.pos.clone();
      p.accessor<double, 2>()[a][c] += h;
      const double up = energy_of(run(s, b, p).out).item<double>();
      p.accessor<double, 2>()[a][c] -= 2 * h;
      const double down = energy_of(run(s, b, p).out).item<double>();
      worst = std::max(worst, std::abs((up - down) / (2 * h) - grad[a][c].item<double>()));
    }
  EXPECT_LT(worst, 1e-7);
  EXPECT_GT(grad.abs().max().item<double>(), 1e-3);
}

TEST(MaceLayer, ForceLossGradientMatchesFiniteDifferencesOfTheFirstDerivative) {
  const Stack s(spec());
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const at::Tensor w = at::randn({b.n_atoms(), 3}, at::kDouble);
  // L(theta) = sum(F . w), F = -dE/dx: its gradient in the parameters is a second derivative.
  auto loss = [&](bool create_graph) {
    const at::Tensor pos = b.pos.clone().requires_grad_(true);
    const at::Tensor f =
        -torch::autograd::grad({energy_of(run(s, b, pos).out)}, {pos}, {}, true, create_graph)[0];
    return (f * w).sum();
  };
  const std::vector<at::Tensor> params = s.parameters();
  const std::vector<at::Tensor> grads = torch::autograd::grad({loss(true)}, params, {}, {}, false,
                                                              /*allow_unused=*/true);
  int checked = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    if (!grads[k].defined()) continue;
    // Two entries of each parameter tensor, by central differences.
    for (int64_t idx : {int64_t(0), params[k].numel() / 2}) {
      const double h = 1e-5;
      at::Tensor flat = params[k].detach().view({-1});
      const double saved = flat[idx].item<double>();
      {
        at::NoGradGuard ng;
        flat[idx] = saved + h;
      }
      const double up = loss(false).item<double>();
      {
        at::NoGradGuard ng;
        flat[idx] = saved - h;
      }
      const double down = loss(false).item<double>();
      {
        at::NoGradGuard ng;
        flat[idx] = saved;
      }
      const double fd = (up - down) / (2 * h);
      const double g = grads[k].reshape({-1})[idx].item<double>();
      EXPECT_NEAR(g, fd, 1e-6 * std::max(1.0, std::abs(fd)))
          << "parameter " << k << "[" << idx << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(MaceLayer, BatchOfTwoEqualsEachAlone) {
  const Stack s(spec());
  const GraphBatch both = batch_of({periodic_cell(), molecule()});
  const GraphBatch a = batch_of({periodic_cell()}), m = batch_of({molecule()});
  const at::Tensor together = run(s, both, both.pos).out.inv;
  expect_close(together.narrow(0, 0, 8), run(s, a, a.pos).out.inv, 1e-12, "cell");
  expect_close(together.narrow(0, 8, 6), run(s, m, m.pos).out.inv, 1e-12, "molecule");
}

TEST(MaceLayer, RadialBasesAllGiveSmoothLayers) {
  for (const char* radial : {"bessel", "gaussian", "chebyshev"}) {
    LayerSpec sp = spec(2, 1, 2);
    sp.radial_type = radial;
    const Stack s(sp);
    // The energy is continuous as an atom crosses the cutoff: a neighbour at the radius adds
    // nothing.
    Structure two;
    two.z = {8, 14};
    two.cell = std::vector<double>(9, 0.0);
    two.pbc = {0, 0, 0};
    two.pos = {0, 0, 0, kRadius - 1e-7, 0, 0};
    Structure apart = two;
    apart.pos[3] = kRadius + 1.0;
    EXPECT_NEAR(energy(s, {two}), energy(s, {apart}), 1e-9) << radial;
    two.pos[3] = 1.5;
    EXPECT_GT(std::abs(energy(s, {two}) - energy(s, {apart})), 1e-4) << radial;
  }
}

// A ConfigError whose message names `key`.
void expect_refused(const LayerSpec& s, const std::string& key) {
  try {
    make_layer("MACE", s);
    ADD_FAILURE() << key << " accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(MaceLayer, BadKeysAreConfigErrorsNamingTheKey) {
  LayerSpec s = spec();
  s.max_ell = 4;
  expect_refused(s, "max_ell 4");
  s = spec();
  s.max_ell = -1;
  expect_refused(s, "max_ell -1");
  s = spec(1, 2, 2);
  expect_refused(s, "node_max_ell 2");
  s = spec(3, 1, 0);
  expect_refused(s, "correlation 0");
  s = spec(3, 1, 4);
  expect_refused(s, "correlation 4");
  s = spec();
  s.radial_type = "spline";
  expect_refused(s, "radial_type \"spline\"");
  s = spec();
  s.distance_transform = "Agnesi";
  expect_refused(s, "distance_transform \"Agnesi\"");
  s = spec();
  s.avg_num_neighbors = 0.0;
  expect_refused(s, "avg_num_neighbors");
  // Checked without the layer, as the config does before the training set is read.
  s = spec();
  s.avg_num_neighbors = 0.0;
  EXPECT_NO_THROW(check_mace_spec(s, false));
  EXPECT_THROW(check_mace_spec(s, true), ConfigError);
}

}  // namespace
}  // namespace ddgnn
