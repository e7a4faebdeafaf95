// MFC as HydraGNN's MFCStack: PyG's MFConv (Duvenaud et al. 2015, molecular fingerprints), with
// weights specific to each atom's in-degree d = min(deg_i, max_degree):
//   h_i' = W_l[d] (sum_j h_j) + b_l[d] + W_r[d] h_i.
// HydraGNN passes Architecture.max_neighbours as max_degree; ddgnn's key max_degree defaults to it.
// As in HydraGNN, MFC is not an edge model: it reads only the graph, not the distances, so the
// energy depends on the positions only through which atoms are neighbours (piecewise constant:
// zero forces, jumps when an atom crosses the cutoff). That is HydraGNN's model, kept as it is.
// PyG's lins_l / lins_r (max_degree + 1 Linears each) are stored stacked: weight_l, weight_r
// [max_degree + 1, F, F], bias_l [max_degree + 1, F], each initialised as torch's Linear.
#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/device.h"
#include "model/layers.h"
#include "model/segment.h"

namespace ddgnn {

namespace {

class Mfc : public MessagePassing {
 public:
  explicit Mfc(const LayerSpec& spec) : m_f(spec.hidden_dim), m_max_degree(spec.max_degree) {
    if (m_max_degree < 1)
      throw ConfigError(
          "max_degree: MFC needs max_degree >= 1, got " + std::to_string(m_max_degree),
          "set NeuralNetwork.Architecture.max_degree (or max_neighbours, its "
          "default) to 1 or more");
    const int64_t f = m_f, nd = m_max_degree + 1;
    const double bound = 1.0 / std::sqrt(double(f));  // torch's Linear: U(-1/sqrt(in), 1/sqrt(in))
    m_weight_l = register_parameter("weight_l", at::empty({nd, f, f}).uniform_(-bound, bound));
    m_bias_l = register_parameter("bias_l", at::empty({nd, f}).uniform_(-bound, bound));
    m_weight_r = register_parameter("weight_r", at::empty({nd, f, f}).uniform_(-bound, bound));
  }

  // in.inv [n_atoms, F] -> inv [n_atoms, F]; equiv left undefined; the geometry is not read.
  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& /*geometry*/) override {
    const at::Tensor& h = in.inv;
    const SegmentIndex& recv = *batch.receivers;
    const int64_t n = h.size(0), nd = m_max_degree + 1;
    NodeState out;
    if (n == 0) {
      out.inv = h * 0.0;
      return out;
    }
    const at::Tensor agg = scatter_sum(gather_rows(h, *batch.senders), recv);  // [n_atoms, F]
    const at::Tensor deg = (recv.ptr.narrow(0, 1, n) - recv.ptr.narrow(0, 0, n))
                               .clamp_max(m_max_degree);        // [n_atoms] int64
    const at::Tensor w = at::cat({m_weight_l, m_weight_r}, 2);  // [nd, F, 2F]
    if (!fused_kernels(h)) {
      // Off the CPU: every atom through every degree's [W_l | W_r] in one product, then each
      // atom's own degree picked (nd times the arithmetic of a small product, and no count of
      // the degrees read back to the host).
      const at::Tensor all =
          at::matmul(at::cat({agg, h}, 1), w.permute({2, 0, 1}).reshape({2 * m_f, nd * m_f}))
              .view({n, nd, m_f});  // [n_atoms, nd, F]
      out.inv = all.gather(1, deg.view({n, 1, 1}).expand({n, 1, m_f})).squeeze(1) +
                m_bias_l.index_select(0, deg);
      return out;
    }
    // On the CPU: atoms grouped by degree (PyG's loop over degrees), each group through its
    // [W_l | W_r] as one matmul, then back to atom order.
    const at::Tensor order = at::argsort(deg);
    const at::Tensor counts = at::bincount(deg, {}, nd);
    const int64_t* count = counts.data_ptr<int64_t>();
    const at::Tensor x = at::cat({agg, h}, 1).index_select(0, order);  // [n_atoms, 2F]
    std::vector<at::Tensor> parts;
    int64_t start = 0;
    for (int64_t d = 0; d < nd; ++d) {
      const int64_t c = count[d];
      if (c == 0) continue;
      parts.push_back(at::addmm(m_bias_l[d], x.narrow(0, start, c), w[d].t()));
      start += c;
    }
    const at::Tensor inverse =
        at::empty_like(order).scatter_(0, order, at::arange(n, order.options()));
    out.inv = at::cat(parts, 0).index_select(0, inverse);
    return out;
  }

 private:
  int64_t m_f, m_max_degree;
  at::Tensor m_weight_l, m_bias_l, m_weight_r;
};

}  // namespace

std::shared_ptr<MessagePassing> make_mfc(const LayerSpec& spec) {
  return std::make_shared<Mfc>(spec);
}

}  // namespace ddgnn
