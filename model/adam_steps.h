// The two ways model/optim_fused.cpp steps Adam and AdamW outside the flat device step: one loop
// over a buffer's elements on the CPU (adam_elements), and ATen's multi-tensor operations for the
// parameters of one group, step count, device and dtype outside a flat layout (AdamBatch), both in
// the order of operations of torch's (1.13) Adam and AdamW.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

namespace ddgnn {

// One Adam step over n elements, in the order of operations of torch's (1.13) Adam and AdamW:
//   AdamW: p *= 1 - lr wd;  Adam: g += wd p;
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g²;
//   p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
template <typename T>
void adam_elements(T* p, const T* g, T* m, T* v, int64_t n, double lr, double wd, bool decoupled,
                   double beta1, double beta2, double eps, int64_t step) {
  const T bc1 = T(1.0 - std::pow(beta1, double(step)));
  const T sqrt_bc2 = T(std::sqrt(1.0 - std::pow(beta2, double(step))));
  const T step_size = T(lr) / bc1, decay = T(1.0 - lr * wd), l2 = T(decoupled ? 0.0 : wd);
  const T b1 = T(beta1), b2 = T(beta2), c1 = T(1.0 - beta1), c2 = T(1.0 - beta2), e = T(eps);
  for (int64_t i = 0; i < n; ++i) {
    T w = p[i];
    if (decoupled) w *= decay;
    const T gi = g[i] + l2 * w;
    const T mi = b1 * m[i] + c1 * gi;
    const T vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = w - step_size * mi / (std::sqrt(vi) / sqrt_bc2 + e);
  }
}

inline void adam_elements(const at::Tensor& p, const at::Tensor& g, const at::Tensor& m,
                          const at::Tensor& v, double lr, double wd, bool decoupled, double beta1,
                          double beta2, double eps, int64_t step) {
  if (p.scalar_type() == at::kFloat)
    adam_elements(p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(),
                  v.data_ptr<float>(), p.numel(), lr, wd, decoupled, beta1, beta2, eps, step);
  else
    adam_elements(p.data_ptr<double>(), g.data_ptr<double>(), m.data_ptr<double>(),
                  v.data_ptr<double>(), p.numel(), lr, wd, decoupled, beta1, beta2, eps, step);
}

// The parameters of one group, step count, device and dtype outside a flat layout, stepped
// together by ATen's multi-tensor operations with the rate and bias corrections as host scalars,
// in the order of operations of torch's (1.13) Adam and AdamW (as adam_elements).
template <typename Options>
struct AdamBatch {
  const Options* options;
  int64_t step;
  c10::Device device;
  c10::ScalarType dtype;
  std::vector<at::Tensor> p, g, m, v;

  void add(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
           const at::Tensor& exp_avg_sq) {
    p.push_back(param);
    g.push_back(grad);
    m.push_back(exp_avg);
    v.push_back(exp_avg_sq);
  }

  void run(bool decoupled, double lr) {
    const Options& o = *options;
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    const double wd = o.weight_decay();
    const double bc1 = 1.0 - std::pow(beta1, double(step));
    const double bc2 = 1.0 - std::pow(beta2, double(step));
    using S = c10::Scalar;
    std::vector<at::Tensor> grads = g;
    if (wd != 0.0) {
      if (decoupled)
        at::_foreach_mul_(p, S(1.0 - lr * wd));
      else
        grads = at::_foreach_add(g, p, S(wd));
    }
    at::_foreach_mul_(m, S(beta1));
    at::_foreach_add_(m, grads, S(1.0 - beta1));
    at::_foreach_mul_(v, S(beta2));
    at::_foreach_addcmul_(v, grads, grads, S(1.0 - beta2));
    std::vector<at::Tensor> denom = at::_foreach_sqrt(v);
    at::_foreach_div_(denom, S(std::sqrt(bc2)));
    at::_foreach_add_(denom, S(o.eps()));
    at::_foreach_addcdiv_(p, m, denom, S(-lr / bc1));
  }
};

// The batch of `options`, `step` and `param`'s device and dtype in `batches`, made when absent.
template <typename Options>
AdamBatch<Options>& batch_for(std::vector<AdamBatch<Options>>& batches, const Options& options,
                              int64_t step, const at::Tensor& param) {
  for (auto& b : batches)
    if (b.options == &options && b.step == step && b.device == param.device() &&
        b.dtype == param.scalar_type())
      return b;
  batches.push_back({&options, step, param.device(), param.scalar_type(), {}, {}, {}, {}});
  return batches.back();
}

}  // namespace ddgnn
