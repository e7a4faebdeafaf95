// PNA (Corso et al. 2020) as PyG's PNAConv with towers = 1, pre/post_layers = 1, as HydraGNN uses
// it: messages M([h_i, h_j, e_ij]) (e_ij: Gaussian expansion of |r_ij|), aggregated by mean, min,
// max, std, scaled by identity, amplification, attenuation; then post and lin Linears, residual.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cmath>

#include "core/error.h"
#include "model/activation.h"
#include "model/layers.h"
#include "model/segment.h"

namespace ddgnn {

namespace {

constexpr double kStdEps = 1e-5;  // std = sqrt(relu(E[x^2] - E[x]^2) + eps), as PyG

// Max (take_max) or min over each receiver's edges of msg [n_edges, F] -> [n_atoms, F], 0 for
// atoms with no edges. The extreme edge is found without autograd, then its value is gathered:
// differentiable to any order (gather <-> scatter_add), exact except at ties.
at::Tensor segment_extreme(const at::Tensor& msg, const SegmentIndex& recv, bool take_max) {
  const int64_t n = recv.n_rows, e = msg.size(0), f = msg.size(1);
  if (e == 0) return at::zeros({n, f}, msg.options());
  at::Tensor edge;  // [n_atoms, F] int64, the chosen edge of every (atom, feature)
  at::Tensor has_edge;
  {
    at::NoGradGuard no_grad;
    const at::Tensor starts = recv.ptr.narrow(0, 0, n);        // [n_atoms]
    const at::Tensor deg = recv.ptr.narrow(0, 1, n) - starts;  // [n_atoms]
    const int64_t max_deg = deg.max().item<int64_t>();
    // Edges in receiver order: sorted position k holds edge order[k] (or k).
    const at::Tensor sorted_msg =
        recv.order.defined() ? msg.detach().index_select(0, recv.order) : msg.detach();
    const at::Tensor sorted_row =
        recv.order.defined() ? recv.index.index_select(0, recv.order) : recv.index;
    const at::Tensor slot = at::arange(e, recv.ptr.options()) - starts.index_select(0, sorted_row);
    const double fill = take_max ? -INFINITY : INFINITY;
    at::Tensor dense = at::full({n, max_deg, f}, fill, msg.options());
    dense.index_put_({sorted_row, slot}, sorted_msg);
    const at::Tensor arg = take_max ? dense.argmax(1) : dense.argmin(1);  // [n_atoms, F] slots
    edge = (starts.unsqueeze(1) + arg).clamp_max(e - 1);
    if (recv.order.defined()) edge = recv.order.index_select(0, edge.reshape(-1)).view({n, f});
    has_edge = (deg > 0).to(msg.scalar_type()).unsqueeze(1);  // [n_atoms, 1]
  }
  return at::gather(msg, 0, edge) * has_edge;
}

class Pna : public MessagePassing {
 public:
  explicit Pna(const LayerSpec& spec)
      : m_f(spec.hidden_dim), m_num_gaussians(spec.num_gaussians), m_deg_hist(spec.pna_deg) {
    const int64_t f = m_f;
    m_edge_encoder = register_module("edge_encoder", torch::nn::Linear(m_num_gaussians, f));
    m_pre = register_module("pre", torch::nn::Linear(3 * f, f));
    m_post = register_module("post", torch::nn::Linear((4 * 3 + 1) * f, f));
    m_lin = register_module("lin", torch::nn::Linear(f, f));
    if (!m_deg_hist.empty()) {
      double sum = 0, count = 0;
      for (size_t k = 0; k < m_deg_hist.size(); ++k) {
        if (m_deg_hist[k] < 0) throw ConfigError("pna_deg: histogram counts must be >= 0");
        sum += double(m_deg_hist[k]) * std::log(double(k) + 1.0);
        count += double(m_deg_hist[k]);
      }
      if (!(sum > 0))
        throw ConfigError("pna_deg: the in-degree histogram has no atom with a neighbour",
                          "compute it from the training set's radius graphs");
      m_avg_log = sum / count;
    }
  }

  // in.inv [n_atoms, F] -> inv [n_atoms, F]; equiv ignored (left undefined).
  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& geometry) override {
    const int64_t f = m_f;
    const at::Tensor& h = in.inv;
    const SegmentIndex& recv = *batch.receivers;
    // pre([h_i, h_j, enc(e_ij)]) with pre's weight split by column block: the h parts are
    // multiplied on atoms, then gathered to edges. msg [n_edges, F].
    const at::Tensor& w = m_pre->weight;                                         // [F, 3F]
    const at::Tensor enc = m_edge_encoder(geometry.gaussians(m_num_gaussians));  // [n_edges, F]
    const at::Tensor msg = gather_rows(at::matmul(h, w.narrow(1, 0, f).t()), recv) +
                           gather_rows(at::matmul(h, w.narrow(1, f, f).t()), *batch.senders) +
                           at::addmm(m_pre->bias, enc, w.narrow(1, 2 * f, f).t());

    at::Tensor deg = (recv.ptr.narrow(0, 1, recv.n_rows) - recv.ptr.narrow(0, 0, recv.n_rows))
                         .to(h.scalar_type())
                         .unsqueeze(1);  // [n_atoms, 1]
    // Without a training-set histogram, the normaliser is this batch's mean log(deg + 1): then
    // a graph's output depends on the batch it is in (set pna_deg for reproducible results).
    const double avg_log =
        m_deg_hist.empty() ? std::max(at::log(deg + 1.0).mean().item<double>(), 1e-12) : m_avg_log;
    deg = deg.clamp_min(1.0);
    const at::Tensor mean = scatter_sum(msg, recv) / deg;
    const at::Tensor mean2 = scatter_sum(msg * msg, recv) / deg;
    const at::Tensor std = at::sqrt(at::relu(mean2 - mean * mean) + kStdEps);
    const at::Tensor agg = at::cat({mean, segment_extreme(msg, recv, /*take_max=*/false),
                                    segment_extreme(msg, recv, /*take_max=*/true), std},
                                   1);  // [n_atoms, 4F]
    const at::Tensor log_deg = at::log(deg + 1.0);
    const at::Tensor scaled =
        at::cat({agg, agg * (log_deg / avg_log), agg * (avg_log / log_deg)}, 1);  // [., 12F]
    NodeState out;
    out.inv = h + m_lin(m_post(at::cat({h, scaled}, 1)));
    return out;
  }

 private:
  int64_t m_f, m_num_gaussians;
  std::vector<int64_t> m_deg_hist;
  double m_avg_log = 0.0;
  torch::nn::Linear m_edge_encoder{nullptr}, m_pre{nullptr}, m_post{nullptr}, m_lin{nullptr};
};

}  // namespace

std::shared_ptr<MessagePassing> make_pna(const LayerSpec& spec) {
  return std::make_shared<Pna>(spec);
}

}  // namespace ddgnn
