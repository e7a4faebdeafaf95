// The segment operations from ATen ops (model/segment_generic.h): a gather is index_select, a
// segment sum is index_add into zeros (out of place, so that autograd differentiates it again),
// the fused operations are these with their products in between ([E, (K,) F] intermediates that
// the CPU kernels avoid). On a GPU index_add sums with atomics: a row's sum has no fixed order.
#include "model/segment_generic.h"

#include <ATen/ATen.h>

#include <tuple>
#include <vector>

namespace ddgnn::generic {

SegmentIndex make_segment_index(const at::Tensor& index, int64_t n_rows) {
  SegmentIndex s;
  s.index = index;
  s.n_rows = n_rows;
  const auto sorted = at::sort(index, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  s.order = std::get<1>(sorted);
  // ptr[n] = the number of edges whose row is below n. (bincount would read the index's maximum
  // back to the host on a GPU.)
  s.ptr = at::searchsorted(std::get<0>(sorted), at::arange(n_rows + 1, index.options()));
  return s;
}

at::Tensor gather_rows(const at::Tensor& y, const SegmentIndex& s) {
  // Flat rows also here: index_select's backward is an index_add (see scatter_sum).
  if (y.dim() > 2) {
    std::vector<int64_t> shape = y.sizes().vec();
    shape[0] = s.index.numel();
    return y.flatten(1).index_select(0, s.index).view(shape);
  }
  return y.index_select(0, s.index);
}

at::Tensor scatter_sum(const at::Tensor& x, const SegmentIndex& s) {
  // Rows in bfloat16 or half (autocast's matrix products) are summed in float32.
  if (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf)
    return generic::scatter_sum(x.to(at::kFloat), s);
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = s.n_rows;
  // Rows of more than one dimension are summed as flat rows: LibTorch's CPU index_add adds
  // those one slice at a time (~40x slower for [E, 3, F] in LibTorch 1.13).
  if (x.dim() > 2) return generic::scatter_sum(x.flatten(1), s).view(shape);
  return at::zeros(shape, x.options()).index_add(0, s.index, x);
}

at::Tensor gather_mul_sum(const at::Tensor& y, const at::Tensor& w, const SegmentIndex& src,
                          const SegmentIndex& dst) {
  // w [E, F] broadcast over y's middle dimensions: [E, 1, ..., 1, F].
  std::vector<int64_t> w_shape(size_t(y.dim()), 1);
  w_shape.front() = w.size(0);
  w_shape.back() = w.size(1);
  return generic::scatter_sum(generic::gather_rows(y, src) * w.reshape(w_shape), dst);
}

at::Tensor gather_gather_dot(const at::Tensor& p, const at::Tensor& q, const SegmentIndex& a,
                             const SegmentIndex& b) {
  const at::Tensor prod = generic::gather_rows(p, a) * generic::gather_rows(q, b);  // [E, (K,) F]
  if (p.dim() == 2) return prod;
  return prod.flatten(1, p.dim() - 2).sum(1);
}

at::Tensor outer_sum(const at::Tensor& a, const at::Tensor& u, const SegmentIndex& dst) {
  // [E, K, F] products summed into [N, K, F].
  return generic::scatter_sum(u.unsqueeze(2) * a.unsqueeze(1), dst);
}

at::Tensor edge_difference(const at::Tensor& y, const SegmentIndex& from, const SegmentIndex& to) {
  return generic::gather_rows(y, from) - generic::gather_rows(y, to);
}

}  // namespace ddgnn::generic
