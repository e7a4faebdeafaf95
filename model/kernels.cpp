// Vectorisable loops: straight-line float arithmetic (no calls, selects instead of branches) that
// GCC turns into AVX-512 / AVX2 code at -O2 and above (the optimize attribute asks for the
// vectoriser's full cost model, which -O2 alone does not use for if-converted loops).
#include "model/kernels.h"

#include <cstring>

namespace ddgnn::kernels {

namespace {

// exp(x) for x <= 0 (clamped at -87, where expf is still normal): x = n ln2 + r with
// |r| <= ln2 / 2 (Cody–Waite, two-part ln2), exp(r) by Cephes's expf polynomial, 2^n from the
// exponent bits. Within 2 ulp of expf.
inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  // Round to nearest by the 1.5 * 2^23 trick (vectorises where roundf does not).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // A NaN input stays NaN through p; n, which becomes the exponent bits, must not be NaN there
  // (converting NaN to an integer is undefined; UBSan flagged it on a NaN loss).
  const float n_bits = n == n ? n : 0.0f;
  const int32_t bits = (static_cast<int32_t>(n_bits) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// log1p(e) for e in [0, 1] as 2 atanh(t), t = e / (2 + e) in [0, 1/3]: the odd series to t^15
// (truncation below 1e-8 relative), accurate in relative terms for tiny e too.
inline float log1p_unit(float e) {
  const float t = e / (2.0f + e), z = t * t;
  float p = 2.0f / 15.0f;
  p = p * z + 2.0f / 13.0f;
  p = p * z + 2.0f / 11.0f;
  p = p * z + 2.0f / 9.0f;
  p = p * z + 2.0f / 7.0f;
  p = p * z + 2.0f / 5.0f;
  p = p * z + 2.0f / 3.0f;
  p = p * z + 2.0f;
  return t * p;
}

}  // namespace

DDGNN_VECTOR_KERNEL
void softplus_sigmoid(const float* __restrict x, float* __restrict y, float* __restrict s,
                      int64_t n, float shift) {
  if (s == nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      const float e = exp_nonpositive(v < 0.0f ? v : -v);
      y[i] = (v > 0.0f ? v : 0.0f) + log1p_unit(e) - shift;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = exp_nonpositive(v < 0.0f ? v : -v);  // exp(-|v|)
    y[i] = (v > 0.0f ? v : 0.0f) + log1p_unit(e) - shift;
    s[i] = (v >= 0.0f ? 1.0f : e) / (1.0f + e);
  }
}

DDGNN_VECTOR_KERNEL
void softplus_grad_backward(const float* __restrict gg, const float* __restrict g,
                            const float* __restrict x, const float* __restrict s,
                            float* __restrict gx, float* __restrict gg_s, int64_t n) {
  if (gx != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      // sigmoid'(x) = e / (1 + e)^2 with e = exp(-|x|): accurate where sigmoid(x) rounds to 1
      // and s (1 - s) would lose every digit.
      const float v = x[i];
      const float e = exp_nonpositive(v < 0.0f ? v : -v), d = 1.0f / (1.0f + e);
      gx[i] = gg[i] * g[i] * (e * d * d);
    }
  }
  if (gg_s != nullptr)
    for (int64_t i = 0; i < n; ++i) gg_s[i] = gg[i] * s[i];
}

DDGNN_VECTOR_KERNEL
void silu_sigmoid(const float* __restrict x, float* __restrict y, float* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = exp_nonpositive(v < 0.0f ? v : -v);  // exp(-|v|)
    const float sv = (v >= 0.0f ? 1.0f : e) / (1.0f + e);
    y[i] = v * sv;
    if (s != nullptr) s[i] = sv;
  }
}

DDGNN_VECTOR_KERNEL
void silu_grad(const float* __restrict g, const float* __restrict x, const float* __restrict s,
               float* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    // 1 - s = e / (1 + e) (x >= 0) or 1 / (1 + e) (x < 0) with e = exp(-|x|): accurate where s
    // rounds to 1. d = s (1 + x (1 - s)), ATen's form (the same rounding near SiLU's minimum).
    const float v = x[i];
    const float e = exp_nonpositive(v < 0.0f ? v : -v);
    const float one_minus_s = (v < 0.0f ? 1.0f : e) / (1.0f + e);
    out[i] = g[i] * (s[i] * (1.0f + v * one_minus_s));
  }
}

DDGNN_VECTOR_KERNEL
void silu_grad_backward(const float* __restrict gg, const float* __restrict g,
                        const float* __restrict x, const float* __restrict s, float* __restrict gx,
                        float* __restrict gg_d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = exp_nonpositive(v < 0.0f ? v : -v), d = 1.0f / (1.0f + e);
    const float ss = e * d * d;  // s (1 - s)
    // 1 - 2 s = (1 - e) / (1 + e) for x < 0, (e - 1) / (1 + e) for x >= 0.
    const float one_minus_2s = (v < 0.0f ? 1.0f - e : e - 1.0f) * d;
    if (gx != nullptr) gx[i] = gg[i] * g[i] * (ss * (2.0f + v * one_minus_2s));
    const float one_minus_s = (v < 0.0f ? 1.0f : e) * d;
    if (gg_d != nullptr) gg_d[i] = gg[i] * (s[i] * (1.0f + v * one_minus_s));
  }
}

DDGNN_VECTOR_KERNEL
void gaussians(const float* __restrict d, const float* __restrict mu, float* __restrict out,
               int64_t n_rows, int64_t n, float coeff) {
  for (int64_t e = 0; e < n_rows; ++e) {
    const float de = d[e];
    float* __restrict row = out + e * n;
    for (int64_t k = 0; k < n; ++k) {
      const float x = de - mu[k];
      const float a = coeff * x * x;
      row[k] = exp_nonpositive(a < -80.0f ? -80.0f : a);
    }
  }
}

}  // namespace ddgnn::kernels
