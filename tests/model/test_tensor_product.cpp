// The fused tensor-product family (model/tensor_product.h) against its ATen reference and plain
// loops over the formulas: values, first and second derivatives w.r.t. every input, finite
// differences, float32 against float64, empty edge lists and malformed patterns.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "../common/cpu_levels.h"
#include "core/error.h"
#include "model/device.h"
#include "model/segment.h"
#include "model/tensor_product.h"

namespace ddgnn {
namespace {

// kF = 37: the kernels' blocks of channels (32 float32, 16 float64) and a tail past them.
constexpr int64_t kI = 5, kJ = 3, kP = 4, kF = 37, kNSrc = 7, kNDst = 6;

// A random pattern (several paths, some (i, j) absent) and a small graph: source atom 5 and
// receiver atom 4 have no edges, and some (src, dst) pairs repeat. Not movable: the autograd
// graphs keep pointers to src and dst.
struct Case {
  CouplingPattern pattern;
  at::Tensor src_index, dst_index;
  SegmentIndex src, dst;
  int64_t n_edges = 0;

  // With `dst_in_order` the edges are sorted by destination (stably), as a radius graph's are.
  explicit Case(int seed, int64_t n_unique = 24, bool dst_in_order = false) {
    std::mt19937 rng(seed);
    pattern.I = kI;
    pattern.J = kJ;
    pattern.P = kP;
    int64_t next_p = 0;
    for (int64_t i = 0; i < kI; ++i)
      for (int64_t j = 0; j < kJ; ++j)
        if (rng() % 3 != 0) pattern.entries.push_back({i, j, next_p++ % kP});
    for (auto& e : pattern.entries)
      if (rng() % 2) e[2] = int64_t(rng() % kP);
    std::vector<int64_t> s, d;
    for (int64_t k = 0; k < n_unique; ++k) {
      int64_t a = int64_t(rng() % (kNSrc - 1)), b = int64_t(rng() % (kNDst - 1));
      s.push_back(a >= 5 ? a + 1 : a);
      d.push_back(b >= 4 ? b + 1 : b);
      if (k % 5 == 0) {  // a repeated edge
        s.push_back(s.back());
        d.push_back(d.back());
      }
    }
    if (dst_in_order) {
      std::vector<size_t> by(s.size());
      for (size_t k = 0; k < by.size(); ++k) by[k] = k;
      std::stable_sort(by.begin(), by.end(), [&](size_t a, size_t b) { return d[a] < d[b]; });
      std::vector<int64_t> s2, d2;
      for (size_t k : by) s2.push_back(s[k]), d2.push_back(d[k]);
      s.swap(s2);
      d.swap(d2);
    }
    n_edges = int64_t(s.size());
    src_index = torch::tensor(s, at::kLong);
    dst_index = torch::tensor(d, at::kLong);
    src = make_segment_index(src_index, kNSrc);
    dst = make_segment_index(dst_index, kNDst);
  }
  Case(const Case&) = delete;
  Case& operator=(const Case&) = delete;
};

enum class Op { kMessage, kWeightGrad, kCouplingGrad };
const Op kOps[] = {Op::kMessage, Op::kWeightGrad, Op::kCouplingGrad};
const char* name(Op op) {
  return op == Op::kMessage      ? "tp_message"
         : op == Op::kWeightGrad ? "tp_weight_grad"
                                 : "tp_coupling_grad";
}

// Random inputs of an op: message (G, W, X), weight_grad (G, X, Y), coupling_grad (W, X, Y).
std::vector<at::Tensor> inputs(Op op, const Case& c, at::ScalarType type) {
  const int64_t e = c.n_edges;
  at::Tensor g = at::randn({e, kI, kJ}, type), w = at::randn({e, kP, kF}, type);
  at::Tensor x = at::randn({kNSrc, kJ, kF}, type), y = at::randn({kNDst, kI, kF}, type);
  if (op == Op::kMessage) return {g, w, x};
  if (op == Op::kWeightGrad) return {g, x, y};
  return {w, x, y};
}

at::Tensor run(Op op, bool reference, const std::vector<at::Tensor>& in, const Case& c) {
  const auto& [a, b, d] = std::tie(in[0], in[1], in[2]);
  switch (op) {
    case Op::kMessage:
      return reference ? tp_message_reference(a, b, d, c.pattern, c.src, c.dst)
                       : tp_message(a, b, d, c.pattern, c.src, c.dst);
    case Op::kWeightGrad:
      return reference ? tp_weight_grad_reference(a, b, d, c.pattern, c.src, c.dst)
                       : tp_weight_grad(a, b, d, c.pattern, c.src, c.dst);
    case Op::kCouplingGrad:
      return reference ? tp_coupling_grad_reference(a, b, d, c.pattern, c.src, c.dst)
                       : tp_coupling_grad(a, b, d, c.pattern, c.src, c.dst);
  }
  return {};
}

// The formulas of model/tensor_product.h as plain loops (float64).
at::Tensor by_loops(Op op, const std::vector<at::Tensor>& in, const Case& c) {
  const int64_t n_e = c.n_edges;
  const auto src = c.src_index.accessor<int64_t, 1>(), dst = c.dst_index.accessor<int64_t, 1>();
  const auto a = in[0].accessor<double, 3>(), b = in[1].accessor<double, 3>();
  const auto d = in[2].accessor<double, 3>();
  at::Tensor out = op == Op::kMessage      ? at::zeros({kNDst, kI, kF}, at::kDouble)
                   : op == Op::kWeightGrad ? at::zeros({n_e, kP, kF}, at::kDouble)
                                           : at::zeros({n_e, kI, kJ}, at::kDouble);
  auto o = out.accessor<double, 3>();
  for (int64_t e = 0; e < n_e; ++e)
    for (const auto& [i, j, p] : c.pattern.entries)
      for (int64_t f = 0; f < kF; ++f) {
        const int64_t s = src[e], r = dst[e];
        if (op == Op::kMessage) o[r][i][f] += a[e][i][j] * b[e][p][f] * d[s][j][f];
        if (op == Op::kWeightGrad) o[e][p][f] += a[e][i][j] * b[s][j][f] * d[r][i][f];
        if (op == Op::kCouplingGrad) o[e][i][j] += a[e][p][f] * b[s][j][f] * d[r][i][f];
      }
  return out;
}

at::Tensor or_zeros(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() ? t : at::zeros_like(like);
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// L = sum(op(in) * r); its gradients w.r.t. all inputs, kept differentiable.
std::vector<at::Tensor> first_grads(Op op, bool reference, const std::vector<at::Tensor>& in,
                                    const at::Tensor& r, const Case& c) {
  const at::Tensor loss = (run(op, reference, in, c) * r).sum();
  std::vector<at::Tensor> g = torch::autograd::grad({loss}, in, {}, true, true, true);
  for (size_t k = 0; k < g.size(); ++k) g[k] = or_zeros(g[k], in[k]);
  return g;
}

std::vector<at::Tensor> with_grad(const std::vector<at::Tensor>& in) {
  std::vector<at::Tensor> out;
  for (const auto& t : in) out.push_back(t.detach().clone().requires_grad_(true));
  return out;
}

TEST(TensorProduct, ValuesMatchReferenceAndLoops) {
  testing::for_each_cpu_level([&] {
    torch::manual_seed(1);
    const Case c(1);
    ASSERT_LT(c.pattern.entries.size(), size_t(kI * kJ));  // some (i, j) absent
    for (Op op : kOps) {
      const auto in = inputs(op, c, at::kDouble);
      const at::Tensor fused = run(op, false, in, c), ref = run(op, true, in, c);
      const at::Tensor loops = by_loops(op, in, c);
      ASSERT_EQ(fused.sizes(), loops.sizes()) << name(op);
      EXPECT_GT(loops.abs().max().item<double>(), 0.1) << name(op);
      EXPECT_LT(max_abs_diff(fused, ref), 1e-12) << name(op);
      EXPECT_LT(max_abs_diff(ref, loops), 1e-12) << name(op);
      EXPECT_LT(max_abs_diff(fused, loops), 1e-12) << name(op);
    }
    // The atom that receives no edge gets zeros; tp_coupling_grad is zero where no entry is.
    const auto in = inputs(Op::kMessage, c, at::kDouble);
    EXPECT_EQ(run(Op::kMessage, false, in, c)[4].abs().max().item<double>(), 0.0);
    at::Tensor present = at::zeros({kI, kJ}, at::kBool);
    for (const auto& [i, j, p] : c.pattern.entries) present[i][j] = true;
    const at::Tensor cg =
        run(Op::kCouplingGrad, false, inputs(Op::kCouplingGrad, c, at::kDouble), c);
    EXPECT_EQ(cg.masked_select(present.logical_not().expand_as(cg)).abs().max().item<double>(),
              0.0);
  });
}

// Edges in destination order: tp_message zeroes each row at its first edge instead of the whole
// output first (rows without edges zeroed apart), and its output memory is whatever the allocator
// hands back (here a block just filled with NaN and freed).
TEST(TensorProduct, DestinationsInOrderMatchLoops) {
  torch::manual_seed(7);
  const Case c(7, 24, /*dst_in_order=*/true);
  ASSERT_FALSE(c.dst.order.defined());  // make_segment_index saw them sorted
  const auto in = inputs(Op::kMessage, c, at::kDouble);
  const at::Tensor loops = by_loops(Op::kMessage, in, c);
  for (int k = 0; k < 3; ++k) {
    { at::Tensor junk = at::full({kNDst, kI, kF}, NAN, at::kDouble); }
    const at::Tensor fused = run(Op::kMessage, false, in, c);
    EXPECT_LT(max_abs_diff(fused, loops), 1e-12);
    EXPECT_EQ(fused[4].abs().max().item<double>(), 0.0);  // the atom no edge reaches
  }
  const at::Tensor r = at::randn({kNDst, kI, kF}, at::kDouble);
  const auto a = with_grad(in), b = with_grad(in);
  const auto fused = first_grads(Op::kMessage, false, a, r, c);
  const auto ref = first_grads(Op::kMessage, true, b, r, c);
  for (size_t k = 0; k < fused.size(); ++k) EXPECT_LT(max_abs_diff(fused[k], ref[k]), 1e-12) << k;
}

TEST(TensorProduct, GenericKernelsRunTheReference) {
  torch::manual_seed(2);
  const Case c(2);
  for (Op op : kOps) {
    const auto in = inputs(op, c, at::kDouble);
    const GenericKernels generic;
    EXPECT_TRUE(at::equal(run(op, false, in, c), run(op, true, in, c))) << name(op);
  }
}

TEST(TensorProduct, FirstDerivativesMatchReference) {
  testing::for_each_cpu_level([&] {
    torch::manual_seed(3);
    const Case c(3);
    for (Op op : kOps) {
      const auto in = with_grad(inputs(op, c, at::kDouble));
      const at::Tensor r = at::randn_like(run(op, true, in, c));
      const auto fused = first_grads(op, false, in, r, c), ref = first_grads(op, true, in, r, c);
      for (size_t k = 0; k < in.size(); ++k) {
        EXPECT_GT(ref[k].abs().max().item<double>(), 0.1) << name(op) << " input " << k;
        EXPECT_LT(max_abs_diff(fused[k], ref[k]), 1e-12) << name(op) << " input " << k;
      }
    }
  });
}

// The force-loss path: gradients of (dL/d input_k * S).sum() w.r.t. every input, every op and k.
TEST(TensorProduct, SecondDerivativesMatchReference) {
  torch::manual_seed(4);
  const Case c(4);
  for (Op op : kOps) {
    const auto in = with_grad(inputs(op, c, at::kDouble));
    const at::Tensor r = at::randn_like(run(op, true, in, c));
    for (size_t k = 0; k < in.size(); ++k) {
      const at::Tensor s = at::randn_like(in[k]);
      std::vector<at::Tensor> second[2];
      for (bool reference : {false, true}) {
        const at::Tensor dk = first_grads(op, reference, in, r, c)[k];
        ASSERT_TRUE(dk.requires_grad()) << name(op);
        auto g = torch::autograd::grad({(dk * s).sum()}, in, {}, true, true, true);
        for (size_t m = 0; m < g.size(); ++m) second[reference].push_back(or_zeros(g[m], in[m]));
      }
      double largest = 0;
      for (size_t m = 0; m < in.size(); ++m) {
        largest = std::max(largest, second[1][m].abs().max().item<double>());
        EXPECT_LT(max_abs_diff(second[0][m], second[1][m]), 1e-12)
            << name(op) << " d/d input " << m << " of dL/d input " << k;
      }
      EXPECT_GT(largest, 0.1) << name(op) << " " << k;  // L is bilinear in any two inputs
    }
  }
}

// Nonlinear loss of tp_message; its gradients and a second derivative against central
// differences of the fused op alone (no reference involved).
TEST(TensorProduct, GradientsMatchFiniteDifferences) {
  torch::manual_seed(5);
  const Case c(5);
  const auto in = with_grad(inputs(Op::kMessage, c, at::kDouble));
  const at::Tensor r = at::randn({kNDst, kI, kF}, at::kDouble);
  const at::Tensor s = at::randn({kNSrc, kJ, kF}, at::kDouble);
  auto loss = [&](const std::vector<at::Tensor>& v) {
    return (at::tanh(tp_message(v[0], v[1], v[2], c.pattern, c.src, c.dst)) * r).sum();
  };
  // h(v) = sum(dL/dX * s): a first derivative, differentiated once more below.
  auto force_loss = [&](const std::vector<at::Tensor>& v, bool create_graph) {
    const at::Tensor dx = torch::autograd::grad({loss(v)}, {v[2]}, {}, true, create_graph)[0];
    return (dx * s).sum();
  };
  const auto grads = torch::autograd::grad({loss(in)}, in);
  const auto second = torch::autograd::grad({force_loss(in, true)}, in);
  constexpr double kH = 1e-6;
  for (size_t k = 0; k < in.size(); ++k) {
    const at::Tensor flat = in[k].detach().flatten();
    double worst = 0, worst2 = 0;
    for (int64_t m = 0; m < flat.numel(); m += 3) {  // every third element
      auto shifted = [&](double delta) {
        std::vector<at::Tensor> v = with_grad(in);
        at::NoGradGuard no_grad;
        v[k].view(-1)[m] += delta;
        return v;
      };
      const auto plus = shifted(kH), minus = shifted(-kH);
      const double fd = (loss(plus).item<double>() - loss(minus).item<double>()) / (2 * kH);
      const double fd2 =
          (force_loss(plus, false).item<double>() - force_loss(minus, false).item<double>()) /
          (2 * kH);
      worst = std::max(worst, std::abs(fd - grads[k].reshape(-1)[m].item<double>()));
      worst2 = std::max(worst2, std::abs(fd2 - second[k].reshape(-1)[m].item<double>()));
    }
    EXPECT_LT(worst, 1e-7) << "dL/d input " << k;
    EXPECT_LT(worst2, 1e-7) << "d(dL/dX * s)/d input " << k;
    EXPECT_GT(grads[k].abs().max().item<double>(), 1e-3) << k;
  }
}

TEST(TensorProduct, Float32MatchesFloat64) {
  testing::for_each_cpu_level([&] {
    torch::manual_seed(6);
    const Case c(6);
    for (Op op : kOps) {
      const auto in64 = with_grad(inputs(op, c, at::kDouble));
      std::vector<at::Tensor> in32;
      for (const auto& t : in64) in32.push_back(t.detach().to(at::kFloat).requires_grad_(true));
      const at::Tensor out64 = run(op, true, in64, c), out32 = run(op, false, in32, c);
      ASSERT_EQ(out32.scalar_type(), at::kFloat);
      const double scale = out64.abs().max().item<double>();
      EXPECT_LT(max_abs_diff(out32.to(at::kDouble), out64), 1e-5 * scale) << name(op);
      const at::Tensor r = at::randn_like(out64);
      const auto g64 = first_grads(op, true, in64, r, c);
      const auto g32 = first_grads(op, false, in32, r.to(at::kFloat), c);
      for (size_t k = 0; k < in64.size(); ++k) {
        ASSERT_EQ(g32[k].scalar_type(), at::kFloat);
        const double gscale = g64[k].abs().max().item<double>();
        EXPECT_LT(max_abs_diff(g32[k].to(at::kDouble), g64[k]), 1e-5 * gscale)
            << name(op) << " input " << k;
      }
    }
  });
}

TEST(TensorProduct, NoEdgesGivesZeros) {
  const Case c(7, 0);
  ASSERT_EQ(c.n_edges, 0);
  for (Op op : kOps) {
    const auto in = with_grad(inputs(op, c, at::kDouble));
    const at::Tensor out = run(op, false, in, c), ref = run(op, true, in, c);
    EXPECT_EQ(out.sizes(), ref.sizes()) << name(op);
    EXPECT_EQ(out.abs().sum().item<double>(), 0.0) << name(op);
    const auto g = first_grads(op, false, in, at::ones_like(ref), c);
    for (size_t k = 0; k < in.size(); ++k) EXPECT_EQ(g[k].sizes(), in[k].sizes()) << name(op);
  }
}

TEST(TensorProduct, TransposedPatternSwapsRowsAndColumns) {
  CouplingPattern p{2, 3, 2, {{0, 2, 1}, {1, 0, 0}}};
  const CouplingPattern t = p.transposed();
  EXPECT_EQ(t.I, 3);
  EXPECT_EQ(t.J, 2);
  EXPECT_EQ(t.P, 2);
  ASSERT_EQ(t.entries.size(), 2u);
  EXPECT_EQ(t.entries[0], (std::array<int64_t, 3>{2, 0, 1}));
  EXPECT_EQ(t.entries[1], (std::array<int64_t, 3>{0, 1, 0}));
}

TEST(TensorProduct, RejectsMalformedPatternsAndShapes) {
  torch::manual_seed(8);
  const Case c(8);
  const auto in = inputs(Op::kMessage, c, at::kDouble);
  CouplingPattern twice = c.pattern;
  twice.entries.push_back(twice.entries.front());
  EXPECT_THROW(tp_message(in[0], in[1], in[2], twice, c.src, c.dst), Error);
  CouplingPattern outside = c.pattern;
  outside.entries.front()[2] = kP;
  EXPECT_THROW(tp_message(in[0], in[1], in[2], outside, c.src, c.dst), Error);
  EXPECT_THROW(tp_message(in[0].transpose(1, 2), in[1], in[2], c.pattern, c.src, c.dst), Error);
  EXPECT_THROW(tp_message(in[0], in[1], in[2].narrow(0, 0, 3), c.pattern, c.src, c.dst), Error);
  EXPECT_THROW(tp_message(in[0], in[1].to(at::kFloat), in[2], c.pattern, c.src, c.dst), Error);
  // Y of X's shape: [kNSrc, kJ, kF] where [kNDst, kI, kF] is expected.
  EXPECT_THROW(tp_weight_grad(in[0], in[2], in[2], c.pattern, c.src, c.dst), Error);
}

}  // namespace
}  // namespace ddgnn
