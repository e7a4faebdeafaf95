// The per-element bodies of the CUDA segment kernels (model/cuda/segment_kernels.cu): what one
// thread computes for one (row, column) of an output, over raw pointers. A segment sum walks its
// row's edges in the map's CSR order (edges sorted by row, stable: increasing edge order within
// a row), so a row's sum has one fixed order (no atomics; the order of the fused CPU kernels).
// Compiled by nvcc for the device and by g++ for the CPU tests (tests/model/test_cuda_rows.cpp).
// Shapes: N rows (atoms), E edges; a row holds `cols` values (trailing dims flattened), K*F for
// [N, K, F] operands (k_dim, f). Every array is contiguous, row-major.
#pragma once

#include <cstdint>

#include "model/cuda/host_device.h"

namespace ddgnn::cuda {

// A SegmentIndex's arrays on the device (model/segment.h): index[e] the row of edge e, order[j]
// the edges sorted by row (stable; null: index is sorted and order is the identity), row n's
// edges order[ptr[n]] .. order[ptr[n + 1] - 1].
struct SegmentMap {
  const int64_t* index = nullptr;
  const int64_t* order = nullptr;
  const int64_t* ptr = nullptr;
};

// The j-th edge of the CSR order.
DDGNN_HD int64_t edge_at(const SegmentMap& m, int64_t j) {
  return m.order ? m.order[j] : j;
}

// Segment sum, [E, cols] -> [N, cols]: sum over row n's edges of x[e, col].
template <typename T>
DDGNN_HD T segment_sum_at(const T* x, const SegmentMap& m, int64_t cols, int64_t n, int64_t col) {
  T acc = T(0);
  for (int64_t j = m.ptr[n]; j < m.ptr[n + 1]; ++j) acc += x[edge_at(m, j) * cols + col];
  return acc;
}

// edge_difference's adjoint, [E, cols] -> [N, cols]: the segment sum over `from` minus the one
// over `to` (one pass where the CPU takes two sums and a subtraction, same rounding).
template <typename T>
DDGNN_HD T difference_sum_at(const T* g, const SegmentMap& from, const SegmentMap& to, int64_t cols,
                             int64_t n, int64_t col) {
  return segment_sum_at(g, from, cols, n, col) - segment_sum_at(g, to, cols, n, col);
}

// Gather, [N, cols] -> [E, cols]: y[index[e], col].
template <typename T>
DDGNN_HD T gather_at(const T* y, const SegmentMap& m, int64_t cols, int64_t e, int64_t col) {
  return y[m.index[e] * cols + col];
}

// edge_difference, [N, cols] -> [E, cols]: y[from[e], col] - y[to[e], col].
template <typename T>
DDGNN_HD T difference_at(const T* y, const SegmentMap& from, const SegmentMap& to, int64_t cols,
                         int64_t e, int64_t col) {
  return y[from.index[e] * cols + col] - y[to.index[e] * cols + col];
}

// gather_mul_sum, y [N_src, K, F] and w [E, F] -> [N_dst, K, F]: sum over row n's edges of dst
// of y[src[e], k, f] w[e, f] (col = k F + f).
template <typename T>
DDGNN_HD T gather_mul_sum_at(const T* y, const T* w, const SegmentMap& src, const SegmentMap& dst,
                             int64_t k_dim, int64_t f, int64_t n, int64_t col) {
  const int64_t kf = k_dim * f, fj = col % f;
  T acc = T(0);
  for (int64_t j = dst.ptr[n]; j < dst.ptr[n + 1]; ++j) {
    const int64_t e = edge_at(dst, j);
    acc += y[src.index[e] * kf + col] * w[e * f + fj];
  }
  return acc;
}

// gather_gather_dot, p and q [N, K, F] -> [E, F]: sum over k of p[a[e], k, f] q[b[e], k, f].
template <typename T>
DDGNN_HD T gather_gather_dot_at(const T* p, const T* q, const SegmentMap& a, const SegmentMap& b,
                                int64_t k_dim, int64_t f, int64_t e, int64_t col) {
  const T* ps = p + a.index[e] * k_dim * f + col;
  const T* qs = q + b.index[e] * k_dim * f + col;
  T acc = T(0);
  for (int64_t c = 0; c < k_dim; ++c) acc += ps[c * f] * qs[c * f];
  return acc;
}

// outer_sum, a [E, F] and u [E, K] -> [N, K, F]: sum over row n's edges of a[e, f] u[e, k]
// (col = k F + f).
template <typename T>
DDGNN_HD T outer_sum_at(const T* a, const T* u, const SegmentMap& dst, int64_t k_dim, int64_t f,
                        int64_t n, int64_t col) {
  const int64_t c = col / f, fj = col - c * f;
  T acc = T(0);
  for (int64_t j = dst.ptr[n]; j < dst.ptr[n + 1]; ++j) {
    const int64_t e = edge_at(dst, j);
    acc += a[e * f + fj] * u[e * k_dim + c];
  }
  return acc;
}

// outer_sum's backward in a, g [N, K, F] and u [E, K] -> [E, F]: sum over k of
// g[dst[e], k, f] u[e, k].
template <typename T>
DDGNN_HD T contract_k_at(const T* g, const T* u, const SegmentMap& dst, int64_t k_dim, int64_t f,
                         int64_t e, int64_t col) {
  const T* gs = g + dst.index[e] * k_dim * f + col;
  T acc = T(0);
  for (int64_t c = 0; c < k_dim; ++c) acc += gs[c * f] * u[e * k_dim + c];
  return acc;
}

// outer_sum's backward in u, g [N, K, F] and a [E, F] -> [E, K]: out[e, k] = sum over f of
// g[dst[e], k, f] a[e, f]. This is lane `lane` of `lanes`'s share, the terms f = lane,
// lane + lanes, ...: a warp sums its 32 lanes' shares (lanes = 1: the whole sum).
template <typename T>
DDGNN_HD T contract_f_part(const T* g, const T* a, const SegmentMap& dst, int64_t k_dim, int64_t f,
                           int64_t e, int64_t c, int lane, int lanes) {
  const T* gs = g + (dst.index[e] * k_dim + c) * f;
  const T* as = a + e * f;
  T acc = T(0);
  for (int64_t j = lane; j < f; j += lanes) acc += gs[j] * as[j];
  return acc;
}

}  // namespace ddgnn::cuda
