// Batch construction (radius graph in float64 by cell lists on the host or by tensor ops on the
// device, then tensors of the model dtype on the device) and the per-step edge geometry with
// memoised radial expansions.
#include "model/batch.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "model/cuda/schnet_cuda.h"
#include "model/device.h"
#include "model/device_graph.h"
#include "model/kernels.h"

namespace ddgnn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Gaussians of d [E] at centres mu [n]: exp(max(coeff (d - mu)^2, -80)) [E, n] (coeff < 0).
// The three kernels below are single passes over [E, n] (one exp per element) in place
// of chains of ~5-15 elementwise ATen ops; they run without autograd. d [E], mu [n], g and the
// outputs [E, n] or [E], all contiguous and of one dtype. G = exp(max(c x^2, -80)), x = d - mu.
template <typename T>
inline T clamped_gaussian(T c, T x) {
  return std::exp(std::max(c * x * x, T(-80)));
}

// Forward of Gaussians: G [E, n] (one CUDA kernel on a CUDA device).
at::Tensor gaussians_fused(const at::Tensor& d_in, const at::Tensor& mu_in, double coeff) {
  if (d_in.is_cuda()) return cuda::gaussians(d_in, mu_in, coeff);
  const at::Tensor d = d_in.contiguous(), mu = mu_in.contiguous();
  const int64_t e_count = d.size(0), n = mu.size(0);
  at::Tensor out = at::empty({e_count, n}, d.options());
  if (d.scalar_type() == at::kFloat) {  // vectorised exp (model/kernels.h)
    kernels::gaussians(d.data_ptr<float>(), mu.data_ptr<float>(), out.data_ptr<float>(), e_count, n,
                       float(coeff));
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES(d.scalar_type(), "gaussians", [&] {
    const scalar_t *dp = d.data_ptr<scalar_t>(), *mp = mu.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    const scalar_t c = scalar_t(coeff);
    for (int64_t e = 0; e < e_count; ++e)
      for (int64_t k = 0; k < n; ++k) op[e * n + k] = clamped_gaussian(c, dp[e] - mp[k]);
  });
  return out;
}

// Forward of GaussianGrad: dd[e] = 2c sum_k g[e, k] G[e, k] x[e, k]  ([E]); G [E, n] given.
at::Tensor gaussian_grad_fused(const at::Tensor& d_in, const at::Tensor& g_in,
                               const at::Tensor& mu_in, const at::Tensor& gauss_in, double coeff) {
  const at::Tensor d = d_in.contiguous(), g = g_in.contiguous(), mu = mu_in.contiguous(),
                   gauss = gauss_in.contiguous();
  const int64_t e_count = d.size(0), n = mu.size(0);
  at::Tensor out = at::empty({e_count}, d.options());
  AT_DISPATCH_FLOATING_TYPES(d.scalar_type(), "gaussian_grad", [&] {
    const scalar_t *dp = d.data_ptr<scalar_t>(), *gp = g.data_ptr<scalar_t>(),
                   *mp = mu.data_ptr<scalar_t>(), *gs = gauss.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    for (int64_t e = 0; e < e_count; ++e) {
      scalar_t acc = 0;
      for (int64_t k = 0; k < n; ++k) acc += gp[e * n + k] * gs[e * n + k] * (dp[e] - mp[k]);
      op[e] = scalar_t(2 * coeff) * acc;
    }
  });
  return out;
}

// Backward of GaussianGrad given gg = dL/d(dd) [E] and G [E, n]: dL/dg [E, n] = gg 2c G x and
// dL/dd [E] = sum_k g (dL/dg 2c x + gg 2c G).
std::pair<at::Tensor, at::Tensor> gaussian_grad_backward_fused(
    const at::Tensor& d_in, const at::Tensor& g_in, const at::Tensor& mu_in,
    const at::Tensor& gauss_in, const at::Tensor& gg_in, double coeff) {
  const at::Tensor d = d_in.contiguous(), g = g_in.contiguous(), mu = mu_in.contiguous(),
                   gauss_all = gauss_in.contiguous(), gg = gg_in.contiguous();
  const int64_t e_count = d.size(0), n = mu.size(0);
  at::Tensor dg = at::empty({e_count, n}, d.options()), dd = at::empty({e_count}, d.options());
  AT_DISPATCH_FLOATING_TYPES(d.scalar_type(), "gaussian_grad_backward", [&] {
    const scalar_t *dp = d.data_ptr<scalar_t>(), *gp = g.data_ptr<scalar_t>(),
                   *mp = mu.data_ptr<scalar_t>(), *ggp = gg.data_ptr<scalar_t>(),
                   *gs = gauss_all.data_ptr<scalar_t>();
    scalar_t *dgp = dg.data_ptr<scalar_t>(), *ddp = dd.data_ptr<scalar_t>();
    const scalar_t c2 = scalar_t(2 * coeff);
    for (int64_t e = 0; e < e_count; ++e) {
      scalar_t acc = 0;
      for (int64_t k = 0; k < n; ++k) {
        const scalar_t x = dp[e] - mp[k];
        const scalar_t gauss = gs[e * n + k];
        const scalar_t v = ggp[e] * gauss * c2 * x;
        dgp[e * n + k] = v;
        acc += gp[e * n + k] * (v * c2 * x + ggp[e] * gauss * c2);
      }
      ddp[e] = acc;
    }
  });
  return {dd, dg};
}

// dL/dd [E] from g = dL/dG [E, n]: sum_k g G 2 coeff (d - mu_k), as one autograd function (as
// a chain of elementwise ATen ops it cost ~15 [E, n] tensors in the force loss). Where the
// exponent is clamped G is e^-80 and so is this term (the clamp's own derivative, 0, differs by
// less than 1e-33). G [E, n] is the Gaussians' forward value, reused and not differentiated
// through (d carries the dependence). Its backward is one fused pass when no graph is recorded
// (the training step's loss.backward()), and plain differentiable ops otherwise (any order).
struct GaussianGrad : public torch::autograd::Function<GaussianGrad> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& d, const at::Tensor& g,
                            const at::Tensor& mu, const at::Tensor& gauss, double coeff) {
    ctx->save_for_backward({d, g, mu, gauss});
    ctx->saved_data["coeff"] = coeff;
    return gaussian_grad_fused(d, g, mu, gauss, coeff);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &d = saved[0], &g = saved[1], &mu = saved[2];
    const double coeff = ctx->saved_data["coeff"].toDouble();
    at::Tensor dd, dg;
    if (!at::GradMode::is_enabled()) {
      std::tie(dd, dg) = gaussian_grad_backward_fused(d, g, mu, saved[3], grad[0], coeff);
    } else {
      const at::Tensor x = d.unsqueeze(1) - mu.unsqueeze(0);
      const at::Tensor gauss = at::exp(at::clamp_min(coeff * x * x, -80.0));
      const at::Tensor gg = grad[0].unsqueeze(1);  // [E, 1]
      dg = gg * gauss * (2.0 * coeff) * x;         // [E, n]
      dd = (g * dg * (2.0 * coeff * x) + g * gg * gauss * (2.0 * coeff)).sum(1);
    }
    return {ctx->needs_input_grad(0) ? dd : at::Tensor(),
            ctx->needs_input_grad(1) ? dg : at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct Gaussians : public torch::autograd::Function<Gaussians> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& d, const at::Tensor& mu,
                            double coeff) {
    ctx->save_for_backward({d, mu});
    ctx->saved_data["coeff"] = coeff;
    at::Tensor out = gaussians_fused(d, mu, coeff);
    // A view without autograd metadata (storing the output itself would make a reference cycle
    // through its grad_fn); nothing writes to the memoised Gaussians in place.
    ctx->saved_data["gauss"] = out.detach();
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const double coeff = ctx->saved_data["coeff"].toDouble();
    return {GaussianGrad::apply(saved[0], grad[0], saved[1], ctx->saved_data["gauss"].toTensor(),
                                coeff),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

GraphBatch make_batch(const uint8_t* z, const double* pos, const int64_t* atom_offsets,
                      int64_t n_graphs, const double* cells, const uint8_t* pbc,
                      const double* energy, const double* forces,
                      const RadiusGraphOptions& graph_options, c10::ScalarType dtype,
                      c10::Device device, GraphBuild build) {
  if (n_graphs < 1) throw Error("make_batch: a batch needs at least one graph");
  const int64_t n_atoms = atom_offsets[n_graphs];
  const bool on_device =
      build == GraphBuild::kTensors || (build == GraphBuild::kAuto && !device.is_cpu());
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  // float64 positions on the device (on the CPU: the caller's array itself, read only).
  const at::Tensor pos64 =
      to_device(at::from_blob(const_cast<double*>(pos), {n_atoms, 3}, f64), device);
  GraphBatch b;
  if (on_device) {
    const DeviceEdges edges =
        radius_graph_tensors(pos64, pos, atom_offsets, n_graphs, cells, pbc, graph_options);
    b.cut_atoms = edges.cut_atoms;
    b.most_neighbours = edges.most_neighbours;
    b.edge_index = edges.edge_index;
    b.edge_shift = edges.shift.to(dtype);
  } else {
    const Edges edges = radius_graph_batch(pos, atom_offsets, n_graphs, cells, pbc, graph_options);
    b.cut_atoms = edges.cut_atoms;
    b.most_neighbours = edges.most_neighbours;
    b.edge_index = to_device(edge_index_tensor(edges), device);
    b.edge_shift = to_device(edge_shift_tensor(edges, dtype), device);
  }
  b.n_graphs = n_graphs;
  at::Tensor z_host = at::empty({n_atoms}, i64);
  at::Tensor graph_of_atom = at::empty({n_atoms}, i64);
  at::Tensor atoms_per_graph = at::empty({n_graphs}, i64);
  int64_t* zp = z_host.data_ptr<int64_t>();
  int64_t* gp = graph_of_atom.data_ptr<int64_t>();
  for (int64_t g = 0; g < n_graphs; ++g) {
    atoms_per_graph.data_ptr<int64_t>()[g] = atom_offsets[g + 1] - atom_offsets[g];
    b.max_graph_atoms = std::max(b.max_graph_atoms, atom_offsets[g + 1] - atom_offsets[g]);
    for (int64_t a = atom_offsets[g]; a < atom_offsets[g + 1]; ++a) gp[a] = g;
  }
  for (int64_t a = 0; a < n_atoms; ++a) zp[a] = z[a];
  b.z = to_device(z_host, device);
  b.species = b.z;
  b.graph_of_atom = to_device(graph_of_atom, device);
  b.atoms_per_graph = to_device(atoms_per_graph, device);
  b.pos = pos64.to(dtype, /*non_blocking=*/false, /*copy=*/true);
  b.receivers = std::make_shared<SegmentIndex>(make_segment_index(b.edge_index[1], n_atoms));
  b.senders = std::make_shared<SegmentIndex>(make_segment_index(b.edge_index[0], n_atoms));
  b.graphs = std::make_shared<SegmentIndex>(make_segment_index(b.graph_of_atom, n_graphs));
  if (graph_options.smooth_cap && graph_options.max_neighbours > 0 && b.cut_atoms > 0) {
    // Edges are sorted by receiver, so a receiver's edges are [ptr[i], ptr[i + 1]); one with
    // max_neighbours + 1 of them was capped, and its last (farthest) is the boundary edge.
    const at::Tensor& ptr = b.receivers->ptr;
    const at::Tensor count = ptr.slice(0, 1) - ptr.slice(0, 0, n_atoms);
    const at::Tensor& dst = b.receivers->index;
    b.cap_boundary =
        at::where(count.gt(graph_options.max_neighbours).index_select(0, dst),
                  (ptr.slice(0, 1) - 1).index_select(0, dst), at::full({}, -1, dst.options()));
  }
  auto target = [&](const double* values, at::IntArrayRef shape) {
    const at::Tensor host = at::from_blob(const_cast<double*>(values), shape, f64);
    return to_device(host.to(dtype, /*non_blocking=*/false, /*copy=*/true), device);
  };
  if (energy) b.energy = target(energy, {n_graphs});
  if (forces) b.forces = target(forces, {n_atoms, 3});
  std::vector<double> bulk_cells(size_t(9 * n_graphs), 0.0);
  for (int64_t g = 0; g < n_graphs; ++g)
    if (pbc[3 * g] && pbc[3 * g + 1] && pbc[3 * g + 2])
      std::copy_n(cells + 9 * g, 9, bulk_cells.begin() + 9 * g);
  b.cell = target(bulk_cells.data(), {n_graphs, 3, 3});
  return b;
}

GraphBatch to_device(const GraphBatch& in, c10::Device device) {
  if (in.z.device() == device) return in;
  const auto move = [&](const at::Tensor& t) { return t.defined() ? to_device(t, device) : t; };
  const auto move_index = [&](const std::shared_ptr<const SegmentIndex>& s) {
    if (!s) return s;
    auto out = std::make_shared<SegmentIndex>();
    out->index = move(s->index);
    out->ptr = move(s->ptr);
    out->n_rows = s->n_rows;
    // Undefined on the CPU when the index is sorted; the generic operations read it.
    out->order = s->order.defined() ? move(s->order)
                                    : to_device(at::arange(s->index.size(0), at::kLong), device);
    return std::shared_ptr<const SegmentIndex>(std::move(out));
  };
  GraphBatch b = in;
  for (at::Tensor* t :
       {&b.z, &b.pos, &b.edge_index, &b.edge_shift, &b.graph_of_atom, &b.atoms_per_graph, &b.cell,
        &b.node_inputs, &b.branch, &b.graph_attr, &b.energy, &b.forces, &b.stress, &b.stress_mask,
        &b.cap_boundary, &b.triplets, &b.laplacian_pe, &b.graph_weight, &b.atom_weight})
    *t = move(*t);
  b.species = in.species.is_same(in.z) ? b.z : move(in.species);
  b.receivers = move_index(in.receivers);
  b.senders = move_index(in.senders);
  b.graphs = move_index(in.graphs);
  return b;
}

namespace {

// Gaussians of d [E] at centres mu [n] from ATen ops, exp(max(coeff (d - mu)^2, -80)) [E, n]: the
// device-agnostic version of Gaussians and gaussians_fused, differentiated by autograd (any order;
// where the exponent is clamped its derivative is 0, not e^-80 as in GaussianGrad).
at::Tensor gaussians_generic(const at::Tensor& d, const at::Tensor& mu, double coeff) {
  const at::Tensor x = d.unsqueeze(1) - mu.unsqueeze(0);
  return at::exp(at::clamp_min(coeff * x * x, -80.0));
}

}  // namespace

EdgeGeometry::EdgeGeometry(const GraphBatch& batch, const at::Tensor& pos, double cutoff,
                           const Envelope& envelope)
    : m_cutoff(cutoff), m_envelope(envelope) {
  // pos[j] - pos[i] + shift, as edge_vectors() computes it, without index_select (whose double
  // backward is LibTorch's slow index_add_).
  if (pos.dim() != 2 || pos.size(0) != batch.n_atoms() || pos.size(1) != 3 ||
      pos.scalar_type() != batch.edge_shift.scalar_type())
    throw Error("EdgeGeometry: expected pos [n_atoms, 3] of the batch's dtype");
  m_vec = edge_difference(pos, *batch.senders, *batch.receivers) + batch.edge_shift;
  m_len = edge_lengths(m_vec);
  m_unit = m_vec / m_len.unsqueeze(1);
  if (batch.cap_boundary.defined()) {
    const at::Tensor& b = batch.cap_boundary;
    m_edge_cutoff = at::where(b.ge(0), m_len.index_select(0, b.clamp_min(0)),
                              at::full({}, cutoff, m_len.options()));
  }
}

std::pair<at::Tensor, double> EdgeGeometry::gaussian_basis(int64_t n) const {
  if (n < 2) throw ConfigError("num_gaussians must be at least 2, got " + std::to_string(n));
  const at::Tensor mu = at::linspace(0.0, m_cutoff, n, m_len.options());
  const double spacing = m_cutoff / double(n - 1);
  return {mu, -0.5 / (spacing * spacing)};
}

const at::Tensor& EdgeGeometry::gaussians(int64_t n) const {
  const std::string key = "gaussians/" + std::to_string(n);
  auto it = m_cache.find(key);
  if (it != m_cache.end()) return it->second;
  const auto [mu, coeff] = gaussian_basis(n);
  // Clamp the exponent: exp of a very negative number falls into libm's slow path and
  // contributes nothing (e^-80 ~ 1e-35). On the CPU one autograd function with a cheap double
  // backward; elsewhere ATen ops.
  return m_cache[key] = fused_kernels(m_len) ? Gaussians::apply(m_len, mu, coeff)
                                             : gaussians_generic(m_len, mu, coeff);
}

const at::Tensor& EdgeGeometry::gaussian_values(int64_t n) const {
  const std::string key = "gaussian_values/" + std::to_string(n);
  auto it = m_cache.find(key);
  if (it != m_cache.end()) return it->second;
  const auto [mu, coeff] = gaussian_basis(n);
  return m_cache[key] = fused_kernels(m_len) || cuda_kernels(m_len)
                            ? gaussians_fused(m_len.detach(), mu, coeff)
                            : gaussians_generic(m_len.detach(), mu, coeff);
}

namespace {

// DimeNet's polynomial envelope of order p and its first two derivatives in x:
// u = 1 - a x^p + b x^(p+1) - c x^(p+2), a = (p+1)(p+2)/2, b = p(p+2), c = p(p+1)/2.
struct Polynomial {
  double p, a, b, c;
  explicit Polynomial(int64_t order)
      : p(double(order)), a((p + 1) * (p + 2) / 2), b(p * (p + 2)), c(p * (p + 1) / 2) {
    if (order < 1)
      throw ConfigError("envelope_exponent: the polynomial envelope's order must be >= 1, got " +
                        std::to_string(order));
  }
  at::Tensor u(const at::Tensor& x) const { return 1.0 + at::pow(x, p) * ((b - c * x) * x - a); }
  at::Tensor du(const at::Tensor& x) const {
    return at::pow(x, p - 1) * ((b * (p + 1) - c * (p + 2) * x) * x - a * p);
  }
  at::Tensor d2u(const at::Tensor& x) const {
    return at::pow(x, p - 2) *
           ((b * (p + 1) * p - c * (p + 2) * (p + 1) * x) * x - a * p * (p - 1));
  }
};

}  // namespace

at::Tensor envelope_of(const at::Tensor& x, const Envelope& e) {
  if (e.kind == Envelope::kCosine) return 0.5 * (at::cos(x * M_PI) + 1.0);
  return Polynomial(e.p).u(x);
}

std::array<at::Tensor, 3> envelope_terms(const at::Tensor& d, double rc, const Envelope& e) {
  if (e.kind == Envelope::kCosine) {
    const double k = M_PI / rc;
    const at::Tensor kd = d * k;
    return {0.5 * (at::cos(kd) + 1.0), (-0.5 * k) * at::sin(kd), (-0.5 * k * k) * at::cos(kd)};
  }
  const Polynomial poly(e.p);
  const at::Tensor x = d / rc;
  return {poly.u(x), poly.du(x) / rc, poly.d2u(x) / (rc * rc)};
}

std::array<at::Tensor, 3> envelope_values(const at::Tensor& d_in, double rc, const Envelope& e) {
  if (e.kind != Envelope::kCosine || (!fused_kernels(d_in) && !cuda_kernels(d_in)))
    return envelope_terms(d_in.detach(), rc, e);
  if (d_in.is_cuda()) return cuda::cosine_cutoff(d_in.detach(), rc);
  const double k = M_PI / rc;
  const at::Tensor d = d_in.detach().contiguous();
  at::Tensor c = at::empty_like(d), c1 = at::empty_like(d), c2 = at::empty_like(d);
  AT_DISPATCH_FLOATING_TYPES(d.scalar_type(), "envelope_values", [&] {
    const scalar_t* dp = d.data_ptr<scalar_t>();
    scalar_t *cp = c.data_ptr<scalar_t>(), *c1p = c1.data_ptr<scalar_t>(),
             *c2p = c2.data_ptr<scalar_t>();
    for (int64_t i = 0; i < d.numel(); ++i) {
      const double cs = std::cos(k * double(dp[i])), sn = std::sin(k * double(dp[i]));
      cp[i] = scalar_t(0.5 * (cs + 1.0));
      c1p[i] = scalar_t(-0.5 * k * sn);
      c2p[i] = scalar_t(-0.5 * k * k * cs);
    }
  });
  return {c, c1, c2};
}

const std::array<at::Tensor, 3>& EdgeGeometry::cutoff_values() const {
  if (m_edge_cutoff.defined())
    throw Error(
        "EdgeGeometry::cutoff_values: the cutoff of a smoothly capped batch depends on "
        "other edges' lengths; differentiate envelope() instead");
  if (!m_cutoff_values[0].defined()) m_cutoff_values = envelope_values(m_len, m_cutoff, m_envelope);
  return m_cutoff_values;
}

const at::Tensor& EdgeGeometry::memoised(const std::string& key,
                                         const std::function<at::Tensor()>& make) const {
  auto it = m_cache.find("memo:" + key);
  if (it == m_cache.end()) it = m_cache.emplace("memo:" + key, make()).first;
  return it->second;
}

const at::Tensor& EdgeGeometry::envelope() const {
  auto it = m_cache.find("envelope");
  if (it != m_cache.end()) return it->second;
  return m_cache["envelope"] = envelope_of(
             m_edge_cutoff.defined() ? m_len / m_edge_cutoff : m_len / m_cutoff, m_envelope);
}

const at::Tensor& EdgeGeometry::bessel(int64_t n) const {
  const std::string key = "bessel/" + std::to_string(n);
  auto it = m_cache.find(key);
  if (it != m_cache.end()) return it->second;
  const at::Tensor k = at::arange(1, n + 1, m_len.options());
  const at::Tensor d = m_len.unsqueeze(1);
  return m_cache[key] = at::sin(k.unsqueeze(0) * d * (M_PI / m_cutoff)) / d;
}

const at::Tensor& EdgeGeometry::bessel_cutoff(int64_t n) const {
  const std::string key = "bessel_cutoff/" + std::to_string(n);
  auto it = m_cache.find(key);
  if (it != m_cache.end()) return it->second;
  const at::Tensor cut = envelope().unsqueeze(1);  // [n_edges, 1]
  return m_cache[key] = at::cat({bessel(n) * cut, cut}, 1);
}

}  // namespace ddgnn
