// Static shapes (model/pad_batch.h): a batch padded into a fixed shape predicts, for its own
// graphs and atoms, what it predicts unpadded (energies, forces, stress), with the same loss and
// the same gradient of every parameter, for every mpnn_type and the options with code of their own
// (float64, on the CPU under GenericKernels: the code a GPU runs); two batches of one shape run
// the same operators on tensors of the same sizes; and the fit rules.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../common/aten_calls.h"
#include "../common/model_cases.h"
#include "../common/small_spec.h"
#include "../common/structures.h"
#include "core/error.h"
#include "model/device.h"
#include "model/gnn.h"
#include "model/layer.h"
#include "model/pad_batch.h"
#include "model/predict.h"

namespace ddgnn {
namespace {

constexpr double kRadius = 3.0;

std::vector<testing::Structure> structures(unsigned seed) {
  return {testing::triclinic_cell({14, 8, 8, 14, 8, 1, 8, 14}, seed, 0.2), testing::methanol()};
}

// The batch of `ss` with targets, a stress for the cell, branches and column targets, as a
// training step's: on the CPU, graph inputs made.
GraphBatch make(const std::vector<testing::Structure>& ss, const GnnSpec& spec, bool cap) {
  GraphBatch b = testing::batch_of(ss, kRadius, at::kDouble, c10::Device(c10::kCPU),
                                   /*max_neighbours=*/cap ? 6 : 0, /*smooth_cap=*/cap);
  at::manual_seed(41);
  b.energy = at::randn({b.n_graphs}, at::kDouble);
  b.forces = at::randn({b.n_atoms(), 3}, at::kDouble);
  b.stress = at::randn({b.n_graphs, 3, 3}, at::kDouble);
  b.stress_mask = at::tensor(std::vector<double>{1.0, 0.0}, at::kDouble);
  b.n_stress = 1;
  b.branch = at::tensor(std::vector<int64_t>{1, 0}, at::kLong);
  add_graph_inputs(b, spec);
  return b;
}

// The targets of the column heads ("gap": graph, "charge": node) of `b`.
std::vector<at::Tensor> columns_of(const GnnSpec& spec, const GraphBatch& b) {
  std::vector<at::Tensor> c(spec.heads.size());
  for (size_t k = 0; k < spec.heads.size(); ++k) {
    const HeadSpec& h = spec.heads[k];
    if (h.name == "gap") c[k] = at::randn({b.n_graphs, h.output_dim}, at::kDouble);
    if (h.name == "charge") c[k] = at::randn({b.n_atoms(), h.output_dim}, at::kDouble);
  }
  return c;
}

TargetSpec targets_for(const GnnSpec& spec, bool stress) {
  TargetSpec t = testing::targets_of(spec, /*conservative=*/true);
  t.stress = stress;
  for (auto& h : t.heads)
    if (h.name == "gap" || h.name == "charge") h.source = TargetSource::kColumn;
  return t;
}

// A shape with room to spare: one graph slot more than the pad atoms need, pad edges and pad
// triplets spread two to a pad atom (edge) at most.
ShapeBucket roomy(const BatchSizes& s) {
  ShapeBucket b;
  b.graph_atoms = std::max<int64_t>(s.graph_atoms, 8);
  b.atoms = s.atoms + 7;
  b.edges = s.edges + 13;
  b.triplets = s.triplets > 0 ? s.triplets + 9 : 0;
  b.graphs = s.graphs + 2;
  b.pad_degree = 2;
  return b;
}

struct Outcome {
  Prediction p;
  at::Tensor loss;
  std::vector<at::Tensor> grads;
};

Outcome run_step(Gnn& gnn, const TargetSpec& t, const GraphBatch& b,
                 const std::vector<at::Tensor>& cols, const StepShare& share) {
  Outcome r;
  r.p = predict(gnn, t, b, /*create_graph=*/true);
  const EnergyForceWeights w{1.0, 0.5, 10.0, t.stress ? 2.0 : 0.0};
  r.loss = total_loss(r.p, b, cols, t, w, LossSpec{LossType::kMse, 1.0}, share);
  const auto params = gnn.parameters();
  r.grads = torch::autograd::grad({r.loss}, params, {}, /*retain_graph=*/false,
                                  /*create_graph=*/false, /*allow_unused=*/true);
  for (size_t k = 0; k < r.grads.size(); ++k)
    if (!r.grads[k].defined()) r.grads[k] = at::zeros_like(params[k]);
  return r;
}

double max_abs(const at::Tensor& t) {
  return t.numel() ? t.abs().max().item<double>() : 0.0;
}

class PaddedBatch : public ::testing::TestWithParam<testing::ModelCase> {};

// Padded equals unpadded with the kernels that `generic` picks (the fused CPU kernels, or the
// code a GPU runs).
void expect_padded_as_unpadded(const testing::ModelCase& c, bool generic_kernels) {
  SCOPED_TRACE(generic_kernels ? "generic kernels" : "fused CPU kernels");
  GnnSpec spec = testing::small_spec(c.mpnn_type, kRadius);
  if (c.adjust) c.adjust(spec);
  const TargetSpec t = targets_for(spec, c.stress);
  std::unique_ptr<GenericKernels> generic;
  if (generic_kernels) generic = std::make_unique<GenericKernels>();
  at::manual_seed(3);
  Gnn gnn(spec);
  gnn.to(at::kDouble);
  const GraphBatch b = make(structures(11), spec, c.smooth_cap);
  const std::vector<at::Tensor> cols = columns_of(spec, b);
  PadOptions o;
  o.radius = kRadius;
  o.stress = t.stress;
  o.cap_boundary = c.smooth_cap;
  const ShapeBucket shape = roomy(sizes_of(b));
  const GraphBatch padded = pad_batch(b, shape, o);
  ASSERT_EQ(padded.n_graphs, shape.graphs);
  ASSERT_EQ(padded.n_atoms(), shape.atoms);
  ASSERT_EQ(padded.n_edges(), shape.edges);
  if (b.triplets.defined()) {
    ASSERT_EQ(padded.triplets.size(1), shape.triplets);
  }
  ASSERT_EQ(padded.real_graphs(), b.n_graphs);
  ASSERT_EQ(padded.real_atoms(), b.n_atoms());
  std::vector<at::Tensor> padded_cols = cols;
  for (size_t k = 0; k < cols.size(); ++k) {
    if (!cols[k].defined()) continue;
    const int64_t extra =
        spec.heads[k].kind == HeadSpec::kGraph ? padded.pad_graphs : padded.pad_atoms;
    padded_cols[k] = at::cat({cols[k], at::zeros({extra, cols[k].size(1)}, at::kDouble)});
  }
  StepShare device_share;
  device_share.device = at::ones({2}, at::kDouble);

  const Outcome u = run_step(gnn, t, b, cols, StepShare{});
  const Outcome p = run_step(gnn, t, padded, padded_cols, device_share);
  const int64_t g = b.n_graphs, n = b.n_atoms();
  const auto rel = [](const at::Tensor& a, const at::Tensor& ref) {
    return max_abs(a - ref) / std::max(max_abs(ref), 1e-300);
  };
  EXPECT_LT(rel(p.p.energy.narrow(0, 0, g), u.p.energy), 1e-11);
  EXPECT_LT(rel(p.p.forces.narrow(0, 0, n), u.p.forces), 1e-11);
  if (t.stress) {
    ASSERT_TRUE(p.p.stress.defined());
    EXPECT_LT(rel(p.p.stress.narrow(0, 0, g), u.p.stress), 1e-11);
    EXPECT_GT(max_abs(u.p.stress), 0.0);
  }
  for (size_t k = 0; k < u.p.outputs.size(); ++k)
    EXPECT_LT(rel(p.p.outputs[k].narrow(0, 0, u.p.outputs[k].size(0)), u.p.outputs[k]), 1e-11)
        << "head " << k;
  EXPECT_TRUE(at::isfinite(p.p.forces).all().item<bool>()) << "padding stays finite";
  EXPECT_TRUE(at::isfinite(p.p.energy).all().item<bool>()) << "padding stays finite";
  EXPECT_LT(rel(p.loss, u.loss), 1e-12);
  const auto names = gnn.named_parameters().keys();
  double largest = 0.0;
  for (const auto& gr : u.grads) largest = std::max(largest, max_abs(gr));
  ASSERT_GT(largest, 0.0);
  for (size_t k = 0; k < u.grads.size(); ++k)
    EXPECT_LT(max_abs(p.grads[k] - u.grads[k]), 1e-10 * largest) << names[k];
}

TEST_P(PaddedBatch, PredictsLossAndGradientsAsUnpadded) {
  expect_padded_as_unpadded(GetParam(), /*generic_kernels=*/true);
  expect_padded_as_unpadded(GetParam(), /*generic_kernels=*/false);
}

// Padding stays finite in float32 with many pad edges on few pad atoms (the envelopes zero along
// pad edges): a pad atom's overflow would make the loss's gradient NaN (0 times infinity), though
// its rows weigh nothing in the loss.
TEST_P(PaddedBatch, PaddingStaysFiniteInFloat32) {
  const testing::ModelCase& c = GetParam();
  GnnSpec spec = testing::small_spec(c.mpnn_type, kRadius);
  spec.num_conv_layers = 3;
  if (c.adjust) c.adjust(spec);
  const TargetSpec t = targets_for(spec, c.stress);
  at::manual_seed(3);
  Gnn gnn(spec);
  GraphBatch b = make(structures(11), spec, c.smooth_cap);
  for (at::Tensor* x : {&b.pos, &b.edge_shift, &b.cell, &b.energy, &b.forces, &b.stress,
                        &b.stress_mask, &b.laplacian_pe})
    if (x->defined()) *x = x->to(at::kFloat);
  std::vector<at::Tensor> cols = columns_of(spec, b);
  PadOptions o;
  o.radius = kRadius;
  o.stress = t.stress;
  o.cap_boundary = c.smooth_cap;
  ShapeBucket shape = roomy(sizes_of(b));
  shape.atoms = b.n_atoms() + 2;  // two pad atoms take every pad edge
  shape.edges = b.n_edges() + 40;
  shape.triplets = b.triplets.defined() ? b.triplets.size(1) + 400 : 0;
  shape.pad_degree = 20;
  const GraphBatch padded = pad_batch(b, shape, o);
  for (size_t k = 0; k < cols.size(); ++k) {
    if (!cols[k].defined()) continue;
    const int64_t extra =
        spec.heads[k].kind == HeadSpec::kGraph ? padded.pad_graphs : padded.pad_atoms;
    cols[k] = at::cat({cols[k], at::zeros({extra, cols[k].size(1)})}).to(at::kFloat);
  }
  StepShare share;
  share.device = at::ones({2}, at::kFloat);
  const Outcome p = run_step(gnn, t, padded, cols, share);
  EXPECT_TRUE(at::isfinite(p.p.energy).all().item<bool>());
  EXPECT_TRUE(at::isfinite(p.p.forces).all().item<bool>());
  for (const auto& out : p.p.outputs) EXPECT_TRUE(at::isfinite(out).all().item<bool>());
  EXPECT_TRUE(std::isfinite(p.loss.item<double>()));
  for (const auto& g : p.grads) EXPECT_TRUE(at::isfinite(g).all().item<bool>());
}

// Two batches of different geometry (other edges) padded to one shape issue the same operators
// on tensors of the same sizes: the forward, the forces, the loss and its backward.
TEST_P(PaddedBatch, TwoBatchesOfOneShapeRunTheSameOperators) {
  const testing::ModelCase& c = GetParam();
  GnnSpec spec = testing::small_spec(c.mpnn_type, kRadius);
  if (c.adjust) c.adjust(spec);
  const TargetSpec t = targets_for(spec, c.stress);
  GenericKernels generic;
  at::manual_seed(3);
  Gnn gnn(spec);
  gnn.to(at::kDouble);
  const GraphBatch a = make(structures(11), spec, c.smooth_cap);
  const GraphBatch b = make(structures(29), spec, c.smooth_cap);
  const BatchSizes sa = sizes_of(a), sb = sizes_of(b);
  // Other edges (with a neighbour cap, as many edges, other boundary edges).
  ASSERT_TRUE(sa.edges != sb.edges || c.smooth_cap) << "the two batches differ";
  ASSERT_FALSE(at::equal(a.pos, b.pos));
  BatchSizes most = sa;
  most.edges = std::max(sa.edges, sb.edges);
  most.triplets = std::max(sa.triplets, sb.triplets);
  PadOptions o;
  o.radius = kRadius;
  o.stress = t.stress;
  o.cap_boundary = c.smooth_cap;
  ShapeBucket shape = roomy(most);
  shape.pad_degree = 1000;
  const GraphBatch pa = pad_batch(a, shape, o), pb = pad_batch(b, shape, o);
  StepShare share;
  share.device = at::ones({2}, at::kDouble);
  const auto calls = [&](const GraphBatch& x) {
    const std::vector<at::Tensor> cols = columns_of(spec, x);
    return testing::aten_calls_with_arguments([&] { (void)run_step(gnn, t, x, cols, share); });
  };
  (void)calls(pa);  // the layers' constant tables are made by the first step
  const auto ca = calls(pa), cb = calls(pb);
  ASSERT_GT(ca.size(), 50u);
  ASSERT_EQ(ca.size(), cb.size());
  for (size_t k = 0; k < ca.size(); ++k) {
    ASSERT_EQ(ca[k].name, cb[k].name) << "call " << k;
    ASSERT_EQ(ca[k].shapes, cb[k].shapes) << "call " << k << " " << ca[k].name;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryModel, PaddedBatch, ::testing::ValuesIn(testing::model_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(ShapeBucket, FitsWithinEveryCapacityAndSpreadsItsPadding) {
  const ShapeBucket b{/*graphs=*/10,      /*atoms=*/100,
                      /*edges=*/1000,     /*triplets=*/0,
                      /*graph_atoms=*/20, /*pad_degree=*/30};
  const BatchSizes ok{8, 90, 800, 0, 20};
  EXPECT_TRUE(fits(ok, b));
  BatchSizes s = ok;
  s.atoms = 101;
  EXPECT_FALSE(fits(s, b)) << "too many atoms";
  s = ok;
  s.edges = 1001;
  EXPECT_FALSE(fits(s, b)) << "too many edges";
  s = ok;
  s.graph_atoms = 21;
  EXPECT_FALSE(fits(s, b)) << "a graph wider than the shape's";
  s = ok;
  s.graphs = 10;
  EXPECT_FALSE(fits(s, b)) << "no graph slot left for the pad atoms";
  s = ok;
  s.atoms = 99;
  s.edges = 900;
  EXPECT_FALSE(fits(s, b)) << "100 pad edges on one pad atom";
  s.edges = 970;
  EXPECT_TRUE(fits(s, b)) << "30 pad edges on one pad atom";
  s = ok;
  s.atoms = 100;
  s.edges = 999;
  EXPECT_FALSE(fits(s, b)) << "a pad edge and no pad atom";
  s.edges = 1000;
  EXPECT_TRUE(fits(s, b)) << "an exact fit needs no padding";
  const std::vector<ShapeBucket> both = {b, ShapeBucket{20, 200, 2000, 0, 20, 30}};
  s = ok;
  s.atoms = 150;
  s.edges = 1500;
  EXPECT_EQ(fit_bucket(both, ok), 0);
  EXPECT_EQ(fit_bucket(both, s), 1);
  s.atoms = 201;
  EXPECT_EQ(fit_bucket(both, s), -1);
}

TEST(ShapeBucket, PaddingABatchThatDoesNotFitIsAnError) {
  const GnnSpec spec = testing::small_spec("SchNet", kRadius);
  const GraphBatch b = make(structures(11), spec, false);
  ShapeBucket small = roomy(sizes_of(b));
  small.edges = b.n_edges() - 1;
  PadOptions o;
  o.radius = kRadius;
  EXPECT_THROW(pad_batch(b, small, o), Error);
}

}  // namespace
}  // namespace ddgnn
