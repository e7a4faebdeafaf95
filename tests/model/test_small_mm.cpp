// The small-operand matrix products (model/small_mm.h) against ATen's: values over shapes that
// cover whole and partial column vectors, row blocks and their tails, strided inputs; first and
// second derivatives against ATen's autograd (GenericKernels) and finite differences; which path
// runs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "../common/aten_calls.h"
#include "../common/cpu_levels.h"
#include "model/device.h"
#include "model/small_mm.h"

namespace ddgnn {
namespace {

double tolerance(at::ScalarType type, int64_t k) {
  return (type == at::kFloat ? 2e-6 : 1e-14) * double(std::max<int64_t>(k, 1));
}

// Columns: one vector, one vector and a tail, whole vectors, past one vector, one whole tile (64
// float32 or 32 float64 values: four vectors), a tile and a tail, whole tiles, the most kept
// (eight tiles).
std::vector<int64_t> column_counts(at::ScalarType type) {
  if (type == at::kFloat) return {1, 7, 16, 32, 33, 50, 64, 65, 100, 128, 320, 512};
  return {1, 5, 8, 17, 32, 33, 70, 256};
}

TEST(SmallMm, ProductsEqualAtenOverShapesAndStrides) {
  testing::for_each_cpu_level([&] {
    torch::manual_seed(1);
    for (const auto type : {at::kFloat, at::kDouble})
      for (const int64_t n : column_counts(type))
        for (const int64_t k : {1, 5, 32, 41})
          for (const int64_t m : {1, 3, 4, 7, 517}) {
            const std::string where = std::string(c10::toString(type)) + " m=" + std::to_string(m) +
                                      " k=" + std::to_string(k) + " n=" + std::to_string(n);
            // x with rows padded (a row stride above k), a and bias as views of larger tensors.
            const at::Tensor x = at::randn({m, k + 3}, type).narrow(1, 1, k);
            const at::Tensor a = at::randn({n, k + 2}, type).narrow(1, 0, k).t();  // [k, n] strided
            const at::Tensor bias = at::randn({2 * n}, type).narrow(0, n, n);
            const double tol = tolerance(type, k);
            EXPECT_TRUE(at::allclose(small_mm(x, a), at::mm(x, a), tol, tol)) << where;
            EXPECT_TRUE(at::allclose(small_mm(x, a, bias), at::addmm(bias, x, a), tol, tol))
                << where;
            // x^T g with g's rows padded too: the whole-vector reads must stay inside g.
            const at::Tensor g = at::randn({m, n + 5}, type).narrow(1, 2, n);
            EXPECT_TRUE(at::allclose(small_tn(x, g), at::mm(x.t(), g), tol * m, tol * m)) << where;
            const at::Tensor gc = g.contiguous();
            EXPECT_TRUE(at::allclose(small_tn(x, gc), at::mm(x.t(), gc), tol * m, tol * m))
                << where;
          }
  });
}

TEST(SmallMm, EmptyOperands) {
  const at::Tensor a = at::randn({4, 8}), bias = at::randn({8});
  EXPECT_EQ(small_mm(at::zeros({0, 4}), a, bias).sizes(), at::IntArrayRef({0, 8}));
  const at::Tensor z = small_tn(at::zeros({0, 4}), at::zeros({0, 8}));
  EXPECT_EQ(z.sizes(), at::IntArrayRef({4, 8}));
  EXPECT_EQ(z.abs().sum().item<float>(), 0.0f);
  // No inner dimension: the bias alone.
  EXPECT_TRUE(at::equal(small_mm(at::zeros({3, 0}), at::zeros({0, 8}), bias), bias.expand({3, 8})));
}

TEST(SmallMm, LinearEqualsTorchLinearOnBatchedInputs) {
  torch::manual_seed(2);
  const at::Tensor x = at::randn({5, 6, 32}), w = at::randn({24, 32}), b = at::randn({24});
  EXPECT_TRUE(at::allclose(small_linear(x, w, b), at::linear(x, w, b), 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(small_linear(x, w), at::linear(x, w), 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(small_linear(x[0][0], w, b), at::linear(x[0][0], w, b), 1e-5, 1e-5));
}

// The kernels run where they fit (no aten::mm, addmm or linear in the forward or in the first
// and second derivatives) and ATen's product where they do not.
TEST(SmallMm, FusedPathCallsNoAtenProductAndWideOperandsFallBack) {
  torch::manual_seed(3);
  const at::Tensor x = torch::randn({100, 32}, torch::requires_grad());
  const at::Tensor w = torch::randn({32, 32}, torch::requires_grad()),
                   b = torch::randn({32}, torch::requires_grad());
  const auto products = [](const std::vector<std::string>& ops) {
    return testing::called(ops, "aten::mm") || testing::called(ops, "aten::addmm") ||
           testing::called(ops, "aten::linear") || testing::called(ops, "aten::matmul");
  };
  const auto ops = testing::aten_calls([&] {
    const at::Tensor y = small_linear(x, w, b);
    const auto g = torch::autograd::grad({y.pow(2).sum()}, {x, w}, {}, true, true);
    (g[0].pow(2).sum() + g[1].pow(2).sum()).backward();
  });
  EXPECT_FALSE(products(ops));
  const at::Tensor wide = at::randn({513, 32});  // 513 float32 columns: past the kernels
  EXPECT_TRUE(products(testing::aten_calls([&] { small_linear(x, wide); })));
  EXPECT_TRUE(at::allclose(small_linear(x, wide), at::linear(x, wide), 1e-5, 1e-5));
  {
    GenericKernels generic;
    EXPECT_TRUE(products(testing::aten_calls([&] { small_linear(x, w, b); })));
  }
}

// f(x, a, b) = sum(r * small_mm(x, a, b)) and the squares of its first derivatives, whose
// gradients are the second derivatives (the force loss's path), fused and by ATen's autograd.
std::vector<at::Tensor> derivatives(const at::Tensor& x0, const at::Tensor& a0,
                                    const at::Tensor& b0, const at::Tensor& r) {
  const at::Tensor x = x0.clone().requires_grad_(), a = a0.clone().requires_grad_(),
                   b = b0.clone().requires_grad_();
  const at::Tensor y = small_mm(x, a, b);
  const auto first =
      torch::autograd::grad({(y * r).sum() + y.pow(3).sum()}, {x, a, b}, {}, true, true);
  const at::Tensor t = small_tn(x, y);  // the weight-gradient op on its own, too
  const at::Tensor s =
      first[0].pow(2).sum() + first[1].pow(2).sum() + first[2].pow(2).sum() + (t * t).sum();
  const auto second = torch::autograd::grad({s}, {x, a, b});
  return {y, first[0], first[1], first[2], t, second[0], second[1], second[2]};
}

TEST(SmallMm, FirstAndSecondDerivativesEqualAtenAutograd) {
  torch::manual_seed(4);
  for (const int64_t n : {5, 32, 37, 100}) {  // one tile, one whole, two, four (a partial last)
    const at::Tensor x = at::randn({23, 19}, at::kDouble), a = at::randn({19, n}, at::kDouble);
    const at::Tensor b = at::randn({n}, at::kDouble), r = at::randn({23, n}, at::kDouble);
    const auto fused = derivatives(x, a, b, r);
    std::vector<at::Tensor> plain;
    {
      GenericKernels generic;
      plain = derivatives(x, a, b, r);
    }
    for (size_t i = 0; i < fused.size(); ++i)
      EXPECT_TRUE(at::allclose(fused[i], plain[i], 1e-11, 1e-11))
          << "n=" << n << " output " << i << " max diff "
          << (fused[i] - plain[i]).abs().max().item<double>();
  }
}

TEST(SmallMm, SecondDerivativeMatchesFiniteDifferencesOfTheFirst) {
  torch::manual_seed(5);
  const at::Tensor x0 = at::randn({9, 6}, at::kDouble), a = at::randn({6, 7}, at::kDouble);
  const at::Tensor r = at::randn({9, 7}, at::kDouble);
  // h(x) = |d/da sum(tanh(x a) r)|^2: its gradient in x goes through small_tn's backward.
  const auto h = [&](const at::Tensor& x, bool graph) {
    const at::Tensor av = a.clone().requires_grad_();
    const at::Tensor y = at::tanh(small_mm(x, av));
    const at::Tensor ga = torch::autograd::grad({(y * r).sum()}, {av}, {}, graph, graph)[0];
    return ga.pow(2).sum();
  };
  const at::Tensor x = x0.clone().requires_grad_();
  const at::Tensor analytic = torch::autograd::grad({h(x, true)}, {x})[0];
  const double eps = 1e-6;
  for (int64_t i = 0; i < 9; i += 4)
    for (int64_t j = 0; j < 6; j += 2) {
      at::Tensor up = x0.clone(), down = x0.clone();
      up[i][j] += eps;
      down[i][j] -= eps;
      const double fd = (h(up, false).item<double>() - h(down, false).item<double>()) / (2 * eps);
      EXPECT_NEAR(analytic[i][j].item<double>(), fd, 1e-6 * std::max(1.0, std::abs(fd)))
          << i << "," << j;
    }
}

}  // namespace
}  // namespace ddgnn
