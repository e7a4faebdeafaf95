// GAT, SAGE and MFC layers in float64: registry and shapes; a plain-ops reference (index_select /
// index_add, per-atom loops) with the same weights gives the same outputs and parameter gradients
// (GAT: also forces and their parameter gradients); invariances; GAT's forces against finite
// differences and its energy across the cutoff; batching; bad keys.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/module.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "../common/layer_checks.h"
#include "../common/structures.h"
#include "core/error.h"
#include "model/batch.h"
#include "model/layer.h"

namespace ddgnn {
namespace {

constexpr int64_t kF = 8;
constexpr double kRadius = 3.0;
constexpr int64_t kHeads = 3;
constexpr double kSlope = 0.2;
constexpr int64_t kMaxDegree = 3;
constexpr int64_t kGaussians = 10;

using testing::expect_close;
using testing::Structure;

// 8 atoms in a perturbed triclinic periodic cell (every atom has more than kMaxDegree neighbours).
Structure periodic_cell() {
  return testing::triclinic_cell({8, 14, 14, 8, 14, 14, 8, 14}, 7, 0.15);
}
// A distorted CH4 (4 neighbours each) and one isolated H (no neighbours), not periodic.
Structure molecule() {
  return testing::ch4_and_lone_h();
}
// A bent chain of 4 atoms: in-degrees 1, 2, 2, 1.
Structure chain() {
  Structure s;
  s.z = {6, 7, 8, 6};
  s.pos = {0.0, 0.0, 0.0, 2.0, 0.1, 0.0, 4.0, 0.35, 0.1, 5.9, 0.0, 0.3};
  s.cell = std::vector<double>(9, 0.0);
  s.pbc = {0, 0, 0};
  return s;
}

GraphBatch batch_of(const std::vector<Structure>& structures) {
  return testing::batch_of(structures, kRadius);
}

LayerSpec spec() {
  LayerSpec s;
  s.hidden_dim = kF;
  s.radius = kRadius;
  s.num_gaussians = kGaussians;
  s.activation = "silu";
  s.heads = kHeads;
  s.negative_slope = kSlope;
  s.max_degree = kMaxDegree;
  return s;
}

std::shared_ptr<MessagePassing> layer(const std::string& name, const LayerSpec& s = spec()) {
  at::manual_seed(3);
  auto l = make_layer(name, s);
  l->to(at::kDouble);
  if (name == "GAT") {
    at::NoGradGuard no_grad;
    l->named_parameters()["bias"].uniform_(-0.5, 0.5);  // away from its initial 0
  }
  return l;
}

// Input features from the atomic number (so they follow atoms under permutation): [n_atoms, F].
at::Tensor features(const GraphBatch& b) {
  return testing::atom_features(b, kF);
}

NodeState run(MessagePassing& l, const GraphBatch& b, const at::Tensor& pos) {
  const EdgeGeometry g(b, pos, kRadius);
  NodeState in;
  in.inv = features(b);
  return l.forward(in, b, g);
}

// ---- plain-ops references (index_select / index_add, per-atom loops) ----

struct Params {
  torch::OrderedDict<std::string, at::Tensor> p;
  at::Tensor lin(const at::Tensor& x, const std::string& name) const {
    const at::Tensor* bias = p.find(name + ".bias");
    return at::linear(x, p[name + ".weight"], bias ? *bias : at::Tensor());
  }
};

at::Tensor ref_sum(const at::Tensor& x, const at::Tensor& dst, int64_t n) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = n;
  return at::zeros(shape, x.options()).index_add(0, dst, x);
}

// GATv2 with self loops of zero edge attribute; each atom's softmax of s + log(envelope) over its
// edges and itself (envelope 1), one atom at a time; heads averaged.
at::Tensor ref_gat(MessagePassing& l, const GraphBatch& b, const at::Tensor& pos) {
  const Params P{l.named_parameters()};
  const int64_t n = b.n_atoms();
  const at::Tensor h = features(b);
  const at::Tensor self = at::arange(n, b.edge_index.options());
  const at::Tensor src = at::cat({b.edge_index[0], self}), dst = at::cat({b.edge_index[1], self});
  const at::Tensor shift = at::cat({b.edge_shift, at::zeros({n, 3}, h.options())});
  const at::Tensor vec = pos.index_select(0, src) - pos.index_select(0, dst) + shift;
  const int64_t e = b.n_edges();
  const at::Tensor d = at::sqrt((vec.narrow(0, 0, e) * vec.narrow(0, 0, e)).sum(1));
  const double sp = kRadius / double(kGaussians - 1);
  const at::Tensor dmu = d.unsqueeze(1) - at::linspace(0.0, kRadius, kGaussians, h.options());
  const at::Tensor env = 0.5 * (at::cos(d * (M_PI / kRadius)) + 1.0);
  const at::Tensor attr =
      at::cat({at::exp(at::clamp_min(-0.5 / (sp * sp) * dmu * dmu, -80.0)) * env.unsqueeze(1),
               at::zeros({n, kGaussians}, h.options())});
  const at::Tensor log_u = at::cat({at::log(env), at::zeros({n}, h.options())});
  const at::Tensor xl = P.lin(h, "lin_l"), xr = P.lin(h, "lin_r");
  const at::Tensor xj = xl.index_select(0, src);
  const at::Tensor z =
      at::leaky_relu(xj + xr.index_select(0, dst) + P.lin(attr, "lin_edge"), kSlope);
  const at::Tensor s = (z.view({-1, kHeads, kF}) * P.p["att"]).sum(2) + log_u.unsqueeze(1);
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < n; ++i) {
    const at::Tensor idx = (dst == i).nonzero().view(-1);
    const at::Tensor alpha = at::softmax(s.index_select(0, idx), 0);  // [deg + 1, heads]
    const at::Tensor m = xj.index_select(0, idx).view({-1, kHeads, kF});
    rows.push_back((alpha.unsqueeze(2) * m).sum(0).mean(0) + P.p["bias"]);
  }
  return at::stack(rows);
}

at::Tensor ref_sage(MessagePassing& l, const GraphBatch& b, const at::Tensor& /*pos*/) {
  const Params P{l.named_parameters()};
  const at::Tensor h = features(b);
  const at::Tensor src = b.edge_index[0], dst = b.edge_index[1];
  const at::Tensor count = ref_sum(at::ones({b.n_edges(), 1}, h.options()), dst, b.n_atoms());
  const at::Tensor mean = ref_sum(h.index_select(0, src), dst, b.n_atoms()) / count.clamp_min(1.0);
  return P.lin(mean, "lin_l") + P.lin(h, "lin_r");
}

at::Tensor ref_mfc(MessagePassing& l, const GraphBatch& b, const at::Tensor& /*pos*/) {
  const Params P{l.named_parameters()};
  const at::Tensor h = features(b);
  const at::Tensor dst = b.edge_index[1];
  const at::Tensor agg = ref_sum(h.index_select(0, b.edge_index[0]), dst, b.n_atoms());
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < b.n_atoms(); ++i) {
    const int64_t d = std::min<int64_t>((dst == i).sum().item<int64_t>(), kMaxDegree);
    rows.push_back(at::mv(P.p["weight_l"][d], agg[i]) + P.p["bias_l"][d] +
                   at::mv(P.p["weight_r"][d], h[i]));
  }
  return at::stack(rows);
}

at::Tensor reference(const std::string& name, MessagePassing& l, const GraphBatch& b,
                     const at::Tensor& pos) {
  if (name == "GAT") return ref_gat(l, b, pos);
  if (name == "SAGE") return ref_sage(l, b, pos);
  return ref_mfc(l, b, pos);
}

// ---- energies ----

double energy(MessagePassing& l, const std::vector<Structure>& s) {
  const GraphBatch b = batch_of(s);
  return run(l, b, b.pos).inv.sum().item<double>();
}

const std::vector<std::string> kLayers = {"GAT", "SAGE", "MFC"};

class LayersC : public ::testing::TestWithParam<std::string> {};

TEST_P(LayersC, BuildsByNameWithShapes) {
  const std::string name = GetParam();
  auto l = layer(name);
  const GraphBatch b = batch_of({periodic_cell(), molecule(), chain()});
  const NodeState out = run(*l, b, b.pos);
  EXPECT_EQ(out.inv.sizes(), (std::vector<int64_t>{18, kF}));
  EXPECT_EQ(out.inv.scalar_type(), at::kDouble);
  EXPECT_FALSE(l->equivariant());
  EXPECT_FALSE(out.equiv.defined());
  EXPECT_TRUE(at::isfinite(out.inv).all().item<bool>());
  EXPECT_GT(out.inv.abs().max().item<double>(), 1e-3);
  const auto p = l->named_parameters();
  if (name == "GAT") {
    EXPECT_EQ(p["att"].sizes(), (std::vector<int64_t>{kHeads, kF}));
    EXPECT_EQ(p["lin_l.weight"].sizes(), (std::vector<int64_t>{kHeads * kF, kF}));
    EXPECT_EQ(p["lin_edge.weight"].sizes(), (std::vector<int64_t>{kHeads * kF, kGaussians}));
  } else if (name == "MFC") {
    EXPECT_EQ(p["weight_l"].sizes(), (std::vector<int64_t>{kMaxDegree + 1, kF, kF}));
    EXPECT_EQ(p["bias_l"].sizes(), (std::vector<int64_t>{kMaxDegree + 1, kF}));
    EXPECT_EQ(p["weight_r"].sizes(), (std::vector<int64_t>{kMaxDegree + 1, kF, kF}));
  } else {
    EXPECT_EQ(p["lin_l.weight"].sizes(), (std::vector<int64_t>{kF, kF}));
    EXPECT_EQ(p.find("lin_r.bias"), nullptr);  // SAGEConv's lin_r has no bias
  }
}

TEST_P(LayersC, MatchesPlainOpsReference) {
  const std::string name = GetParam();
  auto l = layer(name);
  const GraphBatch b = batch_of({periodic_cell(), molecule(), chain()});
  testing::expect_matches_reference(
      *l, b, [&](const at::Tensor& pos) { return run(*l, b, pos); },
      [&](const at::Tensor& pos) {
        return NodeState{reference(name, *l, b, pos), {}, {}};
      },
      name == "GAT", true);
}

TEST_P(LayersC, SumIsInvariantUnderRotationTranslationPermutationAndImageShift) {
  auto l = layer(GetParam());
  const Structure cell = periodic_cell(), mol = molecule();
  const double e0 = energy(*l, {cell, mol});
  const double tol = 1e-10 * std::max(1.0, std::abs(e0));

  for (const auto& [what, structures] : testing::invariance_cases(cell, mol))
    EXPECT_NEAR(energy(*l, structures), e0, tol) << what;
  Structure pc = cell;  // reversed atom order
  for (size_t a = 0; a < 8; ++a) {
    pc.z[a] = cell.z[7 - a];
    for (int c = 0; c < 3; ++c) pc.pos[3 * a + c] = cell.pos[3 * (7 - a) + c];
  }
  const GraphBatch b0 = batch_of({cell}), bp = batch_of({pc});
  expect_close(run(*l, bp, bp.pos).inv.flip(0), run(*l, b0, b0.pos).inv, 1e-10,
               "per-atom permutation");
}

TEST_P(LayersC, BatchOfTwoEqualsEachAlone) {
  auto l = layer(GetParam());
  const GraphBatch both = batch_of({periodic_cell(), molecule()});
  const GraphBatch first = batch_of({periodic_cell()}), second = batch_of({molecule()});
  const NodeState out = run(*l, both, both.pos);
  expect_close(out.inv.narrow(0, 0, 8), run(*l, first, first.pos).inv, 1e-12, "cell");
  expect_close(out.inv.narrow(0, 8, 6), run(*l, second, second.pos).inv, 1e-12, "molecule");
}

TEST(GATLayer, ForcesMatchCentralFiniteDifferences) {
  auto l = layer("GAT");
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const at::Tensor pos = b.pos.clone().requires_grad_(true);
  const at::Tensor force = -torch::autograd::grad({run(*l, b, pos).inv.sum()}, {pos})[0];
  const double h = 1e-5;
  double worst = 0;
  for (int64_t a = 0; a < b.n_atoms(); ++a)
    for (int64_t c = 0; c < 3; ++c) {
      at::Tensor p = b.pos.clone();
      p.accessor<double, 2>()[a][c] += h;
      const double up = run(*l, b, p).inv.sum().item<double>();
      p.accessor<double, 2>()[a][c] -= 2 * h;
      const double down = run(*l, b, p).inv.sum().item<double>();
      worst = std::max(worst, std::abs(-(up - down) / (2 * h) - force.accessor<double, 2>()[a][c]));
    }
  EXPECT_LT(worst, 1e-6);
  EXPECT_GT(force.abs().max().item<double>(), 1e-3);
}

// An atom on a line away from a CH4 crosses the cutoff of the C: across it the energy changes
// only by its slope times the step (no jump), while moving it farther inside changes it visibly.
TEST(GATLayer, EnergyIsContinuousWhenANeighbourCrossesTheCutoff) {
  auto l = layer("GAT");
  const auto with_atom_at = [](double x) {
    Structure s = molecule();
    s.z.back() = 8;
    s.pos.end()[-3] = 0.02 + x, s.pos.end()[-2] = -0.01, s.pos.end()[-1] = 0.03;
    return s;
  };
  // The atom's distance to the C is x; near x = kRadius two Hs are about 2.5 Å from it and the
  // other two about 3.7 Å, so only the C's edges cross the cutoff there.
  const double delta = 1e-6;
  const GraphBatch in_b = batch_of({with_atom_at(kRadius - delta)});
  const at::Tensor pos = in_b.pos.clone().requires_grad_(true);
  const at::Tensor e_in = run(*l, in_b, pos).inv.sum();
  const double slope = torch::autograd::grad({e_in}, {pos})[0][5][0].item<double>();
  const double inside = e_in.item<double>();
  const double outside = energy(*l, {with_atom_at(kRadius + delta)});
  const double farther_inside = energy(*l, {with_atom_at(kRadius - 0.5)});
  EXPECT_LT(std::abs(outside - inside - 2 * delta * slope), 1e-10) << "jump across the cutoff";
  EXPECT_GT(std::abs(slope), 1e-3) << "the atom does not move the energy";
  EXPECT_GT(std::abs(farther_inside - outside), 1e-4) << "the atom does not matter";
  // The O counts as the C's neighbour just inside and not just outside.
  EXPECT_EQ(in_b.n_edges(), batch_of({with_atom_at(kRadius + delta)}).n_edges() + 2);
}

TEST(LayersCKeys, BadKeysAreConfigErrorsNamingTheKey) {
  const auto message_of = [](const std::string& name, const LayerSpec& s) -> std::string {
    try {
      make_layer(name, s);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  LayerSpec s = spec();
  s.heads = 0;
  EXPECT_NE(message_of("GAT", s).find("heads"), std::string::npos) << message_of("GAT", s);
  s = spec();
  s.negative_slope = -0.1;
  EXPECT_NE(message_of("GAT", s).find("negative_slope"), std::string::npos);
  s = spec();
  s.max_degree = 0;
  EXPECT_NE(message_of("MFC", s).find("max_degree"), std::string::npos) << message_of("MFC", s);
  // The good values build.
  EXPECT_EQ(message_of("GAT", spec()), "");
  EXPECT_EQ(message_of("MFC", spec()), "");
}

// HydraGNN's fixed GAT settings are the defaults, and every new key survives the spec's JSON.
TEST(LayersCKeys, DefaultsAreHydraGnnsAndSurviveTheSpecJson) {
  const LayerSpec d;
  EXPECT_EQ(d.heads, 6);
  EXPECT_DOUBLE_EQ(d.negative_slope, 0.05);
  GnnSpec g;
  g.layer.heads = 2, g.layer.negative_slope = 0.3, g.layer.max_degree = 7;
  const GnnSpec back = spec_from_json(spec_to_json(g));
  EXPECT_EQ(back.layer.heads, 2);
  EXPECT_DOUBLE_EQ(back.layer.negative_slope, 0.3);
  EXPECT_EQ(back.layer.max_degree, 7);
  nlohmann::json old = spec_to_json(g);  // a checkpoint from before the keys
  ASSERT_TRUE(old.contains("attention_heads") && old.at("heads").is_array());  // output heads
  old.erase("attention_heads"), old.erase("negative_slope"), old.erase("max_degree");
  EXPECT_EQ(spec_from_json(old).layer.heads, d.heads);
  EXPECT_EQ(spec_from_json(old).layer.max_degree, d.max_degree);
}

INSTANTIATE_TEST_SUITE_P(Layers, LayersC, ::testing::ValuesIn(kLayers),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ddgnn
