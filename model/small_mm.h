// Matrix products whose right operand is small: x [M, K] times a [K, N] with K at most 1,024
// rows and N at most 512 float32 or 256 float64 columns, M large: the edge and atom MLPs of the
// layers (F = 32 or 64 channels over thousands of edges) and their wider maps (MACE's path
// weights, DimeNet's output block). OpenBLAS packs both operands of every such product and runs
// at a third of the core's rate; these CPU kernels keep a tile of 64 bytes x 4 of the small
// operand's columns in registers and stream the rows of x through every tile in turn
// (model/small_mm.cpp), in 64-byte vectors on AVX-512 and in smaller blocks of 32-byte ones on
// AVX2 (16 registers), picked at start; an x86 CPU with neither takes ATen's products. The two ops
// below form a family closed under differentiation, so every order of derivative stays in it. Off
// the CPU, under GenericKernels (model/device.h), for other dtypes or larger operands: ATen's
// products, the same values up to rounding.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace torch::nn {
class LinearImpl;
}

namespace ddgnn {

// x [M, K] @ a [K, N] (+ bias [N] when defined) -> [M, N]. Derivatives: x: small_mm(g, a^T);
// a: small_tn(x, g); bias: g summed over rows.
at::Tensor small_mm(const at::Tensor& x, const at::Tensor& a, const at::Tensor& bias = {});

// x^T g: x [M, K], g [M, N] -> [K, N]. Derivatives: x: small_mm(g, d^T); g: small_mm(x, d).
at::Tensor small_tn(const at::Tensor& x, const at::Tensor& g);

// Which kernels the products run on this CPU, in words ("AVX2 (32-byte vectors)", ...).
std::string small_mm_kernels();

// torch's linear through small_mm: x [..., in] @ weight^T (weight [out, in]) + bias [out] (when
// defined) -> [..., out].
at::Tensor small_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

// A torch::nn::Linear module's map through small_linear: dense(*module, x).
at::Tensor dense(const torch::nn::LinearImpl& module, const at::Tensor& x);

}  // namespace ddgnn
