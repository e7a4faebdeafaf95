// SchNet, EGNN (invariant and equivariant) and CGCNN layers in float64, and the activations:
// registry and shapes; a plain-ops reference (index_select / index_add, same weights) gives the
// same outputs, parameter gradients and second derivatives; invariances (equivariance of EGNN's
// coordinate displacement); forces against finite differences; a batch of two graphs equals each
// graph alone; EGNN's coordinate update (absent when off, a displacement equals moved atoms).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/module.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../common/structures.h"
#include "core/error.h"
#include "model/activation.h"
#include "model/batch.h"
#include "model/layer.h"

namespace ddgnn {
namespace {

constexpr int64_t kF = 8;
constexpr double kRadius = 3.0;

using testing::Structure;

Structure periodic_cell() {
  return testing::triclinic_cell({14, 8, 8, 14, 8, 1, 8, 14}, 11, 0.2);
}
Structure molecule() {
  return testing::methanol();
}
GraphBatch batch_of(const std::vector<Structure>& ss) {
  return testing::batch_of(ss, kRadius);
}

// Input features [n_atoms, F], a fixed function of the atomic number only.
at::Tensor features(const GraphBatch& b) {
  const at::Tensor zf = b.z.to(at::kDouble).unsqueeze(1);
  const at::Tensor f = at::arange(kF, at::kDouble).unsqueeze(0);
  return at::sin(0.37 * zf + 1.3 * f) + 0.1 * f;
}

// Input state as the trunk starts it: features, and zero vectors for equivariant layers.
NodeState input(const GraphBatch& b, bool equivariant) {
  NodeState s;
  s.inv = features(b);
  if (equivariant) s.equiv = at::zeros({b.n_atoms(), 3, kF}, at::kDouble);
  return s;
}

NodeState run(MessagePassing& layer, const GraphBatch& b, const at::Tensor& pos,
              const NodeState& in) {
  const EdgeGeometry g(b, pos, kRadius);
  return layer.forward(in, b, g);
}

// ---- Plain-ops references (index_select / index_add, geometry recomputed here). ----

using Params = std::map<std::string, at::Tensor>;

Params params_of(torch::nn::Module& m) {
  Params p;
  for (const auto& item : m.named_parameters()) p[item.key()] = item.value();
  return p;
}

at::Tensor lin(const Params& p, const std::string& name, const at::Tensor& x) {
  const auto b = p.find(name + ".bias");
  return at::linear(x, p.at(name + ".weight"), b == p.end() ? at::Tensor() : b->second);
}

struct RefGeometry {
  at::Tensor src, dst, vec, len;  // [E], [E], [E, 3], [E]
  RefGeometry(const GraphBatch& b, const at::Tensor& pos)
      : src(b.edge_index[0]), dst(b.edge_index[1]) {
    vec = pos.index_select(0, src) - pos.index_select(0, dst) + b.edge_shift;
    len = vec.norm(2, 1);
  }
  at::Tensor gaussians(int64_t n) const {
    const at::Tensor mu = at::linspace(0.0, kRadius, n, len.options());
    const double spacing = kRadius / double(n - 1);
    const at::Tensor d = len.unsqueeze(1) - mu.unsqueeze(0);
    return at::exp(-0.5 * d * d / (spacing * spacing));
  }
  at::Tensor sum_to_atoms(const at::Tensor& x, int64_t n_atoms) const {
    std::vector<int64_t> shape = x.sizes().vec();
    shape[0] = n_atoms;
    return at::zeros(shape, x.options()).index_add(0, dst, x);
  }
};

using Reference = std::function<NodeState(const Params&, const LayerSpec&, const NodeState&,
                                          const GraphBatch&, const at::Tensor&)>;

NodeState schnet_ref(const Params& p, const LayerSpec& spec, const NodeState& in,
                     const GraphBatch& b, const at::Tensor& pos) {
  const RefGeometry g(b, pos);
  const at::Tensor ssp =
      at::log(0.5 * at::exp(lin(p, "filter1", g.gaussians(spec.num_gaussians))) + 0.5);
  const at::Tensor cut = 0.5 * (at::cos(g.len * M_PI / kRadius) + 1.0);
  const at::Tensor w = lin(p, "filter2", ssp) * cut.unsqueeze(1);
  const at::Tensor msg = lin(p, "lin1", in.inv).index_select(0, g.src) * w;
  NodeState out;
  out.inv = in.inv + lin(p, "lin3",
                         apply_activation(spec.activation,
                                          lin(p, "lin2", g.sum_to_atoms(msg, b.n_atoms()))));
  return out;
}

// With equivariance: in.equiv holds the displacement dx of the atoms in every channel; edge
// vectors are read at the moved atoms, and the step is HydraGNN's E_GCL.coord_model.
NodeState egnn_ref(const Params& p, const LayerSpec& spec, const NodeState& in, const GraphBatch& b,
                   const at::Tensor& pos) {
  const RefGeometry g(b, pos);
  const auto act = [&](const at::Tensor& x) { return at::silu(x); };
  const at::Tensor& h = in.inv;
  at::Tensor vec = g.vec, dx;
  if (spec.equivariance) {
    dx = in.equiv.select(2, 0);
    vec = vec + dx.index_select(0, g.src) - dx.index_select(0, g.dst);
  }
  const at::Tensor z =
      at::cat({h.index_select(0, g.dst), h.index_select(0, g.src), (vec * vec).sum(1, true)}, 1);
  const at::Tensor m = act(lin(p, "edge2", act(lin(p, "edge1", z))));
  NodeState out;
  out.inv =
      h + lin(p, "node2", act(lin(p, "node1", at::cat({h, g.sum_to_atoms(m, b.n_atoms())}, 1))));
  if (spec.equivariance) {
    const at::Tensor phi = at::tanh(lin(p, "coord2", act(lin(p, "coord1", m))));  // [E, 1]
    const at::Tensor dir = vec / (vec.norm(2, 1, true) + 1.0);
    const at::Tensor degree =
        g.sum_to_atoms(at::ones({vec.size(0), 1}, vec.options()), b.n_atoms()).clamp_min(1.0);
    const at::Tensor moved = dx + g.sum_to_atoms(dir * phi, b.n_atoms()) / degree;
    out.equiv = moved.unsqueeze(2).expand({b.n_atoms(), 3, h.size(1)});
  }
  return out;
}

NodeState cgcnn_ref(const Params& p, const LayerSpec& spec, const NodeState& in,
                    const GraphBatch& b, const at::Tensor& pos) {
  const RefGeometry g(b, pos);
  const at::Tensor& h = in.inv;
  const at::Tensor z = at::cat(
      {h.index_select(0, g.dst), h.index_select(0, g.src), g.gaussians(spec.num_gaussians)}, 1);
  const at::Tensor msg =
      1.0 / (1.0 + at::exp(-lin(p, "lin_f", z))) * at::log1p(at::exp(lin(p, "lin_s", z)));
  NodeState out;
  out.inv = h + g.sum_to_atoms(msg, b.n_atoms());
  return out;
}

// ---- Cases ----

struct Case {
  std::string name;  // mpnn_type
  LayerSpec spec;
  Reference reference;
};

Case make_case(const std::string& which) {
  Case c;
  c.spec.hidden_dim = kF;
  c.spec.radius = kRadius;
  c.spec.num_gaussians = 12;
  c.spec.num_filters = 10;
  if (which == "SchNet") {
    c = {"SchNet", c.spec, schnet_ref};
  } else if (which == "EGNN" || which == "EGNN_equivariant") {
    c.spec.activation = "silu";
    c.spec.equivariance = which != "EGNN";
    c = {"EGNN", c.spec, egnn_ref};
  } else {
    c = {"CGCNN", c.spec, cgcnn_ref};
  }
  return c;
}

// EGNN's coord2 starts near zero (gain 0.001, as HydraGNN's): weights of size 1 instead, so that
// the atoms move by tenths of an Å and every check sees the coordinate step.
void widen_coordinate_step(torch::nn::Module& m) {
  at::NoGradGuard no_grad;
  for (auto& item : m.named_parameters())
    if (item.key().find("coord2.weight") != std::string::npos) item.value().normal_(0.0, 1.0);
}

std::shared_ptr<MessagePassing> build(const Case& c) {
  at::manual_seed(3);
  auto layer = make_layer(c.name, c.spec);
  layer->to(at::kDouble);
  if (c.spec.equivariance) widen_coordinate_step(*layer);
  return layer;
}

// Scalar that weights every output entry differently: [n_atoms, F] (+ [n_atoms, 3, F]) -> [].
at::Tensor weighted_sum(const NodeState& s) {
  at::Tensor l =
      (s.inv * at::cos(at::arange(s.inv.numel(), s.inv.options())).view(s.inv.sizes())).sum();
  if (s.equiv.defined())
    l = l +
        (s.equiv * at::sin(at::arange(s.equiv.numel(), s.equiv.options())).view(s.equiv.sizes()))
            .sum();
  return l;
}

void expect_close(const at::Tensor& a, const at::Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double err = (a - b).abs().max().item<double>();
  const double scale = 1.0 + b.abs().max().item<double>();
  EXPECT_LE(err, tol * scale) << what << ": max |difference| " << err;
}

// Differentiates `l` w.r.t. `inputs`; an unused input gets zeros.
std::vector<at::Tensor> grads(const at::Tensor& l, const std::vector<at::Tensor>& inputs,
                              bool create_graph) {
  auto g = torch::autograd::grad({l}, inputs, /*grad_outputs=*/{}, /*retain_graph=*/true,
                                 create_graph, /*allow_unused=*/true);
  for (size_t k = 0; k < g.size(); ++k)
    if (!g[k].defined()) g[k] = at::zeros_like(inputs[k]);
  return g;
}

const std::vector<std::string> kCases = {"SchNet", "EGNN", "EGNN_equivariant", "CGCNN"};

class LayersA : public ::testing::TestWithParam<std::string> {};

TEST_P(LayersA, RegistryAndShapes) {
  const Case c = make_case(GetParam());
  auto layer = build(c);
  EXPECT_EQ(layer->equivariant(), c.spec.equivariance);
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const NodeState out = run(*layer, b, b.pos, input(b, layer->equivariant()));
  EXPECT_EQ(out.inv.sizes(), (std::vector<int64_t>{13, kF}));
  EXPECT_EQ(out.inv.scalar_type(), at::kDouble);
  EXPECT_TRUE(at::isfinite(out.inv).all().item<bool>());
  EXPECT_EQ(out.equiv.defined(), c.spec.equivariance);
  if (out.equiv.defined()) {
    EXPECT_EQ(out.equiv.sizes(), (std::vector<int64_t>{13, 3, kF}));
    EXPECT_GT(out.equiv.abs().max().item<double>(), 1e-6);
  }
  // Messages change the features (the layer is not the identity).
  EXPECT_GT((out.inv - features(b)).abs().max().item<double>(), 1e-6);
}

TEST_P(LayersA, MatchesPlainOpsReferenceToSecondOrder) {
  const Case c = make_case(GetParam());
  auto layer = build(c);
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const Params p = params_of(*layer);
  std::vector<at::Tensor> params;
  for (const auto& [name, t] : p) params.push_back(t);
  const NodeState in = input(b, layer->equivariant());

  const at::Tensor pos_fast = b.pos.clone().requires_grad_(true);
  const at::Tensor pos_ref = b.pos.clone().requires_grad_(true);
  const NodeState fast = run(*layer, b, pos_fast, in);
  const NodeState ref = c.reference(p, c.spec, in, b, pos_ref);
  expect_close(fast.inv, ref.inv, 1e-12, "inv");
  if (c.spec.equivariance) expect_close(fast.equiv, ref.equiv, 1e-12, "equiv");

  const at::Tensor l_fast = weighted_sum(fast), l_ref = weighted_sum(ref);
  std::vector<at::Tensor> in_fast = params, in_ref = params;
  in_fast.push_back(pos_fast);
  in_ref.push_back(pos_ref);
  const auto g_fast = grads(l_fast, in_fast, /*create_graph=*/true);
  const auto g_ref = grads(l_ref, in_ref, /*create_graph=*/true);
  for (size_t k = 0; k < g_fast.size(); ++k)
    expect_close(g_fast[k], g_ref[k], 1e-10, "first derivative " + std::to_string(k));

  // Forces in the loss: differentiate (d l / d pos)^2 w.r.t. the parameters.
  const auto gg_fast = grads(g_fast.back().pow(2).sum(), params, /*create_graph=*/false);
  const auto gg_ref = grads(g_ref.back().pow(2).sum(), params, /*create_graph=*/false);
  double total = 0.0;
  for (size_t k = 0; k < params.size(); ++k) {
    expect_close(gg_fast[k], gg_ref[k], 1e-10, "second derivative " + std::to_string(k));
    total += gg_fast[k].abs().sum().item<double>();
  }
  EXPECT_GT(total, 1e-6);
}

// Rodrigues rotation about a fixed axis: [3, 3] row-major.
std::vector<double> rotation() {
  double ax[3] = {0.3, -0.5, 0.8};
  const double n = std::sqrt(ax[0] * ax[0] + ax[1] * ax[1] + ax[2] * ax[2]);
  for (double& a : ax) a /= n;
  const double t = 1.1, c = std::cos(t), s = std::sin(t);
  std::vector<double> r(9);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) r[3 * i + j] = (i == j ? c : 0.0) + (1 - c) * ax[i] * ax[j];
  r[1] -= s * ax[2], r[2] += s * ax[1], r[3] += s * ax[2];
  r[5] -= s * ax[0], r[6] -= s * ax[1], r[7] += s * ax[0];
  return r;
}

// Applies R to rows of 3 values (positions, lattice vectors).
void rotate_rows(std::vector<double>& v, const std::vector<double>& r) {
  for (size_t k = 0; k + 2 < v.size(); k += 3) {
    const double x[3] = {v[k], v[k + 1], v[k + 2]};
    for (int i = 0; i < 3; ++i)
      v[k + i] = r[3 * i] * x[0] + r[3 * i + 1] * x[1] + r[3 * i + 2] * x[2];
  }
}

TEST_P(LayersA, InvariantUnderRotationTranslationPermutationAndLatticeShift) {
  const Case c = make_case(GetParam());
  auto layer = build(c);
  const auto energy_and_state = [&](const std::vector<Structure>& ss) {
    const GraphBatch b = batch_of(ss);
    // Two layers in sequence, so that a non-zero vector input is exercised too.
    const NodeState s1 = run(*layer, b, b.pos, input(b, layer->equivariant()));
    return run(*layer, b, b.pos, s1);
  };
  const std::vector<Structure> base = {periodic_cell(), molecule()};
  const NodeState ref = energy_and_state(base);
  const double e0 = ref.inv.sum().item<double>();
  const auto expect_same_energy = [&](const std::vector<Structure>& ss, const std::string& what) {
    EXPECT_NEAR(energy_and_state(ss).inv.sum().item<double>(), e0, 1e-10 * (1 + std::abs(e0)))
        << what;
  };

  const std::vector<double> r = rotation();
  std::vector<Structure> rotated = base;
  for (auto& s : rotated) rotate_rows(s.pos, r), rotate_rows(s.cell, r);
  const NodeState rot = energy_and_state(rotated);
  expect_close(rot.inv, ref.inv, 1e-10, "per-atom features under rotation");
  if (c.spec.equivariance) {
    const at::Tensor rt = at::from_blob(const_cast<double*>(r.data()), {3, 3}, at::kDouble);
    expect_close(rot.equiv, at::einsum("ab,nbf->naf", {rt, ref.equiv}), 1e-10,
                 "vectors rotate with the structure");
    EXPECT_GT((rot.equiv - ref.equiv).abs().max().item<double>(), 1e-3);
  }

  std::vector<Structure> moved = base;
  for (auto& s : moved)
    for (size_t k = 0; k < s.pos.size(); ++k)
      s.pos[k] += (k % 3 == 0 ? 1.7 : k % 3 == 1 ? -0.6 : 2.3);
  expect_same_energy(moved, "translation");

  std::vector<Structure> permuted = base;
  for (auto& s : permuted) {
    const Structure o = s;
    for (int64_t a = 0; a < s.n(); ++a) {
      const int64_t from = (3 * a + 1) % s.n();  // 3 is coprime with 8 and 5
      s.z[a] = o.z[from];
      for (int k = 0; k < 3; ++k) s.pos[3 * a + k] = o.pos[3 * from + k];
    }
  }
  expect_same_energy(permuted, "permutation");

  std::vector<Structure> shifted = base;
  for (int k = 0; k < 3; ++k)
    shifted[0].pos[3 * 2 + k] += shifted[0].cell[3 + k] - shifted[0].cell[k];
  expect_same_energy(shifted, "one atom shifted by lattice vectors");
}

TEST_P(LayersA, ForcesMatchFiniteDifferences) {
  const Case c = make_case(GetParam());
  auto layer = build(c);
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  const NodeState in = input(b, layer->equivariant());
  // Two layers for EGNN with equivariance: the second reads the atoms the first moved.
  const auto energy = [&](const at::Tensor& pos) {
    const NodeState s = run(*layer, b, pos, in);
    return (c.spec.equivariance ? run(*layer, b, pos, s) : s).inv.sum();
  };
  const at::Tensor pos = b.pos.clone().requires_grad_(true);
  const at::Tensor grad = grads(energy(pos), {pos}, /*create_graph=*/false)[0];
  EXPECT_GT(grad.abs().max().item<double>(), 1e-4);
  const double h = 1e-5;
  at::Tensor fd = at::zeros_like(grad);
  for (int64_t a = 0; a < b.n_atoms(); ++a)
    for (int64_t k = 0; k < 3; ++k) {
      at::Tensor plus = b.pos.clone(), minus = b.pos.clone();
      plus[a][k] += h;
      minus[a][k] -= h;
      fd[a][k] = (energy(plus).item<double>() - energy(minus).item<double>()) / (2 * h);
    }
  expect_close(grad, fd, 1e-7, "d(sum inv)/d pos vs central differences");
}

TEST_P(LayersA, BatchOfTwoEqualsEachAlone) {
  const Case c = make_case(GetParam());
  auto layer = build(c);
  const auto state = [&](const std::vector<Structure>& ss) {
    const GraphBatch b = batch_of(ss);
    return run(*layer, b, b.pos, input(b, layer->equivariant()));
  };
  const NodeState both = state({periodic_cell(), molecule()});
  const NodeState a = state({periodic_cell()}), m = state({molecule()});
  expect_close(both.inv, at::cat({a.inv, m.inv}, 0), 1e-12, "inv");
  if (c.spec.equivariance) expect_close(both.equiv, at::cat({a.equiv, m.equiv}, 0), 1e-12, "equiv");
}

INSTANTIATE_TEST_SUITE_P(SchNetEGNNCGCNN, LayersA, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// ---- EGNN's coordinate update ----

Case egnn_case(bool equivariance) {
  return make_case(equivariance ? "EGNN_equivariant" : "EGNN");
}

TEST(EgnnCoordinates, OffHasNoCoordinateParameters) {
  const auto names = [](bool equivariance) {
    std::vector<std::string> n;
    for (const auto& item : build(egnn_case(equivariance))->named_parameters())
      n.push_back(item.key() + std::to_string(item.value().sizes().vec().size()));
    return n;
  };
  EXPECT_EQ(names(false), (std::vector<std::string>{"edge1.weight2", "edge1.bias1", "edge2.weight2",
                                                    "edge2.bias1", "node1.weight2", "node1.bias1",
                                                    "node2.weight2", "node2.bias1"}));
  std::vector<std::string> on = names(false);
  on.insert(on.end(), {"coord1.weight2", "coord1.bias1", "coord2.weight2"});
  EXPECT_EQ(names(true), on);
  // Without the widening of the tests: coord2 [1, F], Xavier-uniform with gain 0.001.
  at::manual_seed(3);
  auto layer = make_layer("EGNN", egnn_case(true).spec);
  const at::Tensor w = layer->named_parameters()["coord2.weight"];
  EXPECT_EQ(w.sizes(), (std::vector<int64_t>{1, kF}));
  EXPECT_LE(w.abs().max().item<double>(), 0.001 * std::sqrt(6.0 / (kF + 1)));
  EXPECT_GT(w.abs().max().item<double>(), 0.0);
}

// A displacement dx handed in equals atoms moved by dx (same edges and periodic shifts): the
// features agree, and the displacement handed on is dx plus the same step.
TEST(EgnnCoordinates, DisplacementInEqualsMovedAtoms) {
  const Case c = egnn_case(true);
  auto layer = build(c);
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  at::manual_seed(11);
  const at::Tensor dx = 0.2 * at::randn({b.n_atoms(), 3}, at::kDouble);
  NodeState moved_in = input(b, true);
  moved_in.equiv = dx.unsqueeze(2).expand({b.n_atoms(), 3, kF});
  const NodeState a = run(*layer, b, b.pos, moved_in);
  const NodeState m = run(*layer, b, b.pos + dx, input(b, true));
  expect_close(a.inv, m.inv, 1e-12, "features");
  expect_close(a.equiv - dx.unsqueeze(2), m.equiv, 1e-12, "displacement");
  const NodeState still = run(*layer, b, b.pos, input(b, true));
  EXPECT_GT((a.inv - still.inv).abs().max().item<double>(), 1e-3) << "dx is read";
  EXPECT_GT(still.equiv.abs().max().item<double>(), 1e-2) << "the atoms move";
  // Every channel holds the same displacement.
  expect_close(still.equiv, still.equiv.select(2, 0).unsqueeze(2).expand_as(still.equiv), 0.0,
               "channels");
}

// ---- Activations ----

TEST(Activation, ValuesOfEveryName) {
  const at::Tensor x = at::tensor({-2.0, -0.5, 0.0, 0.7, 3.0}, at::kDouble);
  const std::map<std::string, at::Tensor> expected = {
      {"relu", at::clamp_min(x, 0.0)},
      {"selu", 1.0507009873554805 * at::where(x > 0, x, 1.6732632423543772 * (at::exp(x) - 1))},
      {"prelu", at::where(x > 0, x, 0.25 * x)},
      {"elu", at::where(x > 0, x, at::exp(x) - 1)},
      {"lrelu_01", at::where(x > 0, x, 0.01 * x)},
      {"lrelu_025", at::where(x > 0, x, 0.25 * x)},
      {"lrelu_05", at::where(x > 0, x, 0.5 * x)},
      {"silu", x / (1 + at::exp(-x))},
      {"gelu", 0.5 * x * (1 + at::erf(x / std::sqrt(2.0)))},
      {"tanh", (at::exp(2 * x) - 1) / (at::exp(2 * x) + 1)},
      {"sigmoid", 1 / (1 + at::exp(-x))},
      {"softplus", at::log(1 + at::exp(x))},
      {"ssp", at::log(0.5 * at::exp(x) + 0.5)},
  };
  std::vector<std::string> names;
  for (const auto& [name, y] : expected) {
    names.push_back(name);
    expect_close(apply_activation(name, x), y, 1e-14, name);
    EXPECT_NO_THROW(check_activation(name));
  }
  EXPECT_EQ(known_activations(), names);
  EXPECT_NEAR(apply_activation("ssp", at::zeros({1}, at::kDouble)).item<double>(), 0.0, 1e-15);
}

TEST(Activation, SecondDerivativesExist) {
  for (const auto& name : known_activations()) {
    const at::Tensor x = at::tensor({-1.3, 0.4, 2.1}, at::kDouble).requires_grad_(true);
    const at::Tensor g = grads(apply_activation(name, x).pow(3).sum(), {x}, true)[0];
    const at::Tensor gg = grads(g.sum(), {x}, false)[0];
    EXPECT_TRUE(at::isfinite(gg).all().item<bool>()) << name;
    EXPECT_GT(gg.abs().max().item<double>(), 1e-6) << name;
  }
}

TEST(Activation, UnknownNameIsAConfigErrorListingTheKnownOnes) {
  try {
    apply_activation("swish", at::zeros({2}, at::kDouble));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'swish'"), std::string::npos);
    EXPECT_NE(e.hint().find("lrelu_025"), std::string::npos);
    EXPECT_NE(e.hint().find("ssp"), std::string::npos);
  }
  EXPECT_THROW(check_activation("Relu"), ConfigError);
  LayerSpec spec;
  spec.activation = "swish";
  EXPECT_THROW(make_layer("SchNet", spec), ConfigError);
  EXPECT_THROW(make_layer("EGNN", spec), ConfigError);
}

}  // namespace
}  // namespace ddgnn
