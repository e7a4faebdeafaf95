// The inner step of the fused coupling kernels (model/tensor_product.cpp,
// model/channel_coupling.cpp): a run of entries that share one output row, their channel-wise
// products summed in registers and the row read and written once. Header-only, no torch: it is
// inlined into each caller's DDGNN_VECTOR_KERNEL or DDGNN_AVX2_LOOP loop and compiled for that
// loop's targets.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/simd.h"

namespace ddgnn {

// Entries 0..n-1 ordered stably by key(k), and the runs of one key: order[starts[r]] ..
// order[starts[r + 1] - 1] share one (starts has n_runs + 1 offsets). The kernels below sum a
// run's products in registers and write its output row once.
struct KeyRuns {
  std::vector<int64_t> order, starts;
};

template <typename Key>
KeyRuns runs_by_key(int64_t n, Key key) {
  KeyRuns r;
  r.order.resize(size_t(n));
  for (int64_t k = 0; k < n; ++k) r.order[size_t(k)] = k;
  std::stable_sort(r.order.begin(), r.order.end(),
                   [&](int64_t a, int64_t b) { return key(a) < key(b); });
  for (int64_t k = 0; k < n; ++k)
    if (k == 0 || key(r.order[size_t(k)]) != key(r.order[size_t(k - 1)])) r.starts.push_back(k);
  r.starts.push_back(n);
  return r;
}

// out row o[0, f) += the sum over the run's entries [begin, end) of coef(entry) * a(entry)[q] *
// b(entry)[q], in blocks of 32 float32 (16 float64) channels summed in registers (GCC's vector
// extension: the vectoriser alone kept a block's sums in memory), two vectors of 64 bytes
// (VB 64: AVX-512) or four of 32 (VB 32: AVX2, where 64-byte vectors are built through the stack),
// so that o is read and written once per run; the channels past the last block one at a time.
template <int VB, typename T, typename Coef, typename RowA, typename RowB>
__attribute__((always_inline)) inline void run_sum(T* __restrict__ o, int64_t f, const int64_t* ent,
                                                   int64_t begin, int64_t end, Coef coef,
                                                   RowA row_a, RowB row_b) {
  typedef T V __attribute__((vector_size(VB)));
  constexpr int64_t kLanes = int64_t(sizeof(V) / sizeof(T));
  constexpr int kAcc = 128 / VB;  // vectors of one block
  int64_t q0 = 0;
  for (; q0 + kAcc * kLanes <= f; q0 += kAcc * kLanes) {
    V acc[kAcc];
    for (int v = 0; v < kAcc; ++v) acc[v] = V{};
    for (int64_t k = begin; k < end; ++k) {
      const int64_t* x = ent + 3 * k;
      const T c = coef(x);
      const T* a = row_a(x) + q0;
      const T* b = row_b(x) + q0;
      for (int v = 0; v < kAcc; ++v)
        acc[v] += c * load_vec<V>(a + v * kLanes) * load_vec<V>(b + v * kLanes);
    }
    for (int v = 0; v < kAcc; ++v)
      store_vec(o + q0 + v * kLanes, load_vec<V>(o + q0 + v * kLanes) + acc[v]);
  }
  for (int64_t k = begin; k < end && q0 < f; ++k) {
    const int64_t* x = ent + 3 * k;
    const T c = coef(x);
    const T* __restrict__ a = row_a(x);
    const T* __restrict__ b = row_b(x);
    for (int64_t q = q0; q < f; ++q) o[q] += c * a[q] * b[q];
  }
}

}  // namespace ddgnn
