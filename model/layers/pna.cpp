// PNA (Corso et al. 2020) as PyG's PNAConv with towers = 1, pre/post_layers = 1, as HydraGNN uses
// it: messages M([h_i, h_j, e_ij]) (e_ij: Gaussian expansion of |r_ij|), aggregated by mean, min,
// max, std, scaled by identity, amplification, attenuation; then post and lin Linears, residual.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "model/activation.h"
#include "model/device.h"
#include "model/layers.h"
#include "model/segment.h"

namespace ddgnn {

namespace {

constexpr double kStdEps = 1e-5;  // std = sqrt(relu(E[x^2] - E[x]^2) + eps), as PyG

// Max (take_max) or min over each receiver's edges of msg [n_edges, F] -> [n_atoms, F], 0 for
// atoms with no edges. The extreme edge is found without autograd (one pass over the CSR
// segments, first edge wins ties as argmax does), then its value is gathered: differentiable to
// any order (gather <-> scatter_add), exact except at ties. CPU only (raw loops over ptr / order).
at::Tensor segment_extreme(const at::Tensor& msg, const SegmentIndex& recv, bool take_max) {
  const int64_t n = recv.n_rows, e = msg.size(0), f = msg.size(1);
  if (e == 0) return at::zeros({n, f}, msg.options());
  at::Tensor edge = at::zeros({n, f}, recv.ptr.options());  // the chosen edge of (atom, feature)
  at::Tensor has_edge = at::empty({n, 1}, msg.options());
  {
    const at::Tensor x = msg.detach().contiguous();
    const int64_t* ptr = recv.ptr.data_ptr<int64_t>();
    const int64_t* order = recv.order.defined() ? recv.order.data_ptr<int64_t>() : nullptr;
    int64_t* ep = edge.data_ptr<int64_t>();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "segment_extreme", [&] {
      const scalar_t* xp = x.data_ptr<scalar_t>();
      scalar_t* hp = has_edge.data_ptr<scalar_t>();
      std::vector<scalar_t> best(static_cast<size_t>(f));
      for (int64_t a = 0; a < n; ++a) {
        hp[a] = ptr[a + 1] > ptr[a] ? scalar_t(1) : scalar_t(0);
        int64_t* ea = ep + a * f;
        for (int64_t k = ptr[a]; k < ptr[a + 1]; ++k) {
          const int64_t edge_k = order ? order[k] : k;
          const scalar_t* row = xp + edge_k * f;
          for (int64_t c = 0; c < f; ++c) {
            const bool better =
                k == ptr[a] || (take_max ? row[c] > best[size_t(c)] : row[c] < best[size_t(c)]);
            if (better) best[size_t(c)] = row[c], ea[c] = edge_k;
          }
        }
      }
    });
  }
  return at::gather(msg, 0, edge) * has_edge;
}

// segment_extreme from ATen ops, with no read back to the host (any device): the extreme of every
// (atom, feature) by scatter_reduce, then the first edge that holds it (the smallest edge id among
// those equal to it, by scatter_reduce again), whose value is gathered as above.
at::Tensor segment_extreme_generic(const at::Tensor& msg, const SegmentIndex& recv, bool take_max) {
  const int64_t n = recv.n_rows, e = msg.size(0), f = msg.size(1);
  if (e == 0) return at::zeros({n, f}, msg.options());
  const at::Tensor x = msg.detach();
  const at::Tensor rows = recv.index.unsqueeze(1).expand({e, f});
  const at::Tensor best = at::zeros({n, f}, x.options())
                              .scatter_reduce(0, rows, x, take_max ? "amax" : "amin",
                                              /*include_self=*/false);  // 0 for atoms without edges
  const at::Tensor ids = at::arange(e, recv.index.options()).unsqueeze(1).expand({e, f});
  const at::Tensor candidate = ids.masked_fill(x.ne(best.index_select(0, recv.index)), e);
  // e (no edge) becomes e - 1, a valid index whose value has_edge zeroes.
  const at::Tensor edge = at::full({n, f}, e, ids.options())
                              .scatter_reduce(0, rows, candidate, "amin", /*include_self=*/true)
                              .clamp_max(e - 1);
  const at::Tensor has_edge = recv.ptr.narrow(0, 1, n)
                                  .gt(recv.ptr.narrow(0, 0, n))
                                  .to(msg.scalar_type())
                                  .unsqueeze(1);  // [n_atoms, 1]
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
    // Without a training-set histogram, the normaliser is this batch's mean log(deg + 1) (a 0-dim
    // tensor, not read back to the host): then a graph's output depends on the batch it is in
    // (set pna_deg for reproducible results).
    const at::Tensor batch_avg_log =
        m_deg_hist.empty() ? at::log(deg + 1.0).mean().clamp_min(1e-12) : at::Tensor();
    deg = deg.clamp_min(1.0);
    const at::Tensor mean = scatter_sum(msg, recv) / deg;
    const at::Tensor mean2 = scatter_sum(msg * msg, recv) / deg;
    const at::Tensor std = at::sqrt(at::relu(mean2 - mean * mean) + kStdEps);
    const auto extreme = [&](bool take_max) {
      return fused_kernels(msg) ? segment_extreme(msg, recv, take_max)
                                : segment_extreme_generic(msg, recv, take_max);
    };
    const at::Tensor agg =
        at::cat({mean, extreme(/*take_max=*/false), extreme(/*take_max=*/true), std},
                1);  // [n_atoms, 4F]
    const at::Tensor log_deg = at::log(deg + 1.0);
    // The amplification and attenuation scalers [n_atoms, 1].
    const at::Tensor amplify =
        batch_avg_log.defined() ? log_deg / batch_avg_log : log_deg / m_avg_log;
    const at::Tensor attenuate =
        batch_avg_log.defined() ? batch_avg_log / log_deg : m_avg_log / log_deg;
    // post([h, agg, agg * amp, agg * att]) with post's weight split by column block and the
    // per-atom scalers applied after the matmul ((agg * a) W^T = a (agg W^T)): same math, no
    // [n_atoms, 13F] concatenation (nor its slice backward in the force loss).
    const at::Tensor& wp = m_post->weight;  // [F, 13F]
    const auto block = [&](int64_t k) {
      return at::matmul(agg, wp.narrow(1, (1 + 4 * k) * f, 4 * f).t());
    };
    const at::Tensor post = at::addmm(m_post->bias, h, wp.narrow(1, 0, f).t()) + block(0) +
                            block(1) * amplify + block(2) * attenuate;
    NodeState out;
    out.inv = h + m_lin(post);
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
