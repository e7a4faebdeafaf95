// Precisions as LibTorch dtypes.
#include "model/precision.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <c10/core/ScalarType.h>

#include "core/error.h"
#include "core/threads.h"

namespace ddgnn {

c10::ScalarType to_dtype(Precision p) {
  return p == Precision::kFloat64 ? c10::ScalarType::Double : c10::ScalarType::Float;
}

Precision precision_of(c10::ScalarType dtype) {
  if (dtype == c10::ScalarType::Double) return Precision::kFloat64;
  if (dtype == c10::ScalarType::Float) return Precision::kFloat32;
  throw ConfigError(std::string("no precision for dtype ") + c10::toString(dtype),
                    "models are fp32 or fp64");
}

bool flush_denormals() {
  const bool done = at::globalContext().setFlushDenormal(true);
  // The intra-op pool's threads, one chunk each (threads started later inherit the mode).
  const int64_t n = at::get_num_threads();
  at::parallel_for(0, n, 1, [](int64_t, int64_t) { at::globalContext().setFlushDenormal(true); });
  return done;
}

std::string set_up_cpu_compute(int threads) {
  at::set_num_threads(threads);
  flush_denormals();
  std::string blas = match_blas_kernels();
  set_blas_threads(threads);
  return blas;
}

std::string torch_version() {
  return TORCH_VERSION;
}

}  // namespace ddgnn
