// Floating-point precision of the model (`NeuralNetwork.Training.precision`): fp32 or fp64,
// mapped to a LibTorch dtype. Header free of torch: the dtype enum is only declared here.
#pragma once

#include <cstdint>
#include <string>

namespace c10 {
enum class ScalarType : int8_t;
}

namespace ddgnn {

enum class Precision { kFloat32, kFloat64 };

// "fp32"/"float32"/"float" and "fp64"/"float64"/"double"; anything else is a ConfigError that
// lists the accepted names.
Precision parse_precision(const std::string& name);
std::string to_string(Precision p);
c10::ScalarType to_dtype(Precision p);

// LibTorch's version string, e.g. "1.13.1" (reported in the run header and in outputs).
std::string torch_version();

}  // namespace ddgnn
