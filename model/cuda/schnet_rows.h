// The per-element and per-row bodies of the CUDA kernels of SchNet's filter
// (model/cuda/schnet_kernels.cu), in the notation of model/schnet_filter.cpp: per edge e,
// x_k = d - mu_k, G_k = exp(max(coeff x_k^2, -80)), P = G A1^T + b1, S = ssp(P), s = sigmoid(P),
// U = S A2^T + b2, c = cutoff(d) with derivatives c1, c2, W = U c. A row body writes its row's
// elements f = lane, lane + lanes, ... and returns that share of the row's sum (a warp adds its
// 32 lanes' shares; lanes = 1: the whole row). Compiled by nvcc for the device and by g++ for the
// CPU tests (tests/model/test_cuda_rows.cpp). Contiguous row-major arrays; [E, F] rows of F.
#pragma once

#include <cmath>
#include <cstdint>

#include "model/cuda/host_device.h"

namespace ddgnn::cuda {

DDGNN_HD float exp_of(float x) {
  return expf(x);
}
DDGNN_HD double exp_of(double x) {
  return exp(x);
}
DDGNN_HD float log1p_of(float x) {
  return log1pf(x);
}
DDGNN_HD double log1p_of(double x) {
  return log1p(x);
}

// G = exp(max(coeff x^2, -80)) (coeff < 0): exp of a very negative number contributes nothing.
template <typename T>
DDGNN_HD T clamped_gaussian(T coeff, T x) {
  const T v = coeff * x * x;
  return exp_of(v > T(-80) ? v : T(-80));
}

// S = softplus(p) - ln 2 and s = sigmoid(p) = ssp'(p), from e = exp(-|p|) (no overflow, no
// cancellation; the fused CPU kernels' form), softplus(p) = p past 20 as ATen's (so float64
// agrees with the CPU's and the generic version to rounding).
template <typename T>
DDGNN_HD void ssp_sigmoid(T p, T* s_out, T* sig_out) {
  const T e = exp_of(p > T(0) ? -p : p);
  *s_out = (p > T(20) ? p : (p > T(0) ? p : T(0)) + log1p_of(e)) - T(0.69314718055994530942);
  *sig_out = (p >= T(0) ? T(1) : e) / (T(1) + e);
}

// The cosine cutoff 0.5 (cos(pi d / rc) + 1) and its first two derivatives in d, evaluated in
// double as the fused CPU version does (on the device by sincospi, whose argument reduction is
// exact and needs no local memory).
template <typename T>
DDGNN_HD void cosine_cutoff(double rc, T d, T* c, T* c1, T* c2) {
  constexpr double kPi = 3.14159265358979323846;
  const double k = kPi / rc;
  double sn, cs;
#if defined(__CUDA_ARCH__)
  sincospi(double(d) / rc, &sn, &cs);
#else
  sn = sin(k * double(d));
  cs = cos(k * double(d));
#endif
  *c = T(0.5 * (cs + 1.0));
  *c1 = T(-0.5 * k * sn);
  *c2 = T(-0.5 * k * k * cs);
}

// Through W = U c: gU = gW c for row e, and the share of r1 = sum_f gW U.
template <typename T>
DDGNN_HD T grad_through_cutoff_row(const T* gw, const T* u, const T* c, int64_t f, int64_t e,
                                   int lane, int lanes, T* gu) {
  T acc = T(0);
  for (int64_t j = lane; j < f; j += lanes) {
    const int64_t i = e * f + j;
    gu[i] = gw[i] * c[e];
    acc += gw[i] * u[i];
  }
  return acc;
}

// The share of sum_k g[e, k] G[e, k] x_k (dL/dd through the Gaussians is 2 coeff times the sum).
template <typename T>
DDGNN_HD T gauss_dot_row(const T* g, const T* gauss, const T* d, const T* mu, int64_t n, int64_t e,
                         int lane, int lanes) {
  T acc = T(0);
  for (int64_t k = lane; k < n; k += lanes) acc += g[e * n + k] * gauss[e * n + k] * (d[e] - mu[k]);
  return acc;
}

// The second-order pass over the Gaussians, given v = dL/d(gd) [E] and gG [E, n]: writes
// dL/dgG = v G' (G' = 2 coeff x G) for row e and returns the share of sum_k gG G'' (G'' =
// (2 coeff + 4 coeff^2 x^2) G; the direct term on d is v times the sum).
template <typename T>
DDGNN_HD T gauss_second_row(const T* v, const T* gg, const T* gauss, const T* d, const T* mu,
                            T coeff, int64_t n, int64_t e, int lane, int lanes, T* dgg) {
  T acc = T(0);
  for (int64_t k = lane; k < n; k += lanes) {
    const int64_t i = e * n + k;
    const T x = d[e] - mu[k], g = gauss[i];
    dgg[i] = v[e] * 2 * coeff * x * g;
    acc += gg[i] * (2 * coeff + 4 * coeff * coeff * x * x) * g;
  }
  return acc;
}

// Through gP = gS s, given dL/dgP = a: dL/dgS = a s and dL/dP = a gS s (1 - s), element i.
template <typename T>
DDGNN_HD void sigmoid_second_at(const T* a, const T* gs, const T* sig, int64_t i, T* dgs, T* dp) {
  dgs[i] = a[i] * sig[i];
  dp[i] = a[i] * gs[i] * sig[i] * (1 - sig[i]);
}

// Through gU = gW c and gd's term r1 c1, given dL/dgU = a and v = dL/d(gd): writes
// dL/dgW = a c + v c1 U and dL/dU = v c1 gW for row e, and returns the share of sum_f a gW (the
// direct term on d is c1 times the sum plus v r1 c2).
template <typename T>
DDGNN_HD T cutoff_second_row(const T* a, const T* gw, const T* u, const T* v, const T* c,
                             const T* c1, int64_t f, int64_t e, int lane, int lanes, T* dgw,
                             T* du) {
  const T vc1 = v[e] * c1[e];
  T acc = T(0);
  for (int64_t j = lane; j < f; j += lanes) {
    const int64_t i = e * f + j;
    dgw[i] = a[i] * c[e] + vc1 * u[i];
    du[i] = vc1 * gw[i];
    acc += a[i] * gw[i];
  }
  return acc;
}

}  // namespace ddgnn::cuda
