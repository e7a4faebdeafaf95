// DDGNN_HD: a function that nvcc compiles for the host and the device and g++ as a plain inline
// function, so that the CPU tests run the per-row bodies of the CUDA kernels (model/cuda/*_rows.h).
// Plain C++: no CUDA header, no LibTorch.
#pragma once

#if defined(__CUDACC__)
#define DDGNN_HD __host__ __device__ __forceinline__
#else
#define DDGNN_HD inline
#endif
