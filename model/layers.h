// Factories of the built-in message-passing layers, one file each under model/layers/; the
// registry (model/layer.cpp) lists them by their HydraGNN `mpnn_type` names.
#pragma once

#include <memory>

#include "model/layer.h"

namespace ddgnn {

// (Each layer's file adds its factory here, e.g.
//  std::shared_ptr<MessagePassing> make_schnet(const LayerSpec& spec);)

}  // namespace ddgnn
