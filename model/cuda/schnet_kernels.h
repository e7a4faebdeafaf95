// Launchers of the CUDA kernels of SchNet's filter (model/cuda/schnet_kernels.cu): the elementwise
// passes between its matrix products (which stay cuBLAS's, through ATen), T = float or double,
// over raw device pointers. As model/cuda/segment_kernels.h: enqueued on `stream`, no allocation,
// no synchronisation, cudaGetLastError() returned, every output element written. Notation and
// formulas: model/cuda/schnet_rows.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ddgnn::cuda {

// d [E], mu [n] -> gauss [E, n].
template <typename T>
cudaError_t launch_gaussians(const T* d, const T* mu, int64_t n_edges, int64_t n, T coeff, T* gauss,
                             cudaStream_t stream);

// d [E] (Å) -> c, c1, c2 [E], the cosine cutoff of radius rc (Å) and its derivatives in d.
template <typename T>
cudaError_t launch_cosine_cutoff(const T* d, int64_t n_edges, double rc, T* c, T* c1, T* c2,
                                 cudaStream_t stream);

// p [count] -> S = ssp(p), s = sigmoid(p) [count].
template <typename T>
cudaError_t launch_ssp_sigmoid(const T* p, int64_t count, T* s, T* sig, cudaStream_t stream);

// u [E, f], c [E] -> w = u c [E, f].
template <typename T>
cudaError_t launch_scale_rows(const T* u, const T* c, int64_t n_edges, int64_t f, T* w,
                              cudaStream_t stream);

// gw, u [E, f], c [E] -> gu = gw c [E, f], r1 = sum_f gw u [E].
template <typename T>
cudaError_t launch_grad_through_cutoff(const T* gw, const T* u, const T* c, int64_t n_edges,
                                       int64_t f, T* gu, T* r1, cudaStream_t stream);

// g, gauss [E, n], d [E], mu [n], base [E] or null -> out[e] = 2 coeff sum_k g G x + base[e].
template <typename T>
cudaError_t launch_gauss_grad_dot(const T* g, const T* gauss, const T* d, const T* mu,
                                  const T* base, int64_t n_edges, int64_t n, T coeff, T* out,
                                  cudaStream_t stream);

// v [E], gg, gauss [E, n], d [E], mu [n] -> dgg = v G' [E, n], dd = v sum_k gg G'' [E].
template <typename T>
cudaError_t launch_gauss_second(const T* v, const T* gg, const T* gauss, const T* d, const T* mu,
                                int64_t n_edges, int64_t n, T coeff, T* dgg, T* dd,
                                cudaStream_t stream);

// a, gs, sig [count] -> dgs = a s, dp = a gs s (1 - s) [count].
template <typename T>
cudaError_t launch_sigmoid_second(const T* a, const T* gs, const T* sig, int64_t count, T* dgs,
                                  T* dp, cudaStream_t stream);

// a = dL/dgU, gw, u [E, f], v, c, c1, c2, r1 [E] -> dgw, du [E, f] and
// dd = c1 sum_f a gw + v r1 c2 [E].
template <typename T>
cudaError_t launch_cutoff_second(const T* a, const T* gw, const T* u, const T* v, const T* c,
                                 const T* c1, const T* c2, const T* r1, int64_t n_edges, int64_t f,
                                 T* dgw, T* du, T* dd, cudaStream_t stream);

}  // namespace ddgnn::cuda
