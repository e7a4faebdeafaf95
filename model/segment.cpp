// Segment sum (CSR over edges sorted by row) and gather as a pair of autograd functions whose
// backward passes call each other.
#include "model/segment.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>

#include "core/error.h"

namespace ddgnn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Plain segment sum of x [E, F] (rows in `order` when defined) into [N, F]; no autograd.
at::Tensor segment_sum_raw(const at::Tensor& x_in, const SegmentIndex& s) {
  const at::Tensor x = x_in.contiguous();
  const int64_t e = x.size(0);
  const int64_t f = e > 0 ? x.numel() / e : (x.dim() > 1 ? x.numel() : 1);
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape[0] = s.n_rows;
  at::Tensor out = at::zeros(out_shape, x.options());
  if (e == 0) return out;
  const int64_t row_f = out.numel() / std::max<int64_t>(s.n_rows, 1);
  const int64_t* ptr = s.ptr.data_ptr<int64_t>();
  const int64_t* order = s.order.defined() ? s.order.data_ptr<int64_t>() : nullptr;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "scatter_sum", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    for (int64_t n = 0; n < s.n_rows; ++n) {
      scalar_t* dst = op + n * row_f;
      for (int64_t k = ptr[n]; k < ptr[n + 1]; ++k) {
        const scalar_t* src = xp + (order ? order[k] : k) * f;
        for (int64_t c = 0; c < f; ++c) dst[c] += src[c];
      }
    }
  });
  return out;
}

at::Tensor gather_raw(const at::Tensor& y, const SegmentIndex& s) {
  return y.index_select(0, s.index);
}

struct ScatterSum;

struct GatherRows : public torch::autograd::Function<GatherRows> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y, const SegmentIndex* s) {
    ctx->saved_data["s"] = reinterpret_cast<int64_t>(s);
    return gather_raw(y, *s);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad);
};

struct ScatterSum : public torch::autograd::Function<ScatterSum> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const SegmentIndex* s) {
    ctx->saved_data["s"] = reinterpret_cast<int64_t>(s);
    return segment_sum_raw(x, *s);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto* s = reinterpret_cast<const SegmentIndex*>(ctx->saved_data["s"].toInt());
    return {GatherRows::apply(grad[0], s), at::Tensor()};
  }
};

variable_list GatherRows::backward(AutogradContext* ctx, variable_list grad) {
  const auto* s = reinterpret_cast<const SegmentIndex*>(ctx->saved_data["s"].toInt());
  return {ScatterSum::apply(grad[0], s), at::Tensor()};
}

}  // namespace

SegmentIndex make_segment_index(const at::Tensor& index_in, int64_t n_rows) {
  const at::Tensor index = index_in.to(at::kLong).contiguous();
  if (index.dim() != 1)
    throw Error("segment index must be 1-D, got " + std::to_string(index.dim()) + " dimensions");
  SegmentIndex s;
  s.index = index;
  s.n_rows = n_rows;
  const int64_t e = index.numel();
  const int64_t* ip = index.data_ptr<int64_t>();
  bool sorted = true;
  for (int64_t k = 0; k < e; ++k) {
    if (ip[k] < 0 || ip[k] >= n_rows)
      throw Error("segment index " + std::to_string(ip[k]) + " at edge " + std::to_string(k) +
                  " is outside 0.." + std::to_string(n_rows - 1));
    if (k > 0 && ip[k] < ip[k - 1]) sorted = false;
  }
  at::Tensor counts = at::zeros({n_rows + 1}, at::kLong);
  int64_t* cp = counts.data_ptr<int64_t>();
  for (int64_t k = 0; k < e; ++k) ++cp[ip[k] + 1];
  for (int64_t n = 0; n < n_rows; ++n) cp[n + 1] += cp[n];
  s.ptr = counts;
  if (!sorted) {  // counting sort: stable, O(E + N)
    s.order = at::empty({e}, at::kLong);
    int64_t* op = s.order.data_ptr<int64_t>();
    std::vector<int64_t> next(cp, cp + n_rows);
    for (int64_t k = 0; k < e; ++k) op[next[size_t(ip[k])]++] = k;
  }
  return s;
}

// The SegmentIndex must outlive the autograd graph that uses it (the batch owns it).
at::Tensor gather_rows(const at::Tensor& y, const SegmentIndex& s) {
  return GatherRows::apply(y, &s);
}

at::Tensor scatter_sum(const at::Tensor& x, const SegmentIndex& s) {
  return ScatterSum::apply(x, &s);
}

}  // namespace ddgnn
