// DimeNet++ in float64: spherical Bessel zeros and the normalisation of the radial basis; the
// fused radial part of the spherical basis and its derivatives against plain ops; the
// triplets against an enumeration of every pair of edges; the energy invariant under rotation,
// translation, permutation and periodic-image shift; forces against central finite differences;
// the force loss's parameter gradient against finite differences; the layer against PyG's blocks
// written in plain ops; continuity at the cutoff; a batch of two graphs equals each alone; too
// many triplets and bad keys are clear errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "../common/layer_checks.h"
#include "../common/structures.h"
#include "core/error.h"
#include "model/batch.h"
#include "model/layer.h"
#include "model/layers/dimenet.h"

namespace ddgnn {
namespace {

constexpr int64_t kF = 8;
constexpr double kRadius = 3.2;

using testing::Structure;

Structure periodic_cell() {
  return testing::triclinic_cell({8, 14, 14, 8, 14, 14, 8, 14}, 5, 0.15);
}
// A distorted CH4 and an isolated H, not periodic.
Structure molecule() {
  return testing::ch4_and_lone_h();
}
GraphBatch batch_of(const std::vector<Structure>& ss) {
  return testing::batch_of(ss, kRadius);
}

LayerSpec spec() {
  LayerSpec s;
  s.hidden_dim = kF;
  s.radius = kRadius;
  s.num_radial = 4;
  s.num_spherical = 4;
  s.basis_emb_size = 3;
  s.int_emb_size = 6;
  s.out_emb_size = 10;
  s.num_before_skip = 1;
  s.num_after_skip = 1;
  s.envelope.p = 5;
  return s;
}

std::shared_ptr<MessagePassing> layer(const LayerSpec& s = spec()) {
  at::manual_seed(5);
  auto l = make_layer("DimeNet", s);
  l->to(at::kDouble);
  return l;
}

at::Tensor features(const GraphBatch& b) {
  return testing::atom_features(b, kF);
}
at::Tensor run(MessagePassing& l, const GraphBatch& b, const at::Tensor& pos) {
  const EdgeGeometry g(b, pos, kRadius);
  NodeState in;
  in.inv = features(b);
  return l.forward(in, b, g).inv;
}
at::Tensor energy_of(const at::Tensor& h) {
  return (h + 0.3 * h * h).sum();
}
double energy(MessagePassing& l, const std::vector<Structure>& ss) {
  const GraphBatch b = batch_of(ss);
  return energy_of(run(l, b, b.pos)).item<double>();
}

TEST(DimeNetBasis, SphericalBesselZerosAndNormalisation) {
  // Known zeros: j_0 at k pi; j_1 first at 4.493409457909064, j_2 at 5.763459196894550.
  const auto z0 = spherical_bessel_zeros(0, 3), z1 = spherical_bessel_zeros(1, 2),
             z2 = spherical_bessel_zeros(2, 1);
  EXPECT_NEAR(z0[2], 3 * M_PI, 1e-12);
  EXPECT_NEAR(z1[0], 4.493409457909064, 1e-12);
  EXPECT_NEAR(z2[0], 5.763459196894550, 1e-12);
  for (int l = 0; l < 7; ++l) {
    const auto z = spherical_bessel_zeros(l, 6);
    for (size_t n = 0; n < z.size(); ++n) {
      EXPECT_LT(std::abs(spherical_bessel(l, z[n])), 1e-12) << l << " " << n;
      if (n > 0) {
        EXPECT_GT(z[n], z[n - 1]);
      }
      // Int_0^1 x^2 (N j_l(z x))^2 dx = 1 with N = sqrt(2) / |j_(l+1)(z)| (midpoint rule).
      const double norm = std::sqrt(2.0) / std::abs(spherical_bessel(l + 1, z[n]));
      double integral = 0;
      const int steps = 20000;
      for (int k = 0; k < steps; ++k) {
        const double x = (k + 0.5) / steps, v = norm * spherical_bessel(l, z[n] * x);
        integral += x * x * v * v / steps;
      }
      EXPECT_NEAR(integral, 1.0, 1e-6) << l << " " << n;
    }
  }
}

// The fused radial part of the spherical basis and its first three derivatives in the edge
// length equal autograd's through the plain-ops reference (float64), with Bessel arguments on both
// sides of the series' limit (z x from 0.2 to 30); a fourth derivative is a clear error.
TEST(DimeNetBasis, FusedRadialAndItsThreeDerivativesEqualThePlainOps) {
  const SphericalBesselColumns cols = dimenet_columns(7, 6, 5.0, 6);
  const int64_t c = int64_t(cols.zero.size());
  at::manual_seed(3);
  const at::Tensor d0 = at::linspace(0.3, 4.98, 48, at::kDouble);
  std::vector<at::Tensor> weights;
  for (int k = 0; k < 4; ++k) weights.push_back(at::randn({k == 0 ? 48 * c : 48}, at::kDouble));
  // [value, d1, d2, d3] of sum(w0 * rad), then of each derivative weighted again.
  auto chain = [&](bool fused) {
    const at::Tensor d = d0.clone().requires_grad_(true);
    const at::Tensor rad = fused ? spherical_bessel_radial(d, cols, at::kDouble)
                                 : spherical_bessel_radial_reference(d, cols, at::kDouble);
    std::vector<at::Tensor> out = {rad.detach()};
    at::Tensor s = (rad.reshape(-1) * weights[0]).sum();
    for (int k = 1; k <= 3; ++k) {
      const at::Tensor g = torch::autograd::grad({s}, {d}, {}, true, true)[0];
      out.push_back(g.detach());
      s = (g * weights[size_t(k)]).sum();
    }
    return std::make_pair(out, std::make_pair(d, s));
  };
  const auto fused = chain(true), plain = chain(false);
  for (size_t k = 0; k < 4; ++k) {
    const at::Tensor &a = fused.first[k], &b = plain.first[k];
    const double scale = b.abs().max().item<double>(), diff = (a - b).abs().max().item<double>();
    EXPECT_GT(scale, 0.0) << k;
    EXPECT_LE(diff, 1e-9 * scale) << "derivative " << k << ": " << diff << " of " << scale;
  }
  std::string message;
  try {
    torch::autograd::grad({fused.second.second}, {fused.second.first});
  } catch (const std::exception& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("differentiable 3 times"), std::string::npos) << message;
}

TEST(DimeNetTriplets, EveryPairOfEdgesThroughAnAtomButTheReverse) {
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const Triplets t = dimenet_triplets(b);
  std::set<std::pair<int64_t, int64_t>> got;
  for (int64_t k = 0; k < t.kj.size(0); ++k)
    EXPECT_TRUE(got.insert({t.kj[k].item<int64_t>(), t.ji[k].item<int64_t>()}).second);
  const auto send = b.edge_index[0], recv = b.edge_index[1];
  std::set<std::pair<int64_t, int64_t>> expected;
  int64_t reverse = 0;
  for (int64_t ji = 0; ji < b.n_edges(); ++ji)
    for (int64_t kj = 0; kj < b.n_edges(); ++kj) {
      if (recv[kj].item<int64_t>() != send[ji].item<int64_t>()) continue;
      const bool back = send[kj].item<int64_t>() == recv[ji].item<int64_t>() &&
                        (b.edge_shift[kj] + b.edge_shift[ji]).abs().max().item<double>() == 0.0;
      if (back) {
        ++reverse;
        continue;
      }
      expected.insert({kj, ji});
    }
  EXPECT_EQ(reverse, b.n_edges());  // every edge has its reverse
  EXPECT_EQ(got, expected);
  EXPECT_GT(got.size(), 100u);
}

TEST(DimeNetLayer, EnergyInvariantUnderRotationTranslationPermutationAndImageShift) {
  auto l = layer();
  const Structure cell = periodic_cell(), mol = molecule();
  const double e0 = energy(*l, {cell, mol});
  const double tol = 1e-10 * std::max(1.0, std::abs(e0));
  for (const auto& [what, structures] : testing::invariance_cases(cell, mol))
    EXPECT_NEAR(energy(*l, structures), e0, tol) << what;
}

TEST(DimeNetLayer, ForcesMatchCentralFiniteDifferences) {
  auto l = layer();
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const at::Tensor pos = b.pos.clone().requires_grad_(true);
  const at::Tensor grad = torch::autograd::grad({energy_of(run(*l, b, pos))}, {pos})[0];
  const double h = 1e-5;
  double worst = 0;
  for (int64_t a = 0; a < b.n_atoms(); ++a)
    for (int64_t c = 0; c < 3; ++c) {
      at::Tensor p = b.pos.clone();
      p.accessor<double, 2>()[a][c] += h;
      const double up = energy_of(run(*l, b, p)).item<double>();
      p.accessor<double, 2>()[a][c] -= 2 * h;
      const double down = energy_of(run(*l, b, p)).item<double>();
      worst = std::max(worst, std::abs((up - down) / (2 * h) - grad[a][c].item<double>()));
    }
  EXPECT_LT(worst, 1e-6);
  EXPECT_GT(grad.abs().max().item<double>(), 1e-3);
}

TEST(DimeNetLayer, ForceLossGradientMatchesFiniteDifferences) {
  auto l = layer();
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const at::Tensor w = at::randn({b.n_atoms(), 3}, at::kDouble);
  auto loss = [&](bool create_graph) {
    const at::Tensor pos = b.pos.clone().requires_grad_(true);
    const at::Tensor f =
        -torch::autograd::grad({energy_of(run(*l, b, pos))}, {pos}, {}, true, create_graph)[0];
    return (f * w).sum();
  };
  const std::vector<at::Tensor> params = l->parameters();
  const std::vector<at::Tensor> grads =
      torch::autograd::grad({loss(true)}, params, {}, {}, false, /*allow_unused=*/true);
  int checked = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    if (!grads[k].defined()) continue;
    at::Tensor flat = params[k].detach().view({-1});
    const int64_t idx = flat.numel() / 2;
    const double saved = flat[idx].item<double>(), h = 1e-6;
    auto at_value = [&](double v) {
      {
        at::NoGradGuard ng;
        flat[idx] = v;
      }
      return loss(false).item<double>();
    };
    const double fd = (at_value(saved + h) - at_value(saved - h)) / (2 * h);
    at_value(saved);
    EXPECT_NEAR(grads[k].reshape({-1})[idx].item<double>(), fd, 1e-6 * std::max(1.0, std::abs(fd)))
        << "parameter " << k;
    ++checked;
  }
  EXPECT_GT(checked, 15);
}

TEST(DimeNetLayer, ContinuousAtTheCutoffAndBatchOfTwoEqualsEachAlone) {
  auto l = layer();
  Structure three;  // a triplet whose third atom leaves the cutoff
  three.z = {8, 14, 6};
  three.cell = std::vector<double>(9, 0.0);
  three.pbc = {0, 0, 0};
  three.pos = {0, 0, 0, 1.2, 0.3, 0, -0.4, kRadius - 1e-7, 0};
  Structure apart = three;
  apart.pos[7] = kRadius + 2.0;
  EXPECT_NEAR(energy(*l, {three}), energy(*l, {apart}), 1e-8);
  three.pos[7] = 1.4;
  EXPECT_GT(std::abs(energy(*l, {three}) - energy(*l, {apart})), 1e-4);

  const GraphBatch both = batch_of({periodic_cell(), molecule()});
  const GraphBatch a = batch_of({periodic_cell()}), m = batch_of({molecule()});
  const at::Tensor together = run(*l, both, both.pos);
  EXPECT_LT((together.narrow(0, 0, 8) - run(*l, a, a.pos)).abs().max().item<double>(), 1e-12);
  EXPECT_LT((together.narrow(0, 8, 6) - run(*l, m, m.pos)).abs().max().item<double>(), 1e-12);
}

// The layer against PyG's blocks written out in plain ATen ops, every Linear applied on its own
// and in PyG's order (embedding [x_i, x_j, act(rbf)], the kj and ji maps, the two radial and two
// spherical projections, the triplet sum, the residual layers, the output block's up projection
// and hidden layer): the layer's shortcuts (x_i and x_j mapped on the atoms, chains of
// linear maps folded into one weight, the fused triplet sum) change nothing but rounding.
TEST(DimeNetLayer, EqualsPyGsBlocksInPlainOps) {
  const LayerSpec s = spec();
  auto l = layer(s);
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const EdgeGeometry g(b, b.pos, kRadius);
  const auto params = l->named_parameters();
  auto lin = [&](const std::string& name, const at::Tensor& x) {
    const at::Tensor y = at::matmul(x, params[name + ".weight"].t());
    const at::Tensor* bias = params.find(name + ".bias");
    return bias ? y + *bias : y;
  };
  auto act = [](const at::Tensor& x) { return x * at::sigmoid(x); };
  const int64_t p = s.envelope.p + 1, e = g.len().size(0), n = b.n_atoms();

  // Bases: rbf [E, R]; sbf [T, S R] = the radial part of edge kj times Y_l(angle at i).
  const at::Tensor x = g.len() / kRadius;
  const at::Tensor rbf =
      dimenet_envelope(x, p).unsqueeze(1) * at::sin(params["freq"] * x.unsqueeze(1));
  const Triplets t = dimenet_triplets(b);
  const at::Tensor rad = spherical_bessel_radial_reference(
      g.len(), dimenet_columns(s.num_spherical, s.num_radial, kRadius, p), at::kDouble);
  const at::Tensor v_ji = g.vec().index_select(0, t.ji);
  const at::Tensor cosine =
      at::cosine_similarity(v_ji, g.vec().index_select(0, t.kj) + v_ji, 1, 0.0);
  at::Tensor ang = at::empty({t.kj.size(0), s.num_spherical}, at::kDouble);
  for (int64_t k = 0; k < ang.size(0); ++k)
    for (int64_t deg = 0; deg < s.num_spherical; ++deg)
      ang[k][deg] = std::legendre(unsigned(deg), cosine[k].item<double>()) *
                    std::sqrt((2.0 * double(deg) + 1.0) / (4.0 * M_PI));
  const at::Tensor sbf =
      (rad.index_select(0, t.kj).view({-1, s.num_spherical, s.num_radial}) * ang.unsqueeze(2))
          .view({-1, s.num_spherical * s.num_radial});

  const at::Tensor& recv = b.receivers->index;
  const at::Tensor& send = b.senders->index;
  const at::Tensor h0 = lin("lin", features(b));
  const at::Tensor m = act(lin(
      "emb",
      at::cat({h0.index_select(0, recv), h0.index_select(0, send), act(lin("emb_rbf", rbf))}, 1)));
  at::Tensor kj = act(lin("int_kj", m)) * lin("int_rbf2", lin("int_rbf1", rbf));
  kj = act(lin("int_down", kj));
  kj = kj.index_select(0, t.kj) * lin("int_sbf2", lin("int_sbf1", sbf));
  kj = at::zeros({e, s.int_emb_size}, at::kDouble).index_add(0, t.ji, kj);
  at::Tensor h = act(lin("int_ji", m)) + act(lin("int_up", kj));
  int64_t r = 0;
  auto residual = [&] {
    const std::string a = "int_res" + std::to_string(r++), c = "int_res" + std::to_string(r++);
    h = h + act(lin(c, act(lin(a, h))));
  };
  for (int64_t k = 0; k < s.num_before_skip; ++k) residual();
  h = act(lin("int_skip", h)) + m;
  for (int64_t k = 0; k < s.num_after_skip; ++k) residual();
  at::Tensor y = at::zeros({n, kF}, at::kDouble).index_add(0, recv, lin("out_rbf", rbf) * h);
  y = lin("out", act(lin("out_hidden", lin("out_up", y))));

  const at::Tensor got = run(*l, b, b.pos);
  EXPECT_GT(y.abs().max().item<double>(), 1e-3);
  EXPECT_LT((got - y).abs().max().item<double>(),
            1e-12 * std::max(1.0, y.abs().max().item<double>()));
}

TEST(DimeNetLayer, TooManyTripletsIsADataErrorAndBadKeysAreConfigErrors) {
  LayerSpec s = spec();
  s.max_triplets = 50;
  auto l = layer(s);
  const GraphBatch b = batch_of({periodic_cell()});
  try {
    run(*l, b, b.pos);
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("above Architecture.max_triplets (50)"), std::string::npos)
        << e.what();
  }
  for (const auto& [field, value, key] :
       {std::make_tuple(&LayerSpec::num_spherical, int64_t(1), "num_spherical 1"),
        std::make_tuple(&LayerSpec::num_radial, int64_t(0), "num_radial 0"),
        std::make_tuple(&LayerSpec::int_emb_size, int64_t(0), "int_emb_size 0"),
        std::make_tuple(&LayerSpec::max_triplets, int64_t(0), "max_triplets 0"),
        std::make_tuple(&LayerSpec::num_after_skip, int64_t(-1), "num_after_skip")}) {
    LayerSpec bad = spec();
    bad.*field = value;
    try {
      make_layer("DimeNet", bad);
      ADD_FAILURE() << key << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ddgnn
