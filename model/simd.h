// Loads and stores of GCC vector-extension vectors at any alignment, for the fused CPU kernels
// (model/small_mm.cpp, model/run_sum.h). Header-only, no torch.
#pragma once

// These helpers are always inlined into loops compiled for the vectors' instruction set; GCC's
// note that returning such a vector from a function compiled without it would change the ABI
// does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace ddgnn {

// A vector of V's size read from or written to p (any alignment): one vector load or store. A
// memcpy into a vector can be expanded into 16-byte moves through the stack instead (GCC's
// generic tuning does so for 32- and 64-byte vectors in the AVX2 versions of the kernels); the
// sums then live in memory, and every read of them waits on a store it cannot forward (5-20 times
// slower on an AVX2 CPU).
template <typename V, typename T>
__attribute__((always_inline)) inline V load_vec(const T* p) {
  typedef V U __attribute__((aligned(sizeof(T)), may_alias));
  return *reinterpret_cast<const U*>(p);
}

template <typename V, typename T>
__attribute__((always_inline)) inline void store_vec(T* p, const V& v) {
  typedef V U __attribute__((aligned(sizeof(T)), may_alias));
  *reinterpret_cast<U*>(p) = v;
}

}  // namespace ddgnn
