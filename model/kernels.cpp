// Vectorisable loops: straight-line float arithmetic (no calls, selects instead of branches) that
// GCC turns into AVX-512 / AVX2 code at -O2 and above (the optimize attribute asks for the
// vectoriser's full cost model, which -O2 alone does not use for if-converted loops).
#include "model/kernels.h"

#include <atomic>
#include <cstring>
#include <string>

#include "core/error.h"
#include "model/simd.h"

namespace ddgnn::kernels {

namespace {

// The loops below are written once for a float (the loop of DDGNN_VECTOR_KERNEL, which GCC
// vectorises for AVX-512 itself) and for F8, eight floats in a 32-byte vector (the AVX2 loop:
// GCC's AVX2 clone of the same scalar loop stays scalar, its branches not if-converted).
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));

template <typename F>
__attribute__((always_inline)) inline F splat(float c) {
  return F{} + c;
}

template <typename F>
__attribute__((always_inline)) inline F load(const float* p) {
  if constexpr (sizeof(F) == sizeof(float)) {
    return *p;
  } else {
    return load_vec<F>(p);
  }
}

template <typename F>
__attribute__((always_inline)) inline void store(float* p, F v) {
  if constexpr (sizeof(F) == sizeof(float)) {
    *p = v;
  } else {
    store_vec(p, v);
  }
}

// 2^n for integral n (not NaN) in float's exponent range, from the exponent bits.
__attribute__((always_inline)) inline float pow2(float n) {
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return scale;
}
__attribute__((always_inline)) inline F8 pow2(F8 n) {
  const I8 bits = (__builtin_convertvector(n, I8) + 127) << 23;
  return (F8)bits;  // a cast between vectors of one size keeps the bits
}

// exp(x) for x <= 0 (clamped at -87, where expf is still normal): x = n ln2 + r with
// |r| <= ln2 / 2 (Cody–Waite, two-part ln2), exp(r) by Cephes's expf polynomial, 2^n from the
// exponent bits. Within 2 ulp of expf.
template <typename F>
__attribute__((always_inline)) inline F exp_nonpositive(F x) {
  x = x < splat<F>(-87.0f) ? splat<F>(-87.0f) : x;
  // Round to nearest by the 1.5 * 2^23 trick (vectorises where roundf does not).
  const F n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  F r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  F p = splat<F>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // A NaN input stays NaN through p; n, which becomes the exponent bits, must not be NaN there
  // (converting NaN to an integer is undefined; UBSan flagged it on a NaN loss).
  const F n_bits = n == n ? n : splat<F>(0.0f);
  return p * pow2(n_bits);
}

// log1p(e) for e in [0, 1] as 2 atanh(t), t = e / (2 + e) in [0, 1/3]: the odd series to t^15
// (truncation below 1e-8 relative), accurate in relative terms for tiny e too.
template <typename F>
__attribute__((always_inline)) inline F log1p_unit(F e) {
  const F t = e / (2.0f + e), z = t * t;
  F p = splat<F>(2.0f / 15.0f);
  p = p * z + 2.0f / 13.0f;
  p = p * z + 2.0f / 11.0f;
  p = p * z + 2.0f / 9.0f;
  p = p * z + 2.0f / 7.0f;
  p = p * z + 2.0f / 5.0f;
  p = p * z + 2.0f / 3.0f;
  p = p * z + 2.0f;
  return t * p;
}

// exp(-|v|).
template <typename F>
__attribute__((always_inline)) inline F exp_minus_abs(F v) {
  return exp_nonpositive(v < splat<F>(0.0f) ? v : -v);
}

// The elements i of each kernel, for F a float or F8.
template <typename F>
__attribute__((always_inline)) inline void softplus_sigmoid_at(const float* x, float* y, float* s,
                                                               float shift, int64_t i) {
  const F v = load<F>(x + i), zero = splat<F>(0.0f), one = splat<F>(1.0f);
  const F e = exp_minus_abs(v);
  store(y + i, (v > zero ? v : zero) + log1p_unit(e) - shift);
  if (s != nullptr) store(s + i, (v >= zero ? one : e) / (1.0f + e));
}

template <typename F>
__attribute__((always_inline)) inline void softplus_grad_backward_at(const float* gg,
                                                                     const float* g, const float* x,
                                                                     const float* s, float* gx,
                                                                     float* gg_s, int64_t i) {
  const F ggv = load<F>(gg + i);
  if (gx != nullptr) {
    // sigmoid'(x) = e / (1 + e)^2 with e = exp(-|x|): accurate where sigmoid(x) rounds to 1
    // and s (1 - s) would lose every digit.
    const F e = exp_minus_abs(load<F>(x + i)), d = 1.0f / (1.0f + e);
    store(gx + i, ggv * load<F>(g + i) * (e * d * d));
  }
  if (gg_s != nullptr) store(gg_s + i, ggv * load<F>(s + i));
}

template <typename F>
__attribute__((always_inline)) inline void silu_sigmoid_at(const float* x, float* y, float* s,
                                                           int64_t i) {
  const F v = load<F>(x + i), zero = splat<F>(0.0f), one = splat<F>(1.0f);
  const F e = exp_minus_abs(v);
  const F sv = (v >= zero ? one : e) / (1.0f + e);
  store(y + i, v * sv);
  if (s != nullptr) store(s + i, sv);
}

template <typename F>
__attribute__((always_inline)) inline void silu_grad_at(const float* g, const float* x,
                                                        const float* s, float* out, int64_t i) {
  // 1 - s = e / (1 + e) (x >= 0) or 1 / (1 + e) (x < 0) with e = exp(-|x|): accurate where s
  // rounds to 1. d = s (1 + x (1 - s)), ATen's form (the same rounding near SiLU's minimum).
  const F v = load<F>(x + i), zero = splat<F>(0.0f), one = splat<F>(1.0f);
  const F e = exp_minus_abs(v);
  const F one_minus_s = (v < zero ? one : e) / (1.0f + e);
  store(out + i, load<F>(g + i) * (load<F>(s + i) * (1.0f + v * one_minus_s)));
}

template <typename F>
__attribute__((always_inline)) inline void silu_grad_backward_at(const float* gg, const float* g,
                                                                 const float* x, const float* s,
                                                                 float* gx, float* gg_d,
                                                                 int64_t i) {
  const F v = load<F>(x + i), ggv = load<F>(gg + i), zero = splat<F>(0.0f), one = splat<F>(1.0f);
  const F e = exp_minus_abs(v), d = 1.0f / (1.0f + e);
  const F ss = e * d * d;  // s (1 - s)
  // 1 - 2 s = (1 - e) / (1 + e) for x < 0, (e - 1) / (1 + e) for x >= 0.
  const F one_minus_2s = (v < zero ? 1.0f - e : e - 1.0f) * d;
  if (gx != nullptr) store(gx + i, ggv * load<F>(g + i) * (ss * (2.0f + v * one_minus_2s)));
  const F one_minus_s = (v < zero ? one : e) * d;
  if (gg_d != nullptr) store(gg_d + i, ggv * (load<F>(s + i) * (1.0f + v * one_minus_s)));
}

// n elements by `at`: every element alone (GCC vectorises the loop for AVX-512), or eight at a
// time in F8 and the tail alone (AVX2).
template <typename At>
DDGNN_VECTOR_KERNEL void each_element(int64_t n, At at) {
  for (int64_t i = 0; i < n; ++i) at(float{}, i);
}

template <typename At>
DDGNN_AVX2_LOOP void each_element_avx2(int64_t n, At at) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) at(F8{}, i);
  for (; i < n; ++i) at(float{}, i);
}

template <typename At>
inline void for_elements(int64_t n, At at) {
  if (avx2_loops())
    each_element_avx2(n, at);
  else
    each_element(n, at);
}

}  // namespace

namespace {

CpuKernels detected_kernels() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const CpuKernels level = __builtin_cpu_supports("avx512f") ? CpuKernels::kWide
                                  : cpu_can_run(CpuKernels::kAvx2)  ? CpuKernels::kAvx2
                                                                    : CpuKernels::kNone;
  return level;
#else
  return CpuKernels::kWide;
#endif
}

std::atomic<int> g_forced{-1};  // a CpuKernelsScope's level, or -1

}  // namespace

CpuKernels cpu_kernels() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<CpuKernels>(forced) : detected_kernels();
}

const char* to_string(CpuKernels level) {
  switch (level) {
    case CpuKernels::kAvx2:
      return "avx2";
    case CpuKernels::kNone:
      return "none";
    default:
      return "wide";
  }
}

bool cpu_can_run(CpuKernels level) {
  if (level != CpuKernels::kAvx2) return true;
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

CpuKernelsScope::CpuKernelsScope(CpuKernels level) {
  if (!cpu_can_run(level))
    throw Error(std::string("CpuKernelsScope: this CPU cannot run the ") + to_string(level) +
                " loops");
  m_previous = g_forced.exchange(static_cast<int>(level));
}

CpuKernelsScope::~CpuKernelsScope() {
  g_forced.store(m_previous);
}

void softplus_sigmoid(const float* x, float* y, float* s, int64_t n, float shift) {
  for_elements(
      n, [=](auto f, int64_t i) __attribute__((always_inline)) {
        softplus_sigmoid_at<decltype(f)>(x, y, s, shift, i);
      });
}

void softplus_grad_backward(const float* gg, const float* g, const float* x, const float* s,
                            float* gx, float* gg_s, int64_t n) {
  for_elements(
      n, [=](auto f, int64_t i) __attribute__((always_inline)) {
        softplus_grad_backward_at<decltype(f)>(gg, g, x, s, gx, gg_s, i);
      });
}

void silu_sigmoid(const float* x, float* y, float* s, int64_t n) {
  for_elements(
      n, [=](auto f, int64_t i)
             __attribute__((always_inline)) { silu_sigmoid_at<decltype(f)>(x, y, s, i); });
}

void silu_grad(const float* g, const float* x, const float* s, float* out, int64_t n) {
  for_elements(
      n, [=](auto f, int64_t i)
             __attribute__((always_inline)) { silu_grad_at<decltype(f)>(g, x, s, out, i); });
}

void silu_grad_backward(const float* gg, const float* g, const float* x, const float* s, float* gx,
                        float* gg_d, int64_t n) {
  for_elements(
      n, [=](auto f, int64_t i) __attribute__((always_inline)) {
        silu_grad_backward_at<decltype(f)>(gg, g, x, s, gx, gg_d, i);
      });
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
