// The channel-wise coupling (model/channel_coupling.h) against its ATen reference and a plain loop
// over the formula: values, first and second derivatives w.r.t. both inputs (also when X and Y
// are one tensor, as MACE's pair products are), finite differences, float32, malformed input.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>
#include <vector>

#include "../common/cpu_levels.h"
#include "core/error.h"
#include "model/channel_coupling.h"
#include "model/device.h"

namespace ddgnn {
namespace {

// kF = 37: the kernel's blocks of channels (32 float32, 16 float64) and a tail past them.
constexpr int64_t kN = 6, kF = 37;

// Random coefficients on R x I x J, some (r, i, j) absent and one repeated.
ChannelCoupling random_coupling(int seed, int64_t r, int64_t i, int64_t j) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  ChannelCoupling c{r, i, j, {}};
  for (int64_t a = 0; a < r; ++a)
    for (int64_t b = 0; b < i; ++b)
      for (int64_t d = 0; d < j; ++d)
        if (rng() % 3 == 0) c.entries.push_back({a, b, d, normal(rng)});
  c.entries.push_back(c.entries.front());
  return c;
}

at::Tensor by_loop(const at::Tensor& x, const at::Tensor& y, const ChannelCoupling& c) {
  at::Tensor out = at::zeros({x.size(0), c.R, x.size(2)}, at::kDouble);
  auto o = out.accessor<double, 3>();
  const auto xa = x.accessor<double, 3>(), ya = y.accessor<double, 3>();
  for (int64_t n = 0; n < x.size(0); ++n)
    for (const auto& e : c.entries)
      for (int64_t f = 0; f < x.size(2); ++f) o[n][e.r][f] += e.c * xa[n][e.i][f] * ya[n][e.j][f];
  return out;
}

at::Tensor run(bool reference, const at::Tensor& x, const at::Tensor& y, const ChannelCoupling& c) {
  return reference ? couple_channels_reference(x, y, c) : couple_channels(x, y, c);
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

at::Tensor leaf(at::IntArrayRef shape, at::ScalarType type = at::kDouble) {
  return at::randn(shape, at::TensorOptions().dtype(type)).requires_grad_(true);
}

TEST(ChannelCoupling, ValuesMatchReferenceAndLoop) {
  testing::for_each_cpu_level([&] {
    torch::manual_seed(1);
    const ChannelCoupling c = random_coupling(1, 5, 4, 3);
    const at::Tensor x = at::randn({kN, 4, kF}, at::kDouble),
                     y = at::randn({kN, 3, kF}, at::kDouble);
    const at::Tensor fused = couple_channels(x, y, c), loop = by_loop(x, y, c);
    ASSERT_EQ(fused.sizes(), (at::IntArrayRef{kN, 5, kF}));
    EXPECT_GT(loop.abs().max().item<double>(), 0.1);
    EXPECT_LT(max_abs_diff(fused, loop), 1e-12);
    EXPECT_LT(max_abs_diff(couple_channels_reference(x, y, c), loop), 1e-12);
    const GenericKernels generic;
    EXPECT_TRUE(at::equal(couple_channels(x, y, c), couple_channels_reference(x, y, c)));
  });
}

TEST(ChannelCoupling, DerivativeCouplingsSwapRoles) {
  const ChannelCoupling c{2, 3, 4, {{1, 2, 3, 0.5}}};
  const ChannelCoupling cx = c.for_x(), cy = c.for_y();
  EXPECT_EQ((std::vector<int64_t>{cx.R, cx.I, cx.J}), (std::vector<int64_t>{3, 2, 4}));
  EXPECT_EQ((std::vector<int64_t>{cy.R, cy.I, cy.J}), (std::vector<int64_t>{4, 2, 3}));
  EXPECT_EQ((std::vector<int64_t>{cx.entries[0].r, cx.entries[0].i, cx.entries[0].j}),
            (std::vector<int64_t>{2, 1, 3}));
  EXPECT_EQ((std::vector<int64_t>{cy.entries[0].r, cy.entries[0].i, cy.entries[0].j}),
            (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(cy.entries[0].c, 0.5);
}

// First and second derivatives (the force loss's path) of the fused op equal the reference's, for
// distinct inputs and for X = Y.
TEST(ChannelCoupling, DerivativesToSecondOrderMatchReference) {
  torch::manual_seed(2);
  for (bool same : {false, true}) {
    const ChannelCoupling c = random_coupling(2, 6, 4, same ? 4 : 3);
    const at::Tensor x = leaf({kN, 4, kF}), y = same ? x : leaf({kN, 3, kF});
    const std::vector<at::Tensor> in =
        same ? std::vector<at::Tensor>{x} : std::vector<at::Tensor>{x, y};
    const at::Tensor r = at::randn({kN, 6, kF}, at::kDouble);
    std::vector<at::Tensor> first[2], second[2];
    for (bool reference : {false, true}) {
      const at::Tensor loss = (at::tanh(run(reference, x, y, c)) * r).sum();
      first[reference] = torch::autograd::grad({loss}, in, {}, true, true);
      at::Tensor h = at::zeros({}, at::kDouble);
      for (const auto& g : first[reference]) h = h + (g * g).sum();
      second[reference] = torch::autograd::grad({h}, in);
    }
    for (size_t k = 0; k < in.size(); ++k) {
      EXPECT_GT(first[1][k].abs().max().item<double>(), 0.1) << same << k;
      EXPECT_GT(second[1][k].abs().max().item<double>(), 0.1) << same << k;
      EXPECT_LT(max_abs_diff(first[0][k], first[1][k]), 1e-12) << same << k;
      EXPECT_LT(max_abs_diff(second[0][k], second[1][k]), 1e-11) << same << k;
    }
  }
}

// The fused op's gradient against central differences of its own values (no reference).
TEST(ChannelCoupling, GradientsMatchFiniteDifferences) {
  torch::manual_seed(3);
  const ChannelCoupling c = random_coupling(3, 4, 3, 2);
  const at::Tensor x = leaf({kN, 3, kF}), y = leaf({kN, 2, kF});
  const at::Tensor r = at::randn({kN, 4, kF}, at::kDouble);
  auto loss = [&](const at::Tensor& a, const at::Tensor& b) {
    return (at::sin(couple_channels(a, b, c)) * r).sum();
  };
  const auto grads = torch::autograd::grad({loss(x, y)}, {x, y});
  constexpr double kH = 1e-6;
  double worst = 0;
  for (int k = 0; k < 2; ++k) {
    const at::Tensor flat = (k == 0 ? x : y).detach().flatten();
    for (int64_t m = 0; m < flat.numel(); m += 5) {
      auto at_shift = [&](double d) {
        at::Tensor a = x.detach().clone(), b = y.detach().clone();
        (k == 0 ? a : b).view(-1)[m] += d;
        return loss(a, b).item<double>();
      };
      const double fd = (at_shift(kH) - at_shift(-kH)) / (2 * kH);
      worst = std::max(worst, std::abs(fd - grads[size_t(k)].reshape(-1)[m].item<double>()));
    }
  }
  EXPECT_LT(worst, 1e-7);
}

TEST(ChannelCoupling, Float32MatchesFloat64) {
  testing::for_each_cpu_level([&] {
    torch::manual_seed(4);
    const ChannelCoupling c = random_coupling(4, 5, 3, 3);
    const at::Tensor x = at::randn({kN, 3, kF}, at::kDouble),
                     y = at::randn({kN, 3, kF}, at::kDouble);
    const at::Tensor out64 = couple_channels(x, y, c);
    const at::Tensor out32 = couple_channels(x.to(at::kFloat), y.to(at::kFloat), c);
    ASSERT_EQ(out32.scalar_type(), at::kFloat);
    EXPECT_LT(max_abs_diff(out32.to(at::kDouble), out64), 1e-5 * out64.abs().max().item<double>());
  });
}

TEST(ChannelCoupling, EmptyInputsGiveZeros) {
  const ChannelCoupling none{3, 2, 2, {}};
  const at::Tensor x = at::randn({kN, 2, kF}, at::kDouble);
  EXPECT_EQ(couple_channels(x, x, none).abs().sum().item<double>(), 0.0);
  const ChannelCoupling c = random_coupling(5, 3, 2, 2);
  const at::Tensor no_atoms = at::zeros({0, 2, kF}, at::kDouble);
  EXPECT_EQ(couple_channels(no_atoms, no_atoms, c).sizes(), (at::IntArrayRef{0, 3, kF}));
}

TEST(ChannelCoupling, RejectsMalformedInput) {
  const at::Tensor x = at::randn({kN, 3, kF}, at::kDouble), y = at::randn({kN, 2, kF}, at::kDouble);
  const ChannelCoupling c{4, 3, 2, {{0, 1, 1, 1.0}}};
  ChannelCoupling outside = c;
  outside.entries.push_back({4, 0, 0, 1.0});  // row 4 of 4
  EXPECT_THROW(couple_channels(x, y, outside), Error);
  outside.entries.back() = {0, 0, 2, 1.0};  // Y row 2 of 2
  EXPECT_THROW(couple_channels(x, y, outside), Error);
  EXPECT_THROW(couple_channels(y, x, c), Error);                            // rows swapped
  EXPECT_THROW(couple_channels(x, y.narrow(0, 0, 2), c), Error);            // atoms differ
  EXPECT_THROW(couple_channels(x, y.narrow(2, 0, 3), c), Error);            // channels differ
  EXPECT_THROW(couple_channels(x, y.to(at::kFloat), c), Error);             // dtypes differ
  EXPECT_THROW(couple_channels(x.select(2, 0), y.select(2, 0), c), Error);  // not 3-d
}

}  // namespace
}  // namespace ddgnn
