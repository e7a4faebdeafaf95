// GPS global attention (Rampášek et al. 2022, PyG's GPSConv as HydraGNN uses it with
// `global_attn_engine: "GPS"`): each message-passing layer runs beside multi-head self-attention
// over all atoms of the same graph, each branch with a residual and a batch norm, then an MLP; the
// atoms start from their Laplacian eigenvector positional encodings (GnnSpec::pe_dim).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <memory>

#include "model/batch.h"
#include "model/layer.h"

namespace ddgnn {

// Laplacian eigenvector positional encodings of each graph of `batch` (PyG's
// AddLaplacianEigenvectorPE, as HydraGNN computes them): the eigenvectors of the k smallest
// eigenvalues after the first of the symmetric normalised Laplacian I - D^-1/2 A D^-1/2 of the
// graph's radius graph (A counts the edges between two atoms, periodic images included, without
// self-edges). Returns [n_atoms, k] float64 on the batch's device, without autograd (the graph's
// edges, not its positions, decide them). Eigenvectors are defined up to sign: each is signed so
// that its first entry above 1e-6 in magnitude is positive (PyG draws a random sign once per
// structure instead). A graph of n atoms has n - 1 such vectors; columns past them
// are zero. Costs a dense eigendecomposition of each graph, O(n^3), graphs of one size together
// and unpadded, so that a graph's encodings depend on its own Laplacian alone.
at::Tensor laplacian_pe(const GraphBatch& batch, int64_t k);

// A message-passing layer inside GPS: with x = in.inv,
//   h = norm1(layer(x) + x), g = norm2(attention(x) + x), y = h + g, out = norm3(y + mlp(y)),
// attention: multi-head scaled dot-product self-attention among the atoms of each graph (one
// Linear to queries, keys and values, one to the output, as torch.nn.MultiheadAttention), mlp:
// Linear(F, 2F), ReLU, Linear(2F, F), dropout after each hidden step, batch norms over the atoms
// of the batch (running statistics in eval mode; a padded batch's own atoms only). The layer's
// equivariant state passes through.
class GpsLayer : public MessagePassing {
 public:
  GpsLayer(std::shared_ptr<MessagePassing> layer, int64_t channels, int64_t heads, double dropout);

  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& geometry) override;
  bool equivariant() const override { return m_layer->equivariant(); }
  bool activates_output() const override { return m_layer->activates_output(); }

  // The attention branch alone: x [n_atoms, F] -> [n_atoms, F].
  at::Tensor attention(const at::Tensor& x, const GraphBatch& batch);

 private:
  // bn(x) over the atoms of the batch (its own atoms only when it is padded).
  at::Tensor norm(torch::nn::BatchNorm1d& bn, const at::Tensor& x, const GraphBatch& batch);
  std::shared_ptr<MessagePassing> m_layer;
  int64_t m_heads;
  double m_dropout;
  torch::nn::Linear m_in_proj{nullptr}, m_out_proj{nullptr}, m_mlp1{nullptr}, m_mlp2{nullptr};
  torch::nn::BatchNorm1d m_norm1{nullptr}, m_norm2{nullptr}, m_norm3{nullptr};
};

}  // namespace ddgnn
