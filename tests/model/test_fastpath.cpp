// The fast training paths against plain-ops references (index_select / index_add / ATen
// expressions), in float64: fused segment ops (gather_mul_sum, gather_gather_dot, outer_sum,
// edge_difference), the softplus / ssp autograd functions, the edge geometry and PaiNN's fused
// message block (values, first and second derivatives, parameter gradients of a force loss);
// every model end to end (forces against finite differences, finite parameter gradients).
// Each layer against its plain-ops reference: tests/model/test_layers_{a,b}.cpp.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <malloc.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "../common/cpu_levels.h"
#include "../common/structures.h"
#include "core/alloc.h"
#include "core/error.h"
#include "core/threads.h"
#include "model/activation.h"
#include "model/batch.h"
#include "model/gnn.h"
#include "model/layer.h"
#include "model/predict.h"
#include "model/radius_graph.h"
#include "model/schnet_filter.h"
#include "model/segment.h"

extern "C" int openblas_get_num_threads() __attribute__((weak));

namespace ddgnn {
namespace {

constexpr double kTol = 1e-11;  // relative, float64

using Fn = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

void expect_close(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.defined() && b.defined()) << what;
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double err = (a - b).abs().max().item<double>();
  const double scale = 1.0 + b.abs().max().item<double>();
  EXPECT_LE(err, kTol * scale) << what << ": max |difference| " << err;
}

// Weights every entry of x differently (a scalar that reads all of x).
at::Tensor weighted(const at::Tensor& x, double phase) {
  return (x * at::cos(phase + at::arange(x.numel(), x.options())).view(x.sizes())).sum();
}

// Compares fast(inputs) with ref(inputs): values, first derivatives with create_graph (as forces
// are taken), and second derivatives through them (as the force loss is backpropagated).
void expect_same_to_second_order(const Fn& fast, const Fn& ref, std::vector<at::Tensor> inputs,
                                 const std::string& what) {
  for (auto& x : inputs) x = x.detach().clone().requires_grad_(true);
  const at::Tensor yf = fast(inputs), yr = ref(inputs);
  expect_close(yf, yr, what + " value");
  const auto gf = torch::autograd::grad({weighted(yf, 0.3)}, inputs, {}, true, true, true);
  const auto gr = torch::autograd::grad({weighted(yr, 0.3)}, inputs, {}, true, true, true);
  at::Tensor lf = at::zeros({}, at::kDouble), lr = at::zeros({}, at::kDouble);
  for (size_t i = 0; i < inputs.size(); ++i) {
    expect_close(gf[i], gr[i], what + " first derivative " + std::to_string(i));
    lf = lf + weighted(gf[i] * gf[i], 1.1 + double(i));  // nonlinear in the gradient
    lr = lr + weighted(gr[i] * gr[i], 1.1 + double(i));
  }
  const auto hf = torch::autograd::grad({lf}, inputs, {}, true, false, true);
  const auto hr = torch::autograd::grad({lr}, inputs, {}, true, false, true);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!hr[i].defined()) continue;  // the reference is linear in this input
    const at::Tensor h = hf[i].defined() ? hf[i] : at::zeros_like(hr[i]);
    expect_close(h, hr[i], what + " second derivative " + std::to_string(i));
  }
}

at::Tensor ref_scatter(const at::Tensor& x, const at::Tensor& index, int64_t n) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = n;
  return at::zeros(shape, x.options()).index_add(0, index, x);
}

struct Graph {
  at::Tensor recv, send;  // [E]: receivers sorted, senders not
  SegmentIndex r, s;
  int64_t n;
};

Graph random_graph(int64_t n, int64_t e, int seed) {
  at::manual_seed(seed);
  Graph g;
  g.n = n;
  g.recv = std::get<0>(at::randint(0, n - 1, {e}, at::kLong).sort());  // row n-1 has no edge
  g.send = at::randint(0, n, {e}, at::kLong);
  g.r = make_segment_index(g.recv, n);
  g.s = make_segment_index(g.send, n);
  return g;
}

at::Tensor randn(std::vector<int64_t> shape) {
  return at::randn(shape, at::kDouble);
}

TEST(FastPath, GatherMulSumBothDirectionsAndVectorRows) {
  const Graph g = random_graph(/*n=*/13, /*e=*/57, /*seed=*/1);
  for (const bool vectors : {false, true}) {
    for (const bool forward_dir : {true, false}) {
      const SegmentIndex& src = forward_dir ? g.s : g.r;
      const SegmentIndex& dst = forward_dir ? g.r : g.s;
      const at::Tensor& src_i = forward_dir ? g.send : g.recv;
      const at::Tensor& dst_i = forward_dir ? g.recv : g.send;
      const std::vector<int64_t> y_shape =
          vectors ? std::vector<int64_t>{g.n, 3, 5} : std::vector<int64_t>{g.n, 5};
      const Fn fast = [&](const std::vector<at::Tensor>& x) {
        return gather_mul_sum(at::tanh(x[0]), at::sin(x[1]), src, dst);
      };
      const Fn ref = [&](const std::vector<at::Tensor>& x) {
        at::Tensor w = at::sin(x[1]);
        if (vectors) w = w.unsqueeze(1);
        return ref_scatter(at::tanh(x[0]).index_select(0, src_i) * w, dst_i, g.n);
      };
      expect_same_to_second_order(fast, ref, {randn(y_shape), randn({57, 5})},
                                  std::string("gather_mul_sum") +
                                      (vectors ? " [N,3,F]" : " [N,F]") +
                                      (forward_dir ? " senders->receivers" : " reversed"));
    }
  }
}

TEST(FastPath, GatherGatherDot) {
  const Graph g = random_graph(11, 40, 2);
  for (const bool vectors : {false, true}) {
    const std::vector<int64_t> shape =
        vectors ? std::vector<int64_t>{g.n, 3, 4} : std::vector<int64_t>{g.n, 4};
    const Fn fast = [&](const std::vector<at::Tensor>& x) {
      return gather_gather_dot(at::tanh(x[0]), at::sin(x[1]), g.r, g.s);
    };
    const Fn ref = [&](const std::vector<at::Tensor>& x) {
      const at::Tensor p = at::tanh(x[0]).index_select(0, g.recv);
      const at::Tensor q = at::sin(x[1]).index_select(0, g.send);
      return vectors ? (p * q).sum(1) : p * q;
    };
    expect_same_to_second_order(fast, ref, {randn(shape), randn(shape)}, "gather_gather_dot");
  }
}

TEST(FastPath, OuterSum) {
  const Graph g = random_graph(9, 35, 3);
  for (const bool by_senders : {false, true}) {
    const SegmentIndex& dst = by_senders ? g.s : g.r;
    const at::Tensor& dst_i = by_senders ? g.send : g.recv;
    const Fn fast = [&](const std::vector<at::Tensor>& x) {
      return outer_sum(at::tanh(x[0]), at::sin(x[1]), dst);
    };
    const Fn ref = [&](const std::vector<at::Tensor>& x) {
      return ref_scatter(at::tanh(x[0]).unsqueeze(1) * at::sin(x[1]).unsqueeze(2), dst_i, g.n);
    };
    expect_same_to_second_order(fast, ref, {randn({35, 6}), randn({35, 3})}, "outer_sum");
  }
}

TEST(FastPath, EdgeDifferenceAndGatherOfVectorRows) {
  const Graph g = random_graph(10, 30, 4);
  const Fn fast = [&](const std::vector<at::Tensor>& x) {
    const at::Tensor y = at::sin(x[0]);
    return edge_difference(y, g.s, g.r) * gather_rows(y.transpose(1, 2), g.s).transpose(1, 2);
  };
  const Fn ref = [&](const std::vector<at::Tensor>& x) {
    const at::Tensor y = at::sin(x[0]);
    return (y.index_select(0, g.send) - y.index_select(0, g.recv)) * y.index_select(0, g.send);
  };
  expect_same_to_second_order(fast, ref, {randn({10, 3, 2})}, "edge_difference, gather_rows");
  EXPECT_THROW(edge_difference(randn({10, 3}), g.s, make_segment_index(g.recv.narrow(0, 0, 5), 10)),
               Error);
  EXPECT_THROW(gather_mul_sum(randn({10, 4}), randn({30, 5}), g.s, g.r), Error);
  EXPECT_THROW(outer_sum(randn({29, 4}), randn({30, 3}), g.r), Error);
}

TEST(FastPath, SoftplusAndSspToThirdOrder) {
  // Includes values beyond PyTorch's threshold (20), where the derivative is 1 to 2e-9.
  const at::Tensor x0 = at::cat({at::linspace(-30.0, 30.0, 61, at::kDouble), randn({20})});
  for (const std::string name : {"softplus", "ssp"}) {
    const double shift = name == "ssp" ? std::log(2.0) : 0.0;
    const Fn fast = [&](const std::vector<at::Tensor>& x) { return apply_activation(name, x[0]); };
    const Fn ref = [&](const std::vector<at::Tensor>& x) {
      // log(1 + e^x) (no overflow for |x| <= 30 in float64); exact derivatives, no threshold.
      return at::log1p(at::exp(x[0])) - shift;
    };
    const double tol_above_threshold = 3e-9;
    at::Tensor x = x0.clone().requires_grad_(true);
    const at::Tensor yf = fast({x}), yr = ref({x});
    EXPECT_LE((yf - yr).abs().max().item<double>(), tol_above_threshold) << name;
    // First, second and third derivatives.
    at::Tensor df = yf, dr = yr;
    for (int order = 1; order <= 3; ++order) {
      df = torch::autograd::grad({df.sum()}, {x}, {}, true, true)[0];
      dr = torch::autograd::grad({dr.sum()}, {x}, {}, true, true)[0];
      EXPECT_LE((df - dr).abs().max().item<double>(), tol_above_threshold)
          << name << " derivative of order " << order;
    }
    // Away from the threshold the fast path is exact to rounding, to second order, mixed.
    expect_same_to_second_order(
        [&](const std::vector<at::Tensor>& v) { return fast({v[0] * v[1]}); },
        [&](const std::vector<at::Tensor>& v) { return ref({v[0] * v[1]}); },
        {randn({7, 3}), randn({7, 3})}, name);
  }
}

// float32 on CPU runs the fused kernels of model/kernels.h: softplus and its sigmoid in one pass
// with their own exp and log1p, and the products of the double backward. Against float64 ATen
// over the whole float range (including where exp underflows and softplus(x) == x), and their
// first and second derivatives to float32 rounding.
TEST(FastPath, Float32SoftplusKernelsMatchFloat64) {
  testing::for_each_cpu_level([&] {
    const at::Tensor x64 =
        at::cat({at::linspace(-120.0, 120.0, 240001, at::kDouble), randn({1000}) * 3.0,
                 at::tensor({0.0, -0.0, 1e-30, -1e-30, 88.0, -88.0, 1e6, -1e6}, at::kDouble)});
    const at::Tensor x32 = x64.to(at::kFloat);
    const at::Tensor xr = x32.to(at::kDouble);  // what the float32 path sees, exactly
    for (const std::string name : {"softplus", "ssp"}) {
      const double shift = name == "ssp" ? std::log(2.0) : 0.0;
      const at::Tensor ref = at::softplus(xr) - shift;
      const at::Tensor got = apply_activation(name, x32).to(at::kDouble);
      // Relative to the larger of the terms (softplus and the shift): the shift cancels near zero.
      const at::Tensor err = (got - ref).abs() / (at::softplus(xr) + shift + 1e-30);
      EXPECT_LE(err.max().item<double>(), 5e-7) << name;
      EXPECT_TRUE(at::isfinite(got).all().item<bool>()) << name;
    }
    // Derivatives: the sigmoid saved by the kernel, and the double backward's two products.
    const at::Tensor w64 = randn({x64.numel()});
    at::Tensor x = x32.clone().requires_grad_(true), w = w64.to(at::kFloat).requires_grad_(true);
    const at::Tensor y = (apply_activation("ssp", x) * w).sum();
    const at::Tensor g = torch::autograd::grad({y}, {x}, {}, true, true)[0];
    const auto h = torch::autograd::grad({(g * g).sum()}, {x, w});
    const at::Tensor s = at::sigmoid(xr), wr = w.detach().to(at::kDouble);
    const at::Tensor g_ref = wr * s;
    const at::Tensor hx_ref = 2.0 * g_ref * wr * s * (1.0 - s), hw_ref = 2.0 * g_ref * s;
    // Relative, with a floor a millionth of the largest value: where sigmoid(x) rounds to 1 in
    // float32 (x > 17), s (1 - s) is 0 there, as it is in ATen's sigmoid_backward.
    const auto rel = [](const at::Tensor& a, const at::Tensor& b) {
      const double floor = 1e-6 * b.abs().max().item<double>();
      return ((a.to(at::kDouble) - b).abs() / (b.abs() + floor)).max().item<double>();
    };
    EXPECT_LE(rel(g, g_ref), 1e-6);
    EXPECT_LE(rel(h[0], hx_ref), 1e-5);
    EXPECT_LE(rel(h[1], hw_ref), 1e-5);
  });
}

// A NaN that reaches the fused softplus stays NaN (the trainer's non-finite-loss check then names
// it), and its exp does not convert NaN to an integer (undefined; caught by the UBSan build).
TEST(FastPath, Float32SoftplusKernelsKeepNaN) {
  testing::for_each_cpu_level([&] {
    const at::Tensor x = at::tensor({1.0f, std::nanf(""), -3.0f, std::nanf("")}, at::kFloat);
    for (const std::string name : {"softplus", "ssp"}) {
      const at::Tensor y = apply_activation(name, x);
      EXPECT_TRUE(at::isnan(y[1]).item<bool>()) << name;
      EXPECT_TRUE(at::isnan(y[3]).item<bool>()) << name;
      EXPECT_TRUE(at::isfinite(y[0]).item<bool>() && at::isfinite(y[2]).item<bool>()) << name;
    }
  });
}

// The geometry of EdgeGeometry against edge_vectors() and the formulas in batch.h.
TEST(FastPath, EdgeGeometryMatchesPlainFormulas) {
  const GraphBatch b = testing::batch_of(
      {testing::triclinic_cell({14, 8, 8, 14, 8, 1, 8, 14}, 11, 0.2), testing::methanol()}, 3.0);
  const double cutoff = 3.0;
  const Fn fast = [&](const std::vector<at::Tensor>& x) {
    const EdgeGeometry g(b, x[0], cutoff);
    return at::cat({g.vec(), g.unit(), g.len().unsqueeze(1), g.gaussians(7), g.bessel(4),
                    g.envelope().unsqueeze(1), g.bessel_cutoff(4)},
                   1);
  };
  const Fn ref = [&](const std::vector<at::Tensor>& x) {
    const at::Tensor vec = edge_vectors(x[0], b.edge_index, b.edge_shift);
    const at::Tensor len = vec.norm(2, 1).unsqueeze(1);
    const at::Tensor mu = at::linspace(0.0, cutoff, 7, at::kDouble);
    const double spacing = cutoff / 6.0;
    const at::Tensor gauss = at::exp(-0.5 * (len - mu).pow(2) / (spacing * spacing));
    const at::Tensor k = at::arange(1, 5, at::kDouble);
    const at::Tensor bessel = at::sin(k * len * M_PI / cutoff) / len;
    const at::Tensor cut = 0.5 * (at::cos(len * M_PI / cutoff) + 1.0);
    return at::cat({vec, vec / len, len, gauss, bessel, cut, bessel * cut, cut}, 1);
  };
  expect_same_to_second_order(fast, ref, {b.pos.to(at::kDouble)}, "edge geometry");
}

// The Gaussians' fused kernels serve values and the first two derivatives; a third derivative
// (a graph recorded through the second) takes their plain-ops path: checked against the formula.
TEST(FastPath, GaussiansToThirdOrder) {
  const GraphBatch b = testing::batch_of({testing::methanol()}, 3.0);
  const double cutoff = 3.0, spacing = cutoff / 5.0;
  const auto third = [&](bool fast) {
    const at::Tensor pos = b.pos.to(at::kDouble).detach().clone().requires_grad_(true);
    at::Tensor gauss;
    if (fast) {
      gauss = EdgeGeometry(b, pos, cutoff).gaussians(6);
    } else {
      const at::Tensor len = edge_vectors(pos, b.edge_index, b.edge_shift).norm(2, 1).unsqueeze(1);
      gauss = at::exp(-0.5 * (len - at::linspace(0.0, cutoff, 6, at::kDouble)).pow(2) /
                      (spacing * spacing));
    }
    const at::Tensor g1 = torch::autograd::grad({weighted(gauss, 0.3)}, {pos}, {}, true, true)[0];
    const at::Tensor g2 = torch::autograd::grad({weighted(g1 * g1, 0.7)}, {pos}, {}, true, true)[0];
    return torch::autograd::grad({weighted(g2 * g2, 1.3)}, {pos}, {}, false, false)[0];
  };
  expect_close(third(true), third(false), "gaussians third derivative");
}

// SchNet's fused filter (model/schnet_filter.h) against its plain-ops reference, in float64:
// (1) the training pattern, forces with create_graph w.r.t. d only, then a loss of forces and
// filter values backpropagated to every input (the hand-written second derivative); (2) first
// and second derivatives in every input at once (weight gradients with create_graph take the
// fallback); (3) a third derivative (SchnetFilterGrad's fallback).
TEST(FastPath, SchnetFilterToThirdOrder) {
  const int64_t e = 40, ng = 7, nf = 5;
  const double cutoff = 5.0, spacing = cutoff / double(ng - 1);
  at::manual_seed(11);
  FilterBasis basis;
  basis.mu = at::linspace(0.0, cutoff, ng, at::kDouble);
  basis.coeff = -0.5 / (spacing * spacing);
  basis.cutoff = cutoff;
  const at::Tensor d0 = 0.4 + 4.4 * at::rand({e}, at::kDouble);
  const std::vector<at::Tensor> start = {
      d0, randn({nf, ng}), randn({nf}), randn({nf, nf}) * 0.5, randn({nf}), randn({e, nf})};
  const auto filter = [&](bool fast, const std::vector<at::Tensor>& x) {
    if (!fast) return schnet_filter_reference(x[0], basis, x[1], x[2], x[3], x[4]);
    const at::Tensor xd = x[0].detach().unsqueeze(1) - basis.mu.unsqueeze(0);
    const at::Tensor gauss = at::exp(at::clamp_min(basis.coeff * xd * xd, -80.0));
    return schnet_filter(x[0], gauss, basis, x[1], x[2], x[3], x[4]);
  };
  const auto leaves = [&] {
    std::vector<at::Tensor> x;
    for (const auto& t : start) x.push_back(t.clone().requires_grad_(true));
    return x;
  };
  // (1) The training step's pattern.
  std::vector<at::Tensor> grads[2];
  for (int fast = 0; fast < 2; ++fast) {
    const std::vector<at::Tensor> x = leaves();
    const at::Tensor w = filter(fast, x);
    const at::Tensor energy = (w * x[5]).sum();
    const at::Tensor gd = torch::autograd::grad({energy}, {x[0]}, {}, true, true)[0];
    const at::Tensor loss = weighted(gd * gd, 1.1) + weighted(w, 0.5) + energy * energy;
    grads[fast] = torch::autograd::grad({loss}, x);
  }
  for (size_t i = 0; i < start.size(); ++i)
    expect_close(grads[1][i], grads[0][i], "filter loss gradient " + std::to_string(i));
  // (2) Every input at once.
  expect_same_to_second_order([&](const std::vector<at::Tensor>& x) { return filter(true, x); },
                              [&](const std::vector<at::Tensor>& x) { return filter(false, x); },
                              {start.begin(), start.begin() + 5}, "schnet filter");
  // (3) Third order through the force pass.
  at::Tensor third[2];
  for (int fast = 0; fast < 2; ++fast) {
    const std::vector<at::Tensor> x = leaves();
    const at::Tensor w = filter(fast, x);
    const at::Tensor g1 = torch::autograd::grad({(w * x[5]).sum()}, {x[0]}, {}, true, true)[0];
    const auto g2 = torch::autograd::grad({weighted(g1 * g1, 0.7)}, {x[0], x[3]}, {}, true, true);
    const at::Tensor l3 = weighted(g2[0] * g2[0], 1.3) + weighted(g2[1] * g2[1], 0.2);
    const auto g3 = torch::autograd::grad({l3}, {x[0], x[1]});
    third[fast] = at::cat({g3[0].flatten(), g3[1].flatten()});
  }
  expect_close(third[1], third[0], "filter third derivative");
}

// PaiNN's message block rewritten on fused ops (filter split by rows, gather_mul_sum,
// outer_sum): against the plain-ops layer as it was written before, with non-zero input vectors
// (the trunk's second and later layers), to second order in positions, features and vectors.
NodeState painn_ref(torch::nn::Module& layer, const GraphBatch& b, const at::Tensor& pos,
                    const at::Tensor& s, const at::Tensor& v, double cutoff, int64_t f) {
  const auto p = layer.named_parameters();
  const auto lin = [&](const at::Tensor& x, const std::string& name) {
    const at::Tensor* bias = p.find(name + ".bias");
    return at::linear(x, p[name + ".weight"], bias ? *bias : at::Tensor());
  };
  const auto ssp = [](const at::Tensor& x) { return at::log(0.5 * at::exp(x) + 0.5); };
  const at::Tensor src = b.edge_index[0], dst = b.edge_index[1];
  const at::Tensor vec = pos.index_select(0, src) - pos.index_select(0, dst) + b.edge_shift;
  const at::Tensor d = vec.norm(2, 1).unsqueeze(1);
  const at::Tensor rbf = at::sin(at::arange(1, 7, s.options()) * d * (M_PI / cutoff)) / d;
  const at::Tensor cut = 0.5 * (at::cos(d * (M_PI / cutoff)) + 1.0);
  const at::Tensor x = lin(ssp(lin(s, "phi1")), "phi2").index_select(0, src) *
                       (lin(rbf, "filter") * cut);  // [E, 3F]
  const auto parts = x.split(f, 1);
  const at::Tensor msg_v = v.index_select(0, src) * parts[0].unsqueeze(1) +
                           parts[1].unsqueeze(1) * (vec / d).unsqueeze(2);
  const at::Tensor s1 = s + ref_scatter(parts[2], dst, b.n_atoms());
  const at::Tensor v1 = v + ref_scatter(msg_v, dst, b.n_atoms());
  const at::Tensor uv = lin(v1, "U"), vv = lin(v1, "V");
  const at::Tensor norm = at::sqrt((vv * vv).sum(1) + 1e-8);
  const auto a = lin(ssp(lin(at::cat({s1, norm}, 1), "upd1")), "upd2").split(f, 1);
  NodeState out;
  out.inv = s1 + a[2] + a[1] * (uv * vv).sum(1);
  out.equiv = v1 + a[0].unsqueeze(1) * uv;
  return out;
}

TEST(FastPath, PainnWithNonZeroVectorsMatchesPlainOps) {
  const GraphBatch b = testing::batch_of(
      {testing::triclinic_cell({14, 8, 8, 14, 8, 1, 8, 14}, 11, 0.2), testing::methanol()}, 3.0);
  LayerSpec spec;
  spec.hidden_dim = 5;
  spec.radius = 3.0;
  spec.num_radial = 6;
  spec.activation = "ssp";
  at::manual_seed(7);
  auto layer = make_layer("PAINN", spec);
  layer->to(at::kDouble);
  std::vector<at::Tensor> params;
  for (const auto& t : layer->parameters()) params.push_back(t);
  const int64_t n_params = int64_t(params.size());
  const auto split = [&](const std::vector<at::Tensor>& x) {
    NodeState in;
    in.inv = x[size_t(n_params)];
    in.equiv = x[size_t(n_params) + 1];
    return in;
  };
  const auto flat = [](const NodeState& s) {
    return at::cat({s.inv.reshape(-1), s.equiv.reshape(-1)});
  };
  std::vector<at::Tensor> inputs = params;  // parameters, then s, v, pos
  inputs.push_back(randn({b.n_atoms(), 5}));
  inputs.push_back(randn({b.n_atoms(), 3, 5}));
  inputs.push_back(b.pos.to(at::kDouble));
  const Fn fast = [&](const std::vector<at::Tensor>& x) {
    const EdgeGeometry g(b, x.back(), 3.0);
    return flat(layer->forward(split(x), b, g));
  };
  const Fn ref = [&](const std::vector<at::Tensor>& x) {
    const NodeState in = split(x);
    return flat(painn_ref(*layer, b, x.back(), in.inv, in.equiv, 3.0, 5));
  };
  // Parameters are used as given (not re-leafed): differentiate w.r.t. s, v and pos, and check
  // the parameter gradients of the force loss separately below.
  const Fn fast_sv = [&](const std::vector<at::Tensor>& x) {
    std::vector<at::Tensor> all = params;
    all.insert(all.end(), x.begin(), x.end());
    return fast(all);
  };
  const Fn ref_sv = [&](const std::vector<at::Tensor>& x) {
    std::vector<at::Tensor> all = params;
    all.insert(all.end(), x.begin(), x.end());
    return ref(all);
  };
  expect_same_to_second_order(
      fast_sv, ref_sv, {inputs[size_t(n_params)], inputs[size_t(n_params) + 1], inputs.back()},
      "PAINN (s, v, pos)");
  // Force loss -> parameter gradients.
  std::vector<at::Tensor> grads[2];
  for (int k = 0; k < 2; ++k) {
    std::vector<at::Tensor> x = {inputs[size_t(n_params)], inputs[size_t(n_params) + 1],
                                 inputs.back().clone().requires_grad_(true)};
    const at::Tensor out = (k == 0 ? fast_sv : ref_sv)(x);
    const at::Tensor forces =
        torch::autograd::grad({weighted(out, 0.7)}, {x.back()}, {}, true, true)[0];
    grads[k] = torch::autograd::grad({weighted(forces * forces, 0.2) + weighted(out, 0.1)}, params,
                                     {}, false, false, true);
  }
  for (size_t k = 0; k < params.size(); ++k)
    expect_close(grads[0][k], grads[1][k],
                 "PAINN force-loss gradient of parameter " + std::to_string(k));
}

// Whole models (trunk, node head, energy sum) for every mpnn_type in float64: forces by double
// backward against central differences of the energy, and a force loss backpropagated to every
// parameter without non-finite values.
TEST(FastPath, EveryModelTrainsOneStepWithFiniteForcesAndGradients) {
  const GraphBatch b = testing::batch_of(
      {testing::triclinic_cell({14, 8, 8, 14, 8, 1, 8, 14}, 11, 0.2), testing::methanol()}, 3.0);
  for (const auto& type : known_layers()) {
    GnnSpec spec;
    spec.mpnn_type = type;
    spec.layer.hidden_dim = 6;
    spec.layer.radius = 3.0;
    spec.layer.num_gaussians = 8;
    spec.layer.num_filters = 5;
    spec.layer.activation = "ssp";
    spec.num_conv_layers = 2;
    spec.head.node_num_headlayers = 1;
    spec.head.node_dim_headlayers = {7};
    spec.heads = {{"energy", HeadSpec::kNode, 1}};
    spec.interatomic_potential = true;
    at::manual_seed(5);
    Gnn gnn(spec);
    gnn.to(at::kDouble);
    // The prediction path of training (model/predict.h): forces with their graph.
    TargetSpec targets;
    targets.heads.resize(1);
    targets.heads[0].name = "energy";
    targets.heads[0].kind = HeadSpec::kNode;
    targets.energy_head = 0;
    targets.conservative = true;
    const Prediction pred = predict(gnn, targets, b, /*create_graph=*/true);
    const at::Tensor &energy = pred.energy, &forces = pred.forces;
    // Central differences of the total energy along one random direction.
    const at::Tensor dir = at::randn_like(b.pos);
    const double h = 1e-5;
    double ep, em;
    {
      at::NoGradGuard no_grad;
      TargetSpec energy_only = targets;
      energy_only.conservative = false;
      GraphBatch moved = b;
      moved.pos = b.pos + h * dir;
      ep = predict(gnn, energy_only, moved, false).energy.sum().item<double>();
      moved.pos = b.pos - h * dir;
      em = predict(gnn, energy_only, moved, false).energy.sum().item<double>();
    }
    const double fd = -(ep - em) / (2 * h), an = (forces * dir).sum().item<double>();
    EXPECT_NEAR(an, fd, 1e-6 * (1.0 + std::abs(fd))) << type;
    const at::Tensor loss = (forces * forces).sum() + (energy * energy).sum();
    loss.backward();
    for (const auto& p : gnn.named_parameters()) {
      if (!p.value().grad().defined()) continue;  // e.g. GIN's geometry-free path
      EXPECT_TRUE(at::isfinite(p.value().grad()).all().item<bool>()) << type << " " << p.key();
    }
  }
}

#if defined(__SANITIZE_ADDRESS__)
#define DDGNN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DDGNN_ASAN 1
#endif
#endif

// glibc accepts the settings, and tensors of 1 and 16 MB then come from the heap, not from mmap
// (an mmapped block is faulted in page by page on every step).
TEST(FastPath, TuneAllocatorKeepsTensorBuffersInTheHeap) {
#ifdef DDGNN_ASAN
  // AddressSanitizer's allocator stands in for glibc's: mallopt changes nothing there, and
  // tune_allocator says so instead of claiming a tuned heap.
  EXPECT_FALSE(tune_allocator());
  return;
#endif
  ASSERT_TRUE(tune_allocator());
  ASSERT_TRUE(tune_allocator());  // idempotent
  for (int i = 0; i < 3; ++i) {
    const size_t mmapped_before = mallinfo2().hblks;
    at::Tensor mid = at::ones({1 << 18}, at::kFloat);  // 1 MB
    at::Tensor big = at::ones({1 << 22}, at::kFloat);  // 16 MB
    EXPECT_EQ(mallinfo2().hblks, mmapped_before) << "a tensor buffer was mmapped";
    EXPECT_EQ(big.sum().item<float>(), float(1 << 22));
    EXPECT_EQ(mid.sum().item<float>(), float(1 << 18));
  }
}

// Debian's LibTorch uses OpenBLAS, whose pool at::set_num_threads does not size: the helper does.
TEST(FastPath, SetBlasThreadsSizesOpenBlasPool) {
  ASSERT_TRUE(openblas_get_num_threads != nullptr) << "this test binary does not link OpenBLAS";
  ASSERT_TRUE(set_blas_threads(2));
  EXPECT_EQ(openblas_get_num_threads(), 2);
  ASSERT_TRUE(set_blas_threads(1));
  EXPECT_EQ(openblas_get_num_threads(), 1);
  ASSERT_TRUE(set_blas_threads(0));  // clamped to one thread
  EXPECT_EQ(openblas_get_num_threads(), 1);
  const at::Tensor a = at::ones({64, 64}, at::kDouble);
  EXPECT_EQ(a.mm(a).sum().item<double>(), 64.0 * 64.0 * 64.0);
}

}  // namespace
}  // namespace ddgnn
