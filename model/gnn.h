// The model trunk and heads (HydraGNN's architecture): atomic-number embedding, num_conv_layers
// message-passing layers, graph heads (pooling, shared MLP, one MLP per head) and node heads (MLP
// or one extra conv layer); energy and forces (conservative F = -dE/dx, or direct) and their loss.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/batch.h"
#include "model/layer.h"

namespace torch {
namespace nn {
class LinearImpl;
class EmbeddingImpl;
}  // namespace nn
}  // namespace torch

namespace ddgnn {

struct HeadSpec {
  enum Kind { kGraph, kNode };
  std::string name;
  Kind kind = kGraph;
  int64_t output_dim = 1;
};

// What the model is built from (NeuralNetwork.Architecture keys).
struct GnnSpec {
  LayerSpec layer;  // hidden_dim F, radius, activation, ... (layer_index set here)
  std::string mpnn_type = "SchNet";
  int64_t num_conv_layers = 2;
  int64_t max_z = 118;                 // embedding rows 0..max_z
  std::string graph_pooling = "mean";  // add | mean | max
  // Graph heads: shared MLP, then one MLP per head.
  int64_t num_sharedlayers = 2;
  int64_t dim_sharedlayers = 50;
  int64_t num_headlayers = 2;
  std::vector<int64_t> dim_headlayers = {50, 25};
  // Node heads.
  int64_t node_num_headlayers = 2;
  std::vector<int64_t> node_dim_headlayers = {50, 25};
  std::string node_head_type = "mlp";  // mlp | conv
  std::vector<HeadSpec> heads;
  double dropout = 0.0;           // dropout probability after each hidden layer of the head MLPs
  bool has_initial_bias = false;  // set the bias of each head's last Linear to initial_bias
  double initial_bias = 0.0;
  bool interatomic_potential = false;  // energy = sum of a per-atom node head, F = -dE/dx
};

// Checks a spec (pooling, node head type, head widths, at least one head, known mpnn_type and
// activation); throws ConfigError naming the offending key.
void check_gnn_spec(const GnnSpec& spec);

// Trunk: h0 = Embedding(z) [n_atoms, F]; for each layer, (h, v) = layer(h, v) then h = act(h)
// (HydraGNN applies its activation after every conv; layers' own internal activations and
// residuals are kept; equivariant vectors v start at zero [n_atoms, 3, F] and get no activation).
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

  const GnnSpec& spec() const { return m_spec; }

 private:
  struct Mlp {
    std::vector<std::shared_ptr<torch::nn::LinearImpl>> layers;  // last one without activation
  };
  at::Tensor run_mlp(const Mlp& mlp, at::Tensor x, bool last_activation) const;
  Mlp make_mlp(const std::string& prefix, int64_t in, const std::vector<int64_t>& widths);
  at::Tensor pool(const at::Tensor& h, const GraphBatch& batch) const;

  GnnSpec m_spec;
  std::shared_ptr<torch::nn::EmbeddingImpl> m_embedding;
  std::vector<std::shared_ptr<MessagePassing>> m_layers;
  Mlp m_shared;                                               // hidden layers only
  std::vector<Mlp> m_heads;                                   // per head (empty Mlp for none)
  std::vector<std::shared_ptr<MessagePassing>> m_node_convs;  // per head, "conv" node heads
};

struct EnergyForces {
  at::Tensor energy;                // [n_graphs] eV, model dtype
  at::Tensor forces;                // [n_atoms, 3] eV/Å, model dtype
  std::vector<at::Tensor> outputs;  // every head's output (Gnn::forward), same pass
};

// Total energy [n_graphs] (eV) at positions pos [n_atoms, 3] Å with the batch's edges: the sum over
// each graph's atoms of the first node head of output_dim 1 when there is one, else the first
// graph head of output_dim 1. Throws ConfigError when neither exists. `outputs` (optional)
// receives all heads' outputs.
at::Tensor predict_energy(Gnn& gnn, const GraphBatch& batch, const at::Tensor& pos,
                          std::vector<at::Tensor>* outputs = nullptr);

// Energy and forces of a batch.
// conservative: E = predict_energy at pos = batch.pos cloned with requires_grad, F = -dE/dpos by
//   autograd; create_graph = true keeps the graph of F so a force loss trains the weights (use it
//   when training); with false F is a constant. The energy stays differentiable either way.
// direct: E from the first graph head of output_dim 1 (or the node-head sum as above), F from the
//   first node head of output_dim 3 (ConfigError when there is none).
EnergyForces predict_energy_forces(Gnn& gnn, const GraphBatch& batch, bool conservative,
                                   bool create_graph);

struct EnergyForceWeights {
  double energy_weight = 1.0;
  double energy_peratom_weight = 0.0;
  double force_weight = 1.0;
};

struct LossSpec {
  std::string type = "mse";  // mse | mae | rmse | smooth_l1 | huber
  double huber_delta = 1.0;  // delta of huber and smooth_l1 (beta)
};

// Elementwise loss of pred against target (same shape), reduced by the mean: scalar [].
// Differentiable to any order (huber and smooth_l1 written with where/abs).
at::Tensor regression_loss(const at::Tensor& pred, const at::Tensor& target, const LossSpec& loss);

// Weighted sum of: energy_weight * loss(E, E_ref) over graphs; energy_peratom_weight *
// loss(E / n_atoms, E_ref / n_atoms); force_weight * loss(F, F_ref) over all force components.
// Terms with weight 0 or an undefined target (batch.energy / batch.forces) are left out. Scalar []
// in the model dtype (eV^2 etc. per the loss type).
at::Tensor energy_force_loss(const EnergyForces& pred, const GraphBatch& batch,
                             const EnergyForceWeights& weights, const LossSpec& loss);

}  // namespace ddgnn
