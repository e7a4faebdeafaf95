// Device-agnostic versions of the segment operations of model/segment.h, made of ATen ops
// (index_select, out-of-place index_add, elementwise products and sums) and differentiated by
// autograd to any order. model/segment.cpp calls them where fused_kernels() is false (tensors
// off the CPU, or GenericKernels alive); same contracts and shapes as the public functions.
// No host synchronisation: no .item(), no nonzero, no checks that read index values.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "model/segment.h"

namespace ddgnn::generic {

// index [E] int64 on any device: `order` by a stable sort (always defined, also when `index` is
// sorted: that would take a read of device values to know) and `ptr` by a binary search of every
// row in the sorted index. No range check.
SegmentIndex make_segment_index(const at::Tensor& index, int64_t n_rows);

at::Tensor gather_rows(const at::Tensor& y, const SegmentIndex& s);
at::Tensor scatter_sum(const at::Tensor& x, const SegmentIndex& s);
at::Tensor gather_mul_sum(const at::Tensor& y, const at::Tensor& w, const SegmentIndex& src,
                          const SegmentIndex& dst);
at::Tensor gather_gather_dot(const at::Tensor& p, const at::Tensor& q, const SegmentIndex& a,
                             const SegmentIndex& b);
at::Tensor outer_sum(const at::Tensor& a, const at::Tensor& u, const SegmentIndex& dst);
at::Tensor edge_difference(const at::Tensor& y, const SegmentIndex& from, const SegmentIndex& to);

}  // namespace ddgnn::generic
