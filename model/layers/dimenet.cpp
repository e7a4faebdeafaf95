// DimeNet++ (Gasteiger et al. 2020) as HydraGNN's DIMEStack builds a layer from PyTorch Geometric's
// blocks: Linear(F, F) on the atoms; the embedding block (edge message m_ji = act(W [x_i, x_j,
// act(W_rbf rbf_ji)])); the interaction block (InteractionPPBlock: messages of the edges kj into
// j, times the radial basis, projected down to int_emb_size, times the spherical basis of each
// triplet k -> j -> i, summed into ji, projected up, then residual layers num_before_skip, a skip
// connection and num_after_skip); the output block (OutputPPBlock: messages times a radial filter
// summed into their receivers, up to out_emb_size, one hidden layer, down to F). SiLU inside.
// Bases (PyG's): rbf_n(d) = u(d/rc) sin(f_n d/rc) with trainable f_n (n pi at start) and
// u(x) = (1 + a x^p + b x^(p+1) + c x^(p+2)) / x the envelope of order p = envelope_exponent + 1;
// sbf_ln = u(d_kj/rc) N_ln j_l(z_ln d_kj/rc) sqrt((2l+1)/4pi) P_l(cos angle), z_ln the n-th zero
// of the spherical Bessel function j_l and N_ln = sqrt(2)/|j_(l+1)(z_ln)| (unit norm with weight
// x^2 on [0, 1]); the angle at i between j and k. Differences from HydraGNN: each layer has its own
// radial frequencies (HydraGNN's stack shares one basis); a triplet is dropped only when kj is
// ji's reverse, not whenever k is the atom i (which would drop i's own periodic images in cells
// smaller than twice the cutoff); the angle enters through its cosine (no atan2, whose gradient
// is singular for collinear atoms); the Bessel functions are evaluated in float64. The same
// function in fewer operations than PyG's blocks (tested against them written in plain ops):
// the embedding's x_i and x_j maps on the atoms, chains of linear maps without bias or
// activation between them as one weight, the triplet and output sums fused.
#include "model/layers/dimenet.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/activation.h"
#include "model/layers.h"
#include "model/segment.h"
#include "model/small_mm.h"
#include "model/spherical_bessel.h"

namespace ddgnn {

at::Tensor bessel_radial(const at::Tensor& len, double rc, int64_t p, const at::Tensor& freq,
                         c10::ScalarType dtype) {
  const at::Tensor x = len.to(at::kDouble) * (1.0 / rc);  // [E] in (0, 1)
  const at::Tensor u = dimenet_envelope(x, p);            // [E]
  return (u.unsqueeze(1) * at::sin(freq.to(at::kDouble) * x.unsqueeze(1))).to(dtype);
}

Triplets dimenet_triplets(const GraphBatch& batch) {
  const SegmentIndex& recv = *batch.receivers;
  const at::Tensor& send = batch.senders->index;  // [E]
  const int64_t n = recv.n_rows;
  const auto opts = send.options();
  const at::Tensor deg = recv.ptr.narrow(0, 1, n) - recv.ptr.narrow(0, 0, n);  // [N] in-degree
  const at::Tensor count = deg.index_select(0, send);  // [E] edges into each edge's sender
  const at::Tensor edges = at::arange(send.size(0), opts);
  const at::Tensor ji = at::repeat_interleave(edges, count);
  const at::Tensor first = at::cumsum(count, 0) - count;  // each ji's first triplet
  const at::Tensor local = at::arange(ji.size(0), opts) - first.index_select(0, ji);
  const at::Tensor pos = recv.ptr.index_select(0, send.index_select(0, ji)) + local;
  const at::Tensor kj = recv.order.defined() ? recv.order.index_select(0, pos) : pos;
  // kj is ji's reverse when k = i and its shift is the opposite one (the same image).
  const at::Tensor reverse =
      send.index_select(0, kj).eq(recv.index.index_select(0, ji)) &
      batch.edge_shift.index_select(0, kj).eq(-batch.edge_shift.index_select(0, ji)).all(1);
  const at::Tensor keep = at::logical_not(reverse).nonzero().view({-1});
  return {kj.index_select(0, keep), ji.index_select(0, keep)};
}

namespace {

class DimeNet : public MessagePassing {
 public:
  explicit DimeNet(const LayerSpec& spec)
      : m_f(spec.hidden_dim),
        m_r(spec.num_radial),
        m_s(spec.num_spherical),
        m_p(spec.envelope.p + 1),
        m_rc(spec.radius),
        m_max_triplets(spec.max_triplets),
        m_before(spec.num_before_skip),
        m_after(spec.num_after_skip) {
    check_dimenet_spec(spec);
    const int64_t f = m_f, r = m_r, s = m_s, b = spec.basis_emb_size, i = spec.int_emb_size,
                  o = spec.out_emb_size;
    m_freq = register_parameter("freq", at::arange(1, r + 1, at::kFloat) * M_PI);
    m_cols = dimenet_columns(s, r, m_rc, m_p);
    auto lin = [&](const std::string& name, int64_t in, int64_t out, bool bias = true) {
      return register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)));
    };
    m_lin = lin("lin", f, f);
    m_emb_rbf = lin("emb_rbf", r, f);
    m_emb = lin("emb", 3 * f, f);
    m_rbf1 = lin("int_rbf1", r, b, false);
    m_rbf2 = lin("int_rbf2", b, f, false);
    m_sbf1 = lin("int_sbf1", s * r, b, false);
    m_sbf2 = lin("int_sbf2", b, i, false);
    m_kj = lin("int_kj", f, f);
    m_ji = lin("int_ji", f, f);
    m_down = lin("int_down", f, i, false);
    m_up = lin("int_up", i, f, false);
    m_skip = lin("int_skip", f, f);
    for (int64_t k = 0; k < 2 * (m_before + m_after); ++k)
      m_residual.push_back(lin("int_res" + std::to_string(k), f, f));
    m_out_rbf = lin("out_rbf", r, f, false);
    m_out_up = lin("out_up", f, o, false);
    m_out_hidden = lin("out_hidden", o, o);
    m_out = lin("out", o, f, false);
  }

  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& geometry) override {
    // The triplets come with the batch (add_graph_inputs, made where the batch is built; made
    // here once a step, reading the device, for a batch without them); the spherical basis
    // depends on the geometry only: made once a step, shared by the layers (the radial basis has
    // each layer's frequencies).
    const at::Tensor kj_ji =
        batch.triplets.defined() ? batch.triplets : geometry.memoised("dimenet_triplets", [&] {
          const Triplets all = dimenet_triplets(batch);
          return at::stack({all.kj, all.ji});
        });
    const Triplets t{kj_ji[0], kj_ji[1]};
    const int64_t n_triplets = t.kj.size(0), e = geometry.len().size(0);
    if (n_triplets > m_max_triplets)
      throw DataError("DimeNet: a batch of " + std::to_string(batch.n_graphs) + " graphs has " +
                          std::to_string(n_triplets) +
                          " triplets, above Architecture.max_triplets (" +
                          std::to_string(m_max_triplets) + ")",
                      "lower Training.batch_size or Architecture.radius, or raise max_triplets "
                      "if the memory allows (about 1 KB per triplet for F = 64)");
    const SegmentIndex &send = *batch.senders, &recv = *batch.receivers;

    // Bases, in float64 then the model's dtype.
    const auto dtype = in.inv.scalar_type();
    const at::Tensor rbf = bessel_radial(geometry.len(), m_rc, m_p, m_freq, dtype);  // [E, R]
    const std::string sbf_key = "dimenet_sbf " + std::to_string(m_s) + " " + std::to_string(m_r) +
                                " " + std::to_string(m_p) + " " + std::to_string(m_rc) + " " +
                                c10::toString(dtype);
    const at::Tensor& sbf = geometry.memoised(sbf_key, [&] {
      return spherical_basis(geometry, t, dtype);  // [T, S R]
    });

    // Layer input, embedding block: edge messages m = act(W [x_i, x_j, act(W_rbf rbf)] + b),
    // [E, F], with W's blocks for x_i and x_j applied to the atoms before the gathers (the same
    // sums; matrix products over atoms rather than edges, and no [E, 3F] concatenation).
    const at::Tensor x = dense(*m_lin, in.inv);
    const int64_t f = m_f;
    const at::Tensor& w = m_emb->weight;  // [F, 3F]
    const at::Tensor xi = small_mm(x, w.narrow(1, 0, f).t()),
                     xj = small_mm(x, w.narrow(1, f, f).t());
    const at::Tensor m = ddgnn::silu(
        small_mm(ddgnn::silu(dense(*m_emb_rbf, rbf)), w.narrow(1, 2 * f, f).t(), m_emb->bias) +
        gather_rows(xi, recv) + gather_rows(xj, send));

    // Interaction block.
    const at::Tensor into_i = ddgnn::silu(dense(*m_ji, m));
    // W_rbf2 W_rbf1 rbf: two maps without bias or activation between them, applied as one [R, F]
    // weight made each step (an [E, R] x [R, F] product instead of two over the edges).
    at::Tensor from_k = ddgnn::silu(dense(*m_kj, m)) * small_mm(rbf, chain(*m_rbf1, *m_rbf2));
    from_k = ddgnn::silu(dense(*m_down, from_k));  // [E, I]
    // Each triplet's message from_k[kj] * W_sbf(sbf) summed into ji, fused: no [T, I] gather or
    // product, in the forward or its derivatives.
    const SegmentIndex from_kj = make_segment_index(t.kj, e), into_ji = make_segment_index(t.ji, e);
    from_k = ddgnn::silu(dense(
        *m_up, gather_mul_sum(from_k, dense(*m_sbf2, dense(*m_sbf1, sbf)), from_kj, into_ji)));
    at::Tensor h = into_i + from_k;
    size_t k = 0;
    for (int64_t r = 0; r < m_before; ++r, k += 2) h = residual(h, k);
    h = ddgnn::silu(dense(*m_skip, h)) + m;
    for (int64_t r = 0; r < m_after; ++r, k += 2) h = residual(h, k);

    // Output block: node features [N, F]. The edges' messages times their radial filter, summed
    // into the receivers in one pass (gather_mul_sum over the edges themselves: no [E, F]
    // product).
    const SegmentIndex edges = make_segment_index(at::arange(e, send.index.options()), e);
    at::Tensor y = gather_mul_sum(h, dense(*m_out_rbf, rbf), edges, recv);
    // out_hidden(out_up y): out_up has no bias and no activation follows it, so the two are one
    // [F, O] map (with out_hidden's bias), made each step: an [N, F] x [F, O] product instead of
    // that and an [N, O] x [O, O] one, a third of the layer's arithmetic at O = 256.
    y = ddgnn::silu(small_mm(y, chain(*m_out_up, *m_out_hidden), m_out_hidden->bias));
    NodeState out;
    out.inv = dense(*m_out, y);
    return out;
  }

 private:
  // [in, out] = (second.weight first.weight)^T: the weight of x -> second(first(x)) with first
  // unbiased, for small_mm (second's bias not included).
  static at::Tensor chain(const torch::nn::LinearImpl& first, const torch::nn::LinearImpl& second) {
    return small_mm(first.weight.t(), second.weight.t());
  }

  at::Tensor residual(const at::Tensor& h, size_t k) {
    return h + ddgnn::silu(dense(*m_residual[k + 1], ddgnn::silu(dense(*m_residual[k], h))));
  }

  // [T, S R]: the radial part of edge kj times the angular part of each triplet.
  at::Tensor spherical_basis(const EdgeGeometry& g, const Triplets& t,
                             c10::ScalarType dtype) const {
    const int64_t s = m_s, r = m_r;
    const at::Tensor rad = spherical_bessel_radial(g.len(), m_cols, dtype);  // [E, S R]
    // cos of the angle at i between r_ij and r_ik = r_kj + r_ij (both from i).
    const at::Tensor v_ji = g.vec().index_select(0, t.ji).to(at::kDouble);
    const at::Tensor v_ki = g.vec().index_select(0, t.kj).to(at::kDouble) + v_ji;
    const at::Tensor cosine =
        (v_ji * v_ki).sum(1) / at::sqrt((v_ji * v_ji).sum(1) * (v_ki * v_ki).sum(1));  // [T]
    std::vector<at::Tensor> legendre = {at::ones_like(cosine), cosine};
    for (int64_t l = 1; l + 1 < s; ++l)
      legendre.push_back(((2.0 * double(l) + 1.0) * cosine * legendre.back() -
                          double(l) * legendre[size_t(l - 1)]) /
                         double(l + 1));
    std::vector<at::Tensor> angular;
    for (int64_t l = 0; l < s; ++l)
      angular.push_back(legendre[size_t(l)] * std::sqrt((2.0 * double(l) + 1.0) / (4.0 * M_PI)));
    const at::Tensor ang = at::stack(angular, 1).to(dtype);  // [T, S]
    return (rad.index_select(0, t.kj).view({-1, s, r}) * ang.unsqueeze(2)).view({-1, s * r});
  }

  int64_t m_f, m_r, m_s, m_p;
  double m_rc;
  int64_t m_max_triplets, m_before, m_after;
  at::Tensor m_freq;
  SphericalBesselColumns m_cols;
  torch::nn::Linear m_lin{nullptr}, m_emb_rbf{nullptr}, m_emb{nullptr}, m_rbf1{nullptr},
      m_rbf2{nullptr}, m_sbf1{nullptr}, m_sbf2{nullptr}, m_kj{nullptr}, m_ji{nullptr},
      m_down{nullptr}, m_up{nullptr}, m_skip{nullptr}, m_out_rbf{nullptr}, m_out_up{nullptr},
      m_out_hidden{nullptr}, m_out{nullptr};
  std::vector<torch::nn::Linear> m_residual;
};

}  // namespace

std::shared_ptr<MessagePassing> make_dimenet(const LayerSpec& spec) {
  return std::make_shared<DimeNet>(spec);
}

}  // namespace ddgnn
