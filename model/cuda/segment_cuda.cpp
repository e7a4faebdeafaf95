// ATen glue of the CUDA segment kernels (model/cuda/segment_cuda.h): shapes, output allocation,
// the device guard and the current stream; GPU build only. Every launch is named in the profiler
// (RECORD_FUNCTION "ddgnn::cuda::...").
#include "model/cuda/segment_cuda.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "model/cuda/launch_check.h"
#include "model/cuda/segment_kernels.h"

namespace ddgnn::cuda {

namespace {

// Values per row: the product of the dims after the first (also when there are no rows).
int64_t row_size(const at::Tensor& t) {
  int64_t n = 1;
  for (int64_t k = 1; k < t.dim(); ++k) n *= t.size(k);
  return n;
}

// Shape [n] + x.sizes()[1:].
std::vector<int64_t> rows_shape(const at::Tensor& x, int64_t n) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = n;
  return shape;
}

cudaStream_t stream_of(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

// The map's arrays, which must be on x's device (checked from metadata alone).
SegmentMap device_map(const SegmentIndex& s, const at::Tensor& x, const char* op) {
  if (s.index.device() != x.device() || !s.ptr.defined() || s.ptr.device() != x.device() ||
      (s.order.defined() && s.order.device() != x.device()))
    throw Error(std::string(op) + ": a segment map on " + s.index.device().str() +
                    " (with CSR offsets: " + (s.ptr.defined() ? "yes" : "no") +
                    ") for a tensor on " + x.device().str(),
                "build the map with make_segment_index on the tensors' device");
  return {s.index.data_ptr<int64_t>(), s.order.defined() ? s.order.data_ptr<int64_t>() : nullptr,
          s.ptr.data_ptr<int64_t>()};
}

// b must have a's dtype and device (the kernels read both as one type).
void check_pair(const char* op, const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.device() != b.device())
    throw Error(std::string(op) + ": operands of " + std::string(c10::toString(a.scalar_type())) +
                    " on " + a.device().str() + " and " + c10::toString(b.scalar_type()) + " on " +
                    b.device().str(),
                "cast both to one dtype on one device first");
}

const c10::ArrayRef<const c10::IValue> kNoInputs{};

}  // namespace

at::Tensor segment_sum(const at::Tensor& x_in, const SegmentIndex& s) {
  RECORD_FUNCTION("ddgnn::cuda::segment_sum", kNoInputs);
  const at::Tensor x = x_in.contiguous();
  const c10::cuda::CUDAGuard device_guard(x.device());
  const SegmentMap m = device_map(s, x, "segment_sum");
  at::Tensor out = at::empty(rows_shape(x, s.n_rows), x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "segment_sum", [&] {
    CUDA_LAUNCH_CHECK(launch_segment_sum(x.data_ptr<scalar_t>(), m, s.n_rows, row_size(x),
                                         out.data_ptr<scalar_t>(), stream_of(x)));
  });
  return out;
}

at::Tensor difference_sum(const at::Tensor& g_in, const SegmentIndex& from,
                          const SegmentIndex& to) {
  RECORD_FUNCTION("ddgnn::cuda::difference_sum", kNoInputs);
  if (from.n_rows != to.n_rows)
    throw Error("edge_difference: maps over " + std::to_string(from.n_rows) + " and " +
                std::to_string(to.n_rows) + " rows; both must index the same rows");
  const at::Tensor g = g_in.contiguous();
  const c10::cuda::CUDAGuard device_guard(g.device());
  const SegmentMap mf = device_map(from, g, "edge_difference"),
                   mt = device_map(to, g, "edge_difference");
  at::Tensor out = at::empty(rows_shape(g, from.n_rows), g.options());
  AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "difference_sum", [&] {
    CUDA_LAUNCH_CHECK(launch_difference_sum(g.data_ptr<scalar_t>(), mf, mt, from.n_rows,
                                            row_size(g), out.data_ptr<scalar_t>(), stream_of(g)));
  });
  return out;
}

at::Tensor gather_rows(const at::Tensor& y_in, const SegmentIndex& s) {
  RECORD_FUNCTION("ddgnn::cuda::gather_rows", kNoInputs);
  const at::Tensor y = y_in.contiguous();
  const c10::cuda::CUDAGuard device_guard(y.device());
  const SegmentMap m = device_map(s, y, "gather_rows");
  const int64_t e_count = s.index.numel();
  at::Tensor out = at::empty(rows_shape(y, e_count), y.options());
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "gather_rows", [&] {
    CUDA_LAUNCH_CHECK(launch_gather(y.data_ptr<scalar_t>(), m, e_count, row_size(y),
                                    out.data_ptr<scalar_t>(), stream_of(y)));
  });
  return out;
}

at::Tensor edge_difference(const at::Tensor& y_in, const SegmentIndex& from,
                           const SegmentIndex& to) {
  RECORD_FUNCTION("ddgnn::cuda::edge_difference", kNoInputs);
  const at::Tensor y = y_in.contiguous();
  const c10::cuda::CUDAGuard device_guard(y.device());
  const SegmentMap mf = device_map(from, y, "edge_difference"),
                   mt = device_map(to, y, "edge_difference");
  const int64_t e_count = from.index.numel();
  at::Tensor out = at::empty(rows_shape(y, e_count), y.options());
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "edge_difference", [&] {
    CUDA_LAUNCH_CHECK(launch_difference(y.data_ptr<scalar_t>(), mf, mt, e_count, row_size(y),
                                        out.data_ptr<scalar_t>(), stream_of(y)));
  });
  return out;
}

at::Tensor gather_mul_sum(const at::Tensor& y_in, const at::Tensor& w_in, const SegmentIndex& src,
                          const SegmentIndex& dst) {
  RECORD_FUNCTION("ddgnn::cuda::gather_mul_sum", kNoInputs);
  check_pair("gather_mul_sum", y_in, w_in);
  const at::Tensor y = y_in.contiguous(), w = w_in.contiguous();
  const c10::cuda::CUDAGuard device_guard(y.device());
  const SegmentMap ms = device_map(src, y, "gather_mul_sum"),
                   md = device_map(dst, y, "gather_mul_sum");
  const int64_t f = w.size(1), k_dim = f > 0 ? row_size(y) / f : 0;
  at::Tensor out = at::empty(rows_shape(y, dst.n_rows), y.options());
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "gather_mul_sum", [&] {
    CUDA_LAUNCH_CHECK(launch_gather_mul_sum(y.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), ms, md,
                                            dst.n_rows, k_dim, f, out.data_ptr<scalar_t>(),
                                            stream_of(y)));
  });
  return out;
}

at::Tensor gather_gather_dot(const at::Tensor& p_in, const at::Tensor& q_in, const SegmentIndex& a,
                             const SegmentIndex& b) {
  RECORD_FUNCTION("ddgnn::cuda::gather_gather_dot", kNoInputs);
  check_pair("gather_gather_dot", p_in, q_in);
  const at::Tensor p = p_in.contiguous(), q = q_in.contiguous();
  const c10::cuda::CUDAGuard device_guard(p.device());
  const SegmentMap ma = device_map(a, p, "gather_gather_dot"),
                   mb = device_map(b, p, "gather_gather_dot");
  const int64_t e_count = a.index.numel(), f = p.size(p.dim() - 1);
  const int64_t k_dim = f > 0 ? row_size(p) / f : 0;
  at::Tensor out = at::empty({e_count, f}, p.options());
  AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "gather_gather_dot", [&] {
    CUDA_LAUNCH_CHECK(launch_gather_gather_dot(p.data_ptr<scalar_t>(), q.data_ptr<scalar_t>(), ma,
                                               mb, e_count, k_dim, f, out.data_ptr<scalar_t>(),
                                               stream_of(p)));
  });
  return out;
}

at::Tensor outer_sum(const at::Tensor& a_in, const at::Tensor& u_in, const SegmentIndex& dst) {
  RECORD_FUNCTION("ddgnn::cuda::outer_sum", kNoInputs);
  check_pair("outer_sum", a_in, u_in);
  const at::Tensor a = a_in.contiguous(), u = u_in.contiguous();
  const c10::cuda::CUDAGuard device_guard(a.device());
  const SegmentMap md = device_map(dst, a, "outer_sum");
  const int64_t f = a.size(1), k_dim = u.size(1);
  at::Tensor out = at::empty({dst.n_rows, k_dim, f}, a.options());
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "outer_sum", [&] {
    CUDA_LAUNCH_CHECK(launch_outer_sum(a.data_ptr<scalar_t>(), u.data_ptr<scalar_t>(), md,
                                       dst.n_rows, k_dim, f, out.data_ptr<scalar_t>(),
                                       stream_of(a)));
  });
  return out;
}

at::Tensor gather_contract(const at::Tensor& g_in, const at::Tensor& b_in, const SegmentIndex& dst,
                           bool over_k) {
  RECORD_FUNCTION("ddgnn::cuda::gather_contract", kNoInputs);
  check_pair("gather_contract", g_in, b_in);
  const at::Tensor g = g_in.contiguous(), b = b_in.contiguous();
  const c10::cuda::CUDAGuard device_guard(g.device());
  const SegmentMap md = device_map(dst, g, "gather_contract");
  const int64_t k_dim = g.size(1), f = g.size(2), e_count = dst.index.numel();
  at::Tensor out = at::empty({e_count, over_k ? f : k_dim}, g.options());
  AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "gather_contract", [&] {
    const scalar_t *gp = g.data_ptr<scalar_t>(), *bp = b.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    if (over_k)
      CUDA_LAUNCH_CHECK(launch_contract_k(gp, bp, md, e_count, k_dim, f, op, stream_of(g)));
    else
      CUDA_LAUNCH_CHECK(launch_contract_f(gp, bp, md, e_count, k_dim, f, op, stream_of(g)));
  });
  return out;
}

}  // namespace ddgnn::cuda
