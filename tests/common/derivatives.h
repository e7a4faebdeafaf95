// Value, first and second derivatives of an op (the force loss's backward) on any device, and
// the comparison of an op as it runs (fused CPU kernels, or CUDA kernels in the GPU build) with
// its generic ATen version (GenericKernels, model/device.h): model/ and gpu/ tests.
#pragma once

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "model/device.h"

namespace ddgnn::testing {

inline double max_abs(const at::Tensor& t) {
  return t.numel() == 0 ? 0.0 : t.abs().max().item<double>();
}

// |a - b| at most tol times the larger magnitude of the two (both all zero: equal).
inline void expect_rel(const at::Tensor& a, const at::Tensor& b, double tol,
                       const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  ASSERT_EQ(a.scalar_type(), b.scalar_type()) << what;
  const double err = max_abs(a.to(at::kDouble) - b.to(at::kDouble));
  const double scale = std::max(max_abs(a), max_abs(b));
  EXPECT_LE(err, tol * scale) << what << ": max |difference| " << err << ", max |value| " << scale;
}

// Name of the autograd node that made t ("" for none).
inline std::string node_name(const at::Tensor& t) {
  return t.grad_fn() ? t.grad_fn()->name() : "";
}

using Fn = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

// Value, first and second derivatives of out = f(inputs), flattened: [out, g..., h...].
// g = d<R, out>/d inputs[first] with a random cotangent R, with a graph; h = the gradient of
// sum_k <S_k, g_k> + |g_k|^2 / 2 (S_k random) with respect to every input and R. The random
// tensors are seeded: the same in every call. Undefined gradients read as zeros.
inline std::vector<at::Tensor> derivatives(const Fn& f, const std::vector<at::Tensor>& given,
                                           const std::vector<size_t>& first) {
  std::vector<at::Tensor> in;
  for (const auto& t : given) in.push_back(t.detach().clone().requires_grad_(true));
  const at::Tensor out = f(in);
  at::manual_seed(7);
  const at::Tensor r = at::randn_like(out).requires_grad_(true);
  std::vector<at::Tensor> wrt;
  for (size_t i : first) wrt.push_back(in[i]);
  const auto g = torch::autograd::grad({out}, wrt, {r}, /*retain_graph=*/true,
                                       /*create_graph=*/true, /*allow_unused=*/true);
  at::Tensor second = at::zeros({}, out.options());
  for (const auto& gk : g)
    if (gk.defined()) second = second + (gk * at::randn_like(gk)).sum() + 0.5 * (gk * gk).sum();
  std::vector<at::Tensor> all = in;
  all.push_back(r);
  std::vector<at::Tensor> h(all.size());
  if (second.requires_grad())
    h = torch::autograd::grad({second}, all, {}, /*retain_graph=*/false, /*create_graph=*/false,
                              /*allow_unused=*/true);
  std::vector<at::Tensor> result = {out.detach()};
  for (size_t k = 0; k < g.size(); ++k)
    result.push_back(g[k].defined() ? g[k].detach() : at::zeros_like(wrt[k]));
  for (size_t k = 0; k < h.size(); ++k)
    result.push_back(h[k].defined() ? h[k] : at::zeros_like(all[k]).detach());
  return result;
}

// Runs sin(op) as it runs ("fused": the fused CPU kernels, or the CUDA kernels on a CUDA device)
// and generic (the sine: second derivatives with every kind of term) and compares value, first
// and second derivatives. The fused op must end in a custom autograd function (a CppNode) and the
// generic one must not (it is ATen ops), unless `custom` is false (ops that are the same custom
// function of ATen ops on both paths for this dtype).
inline void compare_op(const std::string& name, const Fn& op, const std::vector<at::Tensor>& inputs,
                       const std::vector<size_t>& first, double tol = 1e-10, bool custom = true) {
  SCOPED_TRACE(name);
  const Fn f = [&](const std::vector<at::Tensor>& in) { return at::sin(op(in)); };
  std::vector<at::Tensor> probe;
  for (const auto& t : inputs) probe.push_back(t.detach().clone().requires_grad_(true));
  const std::string fused_node = node_name(op(probe));
  std::string generic_node;
  std::vector<at::Tensor> generic;
  {
    GenericKernels force;
    generic_node = node_name(op(probe));
    generic = derivatives(f, inputs, first);
  }
  if (custom) {
    EXPECT_NE(fused_node.find("CppNode"), std::string::npos) << fused_node;
    EXPECT_EQ(generic_node.find("CppNode"), std::string::npos) << generic_node;
  }
  const std::vector<at::Tensor> fused = derivatives(f, inputs, first);
  ASSERT_EQ(fused.size(), generic.size());
  // Not a vacuous comparison: the op and its derivative are not zero.
  EXPECT_GT(max_abs(fused[0]), 0.0);
  EXPECT_GT(max_abs(fused[1]), 0.0);
  for (size_t k = 0; k < fused.size(); ++k) {
    std::string what = "value";
    if (k >= 1 && k <= first.size()) what = "first derivative " + std::to_string(k - 1);
    if (k > first.size()) what = "second derivative " + std::to_string(k - 1 - first.size());
    expect_rel(generic[k], fused[k], tol, what);
  }
}

}  // namespace ddgnn::testing
