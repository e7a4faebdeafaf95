// LibTorch's own optim::Adam / optim::AdamW (whose step is ~10 ATen operations per parameter): the
// reference the fused steps of model/optim_fused.cpp are compared with.
#pragma once

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

#include <memory>
#include <vector>

#include "model/optim.h"

namespace ddgnn::testing {

// torch's Adam (type kAdam) or AdamW (kAdamW) over `params`, with the learning rate and weight
// decay given and torch's other defaults (those make_optimizer uses).
inline std::unique_ptr<torch::optim::Optimizer> torch_adam(OptimizerType type,
                                                           const std::vector<at::Tensor>& params,
                                                           double lr, double weight_decay) {
  if (type == OptimizerType::kAdam)
    return std::make_unique<torch::optim::Adam>(
        params, torch::optim::AdamOptions(lr).weight_decay(weight_decay));
  return std::make_unique<torch::optim::AdamW>(
      params, torch::optim::AdamWOptions(lr).weight_decay(weight_decay));
}

}  // namespace ddgnn::testing
