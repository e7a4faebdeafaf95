// GraphSAGE (Hamilton et al. 2017) as PyG's SAGEConv with its defaults, which HydraGNN's SAGE
// stack uses: h_i' = lin_l(mean_j h_j) + lin_r(h_i), lin_l with bias, lin_r without; an atom
// with no neighbours gets lin_l(0) + lin_r(h_i).
// As in HydraGNN, SAGE is not an edge model: it reads only the graph, not the distances, so the
// energy depends on the positions only through which atoms are neighbours. It is piecewise
// constant in the positions: the forces (-dE/dx) are zero and the energy jumps when an atom
// crosses the cutoff. That is HydraGNN's model, kept as it is.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "model/layers.h"
#include "model/segment.h"
#include "model/small_mm.h"

namespace ddgnn {

namespace {

class Sage : public MessagePassing {
 public:
  // Parameters: lin_l [F, F] with bias, lin_r [F, F] without.
  explicit Sage(const LayerSpec& spec) {
    const int64_t f = spec.hidden_dim;
    m_lin_l = register_module("lin_l", torch::nn::Linear(f, f));
    m_lin_r =
        register_module("lin_r", torch::nn::Linear(torch::nn::LinearOptions(f, f).bias(false)));
  }

  // in.inv [n_atoms, F] -> inv [n_atoms, F]; equiv left undefined; the geometry is not read.
  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& /*geometry*/) override {
    const at::Tensor& h = in.inv;
    const SegmentIndex& recv = *batch.receivers;
    const at::Tensor deg = (recv.ptr.narrow(0, 1, recv.n_rows) - recv.ptr.narrow(0, 0, recv.n_rows))
                               .clamp_min(1)
                               .to(h.scalar_type())
                               .unsqueeze(1);  // [n_atoms, 1]
    const at::Tensor mean = scatter_sum(gather_rows(h, *batch.senders), recv) / deg;
    NodeState out;
    out.inv = dense(*m_lin_l, mean) + dense(*m_lin_r, h);
    return out;
  }

 private:
  torch::nn::Linear m_lin_l{nullptr}, m_lin_r{nullptr};
};

}  // namespace

std::shared_ptr<MessagePassing> make_sage(const LayerSpec& spec) {
  return std::make_shared<Sage>(spec);
}

}  // namespace ddgnn
