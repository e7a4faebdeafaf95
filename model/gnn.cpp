// The model trunk and heads (HydraGNN's architecture). See gnn.h for the conventions.
#include "model/gnn.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "model/activation.h"
#include "model/device.h"
#include "model/gps.h"
#include "model/layers/dimenet.h"
#include "model/segment.h"
#include "model/small_mm.h"

namespace ddgnn {

void check_gnn_spec(const GnnSpec& spec) {
  if (spec.num_conv_layers < 1) throw ConfigError("num_conv_layers: must be >= 1");
  if (spec.max_z < 1 || spec.max_z > 255) throw ConfigError("max_z: must be 1..255");
  for (size_t k = 0; k < spec.elements.size(); ++k)
    if (spec.elements[k] < 0 || spec.elements[k] > spec.max_z ||
        (k > 0 && spec.elements[k] <= spec.elements[k - 1]))
      throw ConfigError("elements: atomic numbers in 0.." + std::to_string(spec.max_z) +
                        ", ascending, each once");
  if (spec.layer.hidden_dim < 1) throw ConfigError("hidden_dim: must be >= 1");
  if (!(spec.dropout >= 0.0 && spec.dropout < 1.0))
    throw ConfigError("dropout: must be >= 0 and < 1");
  if (spec.heads.empty()) throw ConfigError("output_heads: the model has no head");
  for (int64_t b = 0; b < spec.num_branches(); ++b) {
    const HeadBranch br = spec.branch(b);
    const std::string of = spec.num_branches() > 1 ? " (branch-" + std::to_string(b) + ")" : "";
    if (br.num_sharedlayers < 0 || br.dim_sharedlayers < 1)
      throw ConfigError("output_heads.graph" + of +
                        ": num_sharedlayers must be >= 0, dim_sharedlayers >= 1");
    if (int64_t(br.dim_headlayers.size()) != br.num_headlayers)
      throw ConfigError("output_heads.graph.dim_headlayers" + of +
                        ": needs num_headlayers entries");
    if (int64_t(br.node_dim_headlayers.size()) != br.node_num_headlayers)
      throw ConfigError("output_heads.node.dim_headlayers" + of + ": needs num_headlayers entries");
    for (int64_t w : br.dim_headlayers)
      if (w < 1)
        throw ConfigError("output_heads.graph.dim_headlayers" + of + ": each must be >= 1");
    for (int64_t w : br.node_dim_headlayers)
      if (w < 1) throw ConfigError("output_heads.node.dim_headlayers" + of + ": each must be >= 1");
  }
  for (const auto& h : spec.heads)
    if (h.output_dim < 1) throw ConfigError("output_dim: head '" + h.name + "' must be >= 1");
  check_gps_spec(spec);
  if (!spec.graph_attr_mode.empty()) {
    if (spec.graph_attr_mode != "film" && spec.graph_attr_mode != "concat_node" &&
        spec.graph_attr_mode != "fuse_pool")
      throw ConfigError("graph_attr_conditioning_mode: '" + spec.graph_attr_mode +
                        "' is not film, concat_node or fuse_pool");
    if (spec.graph_attr_dim < 1)
      throw ConfigError("use_graph_attr_conditioning: the graphs have no attributes",
                        "store each structure's attributes with `ddgnn convert --info-keys "
                        "graph_attr`");
  }
  check_activation(spec.layer.activation);
}

Gnn::Gnn(const GnnSpec& spec) : m_spec(spec) {
  check_gnn_spec(spec);
  const int64_t f = spec.layer.hidden_dim;
  m_embedding = register_module("embedding", torch::nn::Embedding(spec.num_species(), f));
  m_row_of_z = at::full({256}, -1, at::kLong);
  int64_t* row = m_row_of_z.data_ptr<int64_t>();
  if (spec.elements.empty())
    for (int64_t z = 0; z <= spec.max_z; ++z) row[z] = z;
  for (size_t k = 0; k < spec.elements.size(); ++k) row[spec.elements[k]] = int64_t(k);
  if (spec.node_inputs > 0)
    m_node_input = register_module(
        "node_input", torch::nn::Linear(torch::nn::LinearOptions(spec.node_inputs, f).bias(false)));
  // GPS: the atoms start from their positional encodings, beside the embedding; SchNet's filters
  // read the edges' relative encodings (HydraGNN's pos_emb, node_lin, rel_pos_emb).
  LayerSpec layer = spec.layer;
  if (spec.gps_heads > 0) {
    using torch::nn::LinearOptions;
    m_pos_emb =
        register_module("pos_emb", torch::nn::Linear(LinearOptions(spec.pe_dim, f).bias(false)));
    m_node_lin =
        register_module("node_lin", torch::nn::Linear(LinearOptions(2 * f, f).bias(false)));
    if (spec.mpnn_type == "SchNet") {
      m_rel_pos_emb = register_module("rel_pos_emb",
                                      torch::nn::Linear(LinearOptions(spec.pe_dim, f).bias(false)));
      layer.edge_attr_dim = f;
    }
  }
  const int64_t k = spec.graph_attr_dim;
  using torch::nn::Linear;
  if (spec.graph_attr_mode == "film") {
    m_cond1 = register_module("cond1", Linear(k, std::max(f, k)));
    m_cond2 = register_module("cond2", Linear(std::max(f, k), 2 * f));
  } else if (spec.graph_attr_mode == "concat_node") {
    m_cond1 = register_module("cond1", Linear(f + k, f));
  } else if (spec.graph_attr_mode == "fuse_pool") {
    m_cond1 = register_module("cond1", Linear(f + k, f));
    m_cond2 = register_module("cond2", Linear(f, f));
  }
  for (int64_t i = 0; i < spec.num_conv_layers; ++i) {
    LayerSpec ls = layer;
    ls.layer_index = i;
    ls.num_layers = spec.num_conv_layers;
    ls.num_species = spec.num_species();
    std::shared_ptr<MessagePassing> conv = make_layer(spec.mpnn_type, ls);
    if (spec.gps_heads > 0)
      conv = std::make_shared<GpsLayer>(std::move(conv), f, spec.gps_heads, spec.dropout);
    m_layers.push_back(register_module("conv" + std::to_string(i), std::move(conv)));
  }
  bool any_graph = false;
  for (const auto& h : spec.heads) any_graph = any_graph || h.kind == HeadSpec::kGraph;
  for (int64_t b = 0; b < spec.num_branches(); ++b) {
    // Branch 0's modules keep the names of a one-branch model.
    const std::string name = b == 0 ? "" : "branch" + std::to_string(b) + "_";
    const HeadBranch br = spec.branch(b);
    Branch branch;
    int64_t graph_in = f;
    if (any_graph) {
      branch.shared =
          make_mlp(name + "shared", f,
                   std::vector<int64_t>(size_t(br.num_sharedlayers), br.dim_sharedlayers));
      if (br.num_sharedlayers > 0) graph_in = br.dim_sharedlayers;
    }
    for (size_t k = 0; k < spec.heads.size(); ++k) {
      const HeadSpec& h = spec.heads[k];
      const std::string prefix = name + "head" + std::to_string(k) + "_";
      std::shared_ptr<MessagePassing> conv;
      Mlp mlp;
      if (h.kind == HeadSpec::kGraph) {
        std::vector<int64_t> widths = br.dim_headlayers;
        widths.push_back(h.output_dim);
        mlp = make_mlp(prefix, graph_in, widths);
      } else if (spec.node_head_type == NodeHeadType::kMlp) {
        std::vector<int64_t> widths = br.node_dim_headlayers;
        widths.push_back(h.output_dim);
        mlp = make_mlp(prefix, f, widths);
      } else {
        LayerSpec ls = layer;
        ls.layer_index = spec.num_conv_layers + int64_t(k);
        ls.num_layers = spec.num_conv_layers;
        ls.num_species = spec.num_species();
        conv = register_module(prefix + "conv", make_layer(spec.mpnn_type, ls));
        mlp = make_mlp(prefix, f, {h.output_dim});
      }
      if (spec.has_initial_bias) {
        c10::NoGradGuard no_grad;
        mlp.layers.back()->bias.fill_(spec.initial_bias);
      }
      branch.heads.push_back(std::move(mlp));
      branch.node_convs.push_back(std::move(conv));
    }
    m_branches.push_back(std::move(branch));
  }
}

Gnn::Mlp Gnn::make_mlp(const std::string& prefix, int64_t in, const std::vector<int64_t>& widths) {
  Mlp mlp;
  for (size_t i = 0; i < widths.size(); ++i) {
    mlp.layers.push_back(
        register_module(prefix + "lin" + std::to_string(i), torch::nn::Linear(in, widths[i])));
    in = widths[i];
  }
  return mlp;
}

// x [rows, in] -> [rows, out]; activation after every Linear but the last (unless last_activation).
at::Tensor Gnn::run_mlp(const Mlp& mlp, at::Tensor x, bool last_activation) const {
  for (size_t i = 0; i < mlp.layers.size(); ++i) {
    x = dense(*mlp.layers[i], x);
    if (last_activation || i + 1 < mlp.layers.size()) {
      x = apply_activation(m_spec.layer.activation, x);
      if (m_spec.dropout > 0.0) x = at::dropout(x, m_spec.dropout, is_training());
    }
  }
  return x;
}

// h [n_atoms, F] -> [n_graphs, F] by add / mean / max over each graph's atoms (empty graph: 0).
at::Tensor Gnn::pool(const at::Tensor& h, const GraphBatch& batch) const {
  const SegmentIndex& g = *batch.graphs;
  if (m_spec.graph_pooling == Pooling::kAdd) return scatter_sum(h, g);
  const at::Tensor count = batch.atoms_per_graph.to(h.scalar_type()).unsqueeze(1);  // [n_graphs, 1]
  if (m_spec.graph_pooling == Pooling::kMean) return scatter_sum(h, g) / count.clamp_min(1.0);
  // max: dense [n_graphs, max_atoms, F] padded with -inf, then amax over atoms (atoms of a graph
  // are contiguous since graph_of_atom is non-decreasing).
  const int64_t n_graphs = batch.n_graphs;
  if (h.size(0) == 0) return at::zeros({n_graphs, h.size(1)}, h.options());
  const int64_t max_atoms = batch.max_graph_atoms;
  const at::Tensor slot =
      at::arange(h.size(0), batch.graph_of_atom.options()) - g.ptr.index_select(0, g.index);
  at::Tensor dense = at::full({n_graphs, max_atoms, h.size(1)},
                              -std::numeric_limits<double>::infinity(), h.options());
  dense = dense.index_put({g.index, slot}, h);
  const at::Tensor out = std::get<0>(dense.max(1));
  return at::where(count > 0, out, at::zeros_like(out));
}

at::Tensor Gnn::graph_attr_of(const GraphBatch& batch, const at::Tensor& like) const {
  if (!batch.graph_attr.defined() || batch.graph_attr.size(0) != batch.n_graphs ||
      batch.graph_attr.size(1) != m_spec.graph_attr_dim)
    throw Error("the model reads " + std::to_string(m_spec.graph_attr_dim) +
                " attribute(s) per graph (graph-attribute conditioning); the batch has " +
                (batch.graph_attr.defined() ? std::to_string(batch.graph_attr.size(1)) : "none"));
  return batch.graph_attr.to(like.dtype());
}

// film: inv (1 + tanh(scale)) + shift, [scale, shift] = cond2(act(cond1(attr))) of each atom's
// graph; concat_node: cond1([inv, attr]); otherwise inv.
at::Tensor Gnn::condition_nodes(const at::Tensor& inv, const GraphBatch& batch) const {
  const std::string& mode = m_spec.graph_attr_mode;
  if (mode != "film" && mode != "concat_node") return inv;
  const at::Tensor attr = graph_attr_of(batch, inv).index_select(0, batch.graph_of_atom);
  if (mode == "concat_node") return m_cond1->forward(at::cat({inv, attr}, 1));
  const at::Tensor ss =
      m_cond2->forward(apply_activation(m_spec.layer.activation, m_cond1->forward(attr)));
  const auto parts = ss.split(m_spec.layer.hidden_dim, 1);
  return inv * (1 + at::tanh(parts[0])) + parts[1];
}

GraphBatch Gnn::with_species(const GraphBatch& batch) const {
  GraphBatch out = batch;
  const at::Tensor z = batch.z;
  if (z.is_cpu()) {
    // Checked in host memory (no device to wait for): the first atom the model has no row for.
    const at::Tensor zc = z.to(at::kLong).contiguous();
    const int64_t* zp = zc.data_ptr<int64_t>();
    const int64_t* row = m_row_of_z.data_ptr<int64_t>();
    for (int64_t atom = 0; atom < zc.numel(); ++atom) {
      if (zp[atom] >= 0 && zp[atom] <= 255 && row[zp[atom]] >= 0) continue;
      std::string known;
      for (int64_t e : m_spec.elements) known += (known.empty() ? "" : ", ") + std::to_string(e);
      throw DataError("atom " + std::to_string(atom) + " of the batch has atomic number " +
                          std::to_string(zp[atom]) + ", which the model has no weights for (" +
                          (m_spec.elements.empty() ? "it reads 0.." + std::to_string(m_spec.max_z)
                                                   : "it was trained on atomic numbers " + known) +
                          ")",
                      "predict with a model trained on data that holds this element");
    }
    out.species = m_row_of_z.index_select(0, z);
    return out;
  }
  if (!m_row_of_z_device.defined() || m_row_of_z_device.device() != z.device())
    m_row_of_z_device = m_row_of_z.to(z.device());
  out.species = m_row_of_z_device.index_select(0, z);
  return out;
}

NodeState Gnn::trunk_state(const GraphBatch& batch, const EdgeGeometry& geometry) {
  NodeState s;
  s.inv = m_embedding->forward(batch.species);  // [n_atoms, F]
  if (m_node_input) {
    if (!batch.node_inputs.defined() || batch.node_inputs.size(1) != m_spec.node_inputs)
      throw Error(
          "the model reads " + std::to_string(m_spec.node_inputs) +
          " per-atom input(s) beside the atomic number; the batch has " +
          (batch.node_inputs.defined() ? std::to_string(batch.node_inputs.size(1)) : "none"));
    s.inv = s.inv + m_node_input->forward(batch.node_inputs.to(s.inv.dtype()));
  }
  at::Tensor edge_attr;
  if (m_pos_emb) {
    const at::Tensor pe = batch.laplacian_pe.to(s.inv.dtype());
    s.inv = m_node_lin->forward(at::cat({s.inv, m_pos_emb->forward(pe)}, 1));
    if (m_rel_pos_emb)
      edge_attr = m_rel_pos_emb->forward(
          (pe.index_select(0, batch.edge_index[0]) - pe.index_select(0, batch.edge_index[1]))
              .abs());
  }
  for (const auto& layer : m_layers) {
    if (layer->equivariant() && !s.equiv.defined())
      s.equiv = at::zeros({s.inv.size(0), 3, s.inv.size(1)}, s.inv.options());
    s.edge_attr = edge_attr;
    s = layer->forward(s, batch, geometry);
    s.inv = condition_nodes(s.inv, batch);
    if (layer->activates_output()) s.inv = apply_activation(m_spec.layer.activation, s.inv);
  }
  s.edge_attr = edge_attr;
  return s;
}

at::Tensor Gnn::trunk(const GraphBatch& batch, const EdgeGeometry& geometry) {
  GraphBatch b = with_species(batch);
  add_graph_inputs(b, m_spec);
  return trunk_state(b, geometry).inv;
}

// The heads of one branch on every graph and atom.
std::vector<at::Tensor> Gnn::run_branch(const Branch& branch, const NodeState& trunk,
                                        const at::Tensor& pooled, const GraphBatch& batch,
                                        const EdgeGeometry& geometry) {
  const at::Tensor& h = trunk.inv;
  std::vector<at::Tensor> out;
  at::Tensor shared;
  for (size_t k = 0; k < m_spec.heads.size(); ++k) {
    if (m_spec.heads[k].kind == HeadSpec::kGraph) {
      if (!shared.defined()) shared = run_mlp(branch.shared, pooled, /*last_activation=*/true);
      out.push_back(run_mlp(branch.heads[k], shared, false));
    } else if (branch.node_convs[k]) {
      const auto& conv = branch.node_convs[k];
      NodeState s;
      s.inv = h;
      s.edge_attr = trunk.edge_attr;
      if (conv->equivariant()) s.equiv = at::zeros({h.size(0), 3, h.size(1)}, h.options());
      s = conv->forward(s, batch, geometry);
      if (conv->activates_output()) s.inv = apply_activation(m_spec.layer.activation, s.inv);
      out.push_back(run_mlp(branch.heads[k], s.inv, false));
    } else {
      out.push_back(run_mlp(branch.heads[k], h, false));
    }
  }
  return out;
}

void add_graph_inputs(GraphBatch& batch, const GnnSpec& spec) {
  if (spec.mpnn_type == "DimeNet" && !batch.triplets.defined()) {
    const Triplets t = dimenet_triplets(batch);
    batch.triplets = at::stack({t.kj, t.ji});
  }
  if (spec.gps_heads > 0 &&
      !(batch.laplacian_pe.defined() && batch.laplacian_pe.size(1) == spec.pe_dim))
    batch.laplacian_pe = laplacian_pe(batch, spec.pe_dim);
}

std::vector<at::Tensor> Gnn::forward(const GraphBatch& in, const at::Tensor& pos) {
  GraphBatch batch = with_species(in);
  add_graph_inputs(batch, m_spec);
  const EdgeGeometry geometry(batch, pos, m_spec.layer.radius, m_spec.layer.envelope);
  Bf16Autocast autocast(pos.device().type(), m_bf16);
  const NodeState state = trunk_state(batch, geometry);
  const at::Tensor& h = state.inv;
  bool any_graph = false;
  for (const auto& head : m_spec.heads) any_graph = any_graph || head.kind == HeadSpec::kGraph;
  at::Tensor pooled = any_graph ? pool(h, batch) : at::Tensor();
  if (any_graph && m_spec.graph_attr_mode == "fuse_pool")
    pooled = m_cond2->forward(
        apply_activation(m_spec.layer.activation,
                         m_cond1->forward(at::cat({pooled, graph_attr_of(batch, pooled)}, 1))));
  std::vector<at::Tensor> out = run_branch(m_branches[0], state, pooled, batch, geometry);
  if (m_branches.size() > 1 && batch.branch.defined()) {
    // Each graph through its branch: every branch's head layers run on all the rows, and each
    // row takes the output of its own (masks: the host never learns which rows are whose).
    const at::Tensor atom_branch = batch.branch.index_select(0, batch.graph_of_atom);
    for (size_t b = 1; b < m_branches.size(); ++b) {
      const std::vector<at::Tensor> part =
          run_branch(m_branches[b], state, pooled, batch, geometry);
      for (size_t k = 0; k < part.size(); ++k) {
        const at::Tensor& branch =
            m_spec.heads[k].kind == HeadSpec::kGraph ? batch.branch : atom_branch;
        out[k] = at::where(branch.eq(int64_t(b)).unsqueeze(1), part[k], out[k]);
      }
    }
  }
  if (m_bf16)
    for (auto& o : out) o = o.to(pos.scalar_type());
  return out;
}

}  // namespace ddgnn
