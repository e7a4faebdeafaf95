// Precision names (model/spec.h) mapped to LibTorch dtypes, and LibTorch's version. Header free of
// torch: the dtype enum is only declared here.
#pragma once

#include <cstdint>
#include <string>

#include "model/spec.h"

namespace c10 {
enum class ScalarType : int8_t;
}

namespace ddgnn {

// The dtype of the weights and tensors (bf16: float32, the master copy).
c10::ScalarType to_dtype(Precision p);
// The precision of a float32 or float64 dtype (ConfigError for any other).
Precision precision_of(c10::ScalarType dtype);

// Subnormal floats flushed to zero (FTZ and DAZ) on the calling thread, the intra-op pool's threads
// and the threads started afterwards (a new thread inherits its creator's floating-point
// environment): the product of a
// Gaussian basis's e^-80 tail and a small gradient is subnormal, and the CPU's slow path for each
// such operand made SchNet's filter-weight gradient (a [64, E] x [E, 50] product) 30x slower.
// Changes only values below 1.2e-38 (float32) and 2.2e-308 (float64). Returns false where the CPU
// has no such mode (nothing changes then). Call after at::set_num_threads.
bool flush_denormals();

// The CPU compute set up for `threads` threads (>= 1), in this order: LibTorch's intra-op pool,
// subnormals flushed (flush_denormals), OpenBLAS's kernels matched to the CPU
// (match_blas_kernels, core/threads.h) and its pool sized to the same count (set_blas_threads).
// Returns match_blas_kernels's message ("" when the kernels were left as they were), for the
// caller to log once. Call before the first computation.
std::string set_up_cpu_compute(int threads);

// LibTorch's version string, e.g. "1.13.1" (reported in the run header and in outputs).
std::string torch_version();

}  // namespace ddgnn
