// gather_rows / scatter_sum against plain index_select / index_add: values, first and second
// derivatives (the force-loss path), sorted and unsorted indices, empty rows and no edges; the
// gather_mul_sum / gather_gather_dot in float32; derivatives after the maps are gone;
// concat against at::cat.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "model/segment.h"

namespace ddgnn {
namespace {

at::Tensor ref_scatter(const at::Tensor& x, const at::Tensor& index, int64_t n) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = n;
  return at::zeros(shape, x.options()).index_add(0, index, x);
}

// A loss that uses both ops twice and nonlinearly, like a message-passing layer.
at::Tensor model_custom(const at::Tensor& y, const at::Tensor& w, const SegmentIndex& recv,
                        const SegmentIndex& send) {
  at::Tensor m = gather_rows(y, send) * at::tanh(gather_rows(y, recv) * w);
  at::Tensor h = scatter_sum(m, recv);
  return (at::sin(h) * h).sum();
}

at::Tensor model_ref(const at::Tensor& y, const at::Tensor& w, const at::Tensor& recv,
                     const at::Tensor& send) {
  at::Tensor m = y.index_select(0, send) * at::tanh(y.index_select(0, recv) * w);
  at::Tensor h = ref_scatter(m, recv, y.size(0));
  return (at::sin(h) * h).sum();
}

struct Case {
  at::Tensor recv, send;  // receivers sorted, senders not
  int64_t n;
};

Case random_case(int64_t n, int64_t e, int seed) {
  torch::manual_seed(seed);
  at::Tensor recv = std::get<0>(at::randint(0, n, {e}, at::kLong).sort());
  at::Tensor send = at::randint(0, n, {e}, at::kLong);
  return {recv, send, n};
}

TEST(Segment, ValuesMatchIndexSelectAndIndexAdd) {
  const Case c = random_case(30, 200, 1);
  const SegmentIndex recv = make_segment_index(c.recv, c.n);
  const SegmentIndex send = make_segment_index(c.send, c.n);
  EXPECT_FALSE(recv.order.defined());
  EXPECT_TRUE(send.order.defined());
  at::Tensor y = at::randn({c.n, 3, 4}, at::kDouble);
  at::Tensor x = at::randn({200, 3, 4}, at::kDouble);
  EXPECT_TRUE(at::equal(gather_rows(y, send), y.index_select(0, c.send)));
  EXPECT_TRUE(at::allclose(scatter_sum(x, recv), ref_scatter(x, c.recv, c.n), 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(scatter_sum(x, send), ref_scatter(x, c.send, c.n), 1e-12, 1e-12));
  at::Tensor xf = x.to(at::kFloat);
  EXPECT_TRUE(at::allclose(scatter_sum(xf, send), ref_scatter(xf, c.send, c.n), 1e-5, 1e-5));
}

TEST(Segment, FirstAndSecondDerivativesMatchPlainOps) {
  const Case c = random_case(25, 150, 2);
  const SegmentIndex recv = make_segment_index(c.recv, c.n);
  const SegmentIndex send = make_segment_index(c.send, c.n);
  at::Tensor y0 = at::randn({c.n, 5}, at::kDouble);
  at::Tensor w = at::randn({150, 5}, at::kDouble).requires_grad_(true);
  auto grads = [&](bool custom) {
    at::Tensor y = y0.clone().requires_grad_(true);
    at::Tensor loss = custom ? model_custom(y, w, recv, send) : model_ref(y, w, c.recv, c.send);
    // "Forces": dL/dy with create_graph, then a loss on them differentiated w.r.t. w.
    at::Tensor dy = torch::autograd::grad({loss}, {y}, {}, true, true)[0];
    at::Tensor dw = torch::autograd::grad({(dy * dy).sum()}, {w})[0];
    return std::make_pair(dy.detach(), dw);
  };
  const auto [dy_c, dw_c] = grads(true);
  const auto [dy_r, dw_r] = grads(false);
  EXPECT_TRUE(at::allclose(dy_c, dy_r, 1e-10, 1e-12));
  EXPECT_TRUE(at::allclose(dw_c, dw_r, 1e-10, 1e-12));
}

TEST(Segment, GradientMatchesFiniteDifferences) {
  const Case c = random_case(8, 40, 3);
  const SegmentIndex recv = make_segment_index(c.recv, c.n);
  const SegmentIndex send = make_segment_index(c.send, c.n);
  at::Tensor w = at::randn({40, 2}, at::kDouble);
  at::Tensor y = at::randn({c.n, 2}, at::kDouble).requires_grad_(true);
  at::Tensor g = torch::autograd::grad({model_custom(y, w, recv, send)}, {y})[0];
  const double h = 1e-6;
  for (int64_t i = 0; i < c.n; ++i)
    for (int64_t k = 0; k < 2; ++k) {
      at::Tensor yp = y.detach().clone(), ym = y.detach().clone();
      yp[i][k] += h;
      ym[i][k] -= h;
      const double fd = (model_custom(yp, w, recv, send).item<double>() -
                         model_custom(ym, w, recv, send).item<double>()) /
                        (2 * h);
      EXPECT_NEAR(g[i][k].item<double>(), fd, 1e-6);
    }
}

// gather_mul_sum and gather_gather_dot in float32 (F = 37, an odd row) and their first
// derivatives against plain ops in float64, scalar and vector rows.
TEST(Segment, Float32GatherMulSumAndGatherGatherDotMatchFloat64PlainOps) {
  const Case c = random_case(19, 230, 4);
  const SegmentIndex recv = make_segment_index(c.recv, c.n);
  const SegmentIndex send = make_segment_index(c.send, c.n);
  for (const int64_t k : {1, 3}) {
    const std::vector<int64_t> rows =
        k == 1 ? std::vector<int64_t>{c.n, 37} : std::vector<int64_t>{c.n, k, 37};
    const at::Tensor y64 = at::randn(rows, at::kDouble), w64 = at::randn({230, 37}, at::kDouble);
    const at::Tensor y = y64.to(at::kFloat).requires_grad_(true);
    const at::Tensor w = w64.to(at::kFloat).requires_grad_(true);
    const at::Tensor out = gather_mul_sum(y, w, send, recv);
    const at::Tensor wk = k == 1 ? w64 : w64.unsqueeze(1);
    const at::Tensor ref = ref_scatter(y64.index_select(0, c.send) * wk, c.recv, c.n);
    EXPECT_TRUE(at::allclose(out.to(at::kDouble), ref, 1e-5, 1e-5)) << k;
    // The backward runs gather_mul_sum reversed and gather_gather_dot.
    const at::Tensor g64 = at::randn(ref.sizes(), at::kDouble);
    const auto grads = torch::autograd::grad({out}, {y, w}, {g64.to(at::kFloat)});
    const at::Tensor gy = ref_scatter(g64.index_select(0, c.recv) * wk, c.send, c.n);
    at::Tensor gw = g64.index_select(0, c.recv) * y64.index_select(0, c.send);
    if (k > 1) gw = gw.sum(1);
    EXPECT_TRUE(at::allclose(grads[0].to(at::kDouble), gy, 1e-5, 1e-5)) << k;
    EXPECT_TRUE(at::allclose(grads[1].to(at::kDouble), gw, 1e-5, 1e-5)) << k;
  }
}

// A fused op keeps its segment maps: the maps it was given may go out of scope before its first
// and second derivatives are taken (DimeNet's triplet maps live only in one layer's forward).
TEST(Segment, DerivativesOutliveTheMapsTheyWereBuiltWith) {
  const Case c = random_case(12, 90, 5);
  at::Tensor y = at::randn({c.n, 4}, at::kDouble).requires_grad_(true);
  const at::Tensor w = at::randn({90, 4}, at::kDouble).requires_grad_(true);
  at::Tensor loss;
  {
    const SegmentIndex recv = make_segment_index(c.recv, c.n);
    const SegmentIndex send = make_segment_index(c.send, c.n);
    const at::Tensor h = gather_mul_sum(y, w, send, recv);
    loss = (h * h * h).sum();
  }
  const at::Tensor h_ref = ref_scatter(y.index_select(0, c.send) * w, c.recv, c.n);
  const at::Tensor loss_ref = (h_ref * h_ref * h_ref).sum();
  const at::Tensor dy = torch::autograd::grad({loss}, {y}, {}, true, true)[0];
  const at::Tensor dy_ref = torch::autograd::grad({loss_ref}, {y}, {}, true, true)[0];
  EXPECT_TRUE(at::allclose(dy, dy_ref, 1e-12, 1e-12));
  const at::Tensor dw = torch::autograd::grad({(dy * dy).sum()}, {w})[0];
  const at::Tensor dw_ref = torch::autograd::grad({(dy_ref * dy_ref).sum()}, {w})[0];
  EXPECT_TRUE(at::allclose(dw, dw_ref, 1e-10, 1e-12));
}

// concat equals at::cat in value, first and second derivatives (float64), along either dimension,
// with an input that needs no gradient.
TEST(Segment, ConcatMatchesCatToSecondOrder) {
  at::manual_seed(6);
  for (const int64_t dim : {1, 2}) {
    const at::Tensor a = at::randn({5, 3, 4}, at::kDouble).requires_grad_(true);
    const at::Tensor b = at::randn({5, 2, 4}, at::kDouble).requires_grad_(true);
    const at::Tensor c =
        at::randn(dim == 1 ? std::vector<int64_t>{5, 1, 4} : std::vector<int64_t>{5, 3, 2},
                  at::kDouble);  // a constant
    const at::Tensor b2 = dim == 1 ? b : b.transpose(1, 2).narrow(1, 0, 3).contiguous();
    auto derivatives = [&](bool fused) {
      const std::vector<at::Tensor> xs = {at::sin(a), b2 * b2, c};
      const at::Tensor y = fused ? concat(xs, dim) : at::cat(xs, dim);
      const at::Tensor loss = (y * y * y).sum();
      const auto g = torch::autograd::grad({loss}, {a, b}, {}, true, true);
      const auto h =
          torch::autograd::grad({(g[0] * g[0]).sum() + (g[1] * g[1] * g[1]).sum()}, {a, b});
      return std::vector<at::Tensor>{y.detach(), g[0].detach(), g[1].detach(), h[0], h[1]};
    };
    const auto fused = derivatives(true), plain = derivatives(false);
    for (size_t k = 0; k < fused.size(); ++k)
      EXPECT_TRUE(at::allclose(fused[k], plain[k], 1e-12, 1e-12)) << dim << " " << k;
  }
}

TEST(Segment, EmptyRowsNoEdgesAndBadIndex) {
  const SegmentIndex s = make_segment_index(at::tensor({2, 2, 4}, at::kLong), 6);
  at::Tensor x = at::ones({3, 2}, at::kDouble);
  at::Tensor out = scatter_sum(x, s);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(out[2][0].item<double>(), 2.0);
  EXPECT_EQ(out[0][0].item<double>(), 0.0);
  const SegmentIndex none = make_segment_index(at::empty({0}, at::kLong), 4);
  EXPECT_EQ(scatter_sum(at::empty({0, 3}, at::kDouble), none).sum().item<double>(), 0.0);
  EXPECT_THROW(make_segment_index(at::tensor({0, 7}, at::kLong), 6), Error);
}

}  // namespace
}  // namespace ddgnn
