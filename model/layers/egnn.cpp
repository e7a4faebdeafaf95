// EGNN layer (Satorras et al. 2021) as HydraGNN's E_GCL: m_ij = phi_e([h_i, h_j, |r_ij|^2]),
// h_i' = h_i + phi_h([h_i, sum_j m_ij]). With spec.equivariance the layer also carries vectors:
// v_i' = v_i + sum_j r_ij phi_x(m_ij) (positions are not moved; the vector channel is updated).
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "model/activation.h"
#include "model/layers.h"
#include "model/segment.h"

namespace ddgnn {

namespace {

class Egnn : public MessagePassing {
 public:
  // Parameters: edge1 [F, 2F+1], edge2 [F, F], node1 [F, 2F], node2 [F, F]; with equivariance
  // also coord1 [F, F], coord2 [F, F] (no bias; one weight per vector channel).
  explicit Egnn(const LayerSpec& spec)
      : m_equivariant(spec.equivariance), m_activation(spec.activation) {
    check_activation(m_activation);
    const int64_t f = spec.hidden_dim;
    m_edge1 = register_module("edge1", torch::nn::Linear(2 * f + 1, f));
    m_edge2 = register_module("edge2", torch::nn::Linear(f, f));
    m_node1 = register_module("node1", torch::nn::Linear(2 * f, f));
    m_node2 = register_module("node2", torch::nn::Linear(f, f));
    if (m_equivariant) {
      m_coord1 = register_module("coord1", torch::nn::Linear(f, f));
      m_coord2 =
          register_module("coord2", torch::nn::Linear(torch::nn::LinearOptions(f, f).bias(false)));
    }
  }

  bool equivariant() const override { return m_equivariant; }

  // in.inv [n_atoms, F] -> inv [n_atoms, F]; with equivariance in.equiv [n_atoms, 3, F] (or
  // undefined, read as zero) -> equiv [n_atoms, 3, F], Å-weighted vectors.
  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& geometry) override {
    const at::Tensor& h = in.inv;
    const at::Tensor& r = geometry.vec();                    // [n_edges, 3]
    const at::Tensor d2 = (r * r).sum(1, /*keepdim=*/true);  // [n_edges, 1]
    // edge1([h_i, h_j, d2]) with edge1's weight split by column block: the h parts are multiplied
    // on atoms, then gathered to edges (same math, n_edges/n_atoms times fewer flops).
    const int64_t f = h.size(1);
    const at::Tensor& w1 = m_edge1->weight;  // [F, 2F + 1]
    const at::Tensor pre = gather_rows(at::matmul(h, w1.narrow(1, 0, f).t()), *batch.receivers) +
                           gather_rows(at::matmul(h, w1.narrow(1, f, f).t()), *batch.senders) +
                           at::addmm(m_edge1->bias, d2, w1.narrow(1, 2 * f, 1).t());
    const at::Tensor m = act(m_edge2(act(pre)));              // [n_edges, F]
    const at::Tensor agg = scatter_sum(m, *batch.receivers);  // [n_atoms, F]
    NodeState out;
    out.inv = h + m_node2(act(m_node1(at::cat({h, agg}, 1))));
    if (m_equivariant) {
      const at::Tensor phi = m_coord2(act(m_coord1(m)));          // [n_edges, F]
      const at::Tensor dv = outer_sum(phi, r, *batch.receivers);  // sum_j r_ij phi(m_ij)
      out.equiv = in.equiv.defined() ? in.equiv + dv : dv;        // [n_atoms, 3, F]
    }
    return out;
  }

 private:
  at::Tensor act(const at::Tensor& x) const { return apply_activation(m_activation, x); }

  bool m_equivariant;
  std::string m_activation;
  torch::nn::Linear m_edge1{nullptr}, m_edge2{nullptr}, m_node1{nullptr}, m_node2{nullptr},
      m_coord1{nullptr}, m_coord2{nullptr};
};

}  // namespace

std::shared_ptr<MessagePassing> make_egnn(const LayerSpec& spec) {
  return std::make_shared<Egnn>(spec);
}

}  // namespace ddgnn
