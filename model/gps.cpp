// GPS global attention and Laplacian positional encodings (model/gps.h).
#include "model/gps.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"

namespace ddgnn {

namespace {

// Position of each atom within its graph: [n_atoms] int64 (atoms of a graph are contiguous).
at::Tensor slot_in_graph(const GraphBatch& batch) {
  const SegmentIndex& g = *batch.graphs;
  return at::arange(batch.n_atoms(), batch.graph_of_atom.options()) -
         g.ptr.index_select(0, g.index);
}

}  // namespace

at::Tensor laplacian_pe(const GraphBatch& batch, int64_t k) {
  at::NoGradGuard no_grad;
  const auto dev = batch.z.device();
  const int64_t n_graphs = batch.n_graphs, n_atoms = batch.n_atoms();
  const auto f64 = at::TensorOptions().dtype(at::kDouble).device(dev);
  if (n_atoms == 0 || n_graphs == 0) return at::zeros({n_atoms, k}, f64);
  const int64_t n = batch.max_graph_atoms;
  const at::Tensor slot = slot_in_graph(batch);
  const at::Tensor graph = batch.graph_of_atom;
  // A [B, n, n]: edges between distinct atoms, counted (periodic images add up).
  const at::Tensor src = batch.edge_index[0], dst = batch.edge_index[1];
  const at::Tensor keep = (src != dst).nonzero().squeeze(1);
  const at::Tensor s = src.index_select(0, keep), d = dst.index_select(0, keep);
  at::Tensor a = at::zeros({n_graphs, n, n}, f64);
  a.index_put_({graph.index_select(0, d), slot.index_select(0, d), slot.index_select(0, s)},
               at::ones({s.size(0)}, f64), /*accumulate=*/true);
  const at::Tensor deg = a.sum(2);  // [B, n]
  const at::Tensor inv_sqrt = at::where(deg > 0, deg.rsqrt(), at::zeros_like(deg));
  // L = I - D^-1/2 A D^-1/2 on each graph's atoms.
  const at::Tensor lap =
      at::eye(n, f64).unsqueeze(0) - inv_sqrt.unsqueeze(2) * a * inv_sqrt.unsqueeze(1);
  at::Tensor pe = at::zeros({n_graphs, n, k}, f64);
  // Each size of graph on its own, unpadded: a graph's encodings are then a function of its own
  // Laplacian alone. (Padded to the batch's largest, the eigenvectors of a degenerate eigenvalue,
  // as a symmetric molecule has, came out as another basis of the same space depending on the
  // padding and on the LAPACK kernels of the CPU.)
  const at::Tensor sizes = batch.atoms_per_graph.to(at::kCPU);
  std::vector<int64_t> seen;
  for (int64_t g = 0; g < n_graphs; ++g) {
    const int64_t m = sizes[g].item<int64_t>();
    if (m < 2 || std::find(seen.begin(), seen.end(), m) != seen.end()) continue;
    seen.push_back(m);
    const at::Tensor idx = (batch.atoms_per_graph == m).nonzero().squeeze(1);
    const at::Tensor sub = lap.index_select(0, idx).narrow(1, 0, m).narrow(2, 0, m).contiguous();
    const at::Tensor vectors = std::get<1>(at::linalg_eigh(sub));  // ascending; columns [G, m, m]
    const int64_t take = std::min(k, m - 1);
    at::Tensor v = vectors.narrow(2, 1, take);  // [G, m, take]
    // The sign: the first entry above 1e-6 in magnitude positive.
    const at::Tensor first = (v.abs() > 1e-6).to(at::kByte).argmax(1, /*keepdim=*/true);
    const at::Tensor sign =
        at::where(v.gather(1, first) < 0, -at::ones({1}, f64), at::ones({1}, f64));
    at::Tensor block = at::zeros({idx.size(0), n, k}, f64);
    block.narrow(1, 0, m).narrow(2, 0, take).copy_(v * sign);
    pe.index_copy_(0, idx, block);
  }
  return pe.index({graph, slot});  // [n_atoms, k]
}

GpsLayer::GpsLayer(std::shared_ptr<MessagePassing> layer, int64_t channels, int64_t heads,
                   double dropout)
    : m_layer(std::move(layer)), m_heads(heads), m_dropout(dropout) {
  if (heads < 1 || channels % heads != 0)
    throw ConfigError("global_attn_heads: " + std::to_string(heads) +
                          " heads do not divide hidden_dim " + std::to_string(channels),
                      "choose a number of heads that divides hidden_dim (e.g. 8 for 64)");
  register_module("layer", m_layer);
  m_in_proj = register_module("attn_in", torch::nn::Linear(channels, 3 * channels));
  m_out_proj = register_module("attn_out", torch::nn::Linear(channels, channels));
  m_mlp1 = register_module("mlp1", torch::nn::Linear(channels, 2 * channels));
  m_mlp2 = register_module("mlp2", torch::nn::Linear(2 * channels, channels));
  m_norm1 = register_module("norm1", torch::nn::BatchNorm1d(channels));
  m_norm2 = register_module("norm2", torch::nn::BatchNorm1d(channels));
  m_norm3 = register_module("norm3", torch::nn::BatchNorm1d(channels));
}

at::Tensor GpsLayer::attention(const at::Tensor& x, const GraphBatch& batch) {
  const int64_t c = x.size(1), d = c / m_heads, b = batch.n_graphs;
  if (x.size(0) == 0) return x;
  const int64_t n = batch.max_graph_atoms;
  const at::Tensor slot = slot_in_graph(batch);
  const at::Tensor graph = batch.graph_of_atom;
  // Queries, keys and values of each atom, laid out per graph: [B, H, n, d].
  const at::Tensor qkv_atoms = m_in_proj(x);  // [n_atoms, 3F]
  at::Tensor qkv =
      at::zeros({b, n, 3 * c}, qkv_atoms.options()).index_put({graph, slot}, qkv_atoms);
  qkv = qkv.view({b, n, 3, m_heads, d}).permute({2, 0, 3, 1, 4});  // [3, B, H, n, d]
  const at::Tensor q = qkv[0], key = qkv[1], v = qkv[2];
  const at::Tensor real =
      at::arange(n, graph.options()).unsqueeze(0) < batch.atoms_per_graph.unsqueeze(1);  // [B, n]
  at::Tensor scores = at::matmul(q, key.transpose(-2, -1)) / std::sqrt(double(d));  // [B, H, n, n]
  // Padding keys get a large finite negative score (-inf would give NaN gradients for the padding
  // queries of an empty graph).
  scores = scores.masked_fill(real.logical_not().unsqueeze(1).unsqueeze(2), -1e9);
  at::Tensor att = at::softmax(scores, -1);
  if (m_dropout > 0) att = at::dropout(att, m_dropout, is_training());
  const at::Tensor out = at::matmul(att, v).permute({0, 2, 1, 3}).reshape({b, n, c});  // [B, n, F]
  return m_out_proj(out.index({graph, slot}));
}

namespace {

// bn(x) [n_atoms, F] in training mode with the statistics of the atoms of weight > 0 only (a padded
// batch's GraphBatch::atom_weight, 1 / (real atoms) each): the mean and biased variance normalise,
// the running averages take the mean and the unbiased variance, as torch's BatchNorm1d computes
// them over the real atoms alone.
at::Tensor weighted_batch_norm(torch::nn::BatchNorm1dImpl& bn, const at::Tensor& x,
                               const at::Tensor& atom_weight) {
  const auto& o = bn.options;
  const at::Tensor w = atom_weight.to(x.scalar_type()).unsqueeze(1);  // [n_atoms, 1]
  const at::Tensor mean = (x * w).sum(0);                             // [F]
  const at::Tensor centred = x - mean;
  const at::Tensor var = (centred * centred * w).sum(0);
  at::Tensor y = centred * at::rsqrt(var + o.eps());
  if (o.affine()) y = y * bn.weight + bn.bias;
  if (o.track_running_stats()) {
    c10::NoGradGuard no_grad;
    const double m = o.momentum().value_or(0.1);
    const at::Tensor n = atom_weight.gt(0).sum().to(x.scalar_type());
    bn.running_mean.mul_(1.0 - m).add_(mean.detach() * m);
    bn.running_var.mul_(1.0 - m).add_(var.detach() * (n / (n - 1.0).clamp_min(1.0)) * m);
    bn.num_batches_tracked.add_(1);
  }
  return y;
}

}  // namespace

at::Tensor GpsLayer::norm(torch::nn::BatchNorm1d& bn, const at::Tensor& x,
                          const GraphBatch& batch) {
  if (!batch.atom_weight.defined() || !is_training()) return bn(x);
  return weighted_batch_norm(*bn, x, batch.atom_weight);
}

NodeState GpsLayer::forward(const NodeState& in, const GraphBatch& batch,
                            const EdgeGeometry& geometry) {
  const at::Tensor& x = in.inv;
  const auto drop = [&](const at::Tensor& t) {
    return m_dropout > 0 ? at::dropout(t, m_dropout, is_training()) : t;
  };
  NodeState out = m_layer->forward(in, batch, geometry);
  const at::Tensor local = norm(m_norm1, drop(out.inv) + x, batch);
  const at::Tensor global = norm(m_norm2, drop(attention(x, batch)) + x, batch);
  at::Tensor y = local + global;
  y = y + drop(m_mlp2(drop(at::relu(m_mlp1(y)))));
  out.inv = norm(m_norm3, y, batch);
  return out;
}

}  // namespace ddgnn
