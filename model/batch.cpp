// Batch construction (radius graph on the CPU in float64, then tensors of the model dtype) and
// the per-step edge geometry with memoised radial expansions.
#include "model/batch.h"

#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "core/error.h"

namespace ddgnn {

GraphBatch make_batch(const uint8_t* z, const double* pos, const int64_t* atom_offsets,
                      int64_t n_graphs, const double* cells, const uint8_t* pbc,
                      const double* energy, const double* forces,
                      const RadiusGraphOptions& graph_options, c10::ScalarType dtype) {
  if (n_graphs < 1) throw Error("make_batch: a batch needs at least one graph");
  const int64_t n_atoms = atom_offsets[n_graphs];
  const Edges edges = radius_graph_batch(pos, atom_offsets, n_graphs, cells, pbc, graph_options);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  GraphBatch b;
  b.n_graphs = n_graphs;
  b.z = at::empty({n_atoms}, i64);
  b.graph_of_atom = at::empty({n_atoms}, i64);
  b.atoms_per_graph = at::empty({n_graphs}, i64);
  int64_t* zp = b.z.data_ptr<int64_t>();
  int64_t* gp = b.graph_of_atom.data_ptr<int64_t>();
  for (int64_t g = 0; g < n_graphs; ++g) {
    b.atoms_per_graph.data_ptr<int64_t>()[g] = atom_offsets[g + 1] - atom_offsets[g];
    for (int64_t a = atom_offsets[g]; a < atom_offsets[g + 1]; ++a) gp[a] = g;
  }
  for (int64_t a = 0; a < n_atoms; ++a) zp[a] = z[a];
  b.pos = at::from_blob(const_cast<double*>(pos), {n_atoms, 3}, f64).to(dtype, false, true);
  b.edge_index = edge_index_tensor(edges);
  b.edge_shift = edge_shift_tensor(edges, dtype);
  b.receivers = std::make_shared<SegmentIndex>(make_segment_index(b.edge_index[1], n_atoms));
  b.senders = std::make_shared<SegmentIndex>(make_segment_index(b.edge_index[0], n_atoms));
  b.graphs = std::make_shared<SegmentIndex>(make_segment_index(b.graph_of_atom, n_graphs));
  if (energy)
    b.energy = at::from_blob(const_cast<double*>(energy), {n_graphs}, f64).to(dtype, false, true);
  if (forces)
    b.forces = at::from_blob(const_cast<double*>(forces), {n_atoms, 3}, f64).to(dtype, false, true);
  return b;
}

EdgeGeometry::EdgeGeometry(const GraphBatch& batch, const at::Tensor& pos, double cutoff)
    : m_cutoff(cutoff) {
  m_vec = edge_vectors(pos, batch.edge_index, batch.edge_shift);
  m_len = edge_lengths(m_vec);
  m_unit = m_vec / m_len.unsqueeze(1);
}

const at::Tensor& EdgeGeometry::gaussians(int64_t n) const {
  const std::string key = "gaussians/" + std::to_string(n);
  auto it = m_cache.find(key);
  if (it != m_cache.end()) return it->second;
  if (n < 2) throw ConfigError("num_gaussians must be at least 2, got " + std::to_string(n));
  const at::Tensor mu = at::linspace(0.0, m_cutoff, n, m_len.options());
  const double spacing = m_cutoff / double(n - 1);
  const double coeff = -0.5 / (spacing * spacing);
  // Clamp the exponent: exp of a very negative number falls into libm's slow path and
  // contributes nothing (e^-80 ~ 1e-35).
  const at::Tensor d = m_len.unsqueeze(1) - mu.unsqueeze(0);
  return m_cache[key] = at::exp(at::clamp_min(coeff * d * d, -80.0));
}

const at::Tensor& EdgeGeometry::cosine_cutoff() const {
  auto it = m_cache.find("cosine_cutoff");
  if (it != m_cache.end()) return it->second;
  return m_cache["cosine_cutoff"] = 0.5 * (at::cos(m_len * (M_PI / m_cutoff)) + 1.0);
}

const at::Tensor& EdgeGeometry::bessel(int64_t n) const {
  const std::string key = "bessel/" + std::to_string(n);
  auto it = m_cache.find(key);
  if (it != m_cache.end()) return it->second;
  const at::Tensor k = at::arange(1, n + 1, m_len.options());
  const at::Tensor d = m_len.unsqueeze(1);
  return m_cache[key] = at::sin(k.unsqueeze(0) * d * (M_PI / m_cutoff)) / d;
}

}  // namespace ddgnn
