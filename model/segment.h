// Gather and scatter-sum over edges as custom autograd functions, each the other's backward, so
// that double backward (forces in the loss) works, and fused edge operations of the same kind.
// The kernels walk the [E, ...] operand in edge order (sequential reads of the large tensor) and
// add into the small [N, ...] rows; a row's edges are summed in increasing edge order.
// LibTorch 1.13's CPU index_select / index_add_ cost ~0.4 ms a call at training sizes, which
// these avoid. On a CUDA device (GPU build) the same autograd functions run CUDA kernels, whose
// segment sums walk each row's edges in the map's CSR order (model/cuda/segment_kernels.cu);
// elsewhere, or with GenericKernels (model/device.h), ATen ops (model/segment_generic.h),
// differentiable to any order through autograd.
// Shapes: N rows (atoms), E rows (edges), trailing dims flattened into F values per row.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace ddgnn {

// An edge -> row map (e.g. edge -> receiver atom, or edge -> sender atom), prepared once per batch.
struct SegmentIndex {
  at::Tensor index;  // [E] int64, the row of every edge
  // [E] int64, edges sorted by row (stable). With the fused kernels undefined when `index` is
  // sorted; always defined where the generic versions run (knowing would read device values),
  // and so on a CUDA device, whose kernels sum each row's edges in this order.
  at::Tensor order;
  at::Tensor ptr;  // [N+1] int64, CSR offsets of each row's edges in sorted order
  int64_t n_rows = 0;
};

// Builds the map from `index` ([E] integers, values in [0, n_rows)) on index's device; checks the
// range when index is on the CPU (on a device an index out of range fails in the first gather).
SegmentIndex make_segment_index(const at::Tensor& index, int64_t n_rows);

// out[e] = y[index[e]]: [N, ...] -> [E, ...]. Differentiable to any order.
at::Tensor gather_rows(const at::Tensor& y, const SegmentIndex& s);

// out[n] = sum of x[e] over edges e with index[e] == n: [E, ...] -> [N, ...]. Differentiable to
// any order.
at::Tensor scatter_sum(const at::Tensor& x, const SegmentIndex& s);

// Fused "gather, multiply by an edge weight, segment-sum" (SchNet's continuous-filter convolution,
// PaiNN's vector messages): out[n, ..., f] = sum over edges e with dst[e] == n of
// y[src[e], ..., f] * w[e, f]. y [N_src, F] or [N_src, K, F]; w [E, F]; out [dst.n_rows, (K,) F].
// No [E, K, F] intermediate. Its backward is itself (roles of src and dst swapped) and
// gather_gather_dot, whose backward is gather_mul_sum again: differentiable to any order.
at::Tensor gather_mul_sum(const at::Tensor& y, const at::Tensor& w, const SegmentIndex& src,
                          const SegmentIndex& dst);

// out[e, f] = sum over k of p[a[e], k, f] * q[b[e], k, f]: p, q [N, F] or [N, K, F] (same shape)
// -> [E, F]. Differentiable to any order (backward: gather_mul_sum).
at::Tensor gather_gather_dot(const at::Tensor& p, const at::Tensor& q, const SegmentIndex& a,
                             const SegmentIndex& b);

// Segment sum of outer products: out[n, k, f] = sum over edges e with dst[e] == n of
// a[e, f] * u[e, k]. a [E, F], u [E, K] -> [dst.n_rows, K, F] (e.g. PaiNN's and EGNN's
// direction-weighted messages) with no [E, K, F] intermediate. Differentiable to any order (its
// backward and their backwards are two "gather and contract" functions of the same family).
at::Tensor outer_sum(const at::Tensor& a, const at::Tensor& u, const SegmentIndex& dst);

// out[e] = y[from[e]] - y[to[e]]: [N, ...] -> [E, ...] (edge vectors without the periodic shift:
// from = senders, to = receivers). Backward: segment sums over `from` minus over `to`; linear, so
// differentiable to any order. No index_add_.
at::Tensor edge_difference(const at::Tensor& y, const SegmentIndex& from, const SegmentIndex& to);

// at::cat(xs, dim) whose backward is one split_with_sizes, so that the derivative of that backward
// (the force loss's, when the concatenation is on the path to the forces) is one concatenation.
// at::cat's backward narrows the gradient once per input, and each narrow's derivative writes a
// zero tensor of the whole output's size. Differentiable to any order.
at::Tensor concat(const std::vector<at::Tensor>& xs, int64_t dim);

}  // namespace ddgnn
