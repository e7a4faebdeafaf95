// A batch of graphs as tensors, the input of every model: concatenated atoms, the radius graph
// (built here, never stored), segment maps for sums over receivers / senders / graphs, and the
// per-step edge geometry (distances and radial expansions computed once per step, not per layer).
// Shapes: n_atoms, n_edges, n_graphs (= B); F features. Units: Å, eV, eV/Å.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "model/radius_graph.h"
#include "model/segment.h"

namespace ddgnn {

struct GraphBatch {
  at::Tensor z;  // [n_atoms] int64 atomic numbers
  // [n_atoms] int64: each atom's row in the model's element-indexed weights (GnnSpec::elements);
  // make_batch sets z itself, Gnn::forward the rows of the model's elements.
  at::Tensor species;
  at::Tensor pos;            // [n_atoms, 3] model dtype, Å (leaf; the trainer sets requires_grad)
  at::Tensor edge_index;     // [2, n_edges] int64: row 0 sender j, row 1 receiver i, by receiver
  at::Tensor edge_shift;     // [n_edges, 3] model dtype, Å: r_ij = pos[j] - pos[i] + shift
  at::Tensor graph_of_atom;  // [n_atoms] int64, non-decreasing
  at::Tensor atoms_per_graph;  // [n_graphs] int64
  int64_t n_graphs = 0;
  // The most atoms of one graph (known on the host: the per-graph dense layouts of max pooling
  // and GPS attention are sized by it without reading the device).
  int64_t max_graph_atoms = 0;
  // Segment maps (edge -> receiver, edge -> sender, atom -> graph), shared by the batch's copies
  // (the autograd functions that use them keep their own handles, model/saved_index.h).
  std::shared_ptr<const SegmentIndex> receivers, senders, graphs;
  // [n_graphs, 3, 3] model dtype, Å (rows = lattice vectors): the cell of each graph periodic in
  // all three directions, zero for the others (no volume, hence no stress).
  at::Tensor cell;
  // [n_atoms, k] model dtype: per-atom inputs beside z (GnnSpec::node_inputs), standardised;
  // undefined when the model reads none.
  at::Tensor node_inputs;
  // [n_graphs] int64: the branch of multi-branch heads each graph goes through (GnnSpec::
  // more_branches); undefined: branch 0 for every graph.
  at::Tensor branch;
  // [n_graphs, GnnSpec::graph_attr_dim] model dtype: each graph's attributes for graph-attribute
  // conditioning (the per-structure key graph_attr, as stored); undefined when the model reads
  // none.
  at::Tensor graph_attr;
  // Targets (undefined when absent).
  at::Tensor energy;  // [n_graphs] eV
  at::Tensor forces;  // [n_atoms, 3] eV/Å
  // [n_graphs, 3, 3] eV/Å³ ((1/V) dE/dε, ASE's sign), zero where a graph has none; stress_mask
  // [n_graphs] model dtype is 1 where it has one (and a cell); n_stress counts those on the host.
  at::Tensor stress, stress_mask;
  int64_t n_stress = 0;
  // Atoms whose neighbour list max_neighbours cut, and the most neighbours an atom had within the
  // radius (model/radius_graph.h).
  int64_t cut_atoms = 0, most_neighbours = 0;
  // [n_edges] int64, only when RadiusGraphOptions::smooth_cap capped some receiver in this batch:
  // for each edge of a capped receiver the index of that receiver's boundary edge (its
  // (max_neighbours + 1)-th nearest, its last), -1 for the edges of the others.
  at::Tensor cap_boundary;
  // What some models read that depends on the graph alone, made with the batch on the loader's
  // thread (add_graph_inputs, model/gnn.h) so that a training step computes none of it:
  // DimeNet's triplets [2, T] int64 (rows kj and ji, dimenet_triplets) and GPS's Laplacian
  // eigenvector encodings [n_atoms, pe_dim] float64 (laplacian_pe). Undefined: the model makes
  // them in its forward.
  at::Tensor triplets, laplacian_pe;
  // A batch padded to a fixed shape (model/pad_batch.h): its own graphs and atoms come first, the
  // last pad_graphs graphs and pad_atoms atoms are padding. graph_weight [n_graphs] and atom_weight
  // [n_atoms] (model dtype) weigh each row in the loss's means: 1 / (real graphs) for a real graph,
  // 1 / (real atoms) for a real atom, 0 for padding; undefined when the batch is not padded (every
  // row counts alike).
  int64_t pad_graphs = 0, pad_atoms = 0;
  at::Tensor graph_weight, atom_weight;

  int64_t n_atoms() const { return z.size(0); }
  int64_t n_edges() const { return edge_index.size(1); }
  int64_t real_graphs() const { return n_graphs - pad_graphs; }
  int64_t real_atoms() const { return n_atoms() - pad_atoms; }
  bool padded() const { return graph_weight.defined(); }
};

// How make_batch builds the radius graph.
enum class GraphBuild {
  kAuto,      // cell lists when the device is the CPU, tensor ops on any other device
  kCellList,  // radius_graph_batch on the host (model/radius_graph.h), edges copied to the device
  kTensors,   // radius_graph_tensors on the device (model/device_graph.h)
};

// Builds a batch from concatenated plain arrays on the host: z [n_atoms] uint8; pos [n_atoms, 3]
// float64 Å; atom_offsets [n_graphs + 1]; cells [n_graphs, 9] float64 Å (rows = lattice vectors);
// pbc [n_graphs, 3]; energy [n_graphs] eV or nullptr; forces [n_atoms, 3] eV/Å or nullptr.
// `dtype` is the model's floating type (Float or Double). Every tensor of the batch is on
// `device` (copied through pinned memory, without blocking, when it is CUDA); both builds of the
// graph give the same edges.
GraphBatch make_batch(const uint8_t* z, const double* pos, const int64_t* atom_offsets,
                      int64_t n_graphs, const double* cells, const uint8_t* pbc,
                      const double* energy, const double* forces,
                      const RadiusGraphOptions& graph_options, c10::ScalarType dtype,
                      c10::Device device = c10::Device(c10::kCPU),
                      GraphBuild build = GraphBuild::kAuto);

// `batch` with every tensor on `device` (its segment maps included, each map's edge order made
// explicit off the CPU, where the generic segment operations read it); the batch itself when it is
// there already. Copies from the host go through pinned memory without blocking.
GraphBatch to_device(const GraphBatch& batch, c10::Device device);

// The envelope `e` (model/spec.h) at x = d / rc [E] (x in [0, 1]); differentiable ATen ops.
at::Tensor envelope_of(const at::Tensor& x, const Envelope& e);
// The envelope of lengths d [E] for the radius rc and its first and second derivatives in d:
// envelope_terms from differentiable ATen ops of d, envelope_values as values without autograd
// ([E] each, d's dtype).
std::array<at::Tensor, 3> envelope_terms(const at::Tensor& d, double rc, const Envelope& e);
std::array<at::Tensor, 3> envelope_values(const at::Tensor& d, double rc, const Envelope& e);

// Edge geometry of one step, from the batch and the positions it is differentiated against.
// Radial expansions are memoised by name, so several layers share one computation per step.
class EdgeGeometry {
 public:
  // pos [n_atoms, 3] Å (usually batch.pos with requires_grad for conservative forces).
  EdgeGeometry(const GraphBatch& batch, const at::Tensor& pos, double cutoff,
               const Envelope& envelope = Envelope());

  const at::Tensor& vec() const { return m_vec; }    // [n_edges, 3] r_ij, Å
  const at::Tensor& len() const { return m_len; }    // [n_edges] |r_ij|, Å
  const at::Tensor& unit() const { return m_unit; }  // [n_edges, 3] r_ij / |r_ij|
  double cutoff() const { return m_cutoff; }
  const Envelope& envelope_kind() const { return m_envelope; }
  // [n_edges] Å, differentiable: the radius of each edge's envelope when the batch was capped
  // smoothly (GraphBatch::cap_boundary): the length of its receiver's boundary edge for a capped
  // receiver, cutoff() for the others. Undefined otherwise (every envelope ends at cutoff()).
  const at::Tensor& edge_cutoff() const { return m_edge_cutoff; }

  // [n_edges, n] Gaussians exp(-(d - mu_k)^2 / (2 sigma^2)), mu evenly spaced on [0, cutoff],
  // sigma = spacing (SchNet's expansion); exponents clamped so exp never underflows.
  const at::Tensor& gaussians(int64_t n) const;
  // The centres mu [n] and the coefficient -1 / (2 sigma^2) of gaussians(n).
  std::pair<at::Tensor, double> gaussian_basis(int64_t n) const;
  // gaussians(n) as a value, without autograd (for functions that differentiate through len()
  // themselves, as schnet_filter does); memoised.
  const at::Tensor& gaussian_values(int64_t n) const;
  // [n_edges] the envelope at d / rc, zero at rc: rc = edge_cutoff() when defined, else cutoff().
  const at::Tensor& envelope() const;
  // The envelope and its first and second derivatives in d, as values without autograd
  // ([n_edges] each; for schnet_filter); memoised. Not for a smoothly capped batch (an Error):
  // there rc depends on the positions too.
  const std::array<at::Tensor, 3>& cutoff_values() const;
  // [n_edges, n] sin(k pi d / cutoff) / d, k = 1..n (DimeNet/PaiNN radial basis).
  const at::Tensor& bessel(int64_t n) const;
  // [n_edges, n + 1]: bessel(n) * envelope() in the first n columns, envelope() in the
  // last, so that (Linear(bessel) * cutoff) is one matmul with [weight | bias] (PaiNN's filter).
  const at::Tensor& bessel_cutoff(int64_t n) const;
  // The tensor memoised under `key`, made by `make` on the first call: a layer's basis that depends
  // on the geometry and constants only (no trainable parameter) is computed once per step and its
  // autograd graph shared by every layer. The key must name everything the tensor depends on.
  const at::Tensor& memoised(const std::string& key, const std::function<at::Tensor()>& make) const;

 private:
  at::Tensor m_vec, m_len, m_unit, m_edge_cutoff;
  double m_cutoff;
  Envelope m_envelope;
  mutable std::map<std::string, at::Tensor> m_cache;
  mutable std::array<at::Tensor, 3> m_cutoff_values;
};

}  // namespace ddgnn
