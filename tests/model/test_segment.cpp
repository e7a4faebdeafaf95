// gather_rows / scatter_sum against plain index_select / index_add: values, first and second
// derivatives (the force-loss path), sorted and unsorted indices, empty rows and no edges.
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
