// The segment operations of model/segment.h on CUDA tensors, without autograd: the forward
// arithmetic of model/segment.cpp's autograd functions where cuda_kernels() holds
// (model/device.h). Each allocates its output with ATen and enqueues one kernel
// (model/cuda/segment_kernels.cu) on the current stream of the operands' device: no host
// synchronisation. float32 or float64; the maps (SegmentIndex, with `ptr`, on the same device)
// as model/segment_generic.cpp builds them. In the CPU build these are stand-ins that throw
// (model/cuda/no_cuda.cpp), never reached: cuda_kernels() is false there.
#pragma once

#include <ATen/core/Tensor.h>

#include "model/segment.h"

namespace ddgnn::cuda {

// x [E, ...] -> [s.n_rows, ...]: each row's edges summed in CSR order.
at::Tensor segment_sum(const at::Tensor& x, const SegmentIndex& s);
// g [E, ...] -> [n_rows, ...]: segment sum over `from` minus that over `to` (edge_difference's
// adjoint).
at::Tensor difference_sum(const at::Tensor& g, const SegmentIndex& from, const SegmentIndex& to);
// y [N, ...] -> [E, ...]: y[index[e]].
at::Tensor gather_rows(const at::Tensor& y, const SegmentIndex& s);
// y [N, ...] -> [E, ...]: y[from[e]] - y[to[e]].
at::Tensor edge_difference(const at::Tensor& y, const SegmentIndex& from, const SegmentIndex& to);
// y [N_src, (K,) F], w [E, F] -> [dst.n_rows, (K,) F].
at::Tensor gather_mul_sum(const at::Tensor& y, const at::Tensor& w, const SegmentIndex& src,
                          const SegmentIndex& dst);
// p, q [N, (K,) F] -> [E, F].
at::Tensor gather_gather_dot(const at::Tensor& p, const at::Tensor& q, const SegmentIndex& a,
                             const SegmentIndex& b);
// a [E, F], u [E, K] -> [dst.n_rows, K, F].
at::Tensor outer_sum(const at::Tensor& a, const at::Tensor& u, const SegmentIndex& dst);
// g [N, K, F] gathered by dst and contracted with b: over K with b = u [E, K] (-> [E, F]), over
// F with b = a [E, F] (-> [E, K]).
at::Tensor gather_contract(const at::Tensor& g, const at::Tensor& b, const SegmentIndex& dst,
                           bool over_k);

}  // namespace ddgnn::cuda
