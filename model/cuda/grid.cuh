// The three thread mappings of the CUDA kernels (for the .cu files only), each a kernel template
// that calls a functor per output:
// - rows_kernel: an output of `rows` rows of `cols` contiguous values. A block is tx x ty
//   threads, tx the power of two >= cols (at most 128) along a row, so a warp reads a row's
//   consecutive values (coalesced), ty = 256 / tx rows per block; rows and columns stride.
// - warp_rows_kernel: one warp per row, for rows reduced to a value (the functor sums its
//   lanes' shares with warp_sum: a fixed butterfly, the same order every run).
// - flat_kernel: one thread per element.
// Grids are capped at kMaxBlocks and stride over the rest; nothing is launched for no work.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace ddgnn::cuda {

constexpr int kBlockThreads = 256;
constexpr int64_t kMaxBlocks = 65535;
constexpr int kWarp = 32;

template <typename T, typename Body>
__global__ void __launch_bounds__(kBlockThreads)
    rows_kernel(int64_t rows, int64_t cols, T* out, Body body) {
  for (int64_t row = int64_t(blockIdx.x) * blockDim.y + threadIdx.y; row < rows;
       row += int64_t(gridDim.x) * blockDim.y)
    for (int64_t col = threadIdx.x; col < cols; col += blockDim.x)
      out[row * cols + col] = body(row, col);
}

// out[row * cols + col] = body(row, col) for every row < rows and col < cols.
template <typename T, typename Body>
cudaError_t launch_rows(int64_t rows, int64_t cols, T* out, Body body, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  int tx = 1;
  while (tx < cols && tx < 128) tx *= 2;
  const int ty = kBlockThreads / tx;
  const int64_t blocks = std::min<int64_t>((rows + ty - 1) / ty, kMaxBlocks);
  rows_kernel<<<dim3(unsigned(blocks)), dim3(unsigned(tx), unsigned(ty)), 0, stream>>>(rows, cols,
                                                                                       out, body);
  return cudaGetLastError();
}

// The sum of v over the 32 lanes of a warp, in every lane (xor butterfly: a fixed order).
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Calls row(r, lane) with every lane of one warp for each r < rows (r is the same across the
// warp, so the functor may call warp_sum).
template <typename Row>
__global__ void __launch_bounds__(kBlockThreads) warp_rows_kernel(int64_t rows, Row row) {
  for (int64_t r = int64_t(blockIdx.x) * blockDim.y + threadIdx.y; r < rows;
       r += int64_t(gridDim.x) * blockDim.y)
    row(r, int(threadIdx.x));
}

template <typename Row>
cudaError_t launch_warp_rows(int64_t rows, Row row, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  constexpr int kWarpsPerBlock = kBlockThreads / kWarp;
  const int64_t blocks =
      std::min<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks);
  warp_rows_kernel<<<dim3(unsigned(blocks)), dim3(kWarp, kWarpsPerBlock), 0, stream>>>(rows, row);
  return cudaGetLastError();
}

// Calls body(i) for every i < n, one thread each.
template <typename Body>
__global__ void __launch_bounds__(kBlockThreads) flat_kernel(int64_t n, Body body) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    body(i);
}

template <typename Body>
cudaError_t launch_flat(int64_t n, Body body, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int64_t blocks = std::min<int64_t>((n + kBlockThreads - 1) / kBlockThreads, kMaxBlocks);
  flat_kernel<<<dim3(unsigned(blocks)), dim3(kBlockThreads), 0, stream>>>(n, body);
  return cudaGetLastError();
}

}  // namespace ddgnn::cuda
