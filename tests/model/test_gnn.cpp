// The trunk and heads (model/gnn.h) for every registered mpnn_type, float64 unless stated:
// conservative forces against finite differences; invariances of the energy (rotation, translation,
// permutation, periodic image) and equivariance of the forces; batching; training (overfitting a
// Morse-potential dataset with SchNet, every layer type learns); float32; direct forces.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/optim/adam.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "../common/small_spec.h"
#include "../common/structures.h"
#include "core/error.h"
#include "model/batch.h"
#include "model/gnn.h"
#include "model/layer.h"
#include "model/predict.h"

namespace ddgnn {
namespace {

constexpr double kRadius = 3.0;

using testing::batch_of;
using testing::Structure;

// 8 atoms of three species in a perturbed triclinic periodic cell.
Structure periodic_cell() {
  return testing::triclinic_cell({14, 8, 8, 14, 8, 1, 8, 14}, 11, 0.2);
}
Structure molecule() {
  return testing::methanol();
}

// Default radius of these tests.
GraphBatch batch_of(const std::vector<Structure>& ss) {
  return testing::batch_of(ss, kRadius);
}

// An mpnn_type, or "EGNN_equivariant": EGNN with Architecture.equivariance (atoms move).
GnnSpec make_spec(const std::string& type, double radius = kRadius) {
  if (type != "EGNN_equivariant") return testing::small_spec(type, radius);
  GnnSpec s = testing::small_spec("EGNN", radius);
  s.layer.equivariance = true;
  return s;
}

std::vector<std::string> layer_cases() {
  std::vector<std::string> c = known_layers();
  c.push_back("EGNN_equivariant");
  return c;
}

TargetSpec targets_of(const GnnSpec& spec, bool conservative) {
  return testing::targets_of(spec, conservative);
}

// The prediction path of training and evaluation (model/predict.h) on `b`.
Prediction predict_on(Gnn& gnn, const GraphBatch& b, bool conservative, bool create_graph = false) {
  return predict(gnn, targets_of(gnn.spec(), conservative), b, create_graph);
}

// The energy [n_graphs] at positions `pos` with the batch's edges.
at::Tensor energy_at(Gnn& gnn, const GraphBatch& b, const at::Tensor& pos) {
  GraphBatch moved = b;
  moved.pos = pos;
  return predict_on(gnn, moved, /*conservative=*/false).energy;
}

// EGNN's coord2 weights (gain 0.001 at the start, as HydraGNN's) set to size 1 with
// `widen_coordinates`, so that the atoms move by tenths of an Å and the checks see it.
std::shared_ptr<Gnn> build(const GnnSpec& spec, uint64_t seed = 3, bool widen_coordinates = true) {
  at::manual_seed(seed);
  auto g = std::make_shared<Gnn>(spec);
  g->to(at::kDouble);
  if (widen_coordinates) {
    at::NoGradGuard no_grad;
    for (auto& item : g->named_parameters())
      if (item.key().find("coord2.weight") != std::string::npos) item.value().normal_(0.0, 1.0);
  }
  return g;
}

double max_abs(const at::Tensor& t) {
  return t.abs().max().item<double>();
}

void expect_close(const at::Tensor& a, const at::Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double err = max_abs(a - b);
  EXPECT_LE(err, tol * (1.0 + max_abs(b))) << what << ": max |difference| " << err;
}

// -dE/dx by central differences (h = 1e-5 Å), [n_atoms, 3]. Fixed edges (same edge_index /
// shift): EdgeGeometry recomputes vectors from pos, so this differentiates exactly the function
// autograd does, also for layers that are not smooth at the cutoff.
at::Tensor fd_forces(Gnn& gnn, const GraphBatch& b) {
  const double h = 1e-5;
  at::NoGradGuard no_grad;
  at::Tensor fd = at::zeros({b.n_atoms(), 3}, at::kDouble);
  for (int64_t a = 0; a < b.n_atoms(); ++a)
    for (int64_t c = 0; c < 3; ++c) {
      at::Tensor p = b.pos.clone(), m = b.pos.clone();
      p[a][c] += h;
      m[a][c] -= h;
      const double ep = energy_at(gnn, b, p).sum().item<double>();
      const double em = energy_at(gnn, b, m).sum().item<double>();
      fd[a][c] = -(ep - em) / (2 * h);
    }
  return fd;
}

class GnnLayers : public ::testing::TestWithParam<std::string> {};

TEST_P(GnnLayers, ConservativeForcesMatchFiniteDifferences) {
  auto gnn = build(make_spec(GetParam()));
  const GraphBatch b = batch_of({periodic_cell()});
  const Prediction ef = predict_on(*gnn, b, true);
  ASSERT_EQ(ef.energy.sizes(), (std::vector<int64_t>{1}));
  ASSERT_EQ(ef.forces.sizes(), (std::vector<int64_t>{8, 3}));
  // GIN, SAGE and MFC read no geometry (as in HydraGNN): their forces are zero.
  if (GetParam() == "GIN" || GetParam() == "SAGE" || GetParam() == "MFC")
    EXPECT_EQ(max_abs(ef.forces), 0.0);
  else
    EXPECT_GT(max_abs(ef.forces), 1e-6);
  expect_close(ef.forces, fd_forces(*gnn, b), 1e-6, "forces vs finite differences");
  const GraphBatch bm = batch_of({molecule()});  // and without a cell
  expect_close(predict_on(*gnn, bm, true).forces, fd_forces(*gnn, bm), 1e-6,
               "molecule forces vs finite differences");
}

// Rotation matrix about a fixed axis, [3, 3].
at::Tensor rotation() {
  const double ax[3] = {0.3, -0.5, 0.81}, th = 0.7;
  const double nrm = std::sqrt(ax[0] * ax[0] + ax[1] * ax[1] + ax[2] * ax[2]);
  const double x = ax[0] / nrm, y = ax[1] / nrm, zz = ax[2] / nrm, c = std::cos(th),
               s = std::sin(th), t = 1 - c;
  return at::tensor({t * x * x + c, t * x * y - s * zz, t * x * zz + s * y, t * x * y + s * zz,
                     t * y * y + c, t * y * zz - s * x, t * x * zz - s * y, t * y * zz + s * x,
                     t * zz * zz + c},
                    at::kDouble)
      .view({3, 3});
}

// rows [n, 3] -> rows R^T applied: each row v -> R v.
std::vector<double> rotate_rows(const std::vector<double>& v, const at::Tensor& r) {
  const at::Tensor t =
      at::tensor(v, at::kDouble).view({-1, 3}).matmul(r.t()).contiguous().view({-1});
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

TEST_P(GnnLayers, InvariantEnergyAndEquivariantForces) {
  auto gnn = build(make_spec(GetParam()));
  const Structure s0 = periodic_cell();
  const GraphBatch b0 = batch_of({s0});
  const Prediction ef0 = predict_on(*gnn, b0, true);
  const double tol = 1e-9;

  {  // rotation of positions and cell: energy equal, forces rotate
    const at::Tensor r = rotation();
    Structure s = s0;
    s.pos = rotate_rows(s0.pos, r);
    s.cell = rotate_rows(s0.cell, r);
    const GraphBatch b = batch_of({s});
    EXPECT_EQ(b.n_edges(), b0.n_edges());
    const Prediction ef = predict_on(*gnn, b, true);
    expect_close(ef.energy, ef0.energy, tol, "energy, rotated");
    expect_close(ef.forces, ef0.forces.matmul(r.t()), tol, "forces, rotated");
  }
  {  // translation
    Structure s = s0;
    for (size_t k = 0; k < s.pos.size(); ++k) s.pos[k] += (k % 3 == 0 ? 0.37 : -1.9);
    const Prediction ef = predict_on(*gnn, batch_of({s}), true);
    expect_close(ef.energy, ef0.energy, tol, "energy, translated");
    expect_close(ef.forces, ef0.forces, tol, "forces, translated");
  }
  {  // permutation (reversed order)
    Structure s = s0;
    const int64_t n = s0.n();
    for (int64_t a = 0; a < n; ++a) {
      s.z[size_t(a)] = s0.z[size_t(n - 1 - a)];
      for (int c = 0; c < 3; ++c) s.pos[size_t(3 * a + c)] = s0.pos[size_t(3 * (n - 1 - a) + c)];
    }
    const Prediction ef = predict_on(*gnn, batch_of({s}), true);
    expect_close(ef.energy, ef0.energy, tol, "energy, permuted");
    expect_close(ef.forces, ef0.forces.flip({0}), tol, "forces, permuted");
  }
  {  // periodic image of one atom: atom 2 moved by a1 - a3
    Structure s = s0;
    for (int c = 0; c < 3; ++c) s.pos[size_t(6 + c)] += s0.cell[size_t(c)] - s0.cell[size_t(6 + c)];
    const Prediction ef = predict_on(*gnn, batch_of({s}), true);
    expect_close(ef.energy, ef0.energy, tol, "energy, image shift");
    expect_close(ef.forces, ef0.forces, tol, "forces, image shift");
  }
}

TEST_P(GnnLayers, BatchOfTwoEqualsEachAlone) {
  auto gnn = build(make_spec(GetParam()));
  const Structure a = periodic_cell(), m = molecule();
  const Prediction both = predict_on(*gnn, batch_of({a, m}), true);
  const Prediction ea = predict_on(*gnn, batch_of({a}), true);
  const Prediction em = predict_on(*gnn, batch_of({m}), true);
  expect_close(both.energy, at::cat({ea.energy, em.energy}), 1e-12, "energies");
  expect_close(both.forces, at::cat({ea.forces, em.forces}), 1e-12, "forces");
}

// ---- Training data: Morse pair potential over all pairs of small molecules. ----

Structure morse_molecule(std::mt19937& rng) {
  const double d = 0.5, alpha = 1.2, r0 = 1.6;
  std::uniform_real_distribution<double> u(0.0, 2.4);
  Structure s;
  s.z = {6, 6, 8, 6};
  s.cell = std::vector<double>(9, 0.0);
  s.pbc = {0, 0, 0};
  while (s.pos.size() < 12) {  // rejection: no two atoms closer than 1 Å
    const double p[3] = {u(rng), u(rng), u(rng)};
    bool ok = true;
    for (size_t j = 0; j < s.pos.size(); j += 3) {
      const double dx = p[0] - s.pos[j], dy = p[1] - s.pos[j + 1], dz = p[2] - s.pos[j + 2];
      ok = ok && dx * dx + dy * dy + dz * dz > 1.0;
    }
    if (ok) s.pos.insert(s.pos.end(), p, p + 3);
  }
  s.forces.assign(12, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j) {
      double v[3], r2 = 0;
      for (int c = 0; c < 3; ++c) {
        v[c] = s.pos[size_t(3 * i + c)] - s.pos[size_t(3 * j + c)];
        r2 += v[c] * v[c];
      }
      const double r = std::sqrt(r2), e = std::exp(-alpha * (r - r0));
      s.energy += d * ((1 - e) * (1 - e) - 1);
      const double de_dr = 2 * d * alpha * (1 - e) * e;
      for (int c = 0; c < 3; ++c) {
        s.forces[size_t(3 * i + c)] -= de_dr * v[c] / r;
        s.forces[size_t(3 * j + c)] += de_dr * v[c] / r;
      }
    }
  return s;
}

std::vector<Structure> morse_dataset() {
  std::mt19937 rng(5);
  std::vector<Structure> ss;
  for (int k = 0; k < 4; ++k) ss.push_back(morse_molecule(rng));
  return ss;
}

// Adam steps on the energy+force MSE; returns the loss before every step and after the last.
std::vector<double> train(Gnn& gnn, const GraphBatch& b, int steps, double lr) {
  torch::optim::Adam opt(gnn.parameters(), torch::optim::AdamOptions(lr));
  const EnergyForceWeights w;
  const LossSpec loss;
  std::vector<double> history;
  for (int k = 0; k <= steps; ++k) {
    opt.zero_grad();
    const Prediction ef = predict_on(gnn, b, true, /*create_graph=*/true);
    const at::Tensor l = energy_force_loss(ef, b, w, loss);
    history.push_back(l.item<double>());
    if (k == steps) break;
    l.backward();
    opt.step();
  }
  return history;
}

TEST_P(GnnLayers, TrainingReducesTheLoss) {
  const GraphBatch b = batch_of(morse_dataset(), 5.0);
  auto gnn = build(make_spec(GetParam(), 5.0));
  const std::vector<double> h = train(*gnn, b, 20, 1e-2);
  EXPECT_TRUE(std::isfinite(h.back()));
  EXPECT_LT(h.back(), h.front()) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(AllLayers, GnnLayers, ::testing::ValuesIn(layer_cases()),
                         [](const auto& info) { return info.param; });

// With equivariance the first layer's displacement reaches the second layer: the energy changes
// with coord2's weights; with a zero step the model is the one without equivariance (whose
// parameters are the others: coord1 and coord2 exist only with it).
// A model with rows for the elements of its data (GnnSpec::elements) predicts what the model with
// a row for every atomic number predicts when its rows are those rows (the embedding and MACE's
// element weights); an atom of another element is an error that names it.
TEST_P(GnnLayers, RowsOfTheDataElementsPredictAsTheFullTable) {
  const GnnSpec full_spec = make_spec(GetParam());
  GnnSpec spec = full_spec;
  spec.elements = {1, 8, 14};
  auto full = build(full_spec);
  auto own = build(spec);
  const at::Tensor rows = at::tensor(std::vector<int64_t>{1, 8, 14});
  {
    at::NoGradGuard no_grad;
    auto from = full->named_parameters();
    int64_t indexed = 0;
    for (auto& item : own->named_parameters()) {
      const at::Tensor& source = from[item.key()];
      if (source.sizes() == item.value().sizes()) {
        item.value().copy_(source);
      } else {  // rows by element
        item.value().copy_(source.index_select(0, rows));
        ++indexed;
      }
    }
    EXPECT_EQ(indexed, 1 + (GetParam() == "MACE" ? full_spec.num_conv_layers : 0) +
                           (GetParam() == "MACE" && full_spec.layer.node_max_ell > 0 ? 1 : 0));
  }
  const GraphBatch b = batch_of({periodic_cell(), molecule()});  // H, C, O, Si
  const GraphBatch cell = batch_of({periodic_cell()});           // H, O, Si
  const Prediction a = predict_on(*full, cell, true), c = predict_on(*own, cell, true);
  expect_close(c.energy, a.energy, 1e-12, "energy");
  expect_close(c.forces, a.forces, 1e-12, "forces");
  try {
    predict_on(*own, b, true);
    ADD_FAILURE() << "carbon went through a model without carbon";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "has atomic number 6, which the model has no weights for (it was trained on "
                  "atomic numbers 1, 8, 14)"),
              std::string::npos)
        << e.what();
  }
}

// The elements travel in the spec's JSON (a checkpoint's record); a record from before them reads
// as a row for every atomic number; elements out of order or range are refused.
TEST(GnnElements, TheElementsSurviveTheSpecJsonAndAreChecked) {
  GnnSpec spec = make_spec("SchNet");
  spec.elements = {1, 6, 8};
  EXPECT_EQ(spec.num_species(), 3);
  EXPECT_EQ(spec_from_json(spec_to_json(spec)).elements, spec.elements);
  nlohmann::json old = spec_to_json(spec);
  old.erase("elements");
  EXPECT_TRUE(spec_from_json(old).elements.empty());
  EXPECT_EQ(spec_from_json(old).num_species(), kMaxAtomicNumber + 1);
  for (const std::vector<int64_t>& bad :
       {std::vector<int64_t>{8, 1}, std::vector<int64_t>{1, 1}, std::vector<int64_t>{1, 200}}) {
    spec.elements = bad;
    EXPECT_THROW(Gnn{spec}, ConfigError) << bad.size();
  }
}

TEST(EgnnCoordinates, MovedAtomsChangeTheEnergy) {
  const GraphBatch b = batch_of({periodic_cell(), molecule()});
  auto on = build(make_spec("EGNN_equivariant"));
  auto off = build(make_spec("EGNN"));
  EXPECT_EQ(off->named_parameters().size() + 6, on->named_parameters().size());
  {
    at::NoGradGuard no_grad;
    for (const auto& item : off->named_parameters())
      on->named_parameters()[item.key()].copy_(item.value());
  }
  const at::Tensor e = predict_on(*on, b, false).energy;
  {
    at::NoGradGuard no_grad;
    on->named_parameters()["conv0.coord2.weight"].zero_();
  }
  const at::Tensor still = predict_on(*on, b, false).energy;
  EXPECT_GT(max_abs(e - still), 1e-4);
  expect_close(predict_on(*off, b, false).energy, still, 1e-12, "no step = no equivariance");
}

// Per-atom inputs beside the atomic number enter through the embedding: they change the energy,
// zero inputs give the model without them, and a batch without them is refused.
TEST(GnnInputs, PerAtomInputsChangeTheEnergyThroughTheEmbedding) {
  GraphBatch b = batch_of({periodic_cell(), molecule()});
  GnnSpec spec = make_spec("PAINN");
  auto plain = build(spec);
  spec.node_inputs = 2;
  auto with = build(spec);
  EXPECT_EQ(plain->named_parameters().size() + 1, with->named_parameters().size());
  {
    at::NoGradGuard no_grad;
    for (const auto& item : plain->named_parameters())
      with->named_parameters()[item.key()].copy_(item.value());
  }
  EXPECT_THROW(predict_on(*with, b, true), Error);
  b.node_inputs = at::zeros({b.n_atoms(), 2}, b.pos.options());
  const Prediction zero = predict_on(*with, b, true);
  expect_close(zero.energy, predict_on(*plain, b, true).energy, 1e-12, "zero inputs");
  b.node_inputs = at::randn({b.n_atoms(), 2}, b.pos.options());
  const Prediction some = predict_on(*with, b, true);
  EXPECT_GT(max_abs(some.energy - zero.energy), 1e-6);
  EXPECT_GT(max_abs(some.forces - zero.forces), 1e-6);
}

// Multi-branch heads: each graph's outputs (a graph head and a node head) are those its branch
// gives when every graph takes that branch; a branch no graph takes gets no gradient; forces stay
// -dE/dx through the routing.
TEST(GnnBranches, EachGraphGoesThroughItsBranch) {
  GnnSpec spec = make_spec("SchNet");
  spec.heads = {{"energy", HeadSpec::kNode, 1}, {"gap", HeadSpec::kGraph, 2}};
  HeadBranch wide = spec.branch(0), narrow = spec.branch(0);
  wide.dim_sharedlayers = 24;
  narrow.num_headlayers = 2;
  narrow.dim_headlayers = {5, 6};
  narrow.node_dim_headlayers = {7, 3};
  spec.more_branches = {wide, narrow};
  auto gnn = build(spec);
  EXPECT_NE(gnn->named_parameters().find("branch2_head1_lin1.weight"), nullptr);
  EXPECT_NE(gnn->named_parameters().find("head1_lin0.weight"), nullptr);  // branch 0's names
  GraphBatch b = batch_of({periodic_cell(), molecule(), molecule(), periodic_cell()});
  const std::vector<int64_t> branch_of = {2, 0, 2, 0};
  b.branch = at::tensor(branch_of, at::kLong);
  const auto routed = gnn->forward(b, b.pos);
  std::vector<int64_t> atoms;
  for (int64_t g = 0; g < b.n_graphs; ++g) atoms.push_back(b.atoms_per_graph[g].item<int64_t>());
  for (int64_t k : {0, 1, 2}) {
    GraphBatch all = b;
    all.branch = at::full({b.n_graphs}, k, at::kLong);
    const auto out = gnn->forward(all, all.pos);
    for (int64_t g = 0, a0 = 0; g < b.n_graphs; a0 += atoms[size_t(g)], ++g) {
      if (branch_of[size_t(g)] != k) continue;
      expect_close(routed[1][g], out[1][g], 1e-12, "graph head, graph " + std::to_string(g));
      expect_close(routed[0].narrow(0, a0, atoms[size_t(g)]),
                   out[0].narrow(0, a0, atoms[size_t(g)]), 1e-12,
                   "node head, graph " + std::to_string(g));
    }
    if (k == 1) {
      EXPECT_GT(max_abs(out[1] - routed[1]), 1e-6) << "branch 1 is another head";
    }
  }
  gnn->zero_grad();
  (routed[0].sum() + routed[1].sum()).backward();
  const auto params = gnn->named_parameters();
  EXPECT_FALSE(params["branch1_head1_lin0.weight"].grad().defined() &&
               max_abs(params["branch1_head1_lin0.weight"].grad()) > 0);
  EXPECT_GT(max_abs(params["branch2_head1_lin0.weight"].grad()), 0);
  EXPECT_GT(max_abs(params["head1_lin0.weight"].grad()), 0);
  expect_close(predict_on(*gnn, b, true).forces, fd_forces(*gnn, b), 1e-6, "routed forces");
  GnnSpec bad = spec;
  bad.more_branches[1].dim_headlayers = {5};
  EXPECT_THROW(Gnn{bad}, ConfigError);
}

// Graph-attribute conditioning, each mode: a graph's attributes change its own predictions and no
// other graph's; forces stay -dE/dx; a batch without the attributes is refused.
TEST(GnnConditioning, AGraphsAttributesChangeItsOwnPredictionsOnly) {
  for (const std::string mode : {"film", "concat_node", "fuse_pool"}) {
    GnnSpec spec = make_spec("SchNet");
    spec.graph_attr_mode = mode;
    spec.graph_attr_dim = 2;
    if (mode == "fuse_pool") {  // pooled features: a graph energy head
      spec.heads = {{"energy", HeadSpec::kGraph, 1}};
      spec.interatomic_potential = false;
    }
    auto gnn = build(spec);
    GraphBatch b = batch_of({periodic_cell(), molecule()});
    EXPECT_THROW(predict_on(*gnn, b, true), Error) << mode;
    b.graph_attr = at::tensor({0.0, 1.0, 0.5, -1.0}, at::kDouble).view({2, 2});
    const Prediction p = predict_on(*gnn, b, true);
    GraphBatch c = b;
    c.graph_attr = b.graph_attr.clone();
    c.graph_attr[1][0] = 2.0;  // the molecule's charge
    const Prediction q = predict_on(*gnn, c, true);
    EXPECT_NEAR(q.energy[0].item<double>(), p.energy[0].item<double>(), 1e-12) << mode;
    EXPECT_GT(std::abs(q.energy[1].item<double>() - p.energy[1].item<double>()), 1e-6) << mode;
    expect_close(p.forces, fd_forces(*gnn, b), 1e-6, mode + " forces");
  }
  GnnSpec bad = make_spec("SchNet");
  bad.graph_attr_mode = "concat_node";
  EXPECT_THROW(Gnn{bad}, ConfigError);  // no attributes
}

TEST(GnnTraining, SchNetOverfitsMorseDataset) {
  const GraphBatch b = batch_of(morse_dataset(), 5.0);
  auto gnn = build(make_spec("SchNet", 5.0));
  const std::vector<double> h = train(*gnn, b, 400, 1e-2);
  RecordProperty("loss_ratio", std::to_string(h.front() / h.back()));
  EXPECT_LT(h.back(), h.front() / 100.0) << "initial " << h.front() << ", final " << h.back();
}

TEST(GnnPrecision, Float32MatchesFloat64) {
  auto gnn = build(make_spec("SchNet"));
  const std::vector<Structure> ss = {periodic_cell(), molecule()};
  const Prediction ef64 = predict_on(*gnn, batch_of(ss), true);
  gnn->to(at::kFloat);
  const GraphBatch b32 = batch_of(ss, kRadius, at::kFloat);
  const Prediction ef32 = predict_on(*gnn, b32, true);
  EXPECT_EQ(ef32.forces.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::isfinite(ef32.forces).all().item<bool>());
  expect_close(ef32.energy.to(at::kDouble), ef64.energy, 1e-4, "energy float32");
  expect_close(ef32.forces.to(at::kDouble), ef64.forces, 1e-3, "forces float32");
}

GnnSpec direct_spec(Pooling pooling) {
  GnnSpec s = make_spec("SchNet");
  s.graph_pooling = pooling;
  s.interatomic_potential = false;
  s.heads = {{"energy", HeadSpec::kGraph, 1}, {"forces", HeadSpec::kNode, 3}};
  return s;
}

TEST(GnnDirect, ForcesFromTheNodeHeadAndPoolingBatches) {
  for (const Pooling kind : {Pooling::kAdd, Pooling::kMean, Pooling::kMax}) {
    const std::string pooling = to_string(kind);
    auto gnn = build(direct_spec(kind));
    const Structure a = periodic_cell(), m = molecule();
    const GraphBatch b = batch_of({a, m});
    const Prediction ef = predict_on(*gnn, b, false);
    EXPECT_EQ(ef.energy.sizes(), (std::vector<int64_t>{2})) << pooling;
    EXPECT_EQ(ef.forces.sizes(), (std::vector<int64_t>{13, 3})) << pooling;
    ASSERT_EQ(ef.outputs.size(), 2u);
    EXPECT_TRUE(ef.forces.equal(ef.outputs[1]));
    const Prediction ea = predict_on(*gnn, batch_of({a}), false);
    const Prediction em = predict_on(*gnn, batch_of({m}), false);
    expect_close(ef.energy, at::cat({ea.energy, em.energy}), 1e-12, pooling + " energies");
    expect_close(ef.forces, at::cat({ea.forces, em.forces}), 1e-12, pooling + " forces");
    // The loss reaches every head's parameters.
    const GraphBatch t = batch_of(morse_dataset(), 5.0);
    const at::Tensor l = energy_force_loss(predict_on(*gnn, t, false), t,
                                           EnergyForceWeights{1.0, 0.5, 1.0}, LossSpec{});
    l.backward();
    for (const auto& p : gnn->named_parameters()) {
      if (p.key().rfind("head", 0) == 0 || p.key().rfind("shared", 0) == 0) {
        EXPECT_TRUE(p.value().grad().defined() && max_abs(p.value().grad()) > 0) << p.key();
      }
    }
  }
  // Without a forces head a direct model predicts no forces; conservative forces need an energy.
  EXPECT_FALSE(
      predict_on(*build(make_spec("SchNet")), batch_of({molecule()}), false).forces.defined());
  GnnSpec no_energy = make_spec("SchNet");
  no_energy.heads = {{"charge", HeadSpec::kNode, 1}};
  EXPECT_THROW(predict_on(*build(no_energy), batch_of({molecule()}), true), ConfigError);
}

TEST(GnnHeads, ConvNodeHeadAndLosses) {
  GnnSpec s = make_spec("PAINN");
  s.node_head_type = NodeHeadType::kConv;
  auto gnn = build(s);
  const GraphBatch b = batch_of({periodic_cell()});
  const auto out = gnn->forward(b, b.pos);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{8, 1}));
  EXPECT_NE(gnn->named_parameters().find("head0_conv.phi1.weight"), nullptr);
  expect_close(predict_on(*gnn, b, true).forces, fd_forces(*gnn, b), 1e-6, "conv node head forces");
  // Conservative forces through a max-pooled graph head (energy from the graph head).
  auto pooled = build(direct_spec(Pooling::kMax));
  expect_close(predict_on(*pooled, b, true).forces, fd_forces(*pooled, b), 1e-6,
               "max-pooled graph head forces");

  const at::Tensor p = at::tensor({0.0, 3.0}, at::kDouble), t = at::zeros({2}, at::kDouble);
  auto loss = [&](const char* type, double delta) {
    return regression_loss(p, t, {parse_loss_type(type), delta}).item<double>();
  };
  EXPECT_NEAR(loss("mse", 1.0), 4.5, 1e-12);
  EXPECT_NEAR(loss("mae", 1.0), 1.5, 1e-12);
  EXPECT_NEAR(loss("rmse", 1.0), std::sqrt(4.5), 1e-12);
  EXPECT_NEAR(loss("huber", 2.0), 0.5 * 2.0 * 2.0, 1e-12);
  EXPECT_NEAR(loss("smooth_l1", 2.0), 1.0, 1e-12);
  EXPECT_THROW(loss("huber", 0.0), ConfigError);
  EXPECT_THROW(parse_loss_type("l4"), ConfigError);
  EXPECT_THROW(parse_pooling("median"), ConfigError);
  GnnSpec bad = make_spec("SchNet");
  bad.heads.clear();
  EXPECT_THROW(Gnn{bad}, ConfigError);
}

}  // namespace
}  // namespace ddgnn
