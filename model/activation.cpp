// Activation functions by config name: one table from name to an elementwise ATen expression.
#include "model/activation.h"

#include <ATen/ATen.h>

#include <cmath>
#include <functional>
#include <map>

#include "core/error.h"

namespace ddgnn {

namespace {

using Fn = std::function<at::Tensor(const at::Tensor&)>;

const std::map<std::string, Fn>& table() {
  static const std::map<std::string, Fn> t = {
      {"relu", [](const at::Tensor& x) { return at::relu(x); }},
      {"selu", [](const at::Tensor& x) { return at::selu(x); }},
      {"prelu", [](const at::Tensor& x) { return at::leaky_relu(x, /*negative_slope=*/0.25); }},
      {"elu", [](const at::Tensor& x) { return at::elu(x); }},
      {"lrelu_01", [](const at::Tensor& x) { return at::leaky_relu(x, /*negative_slope=*/0.01); }},
      {"lrelu_025", [](const at::Tensor& x) { return at::leaky_relu(x, /*negative_slope=*/0.25); }},
      {"lrelu_05", [](const at::Tensor& x) { return at::leaky_relu(x, /*negative_slope=*/0.5); }},
      {"silu", [](const at::Tensor& x) { return at::silu(x); }},
      {"gelu", [](const at::Tensor& x) { return at::gelu(x); }},
      {"tanh", [](const at::Tensor& x) { return at::tanh(x); }},
      {"sigmoid", [](const at::Tensor& x) { return at::sigmoid(x); }},
      {"softplus", [](const at::Tensor& x) { return at::softplus(x); }},
      {"ssp", [](const at::Tensor& x) { return at::softplus(x) - std::log(2.0); }},
  };
  return t;
}

}  // namespace

std::vector<std::string> known_activations() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : table()) names.push_back(name);
  return names;
}

void check_activation(const std::string& name) {
  if (table().count(name)) return;
  std::string known;
  for (const auto& n : known_activations()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("unknown activation function '" + name + "'", "known activations: " + known);
}

at::Tensor apply_activation(const std::string& name, const at::Tensor& x) {
  auto it = table().find(name);
  if (it == table().end()) check_activation(name);
  return it->second(x);
}

}  // namespace ddgnn
