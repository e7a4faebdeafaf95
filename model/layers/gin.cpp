// GIN (Xu et al. 2019) as PyG's GINConv, which HydraGNN's GIN stack uses:
// h_i' = MLP((1 + eps) h_i + sum_j h_j), eps learnable (initialised to 0), MLP = Linear-act-Linear.
// Invariant; reads only the graph, not the geometry.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "model/activation.h"
#include "model/layers.h"
#include "model/segment.h"
#include "model/small_mm.h"

namespace ddgnn {

namespace {

class Gin : public MessagePassing {
 public:
  explicit Gin(const LayerSpec& spec) : m_activation(spec.activation) {
    check_activation(m_activation);
    const int64_t f = spec.hidden_dim;
    m_eps = register_parameter("eps", at::zeros({1}));
    m_lin1 = register_module("lin1", torch::nn::Linear(f, f));
    m_lin2 = register_module("lin2", torch::nn::Linear(f, f));
  }

  // in.inv [n_atoms, F] -> inv [n_atoms, F]; equiv ignored (left undefined).
  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& /*geometry*/) override {
    const at::Tensor& h = in.inv;
    const at::Tensor agg = scatter_sum(gather_rows(h, *batch.senders), *batch.receivers);
    NodeState out;
    out.inv =
        dense(*m_lin2, apply_activation(m_activation, dense(*m_lin1, (1.0 + m_eps) * h + agg)));
    return out;
  }

 private:
  std::string m_activation;
  at::Tensor m_eps;  // [1]
  torch::nn::Linear m_lin1{nullptr}, m_lin2{nullptr};
};

}  // namespace

std::shared_ptr<MessagePassing> make_gin(const LayerSpec& spec) {
  return std::make_shared<Gin>(spec);
}

}  // namespace ddgnn
