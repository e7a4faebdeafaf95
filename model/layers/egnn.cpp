// EGNN layer (Satorras et al. 2021) as HydraGNN's E_GCL: m_ij = phi_e([h_i, h_j, |r_ij|^2]),
// h_i' = h_i + phi_h([h_i, sum_j m_ij]). With spec.equivariance the layer also moves the atoms, as
// HydraGNN's E_GCL with equivariant=True does: x_i' = x_i + mean_j r_ij / (|r_ij| + 1) phi_x(m_ij),
// and the next layer reads its edge vectors from the moved atoms.
#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "model/activation.h"
#include "model/layers.h"
#include "model/segment.h"
#include "model/small_mm.h"

namespace ddgnn {

namespace {

class Egnn : public MessagePassing {
 public:
  // Parameters: edge1 [F, 2F+1], edge2 [F, F], node1 [F, 2F], node2 [F, F]; with equivariance
  // also coord1 [F, F] and coord2 [1, F] (no bias, Xavier-uniform with gain 0.001 as HydraGNN's,
  // so that a new model starts with the atoms nearly still).
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
          register_module("coord2", torch::nn::Linear(torch::nn::LinearOptions(f, 1).bias(false)));
      torch::nn::init::xavier_uniform_(m_coord2->weight, /*gain=*/0.001);
    }
  }

  bool equivariant() const override { return m_equivariant; }

  // in.inv [n_atoms, F] -> inv [n_atoms, F]. With equivariance, in.equiv [n_atoms, 3, K] (or
  // undefined) holds in every channel k the displacement dx [n_atoms, 3] Å of the atoms made by
  // the layers before (the trunk starts it at zero); out.equiv [n_atoms, 3, F] holds dx plus this
  // layer's step, again in every channel (an expanded view, no copies).
  //
  // The step follows HydraGNN's E_GCL.coord_model (norm_diff=True, tanh=True, coords_weight 1):
  // dx_i += mean over i's edges of r_ij / (|r_ij| + 1) tanh(coord2(act(coord1(m_ij)))), where
  // r_ij = x_j - x_i + shift points from the atom to its neighbour (HydraGNN's sign; Satorras et
  // al. write x_i - x_j, the sign is learnt) and the mean divides by the in-degree (at least 1).
  // HydraGNN's clamp of each term to [-100, 100] is left out: the terms are below 1 in size.
  // The moved atoms enter through the edge vectors, r_ij' = r_ij + dx_j - dx_i, so the periodic
  // shifts (and the strain of the stress) stay as they are. HydraGNN's last layer moves nothing;
  // here every layer does (a layer does not know its place), and the trunk's last displacement is
  // not read: its coord1 and coord2 get no gradient.
  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& geometry) override {
    const at::Tensor& h = in.inv;
    at::Tensor r = geometry.vec();  // [n_edges, 3]
    at::Tensor dx;                  // [n_atoms, 3] displacement so far, Å
    if (m_equivariant && in.equiv.defined()) {
      dx = in.equiv.select(2, 0).contiguous();
      r = r + edge_difference(dx, *batch.senders, *batch.receivers);
    }
    const at::Tensor d2 = (r * r).sum(1, /*keepdim=*/true);  // [n_edges, 1]
    // edge1([h_i, h_j, d2]) with edge1's weight split by column block: the h parts are multiplied
    // on atoms, then gathered to edges (same math, n_edges/n_atoms times fewer flops).
    const int64_t f = h.size(1);
    const at::Tensor& w1 = m_edge1->weight;  // [F, 2F + 1]
    const at::Tensor pre = gather_rows(small_mm(h, w1.narrow(1, 0, f).t()), *batch.receivers) +
                           gather_rows(small_mm(h, w1.narrow(1, f, f).t()), *batch.senders) +
                           small_mm(d2, w1.narrow(1, 2 * f, 1).t(), m_edge1->bias);
    const at::Tensor m = act(dense(*m_edge2, act(pre)));      // [n_edges, F]
    const at::Tensor agg = scatter_sum(m, *batch.receivers);  // [n_atoms, F]
    NodeState out;
    out.inv = h + dense(*m_node2, act(dense(*m_node1, at::cat({h, agg}, 1))));
    if (m_equivariant) {
      const at::Tensor phi = at::tanh(dense(*m_coord2, act(dense(*m_coord1, m))));  // [n_edges, 1]
      const at::Tensor dir = r / (d2.sqrt() + 1.0);                                 // [n_edges, 3]
      const SegmentIndex& recv = *batch.receivers;
      const at::Tensor degree =
          (recv.ptr.narrow(0, 1, recv.n_rows) - recv.ptr.narrow(0, 0, recv.n_rows))
              .clamp_min(1)
              .to(dir.scalar_type())
              .unsqueeze(1);                                          // [n_atoms, 1]
      const at::Tensor step = scatter_sum(dir * phi, recv) / degree;  // [n_atoms, 3]
      const at::Tensor moved = dx.defined() ? dx + step : step;
      out.equiv = moved.unsqueeze(2).expand({moved.size(0), 3, f});
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
