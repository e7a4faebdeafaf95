// MACE (Batatia et al. 2022) as HydraGNN's MACEStack builds a layer
// (RealAgnosticAttResidualInteractionBlock, then EquivariantProductBasisBlock). Features are
// spherical tensors [n_atoms, (L+1)^2, F] (NodeState::irreps, model/irreps.h's order), every degree
// l with parity (-1)^l, F channels each:
//  1. sc and up: linear maps per degree of the input (sc, the residual, into the output degrees);
//     down: a linear map of the input scalars.
//  2. Edge features: a radial basis of the distance (bessel sqrt(2/rc) sin(n pi d/rc)/d, gaussian
//     SchNet's, or chebyshev T_n(2d/rc - 1)) times the polynomial envelope of order
//     envelope_exponent. A radial MLP (three hidden layers of F, SiLU) of [edge features, down of
//     the sender, down of the receiver] gives one weight per path and channel; the weights are
//     multiplied by the envelope once more (HydraGNN's are not, so its messages jump at the
//     cutoff, the MLP of a zero basis not being zero).
//  3. Messages: the tensor product (model/tensor_product.h) of up(sender) (degrees l1 <= L_in) with
//  Y(r_ij) (l2 <= max_ell)
//     into degrees l3 <= max_ell, channel by channel, on the paths with l1 + l2 + l3 even; summed
//     over neighbours, divided by avg_num_neighbors, then a linear map per degree over paths and
//     channels: A, degrees 0..max_ell.
//  4. Product basis: B_l = sum over products of 1..correlation factors of A coupled to degree l,
//     each term weighted per element, term and channel. Products are iterated couplings,
//     (A_l1 A_l2)_L with l1 <= l2, and ((A_l1 A_l2)_L A_l3)_l with the intermediate L <= max_ell:
//     they span MACE's symmetric contraction but for intermediates of degree above max_ell.
//  5. out_l = linear(B_l) + sc_l for l <= L_out (node_max_ell; 0 in the last layer and conv heads).
//  6. Readout: inv = in.inv + linear(out_0), so the trunk's output is the sum of per-layer
//     readouts, the embedding being the first (MACE's are summed energies; here the heads read
//     the sum). No activation follows (activates_output() is false).
// Linear maps have no bias and N(0, 1) weights divided by sqrt(fan-in) at use (e3nn's).
#include "model/layers/mace.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/activation.h"
#include "model/batch.h"
#include "model/channel_coupling.h"
#include "model/device.h"
#include "model/irreps.h"
#include "model/layers.h"
#include "model/segment.h"
#include "model/small_mm.h"
#include "model/so3.h"
#include "model/tensor_product.h"

namespace ddgnn {

static_assert(so3::kMaxL >= kMaxMaceEll, "MACE's degrees need so3's harmonics");

namespace {

bool even(int64_t a) {
  return a % 2 == 0;
}

// x [N, K, F] split along dim 1 into blocks of `sizes` rows, by one split whose backward is one
// concatenation (a narrow's backward writes a zero tensor of x's full size for every block).
std::vector<at::Tensor> blocks_of(const at::Tensor& x, const std::vector<int64_t>& sizes) {
  if (sizes.size() == 1) return {x};
  return x.split_with_sizes(sizes, 1);
}

// The rows of the degrees 0..lmax: 1, 3, 5, ...
std::vector<int64_t> degree_sizes(int64_t lmax) {
  std::vector<int64_t> s;
  for (int64_t l = 0; l <= lmax; ++l) s.push_back(2 * l + 1);
  return s;
}

// The degrees 0..lmax of x [N, (lmax+1)^2, F] (and more rows of x, which are left out).
std::vector<at::Tensor> degrees(const at::Tensor& x, int64_t lmax) {
  const int64_t k = irreps_dim(lmax);
  return blocks_of(x.size(1) == k ? x : x.narrow(1, 0, k), degree_sizes(lmax));
}

// x [..., fan_in] @ (w [fan_in, out] scale / sqrt(fan_in)), as one 2-d matrix product (the
// scale on the small weight, not on the product; LibTorch's matmul of a strided 3-d tensor can
// fall back to a batched product of tiny matrices), by small_mm. A block of rows of a larger
// tensor (one degree of [N, K, F]) is copied once into rows of its own: the kernels read it
// several times, and rows thousands of bytes apart run at half the speed of contiguous ones.
at::Tensor mix(const at::Tensor& x, const at::Tensor& w, double scale = 1.0) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = w.size(1);
  return small_mm(x.reshape({-1, w.size(0)}), w * (scale / std::sqrt(double(w.size(0)))))
      .view(shape);
}

// The constant c (a buffer of the layer, on its device) in x's dtype (the coefficients are kept
// in float64 until then; a module's to(dtype) converts them too, and this is then free).
at::Tensor like(const at::Tensor& c, const at::Tensor& x) {
  return c.to(x.scalar_type());
}

// A message path. The messages' rows are by degree l3, then component, then path: path k of
// degree l3 (of np), component c at row offset(l3) + c np + k, so that one degree's rows are
// [atoms, 2l3+1, np F] for its mixing over paths and channels: a view of one split's piece.
struct Path {
  int64_t l1, l2, l3, k;  // k: which of degree l3's paths
};

// Second-order products: A_l1 A_l2 (l1 <= l2) into degrees `outs`.
struct PairProduct {
  int64_t l1, l2;
  std::vector<int64_t> outs;
};
// Third-order products: (pair's degree-L output) A_l3 into degrees `outs`.
struct TripleProduct {
  size_t pair;
  int64_t mid_index, l3;  // mid_index: which of the pair's outputs
  std::vector<int64_t> outs;
};

class Mace : public MessagePassing {
 public:
  explicit Mace(const LayerSpec& spec)
      : m_f(spec.hidden_dim),
        m_lsh(spec.max_ell),
        m_lin(spec.layer_index == 0 || spec.layer_index >= spec.num_layers ? 0 : spec.node_max_ell),
        m_lout(spec.layer_index >= spec.num_layers - 1 ? 0 : spec.node_max_ell),
        m_correlation(spec.correlation),
        m_num_radial(spec.num_radial),
        m_envelope_p(spec.envelope.p),
        m_avg_neighbours(spec.avg_num_neighbors),
        m_radial_type(spec.radial_type) {
    check_mace_spec(spec, /*require_avg_num_neighbors=*/true);
    const int64_t f = m_f;
    for (int64_t l = 0; l <= m_lin; ++l) {
      m_w_up.push_back(param("up" + std::to_string(l), {f, f}));
      if (l <= m_lout) m_w_sc.push_back(param("sc" + std::to_string(l), {f, f}));
    }
    m_w_down = param("down", {f, f});

    // Message paths, each with its first row among the messages.
    for (int64_t l1 = 0; l1 <= m_lin; ++l1)
      for (int64_t l2 = 0; l2 <= m_lsh; ++l2)
        for (int64_t l3 = std::abs(l1 - l2); l3 <= std::min(l1 + l2, m_lsh); ++l3)
          if (even(l1 + l2 + l3)) {
            m_paths.push_back({l1, l2, l3, 0});
          }
    // The coupling of Y (rows of Y) with up(sender) (columns) into each path's rows,
    // [K_sh, rows x K_in], and the pattern of the nonzero (row, column, path) of the product.
    const int64_t k_sh = irreps_dim(m_lsh), k_in = irreps_dim(m_lin);
    m_degree_paths.assign(size_t(m_lsh + 1), 0);
    for (Path& q : m_paths) q.k = m_degree_paths[size_t(q.l3)]++;
    for (int64_t l3 = 0; l3 <= m_lsh; ++l3) {
      m_degree_rows.push_back((2 * l3 + 1) * m_degree_paths[size_t(l3)]);
      m_degree_offset.push_back(m_rows);
      m_rows += m_degree_rows.back();
    }
    const auto row = [&](const Path& q, int64_t c) {
      return m_degree_offset[size_t(q.l3)] + c * m_degree_paths[size_t(q.l3)] + q.k;
    };
    at::Tensor c = at::zeros({k_sh, m_rows, k_in}, at::kDouble);
    m_pattern.I = m_rows;
    m_pattern.J = k_in;
    m_pattern.P = int64_t(m_paths.size());
    for (size_t p = 0; p < m_paths.size(); ++p) {
      const Path& q = m_paths[p];
      const at::Tensor cg = coupling_tensor(q.l1, q.l2, q.l3);  // [a, b, c]
      for (int64_t ci = 0; ci < 2 * q.l3 + 1; ++ci)
        c.narrow(0, q.l2 * q.l2, 2 * q.l2 + 1)
            .select(1, row(q, ci))
            .narrow(1, q.l1 * q.l1, 2 * q.l1 + 1)
            .copy_(cg.select(2, ci).t());                // [b, a]
      const at::Tensor used = cg.abs().amax(1) > 1e-12;  // [a, c]: coupled through some b
      for (int64_t ci = 0; ci < 2 * q.l3 + 1; ++ci)
        for (int64_t ai = 0; ai < 2 * q.l1 + 1; ++ai)
          if (used[ai][ci].item<bool>())
            m_pattern.entries.push_back({row(q, ci), q.l1 * q.l1 + ai, int64_t(p)});
    }
    m_coupling = register_buffer("coupling", c.view({k_sh, m_rows * k_in}));
    const int64_t n_paths = int64_t(m_paths.size());
    m_r0 = register_module("radial0", torch::nn::Linear(m_num_radial + 2 * f, f));
    m_r1 = register_module("radial1", torch::nn::Linear(f, f));
    m_r2 = register_module("radial2", torch::nn::Linear(f, f));
    m_r3 = register_module("radial3", torch::nn::Linear(f, n_paths * f));
    for (int64_t l3 = 0; l3 <= m_lsh; ++l3) {
      int64_t np = 0;
      for (const Path& q : m_paths) np += q.l3 == l3;
      m_w_msg.push_back(param("message" + std::to_string(l3), {np * f, f}));
    }

    // Product basis: the pair and triple products (their couplings and terms per degree below).
    if (m_correlation >= 2) {
      for (int64_t l1 = 0; l1 <= m_lsh; ++l1)
        for (int64_t l2 = l1; l2 <= m_lsh; ++l2) {
          PairProduct pp{l1, l2, {}};
          const int64_t top = std::max(m_correlation >= 3 ? m_lsh : 0, m_lout);
          for (int64_t l = l2 - l1; l <= std::min(l1 + l2, top); ++l)
            if (even(l1 + l2 + l)) pp.outs.push_back(l);
          if (!pp.outs.empty()) m_pairs.push_back(pp);
        }
    }
    if (m_correlation >= 3) {
      for (size_t p = 0; p < m_pairs.size(); ++p)
        for (size_t k = 0; k < m_pairs[p].outs.size(); ++k) {
          const int64_t lm = m_pairs[p].outs[k];
          if (lm > m_lsh) continue;
          for (int64_t l3 = 0; l3 <= m_lsh; ++l3) {
            TripleProduct t{p, int64_t(k), l3, {}};
            for (int64_t l = std::abs(lm - l3); l <= std::min(lm + l3, m_lout); ++l)
              if (even(lm + l3 + l)) t.outs.push_back(l);
            if (!t.outs.empty()) m_triples.push_back(t);
          }
        }
    }
    build_product_couplings();
    for (int64_t l = 0; l <= m_lout; ++l) {
      // Terms of degree l, in the order forward() appends them: A_l, pairs, triples.
      const int64_t n = (l <= m_lsh) + m_pair_rows[size_t(l)] + m_triple_rows[size_t(l)];
      m_w_elem.push_back(register_parameter("element" + std::to_string(l),
                                            at::randn({spec.num_species, n, f}) / std::sqrt(n)));
      m_w_prod.push_back(param("product" + std::to_string(l), {f, f}));
    }
    build_element_couplings();
    m_w_read = param("readout", {f, f});
  }

  bool activates_output() const override { return false; }

  NodeState forward(const NodeState& in, const GraphBatch& batch,
                    const EdgeGeometry& geometry) override {
    return run(in, batch, geometry, nullptr);
  }

  NodeState run(const NodeState& in, const GraphBatch& batch, const EdgeGeometry& geometry,
                MaceTrace* trace) {
    const int64_t f = m_f, k_in = irreps_dim(m_lin);
    const at::Tensor x = in.irreps.defined() ? in.irreps : in.inv.unsqueeze(1);  // [N, K, F]
    if (x.size(1) < k_in)
      throw Error("MACE layer: input features of degree up to " +
                  std::to_string(int64_t(std::sqrt(double(x.size(1)))) - 1) + ", " +
                  std::to_string(m_lin) + " expected");
    const int64_t e = geometry.len().size(0);
    const SegmentIndex &send = *batch.senders, &recv = *batch.receivers;

    // 1. up, down.
    std::vector<at::Tensor> blocks;
    const std::vector<at::Tensor> xd = degrees(x, m_lin);
    for (int64_t l = 0; l <= m_lin; ++l) blocks.push_back(mix(xd[size_t(l)], m_w_up[size_t(l)]));
    const at::Tensor up = concat(blocks, 1);                  // [N, K_in, F]
    const at::Tensor down = mix(xd[0].squeeze(1), m_w_down);  // [N, F]

    // 2. Edge features and the paths' weights [E, paths, F].
    // The envelope, the radial basis and Y C depend on the geometry and constants only: computed
    // once a step and shared by the layers with the same settings.
    const std::string p = std::to_string(m_envelope_p);
    const at::Tensor& env = geometry.memoised(
        "mace_envelope " + p, [&] { return envelope(geometry).unsqueeze(1); });  // [E, 1]
    const at::Tensor& basis = geometry.memoised(
        "mace_radial " + m_radial_type + " " + std::to_string(m_num_radial) + " " + p,
        [&] { return radial_basis(geometry) * env; });  // [E, R]
    // radial0([basis, down(sender), down(receiver)]) with the weight's blocks for the two down
    // columns applied to the atoms before the gathers (the same sums; no [E, R + 2F] concatenation
    // and products over atoms rather than edges).
    const at::Tensor& w0 = m_r0->weight;  // [F, R + 2F]
    const int64_t nr = m_num_radial;
    at::Tensor h = small_mm(basis, w0.narrow(1, 0, nr).t(), m_r0->bias) +
                   gather_rows(small_mm(down, w0.narrow(1, nr, f).t()), send) +
                   gather_rows(small_mm(down, w0.narrow(1, nr + f, f).t()), recv);
    h = ddgnn::silu(h);
    h = ddgnn::silu(dense(*m_r1, h));
    h = ddgnn::silu(dense(*m_r2, h));
    // radial3(h) * env as one product: [h env, env] [W^T; b] (env on the F columns of h, not on
    // the paths x F of the output).
    const at::Tensor w3 = concat({m_r3->weight.t(), m_r3->bias.unsqueeze(0)}, 0);
    const at::Tensor weights =
        small_mm(concat({h * env, env}, 1), w3).view({e, int64_t(m_paths.size()), f});

    // 3. Messages [E, rows, F] = (Y C) up(sender) * weight of the row's path; summed.
    // Under bf16 autocast the linear maps run in bfloat16; the tensor product runs in float32.
    const auto dt = in.inv.scalar_type() == at::kBFloat16 ? at::kFloat : in.inv.scalar_type();
    const at::Tensor& yc = geometry.memoised(
        "mace_yc " + std::to_string(m_lsh) + " " + std::to_string(m_lin) + " " + c10::toString(dt),
        [&] {
          const at::Tensor y = spherical_harmonics(geometry.unit(), m_lsh);  // [E, K_sh]
          return at::matmul(y, like(m_coupling, y)).view({e, m_rows, k_in}).to(dt);
        });
    // Summed over receivers by the fused tensor-product kernel (model/tensor_product.h): no
    // [E, rows, F] intermediate.
    const at::Tensor summed =
        tp_message(yc, weights.to(dt), up.to(dt), m_pattern, send, recv);  // [N, rows, F]
    // Each degree's rows as [N, 2l3+1, paths x F] (a view), mixed over paths and channels.
    const std::vector<at::Tensor> per_degree = blocks_of(summed, m_degree_rows);
    blocks.clear();
    for (int64_t l3 = 0; l3 <= m_lsh; ++l3) {
      const at::Tensor rows =
          per_degree[size_t(l3)].view({summed.size(0), 2 * l3 + 1, m_degree_paths[size_t(l3)] * f});
      blocks.push_back(mix(rows, m_w_msg[size_t(l3)], 1.0 / m_avg_neighbours));
    }
    const at::Tensor a_in = concat(blocks, 1);  // [N, K_sh, F], divided by avg_num_neighbors

    // 4. Product basis, in float32 under bf16 autocast (products of up to three bfloat16
    // factors lose too much).
    const AutocastOff float32(a_in.device().type());
    const at::Tensor a = a_in.scalar_type() == at::kBFloat16 ? a_in.to(at::kFloat) : a_in;
    const at::Tensor pairs = m_pairs.empty() ? at::Tensor() : couple_channels(a, a, m_pair_cc);
    const at::Tensor triples =
        m_triples.empty() ? at::Tensor() : couple_channels(pairs, a, m_triple_cc);
    // B [N, K_out, F]: every term times its element weight, summed into its degree's rows, by the
    // same coupling kernel (the weights of the atom's element are the coupling's first factor).
    const at::Tensor w =
        concat(m_w_elem, 1).index_select(0, batch.species).to(a.scalar_type());  // [N, terms, F]
    at::Tensor b = couple_channels(w, a, m_elem_cc[0]);
    if (pairs.defined()) b = b + couple_channels(w, pairs, m_elem_cc[1]);
    if (triples.defined()) b = b + couple_channels(w, triples, m_elem_cc[2]);
    // 5. Output with the residual.
    const std::vector<at::Tensor> bd = degrees(b, m_lout);
    std::vector<at::Tensor> out_blocks;
    for (int64_t l = 0; l <= m_lout; ++l) {
      at::Tensor o = mix(bd[size_t(l)], m_w_prod[size_t(l)]);
      if (l <= m_lin) o = o + mix(xd[size_t(l)], m_w_sc[size_t(l)]);
      out_blocks.push_back(o);
    }
    NodeState out;
    out.irreps = concat(out_blocks, 1);
    // 6. Readout.
    out.inv = in.inv + mix(out_blocks[0].squeeze(1), m_w_read);
    if (trace) {
      trace->messages = a;
      trace->product = b;
      trace->out = out.irreps;
    }
    return out;
  }

 private:
  at::Tensor param(const std::string& name, at::IntArrayRef shape) {
    return register_parameter(name, at::randn(shape));
  }

  // The product basis's couplings: every pair product of A's degrees in one ChannelCoupling (A with
  // itself), every triple product in another (the pairs' output with A). Each output is laid out
  // by degree, the products of one degree in the order of m_pairs / m_triples, which is the order
  // of their element weights.
  void build_product_couplings() {
    const int64_t k_sh = irreps_dim(m_lsh);
    m_pair_rows.assign(size_t(m_lout + 1), 0);
    m_triple_rows.assign(size_t(m_lout + 1), 0);
    m_pair_cc = {0, k_sh, k_sh, {}};
    int64_t top = 0;
    for (const PairProduct& pp : m_pairs) top = std::max(top, pp.outs.back());
    std::vector<std::vector<int64_t>> pair_row(m_pairs.size());  // first row of each output
    for (size_t p = 0; p < m_pairs.size(); ++p) pair_row[p].resize(m_pairs[p].outs.size());
    for (int64_t l = 0; l <= top; ++l) {
      for (size_t p = 0; p < m_pairs.size(); ++p) {
        const PairProduct& pp = m_pairs[p];
        for (size_t k = 0; k < pp.outs.size(); ++k)
          if (pp.outs[k] == l) {
            pair_row[p][k] = m_pair_cc.R;
            add_coupling(m_pair_cc, pp.l1 * pp.l1, pp.l2 * pp.l2, pp.l1, pp.l2, l);
            if (l <= m_lout) ++m_pair_rows[size_t(l)];
          }
      }
    }
    m_triple_cc = {0, m_pair_cc.R, k_sh, {}};
    for (int64_t l = 0; l <= m_lout; ++l) {
      for (const TripleProduct& t : m_triples)
        for (int64_t out : t.outs)
          if (out == l) {
            const int64_t lm = m_pairs[t.pair].outs[size_t(t.mid_index)];
            add_coupling(m_triple_cc, pair_row[t.pair][size_t(t.mid_index)], t.l3 * t.l3, lm, t.l3,
                         l);
            ++m_triple_rows[size_t(l)];
          }
    }
  }

  // The couplings that weight each term of B (A's degrees, the pair and the triple products) by
  // its element weight and sum the terms of a degree: X the element weights [N, terms, F] (terms
  // in the order of m_w_elem: degree 0's, then 1's, ...; within a degree A_l, pairs, triples),
  // Y = A, pairs or triples, into B [N, K_out, F].
  void build_element_couplings() {
    const int64_t k_out = irreps_dim(m_lout);
    int64_t terms = 0;
    std::vector<int64_t> first(size_t(m_lout + 1));  // each degree's first term
    for (int64_t l = 0; l <= m_lout; ++l) {
      first[size_t(l)] = terms;
      terms += m_w_elem[size_t(l)].size(1);
    }
    m_elem_cc[0] = {k_out, terms, irreps_dim(m_lsh), {}};
    for (int64_t l = 0; l <= std::min(m_lout, m_lsh); ++l)
      for (int64_t m = 0; m < 2 * l + 1; ++m)
        m_elem_cc[0].entries.push_back({l * l + m, first[size_t(l)], l * l + m, 1.0});
    // The products' rows of degree l: rows[l] terms of 2l+1 rows each, after those of degree < l.
    const auto add_terms = [&](ChannelCoupling& c, int64_t source_rows, const ProductRows& rows,
                               const ProductRows& skip) {
      c = {k_out, terms, source_rows, {}};
      int64_t row = 0;
      for (int64_t l = 0; l <= m_lout; ++l)
        for (int64_t q = 0; q < rows[size_t(l)]; ++q) {
          const int64_t t = first[size_t(l)] + (l <= m_lsh) + skip[size_t(l)] + q;
          for (int64_t m = 0; m < 2 * l + 1; ++m) c.entries.push_back({l * l + m, t, row++, 1.0});
        }
    };
    const ProductRows none(size_t(m_lout + 1), 0);
    add_terms(m_elem_cc[1], m_pair_cc.R, m_pair_rows, none);
    add_terms(m_elem_cc[2], m_triple_cc.R, m_triple_rows, m_pair_rows);
  }

  // Appends the coupling of X's degree-la rows from i0 and Y's degree-lb rows from j0 into degree l
  // as c's next 2l+1 rows.
  static void add_coupling(ChannelCoupling& c, int64_t i0, int64_t j0, int64_t la, int64_t lb,
                           int64_t l) {
    const at::Tensor cg = coupling_tensor(la, lb, l);  // [2la+1, 2lb+1, 2l+1]
    const auto v = cg.accessor<double, 3>();
    for (int64_t m = 0; m < 2 * l + 1; ++m)
      for (int64_t x = 0; x < 2 * la + 1; ++x)
        for (int64_t y = 0; y < 2 * lb + 1; ++y)
          if (std::abs(v[x][y][m]) > 1e-12)
            c.entries.push_back({c.R + m, i0 + x, j0 + y, v[x][y][m]});
    c.R += 2 * l + 1;
  }

  // [E, R] radial basis of the distances.
  at::Tensor radial_basis(const EdgeGeometry& g) const {
    const double rc = g.cutoff();
    if (m_radial_type == "gaussian") return g.gaussians(m_num_radial);
    if (m_radial_type == "chebyshev") {
      const at::Tensor t = (2.0 / rc) * g.len().unsqueeze(1) - 1.0;  // [E, 1]
      std::vector<at::Tensor> cols = {t};
      at::Tensor prev = at::ones_like(t);
      for (int64_t k = 1; k < m_num_radial; ++k) {
        at::Tensor next = 2.0 * t * cols.back() - prev;
        prev = cols.back();
        cols.push_back(next);
      }
      return concat(cols, 1);
    }
    return g.bessel(m_num_radial) * std::sqrt(2.0 / rc);
  }

  // [E] DimeNet's polynomial envelope of order p at d / rc (rc per edge under a smooth cap).
  at::Tensor envelope(const EdgeGeometry& g) const {
    const at::Tensor x =
        g.edge_cutoff().defined() ? g.len() / g.edge_cutoff() : g.len() * (1.0 / g.cutoff());
    return envelope_of(x, Envelope{Envelope::kPolynomial, m_envelope_p});
  }

  int64_t m_f, m_lsh, m_lin, m_lout, m_correlation, m_num_radial, m_envelope_p;
  double m_avg_neighbours;
  std::string m_radial_type;
  std::vector<at::Tensor> m_w_up, m_w_sc, m_w_msg, m_w_elem, m_w_prod;
  at::Tensor m_w_down, m_w_read;
  at::Tensor m_coupling;
  CouplingPattern m_pattern;
  std::vector<Path> m_paths;
  int64_t m_rows = 0;
  // Per degree l3: its paths, its rows ((2l3+1) paths) and the first of them.
  std::vector<int64_t> m_degree_paths, m_degree_rows, m_degree_offset;
  std::vector<PairProduct> m_pairs;
  std::vector<TripleProduct> m_triples;
  // The number of terms of each degree 0..m_lout in a product order's output, whose rows start
  // with those of degree 0, then 1, ...
  using ProductRows = std::vector<int64_t>;
  ChannelCoupling m_pair_cc, m_triple_cc;
  ChannelCoupling m_elem_cc[3];  // element weights with A, pairs, triples into B
  ProductRows m_pair_rows, m_triple_rows;
  torch::nn::Linear m_r0{nullptr}, m_r1{nullptr}, m_r2{nullptr}, m_r3{nullptr};
};

}  // namespace

std::shared_ptr<MessagePassing> make_mace(const LayerSpec& spec) {
  return std::make_shared<Mace>(spec);
}

NodeState mace_forward_traced(MessagePassing& layer, const NodeState& in, const GraphBatch& batch,
                              const EdgeGeometry& geometry, MaceTrace* trace) {
  auto* mace = dynamic_cast<Mace*>(&layer);
  if (!mace) throw Error("mace_forward_traced: the layer is not a MACE layer");
  return mace->run(in, batch, geometry, trace);
}

}  // namespace ddgnn
