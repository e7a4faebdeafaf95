// Activation functions chosen by config name (HydraGNN's `activation_function` values): relu, selu,
// prelu, elu, lrelu_01, lrelu_025, lrelu_05, silu, gelu, tanh, sigmoid, softplus, and ssp (shifted
// softplus log(0.5 e^x + 0.5), SchNet's). Stateless, elementwise, differentiable to any order.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace ddgnn {

// x [any shape] -> same shape and dtype. prelu uses the fixed slope 0.25 (PyTorch's initial
// value; not learned). An unknown name is a ConfigError listing the known ones.
at::Tensor apply_activation(const std::string& name, const at::Tensor& x);

// softplus(x) = log(1 + e^x) (PyTorch's, threshold 20) as a custom autograd function whose
// backward is sigmoid(x) * g and whose double backward is a few elementwise ops (LibTorch's own
// softplus double backward is several times slower). x [any shape] -> same shape.
at::Tensor softplus(const at::Tensor& x);

// SiLU, x sigmoid(x), on the CPU as a custom autograd function whose backward and double
// backward are one fused pass each in float32 (LibTorch's silu double backward is a dozen
// elementwise ops); elsewhere, and under GenericKernels (model/device.h), ATen's silu.
at::Tensor silu(const at::Tensor& x);

// Throws ConfigError (listing the known names) when `name` is not a known activation.
void check_activation(const std::string& name);

// Known names, sorted.
std::vector<std::string> known_activations();

}  // namespace ddgnn
