// The model trunk and heads (HydraGNN's architecture): atomic-number embedding, num_conv_layers
// message-passing layers, graph heads (pooling, shared MLP, one MLP per head) and node heads (MLP
// or one extra conv layer). Energy, forces and the loss of its outputs: model/predict.h.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/batch.h"
#include "model/layer.h"
#include "model/spec.h"

namespace torch {
namespace nn {
class LinearImpl;
class EmbeddingImpl;
}  // namespace nn
}  // namespace torch

namespace ddgnn {

// Checks a spec (layer and head widths, at least one head, dropout, the activation); throws
// ConfigError naming the offending key.
void check_gnn_spec(const GnnSpec& spec);

// What `spec`'s model reads that depends on the graph alone, made and put into the batch where
// it is not there yet (GraphBatch::triplets for DimeNet, GraphBatch::laplacian_pe with GPS): the
// loader calls it when it builds a batch, so that a training step makes none of it (making them
// reads the device on the host); Gnn::forward calls it for batches made elsewhere.
void add_graph_inputs(GraphBatch& batch, const GnnSpec& spec);

// Trunk: h0 = Embedding(z) [n_atoms, F]; for each layer, (h, v) = layer(h, v) then h = act(h)
// (HydraGNN applies its activation after every conv; layers' own internal activations and
// residuals are kept; equivariant vectors v start at zero [n_atoms, 3, F] and get no activation).
// With GPS (GnnSpec::gps_heads, model/gps.h) h0 = node_lin([Embedding(z), pos_emb(pe)]) from the
// Laplacian encodings pe, and each layer runs inside a GpsLayer. Multi-branch heads: each graph's
// outputs come from the head layers of its branch (GraphBatch::branch). Graph-attribute
// conditioning (GnnSpec::graph_attr_mode) as HydraGNN's: film and concat_node on each layer's
// invariant output before the activation, fuse_pool on the pooled features.
// Heads read the invariant features only. Every MLP layer is Linear then activation; the last
// Linear of a head (to output_dim) has none.
class Gnn : public torch::nn::Module {
 public:
  explicit Gnn(const GnnSpec& spec);

  // pos [n_atoms, 3] Å in the model dtype (batch.pos, or a clone with requires_grad). Returns one
  // tensor per spec.heads entry, in order: [n_graphs, d] for graph heads, [n_atoms, d] for node
  // heads, in the model dtype.
  std::vector<at::Tensor> forward(const GraphBatch& batch, const at::Tensor& pos);

  // Invariant node features after the trunk: [n_atoms, F].
  at::Tensor trunk(const GraphBatch& batch, const EdgeGeometry& geometry);

  // The batch with GraphBatch::species set to the rows of this model's elements. An atomic
  // number the model has no row for is an Error naming it (checked where z is on the host; the
  // trainer and `evaluate` check their datasets' elements before the first batch).
  GraphBatch with_species(const GraphBatch& batch) const;

  const GnnSpec& spec() const { return m_spec; }
  // Training.precision bf16: forward runs the layers and heads under bfloat16 autocast
  // (model/device.h) after the edge geometry, and returns float32 outputs.
  void set_bf16_autocast(bool on) { m_bf16 = on; }

 private:
  struct Mlp {
    std::vector<std::shared_ptr<torch::nn::LinearImpl>> layers;  // last one without activation
  };
  at::Tensor run_mlp(const Mlp& mlp, at::Tensor x, bool last_activation) const;
  Mlp make_mlp(const std::string& prefix, int64_t in, const std::vector<int64_t>& widths);
  at::Tensor pool(const at::Tensor& h, const GraphBatch& batch) const;
  struct Branch {
    Mlp shared;                                               // hidden layers only
    std::vector<Mlp> heads;                                   // per head
    std::vector<std::shared_ptr<MessagePassing>> node_convs;  // per head, "conv" node heads
  };
  NodeState trunk_state(const GraphBatch& batch, const EdgeGeometry& geometry);
  std::vector<at::Tensor> run_branch(const Branch& branch, const NodeState& trunk,
                                     const at::Tensor& pooled, const GraphBatch& batch,
                                     const EdgeGeometry& geometry);

  GnnSpec m_spec;
  bool m_bf16 = false;
  std::shared_ptr<torch::nn::EmbeddingImpl> m_embedding;
  // [256] int64 on the host: the row of each atomic number, -1 for none (GnnSpec::elements);
  // m_row_of_z_device: its copy on the device of the last batch.
  at::Tensor m_row_of_z;
  mutable at::Tensor m_row_of_z_device;
  std::shared_ptr<torch::nn::LinearImpl> m_node_input;  // GnnSpec::node_inputs > 0 only
  // GPS only: positional encodings to features, [embedding, encodings] to F, and (SchNet) the
  // edges' relative encodings to the filters' edge attributes.
  std::shared_ptr<torch::nn::LinearImpl> m_pos_emb, m_node_lin, m_rel_pos_emb;
  // Graph-attribute conditioning (GnnSpec::graph_attr_mode): film's conditioner (cond1, act,
  // cond2), concat_node's projector (cond1), fuse_pool's (cond1, act, cond2); one for all layers.
  std::shared_ptr<torch::nn::LinearImpl> m_cond1, m_cond2;
  at::Tensor graph_attr_of(const GraphBatch& batch, const at::Tensor& like) const;
  at::Tensor condition_nodes(const at::Tensor& inv, const GraphBatch& batch) const;
  std::vector<std::shared_ptr<MessagePassing>> m_layers;
  std::vector<Branch> m_branches;  // the head layers of each branch (GnnSpec::num_branches())
};

}  // namespace ddgnn
