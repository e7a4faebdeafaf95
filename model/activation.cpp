// Activation functions by config name: one table from name to an elementwise ATen expression;
// softplus, ssp and silu are custom autograd functions with a cheap double backward (fused
// float32 CPU kernels, ATen ops elsewhere: both differentiable to any order).
#include "model/activation.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <functional>
#include <map>

#include "core/error.h"
#include "core/text.h"
#include "model/device.h"
#include "model/kernels.h"

namespace ddgnn {

namespace {

// The fused float32 CPU kernels apply (model/kernels.h); other dtypes, other devices and
// GenericKernels (model/device.h) use the same formulas as ATen ops.
bool fast_float(const at::Tensor& t) {
  return fused_kernels(t) && t.scalar_type() == at::kFloat;
}

using Fn = std::function<at::Tensor(const at::Tensor&)>;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The backward of g * d(x), d the derivative of an activation with sigmoid s = sigmoid(x) saved by
// its forward (inputs x, g, s; s is not differentiated through). Without create_graph, and with
// float32 CPU operands of one shape, the fused kernel `fused` (gg, g, x, s -> d/dx, d/dg; either
// output may be null); otherwise `aten(x, g, gg, s, need_x, need_g)` with s recomputed from x
// under create_graph, so that this backward is differentiable too (any order).
using FusedDerivativeBackward = void (*)(const float*, const float*, const float*, const float*,
                                         float*, float*, int64_t);
using AtenDerivativeBackward = variable_list (*)(const at::Tensor& x, const at::Tensor& g,
                                                 const at::Tensor& gg, const at::Tensor& s,
                                                 bool need_x, bool need_g);

variable_list derivative_backward(AutogradContext* ctx, const variable_list& grad,
                                  FusedDerivativeBackward fused, AtenDerivativeBackward aten) {
  const auto saved = ctx->get_saved_variables();
  const at::Tensor &x = saved[0], &g = saved[1], &gg = grad[0];
  const bool need_x = ctx->needs_input_grad(0), need_g = ctx->needs_input_grad(1);
  const at::Tensor s = at::GradMode::is_enabled() ? at::sigmoid(x) : saved[2];
  if (!at::GradMode::is_enabled() && fast_float(gg) && fast_float(g) && fast_float(s) &&
      fast_float(x) && gg.sizes() == x.sizes() && g.sizes() == x.sizes() &&
      s.sizes() == x.sizes()) {
    const at::Tensor ggc = gg.contiguous(), gc = g.contiguous(), sc = s.contiguous(),
                     xc = x.contiguous();
    at::Tensor gx = need_x ? at::empty_like(xc) : at::Tensor();
    at::Tensor gd = need_g ? at::empty_like(xc) : at::Tensor();
    fused(ggc.data_ptr<float>(), gc.data_ptr<float>(), xc.data_ptr<float>(), sc.data_ptr<float>(),
          need_x ? gx.data_ptr<float>() : nullptr, need_g ? gd.data_ptr<float>() : nullptr,
          xc.numel());
    return {gx, gd, at::Tensor()};
  }
  variable_list out = aten(x, g, gg, s, need_x, need_g);
  out.push_back(at::Tensor());
  return out;
}

// An activation's float32 forward by a fused kernel (x, y, s or null, n) that also gives
// sigmoid(x), saved as ctx's "sigmoid" for the backward when x requires grad (a graph that will be
// differentiated; not evaluation under NoGradGuard).
template <typename Kernel>
at::Tensor fused_forward(AutogradContext* ctx, const at::Tensor& x, Kernel kernel) {
  const bool need_sigmoid = x.requires_grad();
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  at::Tensor s = need_sigmoid ? at::empty_like(xc) : at::Tensor();
  kernel(xc.data_ptr<float>(), y.data_ptr<float>(), need_sigmoid ? s.data_ptr<float>() : nullptr,
         xc.numel());
  if (need_sigmoid) ctx->saved_data["sigmoid"] = s;
  return y;
}

// g * sigmoid(x), the derivative of softplus applied to g, as its own function: LibTorch's
// softplus_backward has a slow double backward (a dozen ops, comparisons and where), this one
// costs two products. x, g, s = sigmoid(x) (computed once, by the forward of ShiftedSoftplus, and
// not differentiated through): same shape.
struct SoftplusGrad : public torch::autograd::Function<SoftplusGrad> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& g,
                            const at::Tensor& s) {
    ctx->save_for_backward({x, g, s});
    return s * g;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return derivative_backward(ctx, grad, kernels::softplus_grad_backward,
                               [](const at::Tensor& x, const at::Tensor& g, const at::Tensor& gg,
                                  const at::Tensor& s, bool need_x, bool need_g) -> variable_list {
                                 return {need_x ? at::sigmoid_backward(gg * g, s) : at::Tensor(),
                                         need_g ? gg * s : at::Tensor()};
                               });
  }
};

// softplus(x) - shift with PyTorch's softplus (beta 1, threshold 20); backward SoftplusGrad. The
// sigmoid is computed here, once: the force pass and the loss's backward both use it.
struct ShiftedSoftplus : public torch::autograd::Function<ShiftedSoftplus> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double shift) {
    ctx->save_for_backward({x});
    if (fast_float(x))
      return fused_forward(ctx, x, [&](const float* in, float* y, float* s, int64_t n) {
        kernels::softplus_sigmoid(in, y, s, n, static_cast<float>(shift));
      });
    if (x.requires_grad()) ctx->saved_data["sigmoid"] = at::sigmoid(x);
    at::Tensor y = at::softplus(x);
    return shift != 0.0 ? y.sub_(shift) : y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {SoftplusGrad::apply(ctx->get_saved_variables()[0], grad[0],
                                ctx->saved_data["sigmoid"].toTensor()),
            at::Tensor()};
  }
};

// g * d(x), d = s (1 + x (1 - s)) the derivative of SiLU, with s = sigmoid(x) from SiLU's forward
// (not differentiated through): its backward is two products (LibTorch's silu_backward has a
// double backward of a dozen ops).
struct SiluGrad : public torch::autograd::Function<SiluGrad> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& g,
                            const at::Tensor& s) {
    ctx->save_for_backward({x, g, s});
    if (fast_float(x) && fast_float(g) && fast_float(s) && g.sizes() == x.sizes() &&
        s.sizes() == x.sizes()) {
      const at::Tensor xc = x.contiguous(), gc = g.contiguous(), sc = s.contiguous();
      at::Tensor out = at::empty_like(xc);
      kernels::silu_grad(gc.data_ptr<float>(), xc.data_ptr<float>(), sc.data_ptr<float>(),
                         out.data_ptr<float>(), xc.numel());
      return out;
    }
    return g * (s * (1.0 + x * (1.0 - s)));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return derivative_backward(
        ctx, grad, kernels::silu_grad_backward,
        [](const at::Tensor& x, const at::Tensor& g, const at::Tensor& gg, const at::Tensor& s,
           bool need_x, bool need_g) -> variable_list {
          const at::Tensor ss = s * (1.0 - s);
          return {need_x ? gg * g * (ss * (2.0 + x * (1.0 - 2.0 * s))) : at::Tensor(),
                  need_g ? gg * (s * (1.0 + x * (1.0 - s))) : at::Tensor()};
        });
  }
};

// SiLU, x sigmoid(x); backward SiluGrad. The sigmoid is computed here, once, for the forces'
// backward and the loss's.
struct Silu : public torch::autograd::Function<Silu> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    if (fast_float(x)) return fused_forward(ctx, x, kernels::silu_sigmoid);
    const at::Tensor s = at::sigmoid(x);
    if (x.requires_grad()) ctx->saved_data["sigmoid"] = s;
    return x * s;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {SiluGrad::apply(ctx->get_saved_variables()[0], grad[0],
                            ctx->saved_data["sigmoid"].toTensor())};
  }
};

const std::map<std::string, Fn>& table() {
  static const std::map<std::string, Fn> t = {
      {"relu", [](const at::Tensor& x) { return at::relu(x); }},
      {"selu", [](const at::Tensor& x) { return at::selu(x); }},
      {"prelu", [](const at::Tensor& x) { return at::leaky_relu(x, /*negative_slope=*/0.25); }},
      {"elu", [](const at::Tensor& x) { return at::elu(x); }},
      {"lrelu_01", [](const at::Tensor& x) { return at::leaky_relu(x, /*negative_slope=*/0.01); }},
      {"lrelu_025", [](const at::Tensor& x) { return at::leaky_relu(x, /*negative_slope=*/0.25); }},
      {"lrelu_05", [](const at::Tensor& x) { return at::leaky_relu(x, /*negative_slope=*/0.5); }},
      {"silu", [](const at::Tensor& x) { return ddgnn::silu(x); }},
      {"gelu", [](const at::Tensor& x) { return at::gelu(x); }},
      {"tanh", [](const at::Tensor& x) { return at::tanh(x); }},
      {"sigmoid", [](const at::Tensor& x) { return at::sigmoid(x); }},
      {"softplus", [](const at::Tensor& x) { return ddgnn::softplus(x); }},
      {"ssp", [](const at::Tensor& x) { return ShiftedSoftplus::apply(x, std::log(2.0)); }},
  };
  return t;
}

}  // namespace

at::Tensor softplus(const at::Tensor& x) {
  return ShiftedSoftplus::apply(x, 0.0);
}

at::Tensor silu(const at::Tensor& x) {
  // The generic path (other devices, GenericKernels) is ATen's own SiLU.
  return fused_kernels(x) ? Silu::apply(x) : at::silu(x);
}

std::vector<std::string> known_activations() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : table()) names.push_back(name);
  return names;
}

void check_activation(const std::string& name) {
  if (table().count(name)) return;
  throw ConfigError("unknown activation function '" + name + "'",
                    "known activations: " + join_names(known_activations()));
}

at::Tensor apply_activation(const std::string& name, const at::Tensor& x) {
  auto it = table().find(name);
  if (it == table().end()) check_activation(name);
  return it->second(x);
}

}  // namespace ddgnn
