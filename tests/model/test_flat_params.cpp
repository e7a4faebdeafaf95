// model/flat_params: parameters and gradients as views into flat buffers keep the parameters'
// identity and values, take autograd's accumulation in place (float32 and float64, parameters
// that get no gradient included), survive Optimizer::zero_grad, and a second layout is a no-op.
#include <gtest/gtest.h>

#include <torch/types.h>

#include <cmath>
#include <cstdint>

#include <vector>

#include "model/flat_params.h"

namespace ddgnn {
namespace {

// Parameters of several shapes (one of 1 element, one transposed), with a gradient for some.
std::vector<torch::Tensor> some_parameters(torch::Dtype dtype) {
  torch::manual_seed(1);
  std::vector<torch::Tensor> params = {torch::randn({4, 8}, dtype), torch::randn({1}, dtype),
                                       torch::randn({16}, dtype), torch::randn({3, 5}, dtype).t(),
                                       torch::randn({2, 2, 2}, dtype)};
  for (auto& p : params) p.requires_grad_(true);
  params[0].mutable_grad() = torch::full({4, 8}, 2.0, dtype);
  params[3].mutable_grad() = torch::full({5, 3}, 3.0, dtype);
  return params;
}

std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone());
  return out;
}

TEST(FlatParameters, KeepTheTensorsTheirValuesAndGradients) {
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    auto params = some_parameters(dtype);
    const auto values = clones(params);
    std::vector<c10::TensorImpl*> impls;
    for (const auto& p : params) impls.push_back(p.unsafeGetTensorImpl());
    const auto flats = flatten_parameters(params);
    ASSERT_EQ(flats.size(), 1u);
    const FlatParameters& f = flats[0];
    EXPECT_EQ(f.values.numel(), 32 + 1 + 16 + 15 + 8);
    EXPECT_EQ(f.params.size(), params.size());
    for (size_t k = 0; k < params.size(); ++k) {
      EXPECT_EQ(params[k].unsafeGetTensorImpl(), impls[k]);
      EXPECT_TRUE(params[k].requires_grad());
      EXPECT_TRUE(params[k].is_leaf());
      EXPECT_TRUE(torch::equal(params[k], values[k])) << k;
      EXPECT_TRUE(params[k].is_alias_of(f.values)) << k;
      ASSERT_TRUE(params[k].grad().defined()) << k;
      EXPECT_TRUE(params[k].grad().is_alias_of(f.grads)) << k;
      EXPECT_TRUE(params[k].is_contiguous());
    }
    EXPECT_EQ(params[0].grad().sum().item<double>(), 64.0);
    EXPECT_EQ(params[3].grad().sum().item<double>(), 45.0);
    EXPECT_EQ(params[1].grad().abs().sum().item<double>(), 0.0);  // had none: zero
    // Reverse order, those whose size is a multiple of 64 bytes first, starting on 64-byte
    // boundaries.
    std::vector<size_t> expected;
    for (bool whole : {true, false})
      for (size_t k = params.size(); k-- > 0;)
        if ((params[k].numel() * params[k].element_size() % 64 == 0) == whole)
          expected.push_back(k);
    EXPECT_EQ(f.params, expected);
    for (size_t k = 0; k < params.size(); ++k) {
      if (params[k].numel() * params[k].element_size() % 64 == 0) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(params[k].data_ptr()) % 64, 0u) << k;
      }
    }
    // A second call finds the layout and changes nothing.
    const void* value_start = params[2].data_ptr();
    const void* grad_start = params[2].grad().data_ptr();
    const auto again = flatten_parameters(params);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].values.data_ptr(), f.values.data_ptr());
    EXPECT_EQ(again[0].offsets, f.offsets);
    EXPECT_EQ(params[2].data_ptr(), value_start);
    EXPECT_EQ(params[2].grad().data_ptr(), grad_start);
    EXPECT_TRUE(still_flat(f, params));
  }
}

// A backward adds into the gradient buffer in place, for every parameter that gets a gradient,
// and leaves the others' zeros where they are; LibTorch 1.13's Optimizer::zero_grad (detach_ and
// zero_ of each gradient) keeps them there.
TEST(FlatParameters, BackwardAccumulatesIntoTheBufferInPlace) {
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    auto params = some_parameters(dtype);
    const auto f = flatten_parameters(params).at(0);
    std::vector<const void*> starts;
    for (const auto& p : params) starts.push_back(p.grad().data_ptr());
    for (const auto& p : params) {
      p.mutable_grad().detach_();
      p.mutable_grad().zero_();
    }
    EXPECT_TRUE(still_flat(f, params));
    EXPECT_EQ(f.grads.abs().sum().item<double>(), 0.0);
    const auto loss = (params[0] * 2.0).sum() + (params[2] * params[2]).sum() +
                      params[4].sum() * 3.0;  // params[1] and params[3]: no gradient
    loss.backward();
    for (size_t k = 0; k < params.size(); ++k)
      EXPECT_EQ(params[k].grad().data_ptr(), starts[k]) << "gradient " << k << " moved";
    EXPECT_TRUE(still_flat(f, params));
    EXPECT_TRUE(torch::equal(params[0].grad(), torch::full({4, 8}, 2.0, dtype)));
    EXPECT_TRUE(torch::allclose(params[2].grad(), params[2].detach() * 2.0));
    EXPECT_TRUE(torch::equal(params[4].grad(), torch::full({2, 2, 2}, 3.0, dtype)));
    EXPECT_EQ(params[1].grad().abs().sum().item<double>(), 0.0);
    EXPECT_EQ(params[3].grad().abs().sum().item<double>(), 0.0);
    // A second backward adds to the first.
    ((params[0] * 2.0).sum()).backward();
    EXPECT_EQ(params[0].grad().data_ptr(), starts[0]);
    EXPECT_TRUE(torch::equal(params[0].grad(), torch::full({4, 8}, 4.0, dtype)));
    // The flat buffer holds them all: its sum is theirs.
    double sum = 0;
    for (const auto& p : params) sum += p.grad().sum().item<double>();
    EXPECT_NEAR(f.grads.sum().item<double>(), sum, 1e-4 * std::abs(sum));
  }
}

TEST(FlatParameters, CoveredRangeNeedsAnExactTiling) {
  const auto flat = torch::arange(10, torch::kDouble);
  const auto a = alias_of(flat, 0, {2, 2}), b = alias_of(flat, 4, {3}), c = alias_of(flat, 7, {3});
  const auto all = covered_range({c, a, b});  // any order
  ASSERT_TRUE(all.defined());
  EXPECT_EQ(all.numel(), 10);
  EXPECT_TRUE(torch::equal(all, flat));
  EXPECT_FALSE(covered_range({a, c}).defined());                       // a gap
  EXPECT_FALSE(covered_range({a, alias_of(flat, 3, {2})}).defined());  // an overlap
  EXPECT_FALSE(covered_range({a, torch::zeros({3}, torch::kDouble)}).defined());
  EXPECT_FALSE(covered_range({flat.reshape({2, 5}).t()}).defined());  // not contiguous
  EXPECT_FALSE(covered_range({}).defined());
  // An alias is no autograd view: in-place detach_ (Optimizer::zero_grad) accepts it.
  EXPECT_FALSE(a.is_view());
  EXPECT_NO_THROW(a.detach_());
}

}  // namespace
}  // namespace ddgnn
