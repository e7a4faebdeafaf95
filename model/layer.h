// The one message-passing layer contract and the registry keyed by HydraGNN's `mpnn_type` names.
// A layer maps node state (invariant features, optional equivariant vectors) to new node state,
// given the batch (graph, segment maps) and the step's edge geometry. New layer types (DimeNet,
// MACE) register a factory and touch nothing else.
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/batch.h"
#include "model/spec.h"

namespace ddgnn {

struct NodeState {
  at::Tensor inv;    // [n_atoms, F] invariant features
  at::Tensor equiv;  // [n_atoms, 3, F] equivariant vectors, or undefined for invariant models
  // [n_atoms, (L+1)^2, F] spherical-tensor features of degrees 0..L (MACE; components of degree l
  // at rows l^2 .. l^2 + 2l, m = -l..l, model/so3.h's basis), or undefined: a layer that reads
  // them starts from inv as degree 0.
  at::Tensor irreps;
  // [n_edges, k] attributes of each edge that the trunk gives every layer (GPS's relative
  // positional encodings, LayerSpec::edge_attr_dim), or undefined.
  at::Tensor edge_attr;
};

class MessagePassing : public torch::nn::Module {
 public:
  // in.inv [n_atoms, F]; in.equiv [n_atoms, 3, F] when equivariant(), else undefined.
  virtual NodeState forward(const NodeState& in, const GraphBatch& batch,
                            const EdgeGeometry& geometry) = 0;
  // True when the layer reads and writes NodeState::equiv (the trunk then starts it at zero).
  virtual bool equivariant() const { return false; }
  // Whether the trunk applies the activation to the layer's inv output (false for MACE, whose inv
  // is the running sum of its per-layer readouts).
  virtual bool activates_output() const { return true; }
};

using LayerFactory = std::function<std::shared_ptr<MessagePassing>(const LayerSpec&)>;

// Registers a factory under a name (for layers outside ddgnn; the built-in ones are listed in
// model/layer.cpp — not static registrars, which a static library's linker would drop).
// A duplicate name is an error.
void register_layer(const std::string& name, LayerFactory factory);

// Builds a layer by name; an unknown name is a ConfigError listing the known ones.
std::shared_ptr<MessagePassing> make_layer(const std::string& name, const LayerSpec& spec);

// Registered names, sorted.
std::vector<std::string> known_layers();

}  // namespace ddgnn
