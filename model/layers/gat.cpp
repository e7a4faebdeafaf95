// GAT as HydraGNN's GATStack: PyG's GATv2Conv (Brody et al. 2022) with self loops and the edge
// attribute in the logits. For an edge j -> i and head k (of `heads`):
//   z_ij = leaky_relu(lin_l(h)_j + lin_r(h)_i + lin_edge(e_ij), negative_slope),
//   s_ij = att_k . z_ij,  alpha_ij = softmax over j in N(i) + {i} of s_ij,
//   h_i' = mean over k of sum_j alpha_ij lin_l(h)_j, plus bias.
// The edge attribute is the interatomic distance, as HydraGNN makes GAT an edge model:
// e_ij = gaussians(d_ij) * envelope(d_ij) (num_gaussians of SchNet's expansion; the envelope of
// EdgeGeometry, zero with zero slope at the cutoff).
// Deviations from HydraGNN / PyG, each so that ddgnn's trunk and interatomic potentials work:
// - Heads are averaged in every layer (PyG's concat=False, HydraGNN's last layer), so each layer
//   maps [n_atoms, F] -> [n_atoms, F]; HydraGNN concatenates them (width heads * hidden_dim)
//   between layers, with a BatchNorm after each.
// - The softmax weighs each edge's exponential by its envelope, exp(s_ij) u_ij / (sum_k exp(s_ik)
//   u_ik + exp(s_ii)), so that an atom entering or leaving the cutoff changes the energy
//   continuously (and forces exist): PyG's plain softmax jumps when a neighbour appears.
// - The self loop's edge attribute is zero, not the mean of the atom's incoming ones (PyG's
//   fill_value "mean"), whose count would jump at the cutoff.
// - No dropout on the attention coefficients (HydraGNN passes the head MLPs' dropout, 0 by
//   default).
#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <limits>
#include <string>

#include "core/error.h"
#include "model/layers.h"
#include "model/segment.h"
#include "model/small_mm.h"

namespace ddgnn {

namespace {

class Gat : public MessagePassing {
 public:
  // Parameters: lin_l, lin_r [heads * F, F] (with bias), lin_edge [heads * F, num_gaussians]
  // (no bias), att [heads, F], bias [F]. Weights Glorot-uniform, as PyG.
  explicit Gat(const LayerSpec& spec)
      : m_f(spec.hidden_dim),
        m_heads(spec.heads),
        m_slope(spec.negative_slope),
        m_num_gaussians(spec.num_gaussians) {
    if (m_heads < 1)
      throw ConfigError(
          "heads: GAT needs at least one attention head, got " + std::to_string(m_heads),
          "set NeuralNetwork.Architecture.heads to 1 or more (HydraGNN uses 6)");
    if (!(m_slope >= 0.0))
      throw ConfigError(
          "negative_slope: GAT's leaky ReLU slope must be >= 0, got " + std::to_string(m_slope),
          "set NeuralNetwork.Architecture.negative_slope to 0.05 (HydraGNN's)");
    const int64_t f = m_f, hf = m_heads * m_f;
    m_lin_l = register_module("lin_l", torch::nn::Linear(f, hf));
    m_lin_r = register_module("lin_r", torch::nn::Linear(f, hf));
    m_lin_edge = register_module(
        "lin_edge", torch::nn::Linear(torch::nn::LinearOptions(m_num_gaussians, hf).bias(false)));
    m_att = register_parameter("att", at::empty({m_heads, f}));
    m_bias = register_parameter("bias", at::zeros({f}));
    at::NoGradGuard no_grad;
    for (at::Tensor* w : {&m_lin_l->weight, &m_lin_r->weight, &m_lin_edge->weight, &m_att})
      torch::nn::init::xavier_uniform_(*w);
  }

  // in.inv [n_atoms, F] -> inv [n_atoms, F]; equiv left undefined.
  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& geometry) override {
    const at::Tensor& h = in.inv;
    const SegmentIndex& recv = *batch.receivers;
    const int64_t n = h.size(0), nh = m_heads, f = m_f;
    const at::Tensor xl = dense(*m_lin_l, h), xr = dense(*m_lin_r, h);  // [n_atoms, heads * F]
    const at::Tensor env = geometry.envelope().unsqueeze(1);            // [n_edges, 1]
    const at::Tensor attr = geometry.gaussians(m_num_gaussians) * env;
    const at::Tensor xl_edge = gather_rows(xl, *batch.senders);  // [n_edges, heads * F]
    const at::Tensor z_edge =
        at::leaky_relu(xl_edge + gather_rows(xr, recv) + dense(*m_lin_edge, attr), m_slope);
    const at::Tensor z_self = at::leaky_relu(xl + xr, m_slope);
    const at::Tensor s_edge = (z_edge.view({-1, nh, f}) * m_att).sum(2);  // [n_edges, heads]
    const at::Tensor s_self = (z_self.view({n, nh, f}) * m_att).sum(2);   // [n_atoms, heads]
    // Each receiver's largest logit (self loop included), a constant that keeps exp <= 1: a
    // segment max over the edges in receiver order (CSR offsets ptr), -inf where there are none.
    at::Tensor shift;
    {
      at::NoGradGuard no_grad;
      const at::Tensor sorted =
          recv.order.defined() ? s_edge.detach().index_select(0, recv.order) : s_edge.detach();
      shift = at::maximum(s_self.detach(),
                          at::segment_reduce(sorted, "max", {}, {}, recv.ptr, 0, /*unsafe=*/true,
                                             -std::numeric_limits<double>::infinity()));
    }
    const at::Tensor p_edge = at::exp(s_edge - gather_rows(shift, recv)) * env;  // [n_edges, heads]
    const at::Tensor p_self = at::exp(s_self - shift);                           // [n_atoms, heads]
    const at::Tensor denom = scatter_sum(p_edge, recv) + p_self;
    const at::Tensor num = scatter_sum(xl_edge.view({-1, nh, f}) * p_edge.unsqueeze(2), recv) +
                           xl.view({n, nh, f}) * p_self.unsqueeze(2);  // [n_atoms, heads, F]
    NodeState out;
    out.inv = (num / denom.unsqueeze(2)).mean(1) + m_bias;
    return out;
  }

 private:
  int64_t m_f, m_heads;
  double m_slope;
  int64_t m_num_gaussians;
  torch::nn::Linear m_lin_l{nullptr}, m_lin_r{nullptr}, m_lin_edge{nullptr};
  at::Tensor m_att, m_bias;
};

}  // namespace

std::shared_ptr<MessagePassing> make_gat(const LayerSpec& spec) {
  return std::make_shared<Gat>(spec);
}

}  // namespace ddgnn
