// Launchers of the CUDA segment kernels (model/cuda/segment_kernels.cu) over raw device pointers,
// T = float or double. Each enqueues its kernel on `stream` and returns cudaGetLastError(): no
// allocation, no host synchronisation; the caller allocates every output (all of whose elements
// the kernel writes, so no zero fill) and checks the status (model/cuda/launch_check.h). Nothing
// is launched for an empty output. Shapes and sums as the bodies of model/cuda/segment_rows.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/cuda/segment_rows.h"

namespace ddgnn::cuda {

// x [E, cols] -> out [n_rows, cols]: each row's edges summed in CSR order.
template <typename T>
cudaError_t launch_segment_sum(const T* x, SegmentMap m, int64_t n_rows, int64_t cols, T* out,
                               cudaStream_t stream);

// g [E, cols] -> out [n_rows, cols]: the segment sum over `from` minus the one over `to`.
template <typename T>
cudaError_t launch_difference_sum(const T* g, SegmentMap from, SegmentMap to, int64_t n_rows,
                                  int64_t cols, T* out, cudaStream_t stream);

// y [N, cols] -> out [n_edges, cols]: out[e] = y[index[e]].
template <typename T>
cudaError_t launch_gather(const T* y, SegmentMap m, int64_t n_edges, int64_t cols, T* out,
                          cudaStream_t stream);

// y [N, cols] -> out [n_edges, cols]: out[e] = y[from[e]] - y[to[e]].
template <typename T>
cudaError_t launch_difference(const T* y, SegmentMap from, SegmentMap to, int64_t n_edges,
                              int64_t cols, T* out, cudaStream_t stream);

// y [N_src, K, F], w [E, F] -> out [n_rows, K, F] (rows of dst).
template <typename T>
cudaError_t launch_gather_mul_sum(const T* y, const T* w, SegmentMap src, SegmentMap dst,
                                  int64_t n_rows, int64_t k_dim, int64_t f, T* out,
                                  cudaStream_t stream);

// p, q [N, K, F] -> out [n_edges, F].
template <typename T>
cudaError_t launch_gather_gather_dot(const T* p, const T* q, SegmentMap a, SegmentMap b,
                                     int64_t n_edges, int64_t k_dim, int64_t f, T* out,
                                     cudaStream_t stream);

// a [E, F], u [E, K] -> out [n_rows, K, F].
template <typename T>
cudaError_t launch_outer_sum(const T* a, const T* u, SegmentMap dst, int64_t n_rows, int64_t k_dim,
                             int64_t f, T* out, cudaStream_t stream);

// g [N, K, F], u [E, K] -> out [n_edges, F] (contraction over K).
template <typename T>
cudaError_t launch_contract_k(const T* g, const T* u, SegmentMap dst, int64_t n_edges,
                              int64_t k_dim, int64_t f, T* out, cudaStream_t stream);

// g [N, K, F], a [E, F] -> out [n_edges, K] (contraction over F, one warp per output element).
template <typename T>
cudaError_t launch_contract_f(const T* g, const T* a, SegmentMap dst, int64_t n_edges,
                              int64_t k_dim, int64_t f, T* out, cudaStream_t stream);

}  // namespace ddgnn::cuda
