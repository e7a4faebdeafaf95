// PaiNN (Schütt et al. 2021) as HydraGNN's PAINNConv: one layer is a message block (scalar
// filter on Bessel radial features gates neighbours' scalars and vectors) and an update block
// (scalar-vector mixing through U v, V v), each with a residual. Equivariant: NodeState::equiv.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "model/activation.h"
#include "model/layers.h"
#include "model/segment.h"
#include "model/small_mm.h"

namespace ddgnn {

namespace {

constexpr double kNormEps = 1e-8;  // sqrt(|x|^2 + eps): finite gradients at zero vectors

class Painn : public MessagePassing {
 public:
  explicit Painn(const LayerSpec& spec)
      : m_f(spec.hidden_dim), m_num_radial(spec.num_radial), m_activation(spec.activation) {
    check_activation(m_activation);
    const int64_t f = m_f;
    m_phi1 = register_module("phi1", torch::nn::Linear(f, f));
    m_phi2 = register_module("phi2", torch::nn::Linear(f, 3 * f));
    m_filter = register_module("filter", torch::nn::Linear(m_num_radial, 3 * f));
    m_u = register_module("U", torch::nn::Linear(torch::nn::LinearOptions(f, f).bias(false)));
    m_v = register_module("V", torch::nn::Linear(torch::nn::LinearOptions(f, f).bias(false)));
    m_upd1 = register_module("upd1", torch::nn::Linear(2 * f, f));
    m_upd2 = register_module("upd2", torch::nn::Linear(f, 3 * f));
  }

  bool equivariant() const override { return true; }

  // in.inv [n_atoms, F], in.equiv [n_atoms, 3, F] -> same shapes.
  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& geometry) override {
    const int64_t f = m_f;
    const at::Tensor& s = in.inv;
    const at::Tensor v = in.equiv.defined() ? in.equiv : at::zeros({s.size(0), 3, f}, s.options());

    // Message block. phi(s) [n_atoms, 3F] on atoms, then to edges by sender j, times the filter
    // w [n_edges, 3F]: x = phi_j * w split in three F-wide blocks (vv, vs, s). The filter's
    // weight is split by row block instead of its output (no [n_edges, 3F] slice backward), and
    // the edge products are summed into receivers by the fused segment ops (gather_mul_sum,
    // outer_sum) without [n_edges, 3, F] intermediates: same math as
    //   s1 = s + sum_j x_s,  v1 = v + sum_j (v_j * x_vv + x_vs * unit_ij).
    const at::Tensor phi =
        dense(*m_phi2, apply_activation(m_activation, dense(*m_phi1, s)));  // [n_atoms, 3F]
    // Filter block k, (rbf W_k^T + b_k) * cutoff = [rbf * cutoff, cutoff] [W_k | b_k]^T:
    // [n_edges, F], one matmul on the memoised [n_edges, R + 1] basis.
    const at::Tensor& rbf_cut = geometry.bessel_cutoff(m_num_radial);  // [n_edges, R + 1]
    const at::Tensor &wf = m_filter->weight, &bf = m_filter->bias;     // [3F, R], [3F]
    const auto filter = [&](int64_t k) {
      return at::matmul(
          rbf_cut, at::cat({wf.narrow(0, k * f, f), bf.narrow(0, k * f, f).unsqueeze(1)}, 1).t());
    };
    const at::Tensor phi_vv = phi.narrow(1, 0, f), phi_vs = phi.narrow(1, f, f),
                     phi_s = phi.narrow(1, 2 * f, f);  // [n_atoms, F] each
    const SegmentIndex &send = *batch.senders, &recv = *batch.receivers;
    const at::Tensor s1 = s + gather_mul_sum(phi_s, filter(2), send, recv);
    const at::Tensor x_vs = gather_rows(phi_vs, send) * filter(1);  // [n_edges, F]
    const at::Tensor v1 = v + gather_mul_sum(v * phi_vv.unsqueeze(1), filter(0), send, recv) +
                          outer_sum(x_vs, geometry.unit(), recv);  // [n_atoms, 3, F]

    // Update block. U v, V v [n_atoms, 3, F].
    const at::Tensor uv = dense(*m_u, v1), vv = dense(*m_v, v1);
    const at::Tensor vv_norm = at::sqrt((vv * vv).sum(1) + kNormEps);  // [n_atoms, F]
    const at::Tensor a = dense(
        *m_upd2,
        apply_activation(m_activation, dense(*m_upd1, at::cat({s1, vv_norm}, 1))));  // [., 3F]
    const at::Tensor a_vv = a.narrow(1, 0, f), a_sv = a.narrow(1, f, f),
                     a_ss = a.narrow(1, 2 * f, f);
    NodeState out;
    out.inv = s1 + a_ss + a_sv * (uv * vv).sum(1);
    out.equiv = v1 + a_vv.unsqueeze(1) * uv;
    return out;
  }

 private:
  int64_t m_f, m_num_radial;
  std::string m_activation;
  torch::nn::Linear m_phi1{nullptr}, m_phi2{nullptr}, m_filter{nullptr}, m_u{nullptr}, m_v{nullptr},
      m_upd1{nullptr}, m_upd2{nullptr};
};

}  // namespace

std::shared_ptr<MessagePassing> make_painn(const LayerSpec& spec) {
  return std::make_shared<Painn>(spec);
}

}  // namespace ddgnn
