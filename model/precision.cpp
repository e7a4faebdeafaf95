// Precisions as LibTorch dtypes.
#include "model/precision.h"

#include <torch/version.h>

#include <c10/core/ScalarType.h>

#include "core/error.h"

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

std::string torch_version() {
  return TORCH_VERSION;
}

}  // namespace ddgnn
