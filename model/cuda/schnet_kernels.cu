// The CUDA kernels of SchNet's filter (model/schnet_filter.h): the Gaussians and the cosine cutoff
// of the edge lengths, ssp and sigmoid of the first product, and single passes over the [E, F]
// rows of its first and second derivatives, each row reduced by one warp (a fixed order). Thread
// mappings in model/cuda/grid.cuh, bodies in model/cuda/schnet_rows.h. Plain CUDA.
#include "model/cuda/grid.cuh"
#include "model/cuda/schnet_kernels.h"
#include "model/cuda/schnet_rows.h"

namespace ddgnn::cuda {

namespace {

template <typename T>
struct Gaussians {
  const T *d, *mu;
  T coeff;
  __device__ T operator()(int64_t e, int64_t k) const {
    return clamped_gaussian(coeff, d[e] - mu[k]);
  }
};

template <typename T>
struct CosineCutoff {
  const T* d;
  double rc;
  T *c, *c1, *c2;
  __device__ void operator()(int64_t e) const { cosine_cutoff(rc, d[e], c + e, c1 + e, c2 + e); }
};

template <typename T>
struct SspSigmoid {
  const T* p;
  T *s, *sig;
  __device__ void operator()(int64_t i) const { ssp_sigmoid(p[i], s + i, sig + i); }
};

template <typename T>
struct ScaleRows {
  const T *u, *c;
  int64_t f;
  __device__ T operator()(int64_t e, int64_t j) const { return u[e * f + j] * c[e]; }
};

template <typename T>
struct GradThroughCutoff {
  const T *gw, *u, *c;
  int64_t f;
  T *gu, *r1;
  __device__ void operator()(int64_t e, int lane) const {
    const T sum = warp_sum(grad_through_cutoff_row(gw, u, c, f, e, lane, kWarp, gu));
    if (lane == 0) r1[e] = sum;
  }
};

template <typename T>
struct GaussGradDot {
  const T *g, *gauss, *d, *mu, *base;
  int64_t n;
  T coeff;
  T* out;
  __device__ void operator()(int64_t e, int lane) const {
    const T sum = warp_sum(gauss_dot_row(g, gauss, d, mu, n, e, lane, kWarp));
    if (lane == 0) out[e] = 2 * coeff * sum + (base ? base[e] : T(0));
  }
};

template <typename T>
struct GaussSecond {
  const T *v, *gg, *gauss, *d, *mu;
  int64_t n;
  T coeff;
  T *dgg, *dd;
  __device__ void operator()(int64_t e, int lane) const {
    const T sum = warp_sum(gauss_second_row(v, gg, gauss, d, mu, coeff, n, e, lane, kWarp, dgg));
    if (lane == 0) dd[e] = v[e] * sum;
  }
};

template <typename T>
struct SigmoidSecond {
  const T *a, *gs, *sig;
  T *dgs, *dp;
  __device__ void operator()(int64_t i) const { sigmoid_second_at(a, gs, sig, i, dgs, dp); }
};

template <typename T>
struct CutoffSecond {
  const T *a, *gw, *u, *v, *c, *c1, *c2, *r1;
  int64_t f;
  T *dgw, *du, *dd;
  __device__ void operator()(int64_t e, int lane) const {
    const T sum = warp_sum(cutoff_second_row(a, gw, u, v, c, c1, f, e, lane, kWarp, dgw, du));
    if (lane == 0) dd[e] = c1[e] * sum + v[e] * r1[e] * c2[e];
  }
};

}  // namespace

template <typename T>
cudaError_t launch_gaussians(const T* d, const T* mu, int64_t n_edges, int64_t n, T coeff, T* gauss,
                             cudaStream_t stream) {
  return launch_rows(n_edges, n, gauss, Gaussians<T>{d, mu, coeff}, stream);
}

template <typename T>
cudaError_t launch_cosine_cutoff(const T* d, int64_t n_edges, double rc, T* c, T* c1, T* c2,
                                 cudaStream_t stream) {
  return launch_flat(n_edges, CosineCutoff<T>{d, rc, c, c1, c2}, stream);
}

template <typename T>
cudaError_t launch_ssp_sigmoid(const T* p, int64_t count, T* s, T* sig, cudaStream_t stream) {
  return launch_flat(count, SspSigmoid<T>{p, s, sig}, stream);
}

template <typename T>
cudaError_t launch_scale_rows(const T* u, const T* c, int64_t n_edges, int64_t f, T* w,
                              cudaStream_t stream) {
  return launch_rows(n_edges, f, w, ScaleRows<T>{u, c, f}, stream);
}

template <typename T>
cudaError_t launch_grad_through_cutoff(const T* gw, const T* u, const T* c, int64_t n_edges,
                                       int64_t f, T* gu, T* r1, cudaStream_t stream) {
  return launch_warp_rows(n_edges, GradThroughCutoff<T>{gw, u, c, f, gu, r1}, stream);
}

template <typename T>
cudaError_t launch_gauss_grad_dot(const T* g, const T* gauss, const T* d, const T* mu,
                                  const T* base, int64_t n_edges, int64_t n, T coeff, T* out,
                                  cudaStream_t stream) {
  return launch_warp_rows(n_edges, GaussGradDot<T>{g, gauss, d, mu, base, n, coeff, out}, stream);
}

template <typename T>
cudaError_t launch_gauss_second(const T* v, const T* gg, const T* gauss, const T* d, const T* mu,
                                int64_t n_edges, int64_t n, T coeff, T* dgg, T* dd,
                                cudaStream_t stream) {
  return launch_warp_rows(n_edges, GaussSecond<T>{v, gg, gauss, d, mu, n, coeff, dgg, dd}, stream);
}

template <typename T>
cudaError_t launch_sigmoid_second(const T* a, const T* gs, const T* sig, int64_t count, T* dgs,
                                  T* dp, cudaStream_t stream) {
  return launch_flat(count, SigmoidSecond<T>{a, gs, sig, dgs, dp}, stream);
}

template <typename T>
cudaError_t launch_cutoff_second(const T* a, const T* gw, const T* u, const T* v, const T* c,
                                 const T* c1, const T* c2, const T* r1, int64_t n_edges, int64_t f,
                                 T* dgw, T* du, T* dd, cudaStream_t stream) {
  return launch_warp_rows(n_edges, CutoffSecond<T>{a, gw, u, v, c, c1, c2, r1, f, dgw, du, dd},
                          stream);
}

#define DDGNN_SCHNET_LAUNCHERS(T)                                                                  \
  template cudaError_t launch_gaussians<T>(const T*, const T*, int64_t, int64_t, T, T*,            \
                                           cudaStream_t);                                          \
  template cudaError_t launch_cosine_cutoff<T>(const T*, int64_t, double, T*, T*, T*,              \
                                               cudaStream_t);                                      \
  template cudaError_t launch_ssp_sigmoid<T>(const T*, int64_t, T*, T*, cudaStream_t);             \
  template cudaError_t launch_scale_rows<T>(const T*, const T*, int64_t, int64_t, T*,              \
                                            cudaStream_t);                                         \
  template cudaError_t launch_grad_through_cutoff<T>(const T*, const T*, const T*, int64_t,        \
                                                     int64_t, T*, T*, cudaStream_t);               \
  template cudaError_t launch_gauss_grad_dot<T>(const T*, const T*, const T*, const T*, const T*,  \
                                                int64_t, int64_t, T, T*, cudaStream_t);            \
  template cudaError_t launch_gauss_second<T>(const T*, const T*, const T*, const T*, const T*,    \
                                              int64_t, int64_t, T, T*, T*, cudaStream_t);          \
  template cudaError_t launch_sigmoid_second<T>(const T*, const T*, const T*, int64_t, T*, T*,     \
                                                cudaStream_t);                                     \
  template cudaError_t launch_cutoff_second<T>(const T*, const T*, const T*, const T*, const T*,   \
                                               const T*, const T*, const T*, int64_t, int64_t, T*, \
                                               T*, T*, cudaStream_t);

DDGNN_SCHNET_LAUNCHERS(float)
DDGNN_SCHNET_LAUNCHERS(double)

}  // namespace ddgnn::cuda
