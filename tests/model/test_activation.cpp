// SiLU's custom autograd function (model/activation.h): its fused float32 kernels against
// float64 ATen.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "../common/cpu_levels.h"
#include "model/activation.h"

namespace ddgnn {
namespace {

// The fused SiLU kernels (value with its sigmoid, the backward, the double backward's products)
// against float64 ATen's silu and its autograd derivatives over the whole float range; a NaN stays
// NaN.
TEST(Activation, Float32SiluKernelsMatchFloat64) {
  testing::for_each_cpu_level([&] {
    at::manual_seed(5);
    const at::Tensor x64 = at::cat(
        {at::linspace(-120.0, 120.0, 240001, at::kDouble), at::randn({1000}, at::kDouble) * 3.0,
         at::tensor({0.0, -0.0, 1e-30, -1e-30, 88.0, -88.0, 1e6, -1e6}, at::kDouble)});
    const at::Tensor x32 = x64.to(at::kFloat);
    const at::Tensor w64 = at::randn({x64.numel()}, at::kDouble);
    const auto derivatives = [&](const at::Tensor& x_in, const at::Tensor& w_in, bool fused) {
      at::Tensor x = x_in.clone().requires_grad_(true), w = w_in.clone().requires_grad_(true);
      const at::Tensor y = fused ? apply_activation("silu", x) : at::silu(x);
      const at::Tensor g = torch::autograd::grad({(y * w).sum()}, {x}, {}, true, true)[0];
      const auto h = torch::autograd::grad({(g * g).sum()}, {x, w});
      return std::vector<at::Tensor>{y.detach().to(at::kDouble), g.detach().to(at::kDouble),
                                     h[0].to(at::kDouble), h[1].to(at::kDouble)};
    };
    const auto got = derivatives(x32, w64.to(at::kFloat), true);
    const auto aten32 = derivatives(x32, w64.to(at::kFloat), false);
    const auto ref = derivatives(x32.to(at::kDouble), w64.to(at::kFloat).to(at::kDouble), false);
    // Relative, with a floor a millionth of the largest value (where the derivatives underflow),
    // and within 3x of what ATen's own float32 silu is off by (near SiLU's minimum at x = -1.28 its
    // derivative is a difference of rounded terms in float32 whoever computes it).
    const char* what[] = {"value", "first derivative", "second derivative (x)",
                          "second derivative (w)"};
    for (size_t k = 0; k < 4; ++k) {
      const double floor = 1e-6 * ref[k].abs().max().item<double>();
      const auto rel = [&](const at::Tensor& a) {
        return (a - ref[k]).abs() / (ref[k].abs() + floor);
      };
      const double fused = rel(got[k]).max().item<double>(),
                   aten = rel(aten32[k]).max().item<double>();
      EXPECT_LE(fused, std::max(2e-5, 3.0 * aten)) << what[k] << " (ATen float32: " << aten << ")";
      EXPECT_TRUE(at::isfinite(got[k]).all().item<bool>()) << what[k];
    }
    const at::Tensor nan = at::tensor({1.0f, std::nanf(""), -3.0f}, at::kFloat);
    const at::Tensor y = apply_activation("silu", nan);
    EXPECT_TRUE(at::isnan(y[1]).item<bool>());
    EXPECT_FALSE(at::isnan(y[0]).item<bool>());
  });
}

}  // namespace
}  // namespace ddgnn
