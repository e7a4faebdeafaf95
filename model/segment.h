// Gather and scatter-sum over edges as custom autograd functions, each the other's backward, so
// that double backward (forces in the loss) works. Edges sorted by receiver make scatter a
// contiguous segment sum; LibTorch 1.13's CPU index_add_ (index_select's backward) costs
// ~0.4 ms a call at training sizes, which these avoid.
// Shapes: N rows (atoms), E rows (edges), trailing dims flattened into F values per row.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace ddgnn {

// An edge -> row map (e.g. edge -> receiver atom, or edge -> sender atom), prepared once per batch.
struct SegmentIndex {
  at::Tensor index;  // [E] int64, the row of every edge
  at::Tensor order;  // [E] int64, edges sorted by row (stable); undefined when `index` is sorted
  at::Tensor ptr;    // [N+1] int64, CSR offsets of each row's edges in sorted order
  int64_t n_rows = 0;
};

// Builds the map from `index` ([E] int64, values in [0, n_rows)); checks the range.
SegmentIndex make_segment_index(const at::Tensor& index, int64_t n_rows);

// out[e] = y[index[e]]: [N, ...] -> [E, ...]. Differentiable to any order.
at::Tensor gather_rows(const at::Tensor& y, const SegmentIndex& s);

// out[n] = sum of x[e] over edges e with index[e] == n: [E, ...] -> [N, ...]. Differentiable to
// any order.
at::Tensor scatter_sum(const at::Tensor& x, const SegmentIndex& s);

}  // namespace ddgnn
