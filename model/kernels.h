// Elementwise float32 kernels that LibTorch 1.13 runs slowly on CPU: softplus and SiLU with their
// sigmoid in one pass (ATen's softplus alone costs ~3 ns an element here), and the products of
// their derivatives. Raw pointers, no torch; each kernel is compiled for AVX-512, AVX2 and baseline
// x86-64 and picked at load time (GCC target_clones), so one binary runs anywhere.
#pragma once

#include <cstdint>

// A hot loop compiled for AVX-512, AVX2 and baseline x86-64, the CPU's best picked at load time
// (GCC target_clones; the build itself targets plain x86-64), with the vectoriser's full cost
// model (which -O2 alone does not use for if-converted loops). One version elsewhere.
#if defined(__x86_64__) && defined(__GNUC__)
#define DDGNN_VECTOR_KERNEL \
  __attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3")))
#else
#define DDGNN_VECTOR_KERNEL
#endif

// A loop compiled for AVX2 with FMA alone, written for 32-byte vectors (GCC's AVX2 clones of the
// loops above keep 64-byte blocks, which spill on AVX2's 16 registers, or stay scalar where a
// branch is not if-converted): called where cpu_kernels() is kAvx2.
#if defined(__x86_64__) && defined(__GNUC__)
#define DDGNN_AVX2_LOOP __attribute__((target("avx2,fma"), optimize("O3")))
#else
#define DDGNN_AVX2_LOOP
#endif

namespace ddgnn::kernels {

// Which versions of the hot loops run: kWide the DDGNN_VECTOR_KERNEL ones (AVX-512, or a CPU
// other than x86), kAvx2 the DDGNN_AVX2_LOOP ones where they exist, kNone (an x86 CPU without AVX2
// and FMA) the DDGNN_VECTOR_KERNEL ones and ATen's products instead of small_mm's kernels. Found
// once from the CPU, unless a CpuKernelsScope is alive.
enum class CpuKernels { kWide, kAvx2, kNone };
CpuKernels cpu_kernels();
const char* to_string(CpuKernels level);

// Whether the DDGNN_AVX2_LOOP versions run (cpu_kernels() is kAvx2): the one test of the level
// that the loops' dispatchers make.
inline bool avx2_loops() {
  return cpu_kernels() == CpuKernels::kAvx2;
}

// Whether this CPU can run the loops of `level` (kWide and kNone run anywhere, the
// DDGNN_VECTOR_KERNEL loops picking their version by the CPU; kAvx2 needs AVX2 and FMA).
bool cpu_can_run(CpuKernels level);

// Runs the loops of `level` instead of the CPU's own while it lives, for every thread (tests and
// benchmarks compare the versions on one CPU; not for use while other threads compute). Throws
// ddgnn::Error when the CPU cannot run them.
class CpuKernelsScope {
 public:
  explicit CpuKernelsScope(CpuKernels level);
  ~CpuKernelsScope();
  CpuKernelsScope(const CpuKernelsScope&) = delete;
  CpuKernelsScope& operator=(const CpuKernelsScope&) = delete;

 private:
  int m_previous;
};

// y = softplus(x) - shift and s = sigmoid(x), n elements. softplus(x) = max(x, 0) +
// log1p(exp(-|x|)): no overflow, and within 3e-7 relative of the float64 value (PyTorch's
// threshold of 20 only changes results below float32's resolution). s may be null.
void softplus_sigmoid(const float* x, float* y, float* s, int64_t n, float shift);

// The derivatives of g * s with s = sigmoid(x) (softplus's backward applied to g), given the
// upstream gradient gg: gx = gg * g * sigmoid'(x), gg_s = gg * s. sigmoid' is computed from x
// (accurate also where s rounds to 1). Either output may be null.
void softplus_grad_backward(const float* gg, const float* g, const float* x, const float* s,
                            float* gx, float* gg_s, int64_t n);

// SiLU, x sigmoid(x), with sigmoid(x) in one pass: y = x s, s = sigmoid(x) (s may be null).
void silu_sigmoid(const float* x, float* y, float* s, int64_t n);

// SiLU's backward applied to g: out = g * d(x), d(x) = s (1 + x (1 - s)) with s = sigmoid(x).
void silu_grad(const float* g, const float* x, const float* s, float* out, int64_t n);

// The derivatives of g * d(x) given the upstream gradient gg: gx = gg * g * d'(x) with
// d'(x) = s (1 - s) (2 + x (1 - 2 s)), gg_d = gg * d(x). s (1 - s) is computed from x (accurate
// also where s rounds to 1). Either output may be null.
void silu_grad_backward(const float* gg, const float* g, const float* x, const float* s, float* gx,
                        float* gg_d, int64_t n);

// Gaussians out[e, k] = exp(max(coeff (d[e] - mu[k])^2, -80)), e < n_rows, k < n (coeff < 0).
void gaussians(const float* d, const float* mu, float* out, int64_t n_rows, int64_t n, float coeff);

}  // namespace ddgnn::kernels
