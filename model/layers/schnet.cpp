// SchNet interaction block (Schütt et al. 2018) as PyG's InteractionBlock / CFConv: a continuous
// filter W_ij = filter2(ssp(filter1(gaussians(d_ij)))) * envelope(d_ij) modulates lin1(h_j);
// the sum over neighbours goes through lin2, the activation and lin3, added to h (residual). Inside
// GPS (LayerSpec::edge_attr_dim > 0) filter1 reads each edge's attributes beside its Gaussians, as
// HydraGNN's SchNet reads GPS's relative positional encodings.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <array>

#include "core/error.h"
#include "model/activation.h"
#include "model/device.h"
#include "model/layers.h"
#include "model/schnet_filter.h"
#include "model/segment.h"
#include "model/small_mm.h"

namespace ddgnn {

namespace {

class SchNet : public MessagePassing {
 public:
  // Parameters: filter1 [num_filters, num_gaussians], filter2 [num_filters, num_filters],
  // lin1 [num_filters, F] (no bias), lin2 [F, num_filters], lin3 [F, F].
  explicit SchNet(const LayerSpec& spec)
      : m_num_gaussians(spec.num_gaussians),
        m_edge_attr_dim(spec.edge_attr_dim),
        m_activation(spec.activation) {
    check_activation(m_activation);
    const int64_t f = spec.hidden_dim, nf = spec.num_filters;
    m_filter1 =
        register_module("filter1", torch::nn::Linear(m_num_gaussians + m_edge_attr_dim, nf));
    m_filter2 = register_module("filter2", torch::nn::Linear(nf, nf));
    m_lin1 =
        register_module("lin1", torch::nn::Linear(torch::nn::LinearOptions(f, nf).bias(false)));
    m_lin2 = register_module("lin2", torch::nn::Linear(nf, f));
    m_lin3 = register_module("lin3", torch::nn::Linear(f, f));
  }

  // in.inv [n_atoms, F] -> inv [n_atoms, F]; equiv left undefined.
  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& geometry) override {
    const at::Tensor& h = in.inv;
    if (m_edge_attr_dim > 0) {
      if (!in.edge_attr.defined() || in.edge_attr.size(1) != m_edge_attr_dim)
        throw Error("SchNet: the layer reads " + std::to_string(m_edge_attr_dim) +
                    " edge attributes; the trunk gave " +
                    (in.edge_attr.defined() ? std::to_string(in.edge_attr.size(1)) : "none"));
      // filter2(ssp(filter1([gaussians, attributes]))) * envelope, through autograd.
      const at::Tensor basis = at::cat({geometry.gaussians(m_num_gaussians), in.edge_attr}, 1);
      const at::Tensor w =
          m_filter2(apply_activation("ssp", m_filter1(basis))) * geometry.envelope().unsqueeze(1);
      const at::Tensor agg = gather_mul_sum(dense(*m_lin1, h), w, *batch.senders, *batch.receivers);
      NodeState out;
      out.inv = h + dense(*m_lin3, apply_activation(m_activation, dense(*m_lin2, agg)));
      return out;
    }
    // filter2(ssp(filter1(gaussians))) * envelope as one function ([n_edges, num_filters]).
    // The fused CPU and CUDA versions read the memoised Gaussians and cutoff values as values
    // (they differentiate through the lengths themselves); the generic one reads the memoised
    // differentiable Gaussians and envelope, which every layer shares. A smoothly capped batch's
    // envelope (its radius moves with the positions) always goes the generic way.
    const auto [mu, coeff] = geometry.gaussian_basis(m_num_gaussians);
    const bool capped = geometry.edge_cutoff().defined();
    const bool fused = (fused_kernels(geometry.len()) || cuda_kernels(geometry.len())) && !capped;
    FilterBasis basis{mu, coeff, geometry.cutoff(), {}, {}, geometry.envelope_kind(), {}};
    if (fused) {
      basis.cutoff_values = geometry.cutoff_values();
    } else {
      basis.envelope_tensor = geometry.envelope();
      basis.gaussians = geometry.gaussians(m_num_gaussians);
    }
    const at::Tensor w = schnet_filter(
        geometry.len(), fused ? geometry.gaussian_values(m_num_gaussians) : at::Tensor(), basis,
        m_filter1->weight, m_filter1->bias, m_filter2->weight, m_filter2->bias);
    // sum_j lin1(h)_j * W_ij in one fused op (no [n_edges, num_filters] message tensor).
    const at::Tensor agg = gather_mul_sum(dense(*m_lin1, h), w, *batch.senders,
                                          *batch.receivers);  // [n_atoms, num_filters]
    NodeState out;
    out.inv = h + dense(*m_lin3, apply_activation(m_activation, dense(*m_lin2, agg)));
    return out;
  }

 private:
  int64_t m_num_gaussians, m_edge_attr_dim;
  std::string m_activation;
  torch::nn::Linear m_filter1{nullptr}, m_filter2{nullptr}, m_lin1{nullptr}, m_lin2{nullptr},
      m_lin3{nullptr};
};

}  // namespace

std::shared_ptr<MessagePassing> make_schnet(const LayerSpec& spec) {
  return std::make_shared<SchNet>(spec);
}

}  // namespace ddgnn
