// Precision names <-> LibTorch dtypes.
#include "model/precision.h"

#include <torch/version.h>

#include <c10/core/ScalarType.h>

#include "core/error.h"

namespace ddgnn {

Precision parse_precision(const std::string& name) {
  if (name == "fp32" || name == "float32" || name == "float") return Precision::kFloat32;
  if (name == "fp64" || name == "float64" || name == "double") return Precision::kFloat64;
  throw ConfigError("unknown precision '" + name + "'", "use fp32 or fp64");
}

std::string to_string(Precision p) {
  return p == Precision::kFloat64 ? "fp64" : "fp32";
}

c10::ScalarType to_dtype(Precision p) {
  return p == Precision::kFloat64 ? c10::ScalarType::Double : c10::ScalarType::Float;
}

std::string torch_version() {
  return TORCH_VERSION;
}

}  // namespace ddgnn
