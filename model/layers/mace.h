// The MACE layer's intermediate features, for the tests that check that every irreps channel
// transforms with its Wigner-D matrix. The layer itself is built by make_layer("MACE", spec).
#pragma once

#include <ATen/core/Tensor.h>

#include "model/layer.h"

namespace ddgnn {

// One layer's spherical-tensor features, each [n_atoms, (L+1)^2, F] (model/irreps.h's order).
struct MaceTrace {
  at::Tensor messages;  // A: the neighbour sum after its linear, degrees 0..max_ell
  at::Tensor product;   // B: the symmetric contraction of A, degrees 0..the layer's output degree
  at::Tensor out;       // the layer's output (NodeState::irreps)
};

// Runs `layer` (a MACE layer) like its forward and records its intermediates in `trace`. Throws
// ddgnn::Error when `layer` is not a MACE layer.
NodeState mace_forward_traced(MessagePassing& layer, const NodeState& in, const GraphBatch& batch,
                              const EdgeGeometry& geometry, MaceTrace* trace);

}  // namespace ddgnn
