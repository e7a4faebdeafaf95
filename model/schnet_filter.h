// SchNet's continuous filter as one autograd function with hand-written first and second
// derivatives: W = (ssp(G(d) A1^T + b1) A2^T + b2) * cutoff(d), from edge lengths d to the
// [E, nf] filter of every edge. As a chain of ATen ops the filter, its derivative (the force
// pass) and that derivative's derivative (the force loss's backward) cost ~60 small ops per
// layer; fused, each is a few matmuls (BLAS) and single passes over [E, nf].
// Derivatives beyond the second (and weight gradients taken with create_graph) fall back to
// schnet_filter_reference, differentiable to any order. On a CUDA device (GPU build) the same
// functions run with CUDA kernels for their single passes; elsewhere the reference is the whole
// function.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>

#include "model/spec.h"

namespace ddgnn {

// The radial expansion and cutoff of the filter: G[e, k] = exp(max(coeff (d_e - mu_k)^2, -80)),
// cutoff(d) the envelope at d / cutoff (cosine 0.5 (cos(pi d / cutoff) + 1) by default).
struct FilterBasis {
  at::Tensor mu;        // [ng] centres, Å
  double coeff = 0.0;   // < 0, 1/Å²
  double cutoff = 0.0;  // Å
  // Optional: cutoff(d) and its first two derivatives, [E] values (EdgeGeometry::cutoff_values(),
  // shared by the layers); computed from d when undefined.
  std::array<at::Tensor, 3> cutoff_values;
  // Optional: the envelope itself, [E] and differentiable (EdgeGeometry::envelope(), memoised
  // and shared by the layers; a smoothly capped batch's, whose radius depends on other edges, is
  // one); when defined it replaces cutoff(d) and the filter runs as schnet_filter_reference.
  at::Tensor envelope_tensor;
  Envelope envelope;  // the shape of cutoff(d) (model/spec.h)
  // Optional: G(d) [E, ng], differentiable (EdgeGeometry::gaussians(), memoised); when defined
  // schnet_filter_reference reads it instead of computing the Gaussians of d again.
  at::Tensor gaussians;
};

// d [E] (differentiable), gauss [E, ng] = G(d) already computed (a value: d carries the
// dependence), A1 [nf, ng], b1 [nf], A2 [nf, nf], b2 [nf] -> W [E, nf]. float32 or float64.
// Where fused_kernels(d) and cuda_kernels(d) are false (model/device.h) it is
// schnet_filter_reference, and `gauss` and basis.cutoff_values are not read (may be undefined).
at::Tensor schnet_filter(const at::Tensor& d, const at::Tensor& gauss, const FilterBasis& basis,
                         const at::Tensor& a1, const at::Tensor& b1, const at::Tensor& a2,
                         const at::Tensor& b2);

// The same function from plain differentiable ATen ops (the fallback, and the tests' reference).
at::Tensor schnet_filter_reference(const at::Tensor& d, const FilterBasis& basis,
                                   const at::Tensor& a1, const at::Tensor& b1, const at::Tensor& a2,
                                   const at::Tensor& b2);

}  // namespace ddgnn
