// The CUDA kernels of the segment family (model/segment.h) over raw device pointers: segment sums
// by rows of the CSR order (a row's edges summed in one fixed order by the thread of that
// (row, column): deterministic, no atomics), gathers, the fused gather-multiply-sum,
// gather-gather-dot, outer sum and their contractions. Thread mappings in model/cuda/grid.cuh,
// per-element bodies in model/cuda/segment_rows.h. Plain CUDA: no LibTorch header.
#include "model/cuda/grid.cuh"
#include "model/cuda/segment_kernels.h"

namespace ddgnn::cuda {

namespace {

template <typename T>
struct SegmentSum {
  const T* x;
  SegmentMap m;
  int64_t cols;
  __device__ T operator()(int64_t n, int64_t col) const {
    return segment_sum_at(x, m, cols, n, col);
  }
};

template <typename T>
struct DifferenceSum {
  const T* g;
  SegmentMap from, to;
  int64_t cols;
  __device__ T operator()(int64_t n, int64_t col) const {
    return difference_sum_at(g, from, to, cols, n, col);
  }
};

template <typename T>
struct Gather {
  const T* y;
  SegmentMap m;
  int64_t cols;
  __device__ T operator()(int64_t e, int64_t col) const { return gather_at(y, m, cols, e, col); }
};

template <typename T>
struct Difference {
  const T* y;
  SegmentMap from, to;
  int64_t cols;
  __device__ T operator()(int64_t e, int64_t col) const {
    return difference_at(y, from, to, cols, e, col);
  }
};

template <typename T>
struct GatherMulSum {
  const T *y, *w;
  SegmentMap src, dst;
  int64_t k_dim, f;
  __device__ T operator()(int64_t n, int64_t col) const {
    return gather_mul_sum_at(y, w, src, dst, k_dim, f, n, col);
  }
};

template <typename T>
struct GatherGatherDot {
  const T *p, *q;
  SegmentMap a, b;
  int64_t k_dim, f;
  __device__ T operator()(int64_t e, int64_t col) const {
    return gather_gather_dot_at(p, q, a, b, k_dim, f, e, col);
  }
};

template <typename T>
struct OuterSum {
  const T *a, *u;
  SegmentMap dst;
  int64_t k_dim, f;
  __device__ T operator()(int64_t n, int64_t col) const {
    return outer_sum_at(a, u, dst, k_dim, f, n, col);
  }
};

template <typename T>
struct ContractK {
  const T *g, *u;
  SegmentMap dst;
  int64_t k_dim, f;
  __device__ T operator()(int64_t e, int64_t col) const {
    return contract_k_at(g, u, dst, k_dim, f, e, col);
  }
};

// One warp per output element (e, k) = (r / K, r % K): lanes read consecutive f.
template <typename T>
struct ContractF {
  const T *g, *a;
  SegmentMap dst;
  int64_t k_dim, f;
  T* out;
  __device__ void operator()(int64_t r, int lane) const {
    const int64_t e = r / k_dim;
    const T sum = warp_sum(contract_f_part(g, a, dst, k_dim, f, e, r - e * k_dim, lane, kWarp));
    if (lane == 0) out[r] = sum;
  }
};

}  // namespace

template <typename T>
cudaError_t launch_segment_sum(const T* x, SegmentMap m, int64_t n_rows, int64_t cols, T* out,
                               cudaStream_t stream) {
  return launch_rows(n_rows, cols, out, SegmentSum<T>{x, m, cols}, stream);
}

template <typename T>
cudaError_t launch_difference_sum(const T* g, SegmentMap from, SegmentMap to, int64_t n_rows,
                                  int64_t cols, T* out, cudaStream_t stream) {
  return launch_rows(n_rows, cols, out, DifferenceSum<T>{g, from, to, cols}, stream);
}

template <typename T>
cudaError_t launch_gather(const T* y, SegmentMap m, int64_t n_edges, int64_t cols, T* out,
                          cudaStream_t stream) {
  return launch_rows(n_edges, cols, out, Gather<T>{y, m, cols}, stream);
}

template <typename T>
cudaError_t launch_difference(const T* y, SegmentMap from, SegmentMap to, int64_t n_edges,
                              int64_t cols, T* out, cudaStream_t stream) {
  return launch_rows(n_edges, cols, out, Difference<T>{y, from, to, cols}, stream);
}

template <typename T>
cudaError_t launch_gather_mul_sum(const T* y, const T* w, SegmentMap src, SegmentMap dst,
                                  int64_t n_rows, int64_t k_dim, int64_t f, T* out,
                                  cudaStream_t stream) {
  return launch_rows(n_rows, k_dim * f, out, GatherMulSum<T>{y, w, src, dst, k_dim, f}, stream);
}

template <typename T>
cudaError_t launch_gather_gather_dot(const T* p, const T* q, SegmentMap a, SegmentMap b,
                                     int64_t n_edges, int64_t k_dim, int64_t f, T* out,
                                     cudaStream_t stream) {
  return launch_rows(n_edges, f, out, GatherGatherDot<T>{p, q, a, b, k_dim, f}, stream);
}

template <typename T>
cudaError_t launch_outer_sum(const T* a, const T* u, SegmentMap dst, int64_t n_rows, int64_t k_dim,
                             int64_t f, T* out, cudaStream_t stream) {
  return launch_rows(n_rows, k_dim * f, out, OuterSum<T>{a, u, dst, k_dim, f}, stream);
}

template <typename T>
cudaError_t launch_contract_k(const T* g, const T* u, SegmentMap dst, int64_t n_edges,
                              int64_t k_dim, int64_t f, T* out, cudaStream_t stream) {
  return launch_rows(n_edges, f, out, ContractK<T>{g, u, dst, k_dim, f}, stream);
}

template <typename T>
cudaError_t launch_contract_f(const T* g, const T* a, SegmentMap dst, int64_t n_edges,
                              int64_t k_dim, int64_t f, T* out, cudaStream_t stream) {
  if (f == 0) {  // empty sums: zeros
    return n_edges * k_dim > 0
               ? cudaMemsetAsync(out, 0, size_t(n_edges * k_dim) * sizeof(T), stream)
               : cudaSuccess;
  }
  return launch_warp_rows(n_edges * k_dim, ContractF<T>{g, a, dst, k_dim, f, out}, stream);
}

#define DDGNN_SEGMENT_LAUNCHERS(T)                                                                 \
  template cudaError_t launch_segment_sum<T>(const T*, SegmentMap, int64_t, int64_t, T*,           \
                                             cudaStream_t);                                        \
  template cudaError_t launch_difference_sum<T>(const T*, SegmentMap, SegmentMap, int64_t,         \
                                                int64_t, T*, cudaStream_t);                        \
  template cudaError_t launch_gather<T>(const T*, SegmentMap, int64_t, int64_t, T*, cudaStream_t); \
  template cudaError_t launch_difference<T>(const T*, SegmentMap, SegmentMap, int64_t, int64_t,    \
                                            T*, cudaStream_t);                                     \
  template cudaError_t launch_gather_mul_sum<T>(const T*, const T*, SegmentMap, SegmentMap,        \
                                                int64_t, int64_t, int64_t, T*, cudaStream_t);      \
  template cudaError_t launch_gather_gather_dot<T>(const T*, const T*, SegmentMap, SegmentMap,     \
                                                   int64_t, int64_t, int64_t, T*, cudaStream_t);   \
  template cudaError_t launch_outer_sum<T>(const T*, const T*, SegmentMap, int64_t, int64_t,       \
                                           int64_t, T*, cudaStream_t);                             \
  template cudaError_t launch_contract_k<T>(const T*, const T*, SegmentMap, int64_t, int64_t,      \
                                            int64_t, T*, cudaStream_t);                            \
  template cudaError_t launch_contract_f<T>(const T*, const T*, SegmentMap, int64_t, int64_t,      \
                                            int64_t, T*, cudaStream_t);

DDGNN_SEGMENT_LAUNCHERS(float)
DDGNN_SEGMENT_LAUNCHERS(double)

}  // namespace ddgnn::cuda
