// PNA (Corso et al. 2020) as PyG's PNAConv with towers = 1, pre/post_layers = 1, as HydraGNN's
// PNAStack uses it: messages M([h_i, h_j, e_ij]) (e_ij: Gaussian expansion of |r_ij| through a
// Linear), aggregated by mean, min, max, std, scaled by identity, amplification, attenuation and
// linear; then post and lin Linears, residual. PNAPlus (HydraGNN's PNAPlusStack): e_ij is
// relu(Linear(rbf_ij)) of PyG's Bessel basis (DimeNet's, model/layers/dimenet.h: num_radial
// functions, trainable frequencies, envelope of order envelope_exponent + 1), and the message is
// multiplied by Linear(rbf_ij) (no bias), so that it vanishes at the cutoff. As HydraGNN's, the
// degree scalers and min/max/std make both non-smooth as neighbours cross the cutoff. Each
// PNAPlus layer has its own frequencies (HydraGNN's stack shares one basis).
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
#include "model/layers/dimenet.h"
#include "model/layers/pna.h"
#include "model/segment.h"
#include "model/small_mm.h"

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
  Pna(const LayerSpec& spec, bool plus)
      : m_f(spec.hidden_dim),
        m_plus(plus),
        m_basis(plus ? spec.num_radial : spec.num_gaussians),
        m_p(spec.envelope.p + 1),
        m_rc(spec.radius),
        m_degrees(spec.pna_deg) {
    const int64_t f = m_f;
    if (plus && (m_basis < 1 || m_p < 2))
      throw ConfigError("PNAPlus needs num_radial >= 1 and envelope_exponent >= 1");
    if (plus) {
      m_freq = register_parameter("freq", at::arange(1, m_basis + 1, at::kFloat) * M_PI);
      m_rbf_lin = register_module(
          "rbf_lin", torch::nn::Linear(torch::nn::LinearOptions(m_basis, f).bias(false)));
    }
    // PNAPlus: HydraGNN's rbf_emb (then relu); PNA: the edge encoder of the Gaussians.
    m_edge_encoder =
        register_module(plus ? "rbf_emb" : "edge_encoder", torch::nn::Linear(m_basis, f));
    m_pre = register_module("pre", torch::nn::Linear(3 * f, f));
    m_post = register_module("post", torch::nn::Linear((4 * kScalers + 1) * f, f));
    m_lin = register_module("lin", torch::nn::Linear(f, f));
  }

  // in.inv [n_atoms, F] -> inv [n_atoms, F]; equiv ignored (left undefined).
  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& geometry) override {
    const int64_t f = m_f;
    const at::Tensor& h = in.inv;
    const SegmentIndex& recv = *batch.receivers;
    // pre([h_i, h_j, enc(e_ij)]) with pre's weight split by column block: the h parts are
    // multiplied on atoms, then gathered to edges. msg [n_edges, F].
    const at::Tensor& w = m_pre->weight;  // [F, 3F]
    at::Tensor rbf, enc;
    if (m_plus) {
      rbf = bessel_radial(geometry.len(), m_rc, m_p, m_freq, h.scalar_type());  // [E, R]
      enc = at::relu(dense(*m_edge_encoder, rbf));
    } else {
      enc = dense(*m_edge_encoder, geometry.gaussians(m_basis));  // [n_edges, F]
    }
    at::Tensor msg = gather_rows(small_mm(h, w.narrow(1, 0, f).t()), recv) +
                     gather_rows(small_mm(h, w.narrow(1, f, f).t()), *batch.senders) +
                     small_mm(enc, w.narrow(1, 2 * f, f).t(), m_pre->bias);
    if (m_plus) msg = msg * dense(*m_rbf_lin, rbf);
    NodeState out;
    out.inv = h + dense(*m_lin, pna_aggregate_post(h, msg, recv, m_degrees, kScalers, *m_post,
                                                   batch.atom_weight));
    return out;
  }

 private:
  static constexpr int kScalers = 4;  // identity, amplification, attenuation, linear
  int64_t m_f;
  bool m_plus;
  int64_t m_basis, m_p;
  double m_rc;
  PnaDegrees m_degrees;
  at::Tensor m_freq;
  torch::nn::Linear m_edge_encoder{nullptr}, m_pre{nullptr}, m_post{nullptr}, m_lin{nullptr},
      m_rbf_lin{nullptr};
};

}  // namespace

PnaDegrees::PnaDegrees(const std::vector<int64_t>& hist) : from_batch(hist.empty()) {
  if (from_batch) return;
  double sum_log = 0, sum_lin = 0, count = 0;
  for (size_t k = 0; k < hist.size(); ++k) {
    if (hist[k] < 0) throw ConfigError("pna_deg: histogram counts must be >= 0");
    sum_log += double(hist[k]) * std::log(double(k) + 1.0);
    sum_lin += double(hist[k]) * double(k);
    count += double(hist[k]);
  }
  if (!(sum_log > 0))
    throw ConfigError("pna_deg: the in-degree histogram has no atom with a neighbour",
                      "compute it from the training set's radius graphs");
  avg_log = sum_log / count;
  avg_lin = sum_lin / count;
}

at::Tensor pna_aggregate_post(const at::Tensor& h, const at::Tensor& msg, const SegmentIndex& recv,
                              const PnaDegrees& degrees, int n_scalers, torch::nn::LinearImpl& post,
                              const at::Tensor& atom_weight) {
  const int64_t f = msg.size(1);
  const at::Tensor raw_deg =
      (recv.ptr.narrow(0, 1, recv.n_rows) - recv.ptr.narrow(0, 0, recv.n_rows))
          .to(msg.scalar_type())
          .unsqueeze(1);  // [n_atoms, 1]
  const at::Tensor deg = raw_deg.clamp_min(1.0);
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
  // The scalers after identity [n_atoms, 1]: amplification, attenuation, linear, inverse linear.
  // Without a training-set histogram, the normalisers are this batch's mean log(deg + 1) and mean
  // degree (0-dim tensors, not read back to the host): then a graph's output depends on the batch
  // it is in (set pna_deg for reproducible results).
  std::vector<at::Tensor> scalers;
  if (degrees.from_batch) {
    // Means over the batch's own atoms (a padded batch's atom weights).
    const auto mean = [&](const at::Tensor& x) {
      return atom_weight.defined() ? (x.squeeze(1) * atom_weight).sum() : x.mean();
    };
    const at::Tensor avg_log = mean(at::log(raw_deg + 1.0)).clamp_min(1e-12);
    const at::Tensor avg_lin = mean(raw_deg).clamp_min(1e-12);
    scalers = {log_deg / avg_log, avg_log / log_deg, deg / avg_lin, avg_lin / deg};
  } else {
    scalers = {log_deg / degrees.avg_log, degrees.avg_log / log_deg, deg / degrees.avg_lin,
               degrees.avg_lin / deg};
  }
  // post([h, agg, agg * s_1, ...]) with post's weight split by column block and the per-atom
  // scalers applied after the matmul ((agg * s) W^T = s (agg W^T)): same math, no [n_atoms,
  // (4 n + 1) F] concatenation (nor its slice backward in the force loss).
  const at::Tensor& wp = post.weight;  // [F_out, (4 n_scalers + 1) F]
  const auto block = [&](int64_t k) {
    return at::matmul(agg, wp.narrow(1, (1 + 4 * k) * f, 4 * f).t());
  };
  at::Tensor out = small_mm(h, wp.narrow(1, 0, f).t(), post.bias) + block(0);
  for (int k = 1; k < n_scalers; ++k) out = out + block(k) * scalers[k - 1];
  return out;
}

std::shared_ptr<MessagePassing> make_pna(const LayerSpec& spec) {
  return std::make_shared<Pna>(spec, /*plus=*/false);
}

std::shared_ptr<MessagePassing> make_pna_plus(const LayerSpec& spec) {
  return std::make_shared<Pna>(spec, /*plus=*/true);
}

}  // namespace ddgnn
