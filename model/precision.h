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

// LibTorch's version string, e.g. "1.13.1" (reported in the run header and in outputs).
std::string torch_version();

}  // namespace ddgnn
