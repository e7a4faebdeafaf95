// PAINN, GIN, PNA, PNAPlus and PNAEq layers in float64: registry and shapes; a plain-ops reference
// (index_select / index_add, per-atom min/max) with the same weights gives the same outputs,
// parameter gradients and second derivatives; invariances; forces against finite differences;
// batching.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/module.h>

#include <cmath>
#include <random>
#include <vector>

#include "../common/layer_checks.h"
#include "../common/structures.h"
#include "core/error.h"
#include "model/activation.h"
#include "model/batch.h"
#include "model/layer.h"

namespace ddgnn {
namespace {

constexpr int64_t kF = 8;
constexpr double kRadius = 3.0;
const std::vector<int64_t> kDegHist = {1, 2, 3, 4, 5, 6, 5, 4, 3, 2, 1};

using testing::expect_close;
using testing::Structure;

// 8 atoms in a perturbed triclinic periodic cell.
Structure periodic_cell() {
  return testing::triclinic_cell({8, 14, 14, 8, 14, 14, 8, 14}, 7, 0.15);
}
// A distorted CH4 and one isolated H (an atom with no neighbours), not periodic.
Structure molecule() {
  return testing::ch4_and_lone_h();
}

GraphBatch batch_of(const std::vector<Structure>& structures) {
  return testing::batch_of(structures, kRadius);
}

LayerSpec spec() {
  LayerSpec s;
  s.hidden_dim = kF;
  s.radius = kRadius;
  s.num_radial = 6;
  s.num_gaussians = 10;
  s.activation = "silu";
  s.pna_deg = kDegHist;
  return s;
}

std::shared_ptr<MessagePassing> layer(const std::string& name) {
  at::manual_seed(3);
  auto l = make_layer(name, spec());
  l->to(at::kDouble);
  if (name == "GIN") {
    at::NoGradGuard no_grad;
    l->named_parameters()["eps"].fill_(0.3);  // away from its initial 0, so (1 + eps) matters
  }
  return l;
}

// Input features from the atomic number (so they follow atoms under permutation): [n_atoms, F].
at::Tensor features(const GraphBatch& b) {
  return testing::atom_features(b, kF);
}

NodeState run(MessagePassing& l, const GraphBatch& b, const at::Tensor& pos,
              at::Tensor equiv = {}) {
  const EdgeGeometry g(b, pos, kRadius);
  NodeState in;
  in.inv = features(b);
  if (l.equivariant())
    in.equiv = equiv.defined() ? equiv : at::zeros({b.n_atoms(), 3, kF}, in.inv.options());
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

struct RefGeometry {
  at::Tensor src, dst, vec, len;
  RefGeometry(const GraphBatch& b, const at::Tensor& pos) {
    src = b.edge_index[0];
    dst = b.edge_index[1];
    vec = pos.index_select(0, src) - pos.index_select(0, dst) + b.edge_shift;
    len = at::sqrt((vec * vec).sum(1));
  }
};

at::Tensor ref_sum(const at::Tensor& x, const at::Tensor& dst, int64_t n) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = n;
  return at::zeros(shape, x.options()).index_add(0, dst, x);
}

NodeState ref_painn(MessagePassing& l, const GraphBatch& b, const at::Tensor& pos,
                    at::Tensor v = {}) {
  const Params P{l.named_parameters()};
  const RefGeometry g(b, pos);
  const int64_t n = b.n_atoms();
  const at::Tensor s = features(b);
  if (!v.defined()) v = at::zeros({n, 3, kF}, s.options());
  const at::Tensor k = at::arange(1, 7, s.options());
  const at::Tensor d = g.len.unsqueeze(1);
  const at::Tensor rbf = at::sin(k * d * (M_PI / kRadius)) / d;
  const at::Tensor cut = 0.5 * (at::cos(g.len * (M_PI / kRadius)) + 1.0);
  const at::Tensor phi = P.lin(at::silu(P.lin(s, "phi1")), "phi2");
  const at::Tensor x = phi.index_select(0, g.src) * (P.lin(rbf, "filter") * cut.unsqueeze(1));
  const auto parts = x.split(kF, 1);
  const at::Tensor unit = g.vec / d;
  const at::Tensor msg_v =
      v.index_select(0, g.src) * parts[0].unsqueeze(1) + parts[1].unsqueeze(1) * unit.unsqueeze(2);
  const at::Tensor s1 = s + ref_sum(parts[2], g.dst, n);
  const at::Tensor v1 = v + ref_sum(msg_v, g.dst, n);
  const at::Tensor uv = P.lin(v1, "U"), vv = P.lin(v1, "V");
  const at::Tensor a =
      P.lin(at::silu(P.lin(at::cat({s1, at::sqrt((vv * vv).sum(1) + 1e-8)}, 1), "upd1")), "upd2");
  const auto ap = a.split(kF, 1);
  return {s1 + ap[2] + ap[1] * (uv * vv).sum(1), v1 + ap[0].unsqueeze(1) * uv, {}};
}

NodeState ref_gin(MessagePassing& l, const GraphBatch& b, const at::Tensor& /*pos*/) {
  const Params P{l.named_parameters()};
  const at::Tensor h = features(b);
  const at::Tensor agg = ref_sum(h.index_select(0, b.edge_index[0]), b.edge_index[1], b.n_atoms());
  return {P.lin(at::silu(P.lin((1.0 + P.p["eps"]) * h + agg, "lin1")), "lin2"), {}, {}};
}

// PNA's aggregation, per atom: the four aggregators of its messages, each scaled by the first
// n_scalers of identity, amplification, attenuation, linear, inverse linear (degree normalisers
// of kDegHist), then post([h, ...]).
at::Tensor ref_pna_post(const Params& P, const at::Tensor& h, const at::Tensor& msg,
                        const at::Tensor& dst, int n_scalers) {
  double avg_log = 0, avg_lin = 0, count = 0;
  for (size_t k = 0; k < kDegHist.size(); ++k) {
    avg_log += double(kDegHist[k]) * std::log(double(k) + 1.0);
    avg_lin += double(kDegHist[k]) * double(k);
    count += double(kDegHist[k]);
  }
  avg_log /= count;
  avg_lin /= count;
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < h.size(0); ++i) {
    const at::Tensor idx = (dst == i).nonzero().view(-1);
    const int64_t deg = idx.size(0);
    at::Tensor agg;
    if (deg == 0) {
      const at::Tensor z = at::zeros({kF}, h.options());
      agg = at::cat({z, z, z, at::full({kF}, std::sqrt(1e-5), h.options())});
    } else {
      const at::Tensor m = msg.index_select(0, idx);
      const at::Tensor mean = m.mean(0);
      const at::Tensor var = (m * m).mean(0) - mean * mean;
      agg = at::cat(
          {mean, std::get<0>(m.min(0)), std::get<0>(m.max(0)), at::sqrt(at::relu(var) + 1e-5)});
    }
    const double d1 = double(std::max<int64_t>(deg, 1)), ld = std::log(d1 + 1.0);
    const double scale[] = {1.0, ld / avg_log, avg_log / ld, d1 / avg_lin, avg_lin / d1};
    std::vector<at::Tensor> parts = {h[i]};
    for (int k = 0; k < n_scalers; ++k) parts.push_back(agg * scale[k]);
    rows.push_back(at::cat(parts));
  }
  return P.lin(at::stack(rows), "post");
}

// PNA, and PNAPlus (plus): edge features from PyG's Bessel basis written out here (u(x) sin(f x),
// u the envelope of order p = 6, the default envelope_exponent 5 plus one), the message times
// Linear(rbf); four scalers.
NodeState ref_pna(MessagePassing& l, const GraphBatch& b, const at::Tensor& pos, bool plus) {
  const Params P{l.named_parameters()};
  const RefGeometry g(b, pos);
  const at::Tensor h = features(b);
  at::Tensor edge, gate;
  if (plus) {
    const at::Tensor x = g.len / kRadius;
    const double p = 6, a = -(p + 1) * (p + 2) / 2, bb = p * (p + 2), c = -p * (p + 1) / 2;
    const at::Tensor u =
        1.0 / x + a * at::pow(x, p - 1) + bb * at::pow(x, p) + c * at::pow(x, p + 1);
    const at::Tensor rbf = u.unsqueeze(1) * at::sin(P.p["freq"] * x.unsqueeze(1));
    edge = at::relu(P.lin(rbf, "rbf_emb"));
    gate = P.lin(rbf, "rbf_lin");
  } else {
    const int64_t n_g = 10;
    const double sp = kRadius / double(n_g - 1);
    const at::Tensor dmu = g.len.unsqueeze(1) - at::linspace(0.0, kRadius, n_g, h.options());
    edge = P.lin(at::exp(at::clamp_min(-0.5 / (sp * sp) * dmu * dmu, -80.0)), "edge_encoder");
  }
  at::Tensor msg =
      P.lin(at::cat({h.index_select(0, g.dst), h.index_select(0, g.src), edge}, 1), "pre");
  if (plus) msg = msg * gate;
  return {h + P.lin(ref_pna_post(P, h, msg, g.dst, 4), "lin"), {}, {}};
}

// PNAEq: PaiNN's message and update blocks as HydraGNN's PainnMessage / PainnUpdate, the scalar
// messages through PNA's aggregation with five scalers; sinc basis times the cosine envelope.
NodeState ref_pna_eq(MessagePassing& l, const GraphBatch& b, const at::Tensor& pos,
                     at::Tensor v = {}) {
  const Params P{l.named_parameters()};
  const RefGeometry g(b, pos);
  const at::Tensor h = features(b);
  const int64_t n = b.n_atoms();
  if (!v.defined()) v = at::zeros({n, 3, kF}, h.options());
  const at::Tensor d = g.len.unsqueeze(1);
  const at::Tensor k = at::arange(1, 7, h.options());  // num_radial 6
  const at::Tensor rbf =
      at::sin(k * M_PI * d / kRadius) / d * 0.5 * (at::cos(M_PI * d / kRadius) + 1.0);  // [E, 6]
  const at::Tensor m = P.lin(
      at::cat({h.index_select(0, g.dst), h.index_select(0, g.src), at::tanh(P.lin(rbf, "rbf_emb"))},
              1),
      "pre");
  const at::Tensor x =
      P.lin(at::silu(P.lin(at::tanh(P.lin(m, "msg1")), "msg2")), "msg3") * P.lin(rbf, "rbf_lin");
  const auto parts = x.split(kF, 1);
  const at::Tensor unit = g.vec / d;
  const at::Tensor h1 = h + ref_pna_post(P, h, parts[2], g.dst, 5);
  const at::Tensor msg_v =
      v.index_select(0, g.src) * parts[0].unsqueeze(1) + parts[1].unsqueeze(1) * unit.unsqueeze(2);
  const at::Tensor v1 = v + ref_sum(msg_v, g.dst, n);
  const at::Tensor uv = P.lin(v1, "U"), vv = P.lin(v1, "V");
  const at::Tensor a =
      P.lin(at::silu(P.lin(at::cat({at::sqrt((vv * vv).sum(1) + 1e-8), h1}, 1), "upd1")), "upd2");
  const auto ap = a.split(kF, 1);
  const at::Tensor h2 = h1 + ap[1] * (uv * vv).sum(1) + ap[2];
  const at::Tensor v2 = v1 + ap[0].unsqueeze(1) * uv;
  return {P.lin(at::tanh(P.lin(h2, "out1")), "out2"), P.lin(v2, "vec_out"), {}};
}

using RefFn = NodeState (*)(MessagePassing&, const GraphBatch&, const at::Tensor&);

RefFn reference(const std::string& name) {
  if (name == "GIN") return ref_gin;
  if (name == "PNA")
    return [](MessagePassing& l, const GraphBatch& b, const at::Tensor& p) {
      return ref_pna(l, b, p, false);
    };
  if (name == "PNAPlus")
    return [](MessagePassing& l, const GraphBatch& b, const at::Tensor& p) {
      return ref_pna(l, b, p, true);
    };
  if (name == "PNAEq")
    return [](MessagePassing& l, const GraphBatch& b, const at::Tensor& p) {
      return ref_pna_eq(l, b, p);
    };
  return [](MessagePassing& l, const GraphBatch& b, const at::Tensor& p) {
    return ref_painn(l, b, p);
  };
}

// ---- helpers ----

double energy(MessagePassing& l, const std::vector<Structure>& s) {
  const GraphBatch b = batch_of(s);
  return run(l, b, b.pos).inv.sum().item<double>();
}

std::vector<double> rotation() {
  return testing::euler_rotation();
}

void rotate(std::vector<double>& xs, const std::vector<double>& r) {
  testing::rotate_rows(xs, r);
}

const std::vector<std::string> kLayers = {"PAINN", "GIN", "PNA", "PNAPlus", "PNAEq"};

class LayersB : public ::testing::TestWithParam<std::string> {};

TEST_P(LayersB, BuildsByNameWithShapes) {
  auto l = layer(GetParam());
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const NodeState out = run(*l, b, b.pos);
  EXPECT_EQ(out.inv.sizes(), (std::vector<int64_t>{14, kF}));
  EXPECT_EQ(out.inv.scalar_type(), at::kDouble);
  EXPECT_EQ(l->equivariant(), GetParam() == "PAINN" || GetParam() == "PNAEq");
  if (l->equivariant()) {
    EXPECT_EQ(out.equiv.sizes(), (std::vector<int64_t>{14, 3, kF}));
    EXPECT_GT(out.equiv.abs().max().item<double>(), 1e-3);  // vectors appear from zero
  }
  EXPECT_TRUE(at::isfinite(out.inv).all().item<bool>());
}

TEST_P(LayersB, MatchesPlainOpsReferenceToSecondDerivatives) {
  const std::string name = GetParam();
  auto l = layer(name);
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  testing::expect_matches_reference(
      *l, b, [&](const at::Tensor& pos) { return run(*l, b, pos); },
      [&](const at::Tensor& pos) { return reference(name)(*l, b, pos); }, name != "GIN", false);
}

TEST_P(LayersB, SumIsInvariantUnderRotationTranslationPermutationAndImageShift) {
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

class VectorLayers : public ::testing::TestWithParam<std::string> {};

TEST_P(VectorLayers, EquivariantVectorsRotateWithTheStructure) {
  auto l = layer(GetParam());
  const Structure cell = periodic_cell(), mol = molecule();
  Structure rc = cell, rm = mol;
  const auto r = rotation();
  rotate(rc.pos, r), rotate(rc.cell, r), rotate(rm.pos, r);
  const GraphBatch b = batch_of({cell, mol}), br = batch_of({rc, rm});
  const at::Tensor rm_t = at::tensor(r).view({3, 3});
  const at::Tensor v = at::randn({b.n_atoms(), 3, kF}, at::kDouble);
  const NodeState out = run(*l, b, b.pos, v);
  const NodeState out_r = run(*l, br, br.pos, at::matmul(rm_t, v));
  expect_close(out_r.inv, out.inv, 1e-10, "inv under rotation");
  expect_close(out_r.equiv, at::matmul(rm_t, out.equiv), 1e-10, "equiv under rotation");
  EXPECT_GT(out.equiv.abs().max().item<double>(), 1e-2);
}

// With input vectors (not only from zero): the reference of PNAEq's vector path.
TEST(PNAEqLayer, MatchesTheReferenceWithInputVectors) {
  auto l = layer("PNAEq");
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  at::manual_seed(11);
  const at::Tensor v = at::randn({b.n_atoms(), 3, kF}, at::kDouble);
  const NodeState out = run(*l, b, b.pos, v), ref = ref_pna_eq(*l, b, b.pos, v);
  expect_close(out.inv, ref.inv, 1e-10, "inv");
  expect_close(out.equiv, ref.equiv, 1e-10, "equiv");
}

class LayersBForces : public ::testing::TestWithParam<std::string> {};
class PNALayers : public ::testing::TestWithParam<std::string> {};

TEST_P(LayersBForces, GradientMatchesCentralFiniteDifferences) {
  auto l = layer(GetParam());
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const at::Tensor pos = b.pos.clone().requires_grad_(true);
  const at::Tensor grad = torch::autograd::grad({run(*l, b, pos).inv.sum()}, {pos})[0];
  const double h = 1e-5;
  double worst = 0;
  for (int64_t a = 0; a < b.n_atoms(); ++a)
    for (int64_t c = 0; c < 3; ++c) {
      at::Tensor p = b.pos.clone();
      p.accessor<double, 2>()[a][c] += h;
      const double up = run(*l, b, p).inv.sum().item<double>();
      p.accessor<double, 2>()[a][c] -= 2 * h;
      const double down = run(*l, b, p).inv.sum().item<double>();
      const double g = grad.accessor<double, 2>()[a][c];
      worst = std::max(worst, std::abs((up - down) / (2 * h) - g));
    }
  EXPECT_LT(worst, 1e-6);
  EXPECT_GT(grad.abs().max().item<double>(), 1e-3);
}

TEST_P(LayersB, BatchOfTwoEqualsEachAlone) {
  auto l = layer(GetParam());
  const GraphBatch both = batch_of({periodic_cell(), molecule()});
  const GraphBatch first = batch_of({periodic_cell()}), second = batch_of({molecule()});
  const NodeState out = run(*l, both, both.pos);
  expect_close(out.inv.narrow(0, 0, 8), run(*l, first, first.pos).inv, 1e-12, "cell");
  expect_close(out.inv.narrow(0, 8, 6), run(*l, second, second.pos).inv, 1e-12, "molecule");
  if (l->equivariant())
    expect_close(out.equiv.narrow(0, 8, 6), run(*l, second, second.pos).equiv, 1e-12, "equiv");
}

// Without pna_deg the normalisers are the batch's own mean log(deg + 1) and mean degree: the same
// as passing the batch's in-degree histogram. A histogram with no neighbours at all is a
// ConfigError.
TEST_P(PNALayers, WithoutHistogramUseTheBatchInDegrees) {
  const std::string name = GetParam();
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const at::Tensor deg =
      b.receivers->ptr.narrow(0, 1, b.n_atoms()) - b.receivers->ptr.narrow(0, 0, b.n_atoms());
  std::vector<int64_t> hist(deg.max().item<int64_t>() + 1, 0);
  for (int64_t a = 0; a < b.n_atoms(); ++a) ++hist[deg[a].item<int64_t>()];
  LayerSpec with = spec(), without = spec();
  with.pna_deg = hist;
  without.pna_deg.clear();
  at::manual_seed(5);
  auto l_with = make_layer(name, with);
  at::manual_seed(5);
  auto l_without = make_layer(name, without);
  l_with->to(at::kDouble), l_without->to(at::kDouble);
  const at::Tensor out = run(*l_without, b, b.pos).inv;
  expect_close(out, run(*l_with, b, b.pos).inv, 1e-12, "batch histogram");
  EXPECT_TRUE(at::isfinite(out).all().item<bool>());
  at::manual_seed(5);
  auto l_other = make_layer(name, spec());  // the fixed histogram kDegHist
  l_other->to(at::kDouble);
  EXPECT_GT((run(*l_other, b, b.pos).inv - out).abs().max().item<double>(), 1e-6);
  LayerSpec bad = spec();
  bad.pna_deg = {3};
  EXPECT_THROW(make_layer(name, bad), ConfigError);
}

// PNAPlus's messages end in Linear(rbf), and its Bessel basis vanishes at the cutoff: a C-O pair
// just inside the radius gives each atom what an atom without neighbours gets (one neighbour and
// none are the same degree after PyG's clamp to 1), so the energy does not jump as the pair
// separates. PNA's Gaussian messages do not vanish there, so its output jumps.
TEST(PNAPlusLayer, APairAtTheCutoffEqualsTwoLoneAtoms) {
  const auto pair_at = [](double d) {
    Structure s;
    s.z = {6, 8};
    s.pos = {0, 0, 0, d, 0, 0};
    s.cell.assign(9, 0.0);
    s.pbc = {0, 0, 0};
    return s;
  };
  const Structure inside = pair_at(kRadius * (1 - 1e-7)), outside = pair_at(kRadius * 1.01);
  const GraphBatch bi = batch_of({inside}), bo = batch_of({outside});
  ASSERT_EQ(bi.edge_index.size(1), 2);
  ASSERT_EQ(bo.edge_index.size(1), 0);
  auto plus = layer("PNAPlus");
  const at::Tensor near = run(*plus, bi, bi.pos).inv, apart = run(*plus, bo, bo.pos).inv;
  expect_close(near, apart, 1e-6, "PNAPlus: pair at the cutoff against lone atoms");
  auto pna = layer("PNA");
  EXPECT_GT((run(*pna, bi, bi.pos).inv - run(*pna, bo, bo.pos).inv).abs().max().item<double>(),
            1e-3);
  const auto params = plus->named_parameters();
  ASSERT_TRUE(params.contains("freq"));
  EXPECT_TRUE(params["freq"].requires_grad());
  EXPECT_NEAR(params["freq"][2].item<double>(), 3 * M_PI, 1e-6);  // made in float32
  LayerSpec s = spec();
  s.num_radial = 0;
  EXPECT_THROW(make_layer("PNAPlus", s), ConfigError);
}

INSTANTIATE_TEST_SUITE_P(Layers, LayersB, ::testing::ValuesIn(kLayers),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Layers, VectorLayers, ::testing::Values("PAINN", "PNAEq"),
                         [](const auto& info) { return std::string(info.param); });
INSTANTIATE_TEST_SUITE_P(Layers, PNALayers, ::testing::Values("PNA", "PNAPlus", "PNAEq"),
                         [](const auto& info) { return std::string(info.param); });
INSTANTIATE_TEST_SUITE_P(Layers, LayersBForces,
                         ::testing::Values("PAINN", "PNA", "PNAPlus", "PNAEq"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace ddgnn
