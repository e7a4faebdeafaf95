// Edge operations as autograd functions whose backward passes are made of each other: gather /
// segment sum, the fused gather_mul_sum / gather_gather_dot and outer_sum / gather-contract
// families, and edge_difference / its adjoint. Plain loops over edges, no index_add_; on a CUDA
// device (cuda_kernels(), GPU build) the same functions with one CUDA kernel per forward
// (model/cuda/segment_cuda.h). Elsewhere (or with GenericKernels) the versions of
// model/segment_generic.cpp run instead.
#include "model/segment.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "model/cuda/segment_cuda.h"
#include "model/device.h"
#include "model/kernels.h"
#include "model/saved_index.h"
#include "model/segment_generic.h"

namespace ddgnn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The loops of the kernels below, compiled for AVX-512 and AVX2 as well as the build's target
// (model/kernels.h): rows of F channels, F innermost.

// out[row[k]] += x[k], k < e.
template <typename T>
DDGNN_VECTOR_KERNEL void scatter_sum_loop(const T* xp, const int64_t* row, int64_t e, int64_t f,
                                          T* op) {
  for (int64_t k = 0; k < e; ++k) {
    T* __restrict__ dst = op + row[k] * f;
    const T* __restrict__ src = xp + k * f;
    for (int64_t c = 0; c < f; ++c) dst[c] += src[c];
  }
}

// out[to[e], c] += y[from[e], c] * w[e] (c < k_dim rows of f).
template <typename T>
DDGNN_VECTOR_KERNEL void gather_mul_sum_loop(const T* yp, const T* wp, const int64_t* from,
                                             const int64_t* to, int64_t e_count, int64_t k_dim,
                                             int64_t f, T* op) {
  const int64_t kf = k_dim * f;
  for (int64_t e = 0; e < e_count; ++e) {
    T* __restrict__ o = op + to[e] * kf;
    const T* __restrict__ ys = yp + from[e] * kf;
    const T* __restrict__ ws = wp + e * f;
    for (int64_t c = 0; c < k_dim; ++c)
      for (int64_t j = 0; j < f; ++j) o[c * f + j] += ys[c * f + j] * ws[j];
  }
}

// out[e] = sum over c < k_dim of p[ia[e], c] * q[ib[e], c] (k_dim >= 1).
template <typename T>
DDGNN_VECTOR_KERNEL void gather_gather_dot_loop(const T* pp, const T* qp, const int64_t* ia,
                                                const int64_t* ib, int64_t e_count, int64_t k_dim,
                                                int64_t f, T* op) {
  const int64_t kf = k_dim * f;
  for (int64_t e = 0; e < e_count; ++e) {
    const T* __restrict__ ps = pp + ia[e] * kf;
    const T* __restrict__ qs = qp + ib[e] * kf;
    T* __restrict__ o = op + e * f;
    for (int64_t j = 0; j < f; ++j) o[j] = ps[j] * qs[j];
    for (int64_t c = 1; c < k_dim; ++c)
      for (int64_t j = 0; j < f; ++j) o[j] += ps[c * f + j] * qs[c * f + j];
  }
}

// Plain segment sum of x [E, ...] into [N, ...] by s.index; no autograd.
at::Tensor segment_sum_raw(const at::Tensor& x_in, const SegmentIndex& s) {
  if (x_in.is_cuda()) return cuda::segment_sum(x_in, s);
  const at::Tensor x = x_in.contiguous();
  const int64_t e = x.size(0);
  const int64_t f = e > 0 ? x.numel() / e : (x.dim() > 1 ? x.numel() : 1);
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape[0] = s.n_rows;
  at::Tensor out = at::zeros(out_shape, x.options());
  if (e == 0) return out;
  // Edges in their own order, each added to its row: x is read sequentially (the [E, F] tensor
  // is the large one) and rows are small enough to stay in cache. A row's edges are summed in
  // increasing edge order, as the stable CSR order would.
  const int64_t* row = s.index.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "scatter_sum", [&] {
    scatter_sum_loop<scalar_t>(x.data_ptr<scalar_t>(), row, e, f, out.data_ptr<scalar_t>());
  });
  return out;
}

at::Tensor gather_raw(const at::Tensor& y_in, const SegmentIndex& s) {
  if (y_in.is_cuda()) return cuda::gather_rows(y_in, s);
  const at::Tensor y = y_in.contiguous();
  const int64_t e_count = s.index.numel();
  const int64_t f = y.size(0) > 0 ? y.numel() / y.size(0) : 0;
  std::vector<int64_t> shape = y.sizes().vec();
  shape[0] = e_count;
  at::Tensor out = at::empty(shape, y.options());
  if (e_count == 0 || f == 0) return out;
  const int64_t* row = s.index.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "gather_rows", [&] {
    const scalar_t* yp = y.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    for (int64_t e = 0; e < e_count; ++e)
      std::copy(yp + row[e] * f, yp + (row[e] + 1) * f, op + e * f);
  });
  return out;
}

struct ScatterSum;

struct GatherRows : public torch::autograd::Function<GatherRows> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y, const SegmentIndex* s) {
    save_index(ctx, "s", s);
    return gather_raw(y, *s);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad);
};

struct ScatterSum : public torch::autograd::Function<ScatterSum> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const SegmentIndex* s) {
    save_index(ctx, "s", s);
    return segment_sum_raw(x, *s);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const SegmentIndex s = saved_index(ctx, "s");
    return {GatherRows::apply(grad[0], &s), at::Tensor()};
  }
};

variable_list GatherRows::backward(AutogradContext* ctx, variable_list grad) {
  const SegmentIndex s = saved_index(ctx, "s");
  return {ScatterSum::apply(grad[0], &s), at::Tensor()};
}

// Shape [n] + x.sizes()[1:].
std::vector<int64_t> rows_shape(const at::Tensor& x, int64_t n) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = n;
  return shape;
}

// gather_mul_sum without autograd: y [N_src, K, F] (K = 1 when 2-D), w [E, F].
at::Tensor gather_mul_sum_raw(const at::Tensor& y_in, const at::Tensor& w_in,
                              const SegmentIndex& src, const SegmentIndex& dst) {
  if (y_in.is_cuda()) return cuda::gather_mul_sum(y_in, w_in, src, dst);
  const at::Tensor y = y_in.contiguous(), w = w_in.contiguous();
  const int64_t f = w.size(1), kf = y.numel() / std::max<int64_t>(y.size(0), 1);
  const int64_t k_dim = f > 0 ? kf / f : 0;
  at::Tensor out = at::zeros(rows_shape(y, dst.n_rows), y.options());
  if (w.size(0) == 0 || kf == 0) return out;
  const int64_t* from = src.index.data_ptr<int64_t>();
  const int64_t* to = dst.index.data_ptr<int64_t>();
  const int64_t e_count = w.size(0);
  // Edges in their own order (w, the large operand, is read sequentially); see segment_sum_raw.
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "gather_mul_sum", [&] {
    gather_mul_sum_loop<scalar_t>(y.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), from, to, e_count,
                                  k_dim, f, out.data_ptr<scalar_t>());
  });
  return out;
}

// gather_gather_dot without autograd: p, q [N, K, F] (K = 1 when 2-D) -> [E, F].
at::Tensor gather_gather_dot_raw(const at::Tensor& p_in, const at::Tensor& q_in,
                                 const SegmentIndex& a, const SegmentIndex& b) {
  if (p_in.is_cuda()) return cuda::gather_gather_dot(p_in, q_in, a, b);
  const at::Tensor p = p_in.contiguous(), q = q_in.contiguous();
  const int64_t e_count = a.index.numel();
  const int64_t f = p.size(p.dim() - 1), kf = p.numel() / std::max<int64_t>(p.size(0), 1);
  const int64_t k_dim = f > 0 ? kf / f : 0;
  if (e_count == 0 || kf == 0) return at::zeros({e_count, f}, p.options());
  // Every element is written (the first k term assigns): no zero fill of the [E, F] output.
  at::Tensor out = at::empty({e_count, f}, p.options());
  const int64_t* ia = a.index.data_ptr<int64_t>();
  const int64_t* ib = b.index.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "gather_gather_dot", [&] {
    gather_gather_dot_loop<scalar_t>(p.data_ptr<scalar_t>(), q.data_ptr<scalar_t>(), ia, ib,
                                     e_count, k_dim, f, out.data_ptr<scalar_t>());
  });
  return out;
}

// out[e] = y[from[e]] - y[to[e]] without autograd.
at::Tensor edge_difference_raw(const at::Tensor& y_in, const SegmentIndex& from,
                               const SegmentIndex& to) {
  if (y_in.is_cuda()) return cuda::edge_difference(y_in, from, to);
  const at::Tensor y = y_in.contiguous();
  const int64_t e_count = from.index.numel();
  const int64_t f = y.numel() / std::max<int64_t>(y.size(0), 1);
  at::Tensor out = at::empty(rows_shape(y, e_count), y.options());
  const int64_t* i_from = from.index.data_ptr<int64_t>();
  const int64_t* i_to = to.index.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "edge_difference", [&] {
    const scalar_t* yp = y.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    for (int64_t e = 0; e < e_count; ++e) {
      const scalar_t* a = yp + i_from[e] * f;
      const scalar_t* b = yp + i_to[e] * f;
      for (int64_t c = 0; c < f; ++c) op[e * f + c] = a[c] - b[c];
    }
  });
  return out;
}

// outer_sum without autograd: a [E, F], u [E, K] -> [N, K, F].
at::Tensor outer_sum_raw(const at::Tensor& a_in, const at::Tensor& u_in, const SegmentIndex& dst) {
  if (a_in.is_cuda()) return cuda::outer_sum(a_in, u_in, dst);
  const at::Tensor a = a_in.contiguous(), u = u_in.contiguous();
  const int64_t f = a.size(1), k_dim = u.size(1);
  at::Tensor out = at::zeros({dst.n_rows, k_dim, f}, a.options());
  const int64_t* to = dst.index.data_ptr<int64_t>();
  const int64_t e_count = a.size(0);
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "outer_sum", [&] {
    const scalar_t* ap = a.data_ptr<scalar_t>();
    const scalar_t* up = u.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    for (int64_t e = 0; e < e_count; ++e) {  // edges in their own order; see segment_sum_raw
      scalar_t* __restrict__ o = op + to[e] * k_dim * f;
      const scalar_t* __restrict__ as = ap + e * f;
      for (int64_t c = 0; c < k_dim; ++c) {
        const scalar_t uc = up[e * k_dim + c];
        for (int64_t j = 0; j < f; ++j) o[c * f + j] += as[j] * uc;
      }
    }
  });
  return out;
}

// Gather g [N, K, F] to edges by dst and contract with b: over K when b is u [E, K] (-> [E, F]),
// over F when b is a [E, F] (-> [E, K]), no autograd.
at::Tensor gather_contract_raw(const at::Tensor& g_in, const at::Tensor& b_in,
                               const SegmentIndex& dst, bool over_k) {
  if (g_in.is_cuda()) return cuda::gather_contract(g_in, b_in, dst, over_k);
  const at::Tensor g = g_in.contiguous(), b = b_in.contiguous();
  const int64_t k_dim = g.size(1), f = g.size(2), e_count = dst.index.numel();
  // Every element is written when k_dim > 0 (over K, the first k term assigns): no zero fill.
  at::Tensor out = k_dim > 0 ? at::empty({e_count, over_k ? f : k_dim}, g.options())
                             : at::zeros({e_count, over_k ? f : k_dim}, g.options());
  const int64_t* row = dst.index.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "gather_contract", [&] {
    const scalar_t* gp = g.data_ptr<scalar_t>();
    const scalar_t* bp = b.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    for (int64_t e = 0; e < e_count; ++e) {
      const scalar_t* gs = gp + row[e] * k_dim * f;
      if (over_k) {  // out[e, f] = sum_k g[dst[e], k, f] u[e, k]
        scalar_t* o = op + e * f;
        for (int64_t c = 0; c < k_dim; ++c) {
          const scalar_t uc = bp[e * k_dim + c];
          if (c == 0)
            for (int64_t j = 0; j < f; ++j) o[j] = gs[j] * uc;
          else
            for (int64_t j = 0; j < f; ++j) o[j] += gs[c * f + j] * uc;
        }
      } else {  // out[e, k] = sum_f g[dst[e], k, f] a[e, f]
        const scalar_t* as = bp + e * f;
        for (int64_t c = 0; c < k_dim; ++c) {
          scalar_t acc = 0;
          for (int64_t j = 0; j < f; ++j) acc += gs[c * f + j] * as[j];
          op[e * k_dim + c] = acc;
        }
      }
    }
  });
  return out;
}

struct GatherGatherDot;

struct GatherMulSum : public torch::autograd::Function<GatherMulSum> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y, const at::Tensor& w,
                            const SegmentIndex* src, const SegmentIndex* dst) {
    save_index(ctx, "src", src);
    save_index(ctx, "dst", dst);
    ctx->save_for_backward({y, w});
    return gather_mul_sum_raw(y, w, *src, *dst);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad);
};

struct GatherGatherDot : public torch::autograd::Function<GatherGatherDot> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& p, const at::Tensor& q,
                            const SegmentIndex* a, const SegmentIndex* b) {
    save_index(ctx, "a", a);
    save_index(ctx, "b", b);
    ctx->save_for_backward({p, q});
    return gather_gather_dot_raw(p, q, *a, *b);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const SegmentIndex a_map = saved_index(ctx, "a"), b_map = saved_index(ctx, "b");
    const SegmentIndex *a = &a_map, *b = &b_map;
    // dp[n, k, f] = sum over e with a[e] == n of gg[e, f] q[b[e], k, f]; dq likewise.
    return {ctx->needs_input_grad(0) ? GatherMulSum::apply(saved[1], grad[0], b, a) : at::Tensor(),
            ctx->needs_input_grad(1) ? GatherMulSum::apply(saved[0], grad[0], a, b) : at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

variable_list GatherMulSum::backward(AutogradContext* ctx, variable_list grad) {
  const auto saved = ctx->get_saved_variables();
  const SegmentIndex src_map = saved_index(ctx, "src"), dst_map = saved_index(ctx, "dst");
  const SegmentIndex *src = &src_map, *dst = &dst_map;
  // dy[m] = sum over e with src[e] == m of g[dst[e]] * w[e]; dw[e] = sum_k g[dst[e]] y[src[e]].
  return {
      ctx->needs_input_grad(0) ? GatherMulSum::apply(grad[0], saved[1], dst, src) : at::Tensor(),
      ctx->needs_input_grad(1) ? GatherGatherDot::apply(grad[0], saved[0], dst, src) : at::Tensor(),
      at::Tensor(), at::Tensor()};
}

// The outer_sum family: OuterSum(a, u) and GatherContract(g, b) over K (b = u) or F (b = a).
struct OuterSum : public torch::autograd::Function<OuterSum> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& u,
                            const SegmentIndex* dst) {
    save_index(ctx, "dst", dst);
    ctx->save_for_backward({a, u});
    return outer_sum_raw(a, u, *dst);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad);
};

struct GatherContract : public torch::autograd::Function<GatherContract> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& g, const at::Tensor& b,
                            const SegmentIndex* dst, bool over_k) {
    save_index(ctx, "dst", dst);
    ctx->saved_data["over_k"] = over_k;
    ctx->save_for_backward({g, b});
    return gather_contract_raw(g, b, *dst, over_k);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const SegmentIndex dst_map = saved_index(ctx, "dst");
    const SegmentIndex* dst = &dst_map;
    const bool over_k = ctx->saved_data["over_k"].toBool();
    const at::Tensor &g = saved[0], &b = saved[1], &gg = grad[0];
    at::Tensor dg, db;
    if (over_k) {  // out[e, f] = sum_k g[dst e, k, f] u[e, k]
      if (ctx->needs_input_grad(0)) dg = OuterSum::apply(gg, b, dst);
      if (ctx->needs_input_grad(1)) db = GatherContract::apply(g, gg, dst, false);
    } else {  // out[e, k] = sum_f g[dst e, k, f] a[e, f]
      if (ctx->needs_input_grad(0)) dg = OuterSum::apply(b, gg, dst);
      if (ctx->needs_input_grad(1)) db = GatherContract::apply(g, gg, dst, true);
    }
    return {dg, db, at::Tensor(), at::Tensor()};
  }
};

variable_list OuterSum::backward(AutogradContext* ctx, variable_list grad) {
  const auto saved = ctx->get_saved_variables();
  const SegmentIndex dst_map = saved_index(ctx, "dst");
  const SegmentIndex* dst = &dst_map;
  // da[e, f] = sum_k g[dst e, k, f] u[e, k]; du[e, k] = sum_f g[dst e, k, f] a[e, f].
  return {
      ctx->needs_input_grad(0) ? GatherContract::apply(grad[0], saved[1], dst, true) : at::Tensor(),
      ctx->needs_input_grad(1) ? GatherContract::apply(grad[0], saved[0], dst, false)
                               : at::Tensor(),
      at::Tensor()};
}

struct EdgeDifference;

// g [E, ...] -> [N, ...]: segment sum over `from` minus segment sum over `to` (the adjoint of
// edge_difference).
struct EdgeDifferenceAdjoint : public torch::autograd::Function<EdgeDifferenceAdjoint> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& g, const SegmentIndex* from,
                            const SegmentIndex* to) {
    save_index(ctx, "from", from);
    save_index(ctx, "to", to);
    if (g.is_cuda()) return cuda::difference_sum(g, *from, *to);  // one pass over both maps
    return segment_sum_raw(g, *from).sub_(segment_sum_raw(g, *to));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad);
};

struct EdgeDifference : public torch::autograd::Function<EdgeDifference> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y, const SegmentIndex* from,
                            const SegmentIndex* to) {
    save_index(ctx, "from", from);
    save_index(ctx, "to", to);
    return edge_difference_raw(y, *from, *to);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const SegmentIndex from = saved_index(ctx, "from"), to = saved_index(ctx, "to");
    return {EdgeDifferenceAdjoint::apply(grad[0], &from, &to), at::Tensor(), at::Tensor()};
  }
};

variable_list EdgeDifferenceAdjoint::backward(AutogradContext* ctx, variable_list grad) {
  const SegmentIndex from = saved_index(ctx, "from"), to = saved_index(ctx, "to");
  return {EdgeDifference::apply(grad[0], &from, &to), at::Tensor(), at::Tensor()};
}

struct Concat : public torch::autograd::Function<Concat> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList xs, int64_t dim) {
    std::vector<int64_t> sizes;
    for (const at::Tensor& x : xs) sizes.push_back(x.size(dim));
    ctx->saved_data["sizes"] = sizes;
    ctx->saved_data["dim"] = dim;
    return at::cat(xs, dim);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const std::vector<int64_t> sizes = ctx->saved_data["sizes"].toIntVector();
    variable_list out = grad[0].split_with_sizes(sizes, ctx->saved_data["dim"].toInt());
    for (size_t k = 0; k < out.size(); ++k)
      if (!ctx->needs_input_grad(k)) out[k] = at::Tensor();
    out.emplace_back();  // dim
    return out;
  }
};

}  // namespace

SegmentIndex make_segment_index(const at::Tensor& index_in, int64_t n_rows) {
  const at::Tensor index = index_in.to(at::kLong).contiguous();
  if (index.dim() != 1)
    throw Error("segment index must be 1-D, got " + std::to_string(index.dim()) + " dimensions");
  const int64_t e = index.numel();
  // The range is checked where the values are in host memory (on a device that would be a
  // synchronisation; an index out of range there fails in the first gather instead).
  bool sorted = true;
  if (index.device().is_cpu()) {
    const int64_t* ip = index.data_ptr<int64_t>();
    for (int64_t k = 0; k < e; ++k) {
      if (ip[k] < 0 || ip[k] >= n_rows)
        throw Error("segment index " + std::to_string(ip[k]) + " at edge " + std::to_string(k) +
                    " is outside 0.." + std::to_string(n_rows - 1));
      if (k > 0 && ip[k] < ip[k - 1]) sorted = false;
    }
  }
  if (!fused_kernels(index)) return generic::make_segment_index(index, n_rows);
  SegmentIndex s;
  s.index = index;
  s.n_rows = n_rows;
  const int64_t* ip = index.data_ptr<int64_t>();
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

// The autograd functions keep their own handles to the map's tensors (model/saved_index.h).
at::Tensor gather_rows(const at::Tensor& y, const SegmentIndex& s) {
  if (!fused_kernels(y) && !cuda_kernels(y)) return generic::gather_rows(y, s);
  return GatherRows::apply(y, &s);
}

at::Tensor scatter_sum(const at::Tensor& x, const SegmentIndex& s) {
  if (!fused_kernels(x) && !cuda_kernels(x)) return generic::scatter_sum(x, s);
  return ScatterSum::apply(x, &s);
}

at::Tensor gather_mul_sum(const at::Tensor& y, const at::Tensor& w, const SegmentIndex& src,
                          const SegmentIndex& dst) {
  if (w.dim() != 2 || w.size(0) != src.index.numel() || src.index.numel() != dst.index.numel() ||
      y.dim() < 2 || y.size(y.dim() - 1) != w.size(1))
    throw Error("gather_mul_sum: expected y [N, (K,) F], w [E, F] and two maps over the E edges");
  if (!fused_kernels(y) && !cuda_kernels(y)) return generic::gather_mul_sum(y, w, src, dst);
  return GatherMulSum::apply(y, w, &src, &dst);
}

at::Tensor gather_gather_dot(const at::Tensor& p, const at::Tensor& q, const SegmentIndex& a,
                             const SegmentIndex& b) {
  if (p.sizes() != q.sizes() || p.dim() < 2 || a.index.numel() != b.index.numel())
    throw Error("gather_gather_dot: expected p, q of one shape [N, (K,) F] and two maps over E");
  if (!fused_kernels(p) && !cuda_kernels(p)) return generic::gather_gather_dot(p, q, a, b);
  return GatherGatherDot::apply(p, q, &a, &b);
}

at::Tensor outer_sum(const at::Tensor& a, const at::Tensor& u, const SegmentIndex& dst) {
  if (a.dim() != 2 || u.dim() != 2 || a.size(0) != u.size(0) || a.size(0) != dst.index.numel())
    throw Error("outer_sum: expected a [E, F] and u [E, K] over the map's E edges");
  if (!fused_kernels(a) && !cuda_kernels(a)) return generic::outer_sum(a, u, dst);
  return OuterSum::apply(a, u, &dst);
}

at::Tensor edge_difference(const at::Tensor& y, const SegmentIndex& from, const SegmentIndex& to) {
  if (from.index.numel() != to.index.numel() || y.dim() < 1)
    throw Error("edge_difference: the two maps must cover the same edges");
  if (!fused_kernels(y) && !cuda_kernels(y)) return generic::edge_difference(y, from, to);
  return EdgeDifference::apply(y, &from, &to);
}

at::Tensor concat(const std::vector<at::Tensor>& xs, int64_t dim) {
  if (xs.size() == 1) return xs[0];
  return Concat::apply(at::TensorList(xs), dim);
}

}  // namespace ddgnn
