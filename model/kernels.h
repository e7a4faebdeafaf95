// Elementwise float32 kernels that LibTorch 1.13 runs slowly on CPU: softplus and SiLU with their
// sigmoid in one pass (ATen's softplus alone costs ~3 ns an element here), and the products of
// their derivatives. Raw pointers, no torch; each kernel is compiled for AVX-512, AVX2 and baseline
// x86-64 and picked at load time (GCC target_clones), so one binary runs anywhere.
#pragma once

#include <cstdint>

// A hot loop compiled for AVX-512, AVX2 and baseline x86-64, the CPU's best picked at load time
// (GCC target_clones; the build itself targets plain x86-64), with the vectoriser's full cost
// model (which -O2 alone does not use for if-converted loops). One version elsewhere.
#if defined(__x86_64__) && defined(__GNUC__)
#define DDGNN_VECTOR_KERNEL \
  __attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3")))
#else
#define DDGNN_VECTOR_KERNEL
#endif

namespace ddgnn::kernels {

// y = softplus(x) - shift and s = sigmoid(x), n elements. softplus(x) = max(x, 0) +
// log1p(exp(-|x|)): no overflow, and within 3e-7 relative of the float64 value (PyTorch's
// threshold of 20 only changes results below float32's resolution). s may be null.
void softplus_sigmoid(const float* x, float* y, float* s, int64_t n, float shift);

// The derivatives of g * s with s = sigmoid(x) (softplus's backward applied to g), given the
// upstream gradient gg: gx = gg * g * sigmoid'(x), gg_s = gg * s. sigmoid' is computed from x
// (accurate also where s rounds to 1). Either output may be null.
void softplus_grad_backward(const float* gg, const float* g, const float* x, const float* s,
                            float* gx, float* gg_s, int64_t n);

// SiLU, x sigmoid(x), with sigmoid(x) in one pass: y = x s, s = sigmoid(x) (s may be null).
void silu_sigmoid(const float* x, float* y, float* s, int64_t n);

// SiLU's backward applied to g: out = g * d(x), d(x) = s (1 + x (1 - s)) with s = sigmoid(x).
void silu_grad(const float* g, const float* x, const float* s, float* out, int64_t n);

// The derivatives of g * d(x) given the upstream gradient gg: gx = gg * g * d'(x) with
// d'(x) = s (1 - s) (2 + x (1 - 2 s)), gg_d = gg * d(x). s (1 - s) is computed from x (accurate
// also where s rounds to 1). Either output may be null.
void silu_grad_backward(const float* gg, const float* g, const float* x, const float* s, float* gx,
                        float* gg_d, int64_t n);

// Gaussians out[e, k] = exp(max(coeff (d[e] - mu[k])^2, -80)), e < n_rows, k < n (coeff < 0).
void gaussians(const float* d, const float* mu, float* out, int64_t n_rows, int64_t n, float coeff);

}  // namespace ddgnn::kernels
