// PNAEq (HydraGNN's PNAEqStack): a PaiNN layer whose scalar messages are aggregated by PNA. Message
// block (PainnMessage): m_ij = pre([h_i, h_j, tanh(W_e rbf_ij)]) (one Linear), expanded to 3F by
// an MLP (Linear, tanh, Linear, SiLU, Linear) and multiplied by W_r rbf_ij (no bias), split into
// gates g_v, g_e and the scalar message s_ij. Vectors: v_i += sum_j (v_j g_v + g_e u_ij), u_ij the
// unit vector from i to j; scalars: h_i += post([h_i, PNA(s_ij)]) with the aggregators mean, min,
// max, std and the scalers identity, amplification, attenuation, linear, inverse linear. Update
// block (PainnUpdate) as PaiNN's: U v, V v, a = MLP([|V v|, h]) (Linear, SiLU, Linear to 3F),
// v += a_vv U v, h += a_xv <U v, V v> + a_xx. Then h = Linear(tanh(Linear(h))) and v = Linear(v)
// (no bias). rbf_ij = sin(n pi d / rc) / d times the radial envelope (HydraGNN's: cosine).
// Differences from HydraGNN: |V v| is sqrt(|V v|^2 + 1e-8), as PaiNN's here (finite gradients at
// zero vectors); the last layer updates its vectors too (HydraGNN skips that, as nothing reads
// them: the same energy, a few more weights).
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "core/error.h"
#include "model/activation.h"
#include "model/layers.h"
#include "model/layers/pna.h"
#include "model/segment.h"
#include "model/small_mm.h"

namespace ddgnn {

namespace {

constexpr double kNormEps = 1e-8;  // sqrt(|x|^2 + eps): finite gradients at zero vectors
constexpr int kScalers = 5;        // identity, amplification, attenuation, linear, inverse linear

class PnaEq : public MessagePassing {
 public:
  explicit PnaEq(const LayerSpec& spec)
      : m_f(spec.hidden_dim), m_r(spec.num_radial), m_degrees(spec.pna_deg) {
    if (m_r < 1) throw ConfigError("PNAEq needs num_radial >= 1");
    const int64_t f = m_f, r = m_r;
    auto lin = [&](const std::string& name, int64_t in, int64_t out, bool bias = true) {
      return register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)));
    };
    m_rbf_emb = lin("rbf_emb", r, f);
    m_pre = lin("pre", 3 * f, f);
    m_msg1 = lin("msg1", f, f);
    m_msg2 = lin("msg2", f, f);
    m_msg3 = lin("msg3", f, 3 * f);
    m_rbf_lin = lin("rbf_lin", r, 3 * f, false);
    m_post = lin("post", (4 * kScalers + 1) * f, f);
    m_u = lin("U", f, f, false);
    m_v = lin("V", f, f, false);
    m_upd1 = lin("upd1", 2 * f, f);
    m_upd2 = lin("upd2", f, 3 * f);
    m_out1 = lin("out1", f, f);
    m_out2 = lin("out2", f, f);
    m_vec_out = lin("vec_out", f, f, false);
  }

  bool equivariant() const override { return true; }

  // in.inv [n_atoms, F], in.equiv [n_atoms, 3, F] -> same shapes.
  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& geometry) override {
    const int64_t f = m_f;
    const at::Tensor& h = in.inv;
    const at::Tensor v = in.equiv.defined() ? in.equiv : at::zeros({h.size(0), 3, f}, h.options());
    const SegmentIndex &send = *batch.senders, &recv = *batch.receivers;

    // Message block. rbf [E, R] with the envelope; pre's weight split by column block (the atom
    // parts multiplied on atoms, then gathered to edges).
    const at::Tensor rbf = geometry.bessel(m_r) * geometry.envelope().unsqueeze(1);
    const at::Tensor& w = m_pre->weight;  // [F, 3F]
    const at::Tensor m =
        gather_rows(small_mm(h, w.narrow(1, 0, f).t()), recv) +
        gather_rows(small_mm(h, w.narrow(1, f, f).t()), send) +
        small_mm(at::tanh(dense(*m_rbf_emb, rbf)), w.narrow(1, 2 * f, f).t(), m_pre->bias);
    const at::Tensor x = dense(*m_msg3, ddgnn::silu(dense(*m_msg2, at::tanh(dense(*m_msg1, m))))) *
                         dense(*m_rbf_lin, rbf);          // [E, 3F]
    const auto parts = x.split_with_sizes({f, f, f}, 1);  // g_v, g_e, s
    const at::Tensor h1 =
        h + pna_aggregate_post(h, parts[2], recv, m_degrees, kScalers, *m_post, batch.atom_weight);
    const at::Tensor v1 = v + gather_mul_sum(v, parts[0], send, recv) +
                          outer_sum(parts[1], geometry.unit(), recv);  // [n_atoms, 3, F]

    // Update block.
    const at::Tensor uv = dense(*m_u, v1), vv = dense(*m_v, v1);
    const at::Tensor vv_norm = at::sqrt((vv * vv).sum(1) + kNormEps);  // [n_atoms, F]
    const at::Tensor a =
        dense(*m_upd2, ddgnn::silu(dense(*m_upd1, at::cat({vv_norm, h1}, 1))));  // [n_atoms, 3F]
    const auto ap = a.split_with_sizes({f, f, f}, 1);                            // a_vv, a_xv, a_xx
    const at::Tensor h2 = h1 + ap[1] * (uv * vv).sum(1) + ap[2];
    const at::Tensor v2 = v1 + ap[0].unsqueeze(1) * uv;

    NodeState out;
    out.inv = dense(*m_out2, at::tanh(dense(*m_out1, h2)));
    out.equiv = dense(*m_vec_out, v2);
    return out;
  }

 private:
  int64_t m_f, m_r;
  PnaDegrees m_degrees;
  torch::nn::Linear m_rbf_emb{nullptr}, m_pre{nullptr}, m_msg1{nullptr}, m_msg2{nullptr},
      m_msg3{nullptr}, m_rbf_lin{nullptr}, m_post{nullptr}, m_u{nullptr}, m_v{nullptr},
      m_upd1{nullptr}, m_upd2{nullptr}, m_out1{nullptr}, m_out2{nullptr}, m_vec_out{nullptr};
};

}  // namespace

std::shared_ptr<MessagePassing> make_pna_eq(const LayerSpec& spec) {
  return std::make_shared<PnaEq>(spec);
}

}  // namespace ddgnn
