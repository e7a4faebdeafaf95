// Radius graph of atomic structures, built after a sample is loaded (edges are never stored):
// cell lists in O(n_atoms), periodic images within the cutoff for any cell shape and size,
// mixed periodicity, nearest-first `max_neighbours`. Torch-free core; tensor glue at the end.
//
// Conventions (as PyG / HydraGNN): edge e goes from neighbour j = src[e] = edge_index[0][e]
// (source) to center i = dst[e] = edge_index[1][e] (target, receiver), with the vector
//   r_ij = pos[j] - pos[i] + shift[e],   shift[e] = image[e] . cell   (Å, Cartesian),
// for the positions exactly as given (unwrapped positions are fine). Edges are SORTED by
// receiver i, then by (|r_ij|, j, image): layers sum messages over contiguous receiver segments.
// For each center i: every (j, image) with 0 < |r_ij| < radius (self-images at nonzero image
// included), and with max_neighbours > 0 only the max_neighbours nearest of them (one more with
// smooth_cap: the boundary edge, model/spec.h).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "model/spec.h"

namespace at {
class Tensor;
}
namespace c10 {
enum class ScalarType : int8_t;
}

namespace ddgnn {

// Edges of one graph, or of a batch (then with global atom indices and per-graph counts).
struct Edges {
  std::vector<int64_t> src;              // [n_edges] neighbour j (edge_index[0])
  std::vector<int64_t> dst;              // [n_edges] center i (edge_index[1]), non-decreasing
  std::vector<double> shift;             // [n_edges, 3] Å, Cartesian: r_ij = pos[j]-pos[i]+shift
  std::vector<int32_t> image;            // [n_edges, 3] integer cell offsets of j (0 if no pbc)
  std::vector<int64_t> edges_per_graph;  // [n_graphs] (batched builds; {n_edges} for one graph)
  int64_t cut_atoms = 0;  // centers with more than max_neighbours neighbours within the radius
  int64_t most_neighbours = 0;  // the largest number of neighbours within the radius of a center

  int64_t size() const { return static_cast<int64_t>(src.size()); }
};

// One structure. pos [n_atoms, 3] float64 Å; cell [9] float64 Å, rows = lattice vectors (may be
// nullptr or all zeros when no axis is periodic); pbc [3] (nonzero = periodic; nullptr = none).
// Errors: radius <= 0 or max_neighbours < 0 (ConfigError); a non-finite position, a periodic
// axis whose lattice vectors are degenerate (zero volume), or a cell far too small for the
// radius (DataError). Atoms without neighbours are not an error (see count_isolated_atoms).
Edges radius_graph(const double* pos, int64_t n_atoms, const double* cell, const uint8_t* pbc,
                   const RadiusGraphOptions& options);

// A batch of n_graphs structures, concatenated: pos [n_atoms, 3] float64 Å; atom_offsets
// [n_graphs + 1] (graph g owns atoms [atom_offsets[g], atom_offsets[g+1])); cells [n_graphs, 9]
// float64 Å; pbc [n_graphs, 3]. Returns concatenated edges with global atom indices (equal to
// each graph alone with its atoms offset) and edges_per_graph [n_graphs].
Edges radius_graph_batch(const double* pos, const int64_t* atom_offsets, int64_t n_graphs,
                         const double* cells, const uint8_t* pbc,
                         const RadiusGraphOptions& options);

// The periodic frame of one structure, for searches over images (model/device_graph.h): rows of
// `lattice` are the periodic lattice vectors (Å), rows of `reciprocal` the b_k with
// lattice_k . b_l = delta_kl (1/Å), so that s_k = x . b_k is the fractional coordinate along a
// periodic axis k; both are zero rows on non-periodic axes. Every neighbour within the radius has
// |s_k(pos[j]) - s_k(pos[i]) + image_k| < reach[k] = radius |b_k| (0 on non-periodic axes).
struct PeriodicFrame {
  std::array<double, 9> lattice{}, reciprocal{};
  std::array<double, 3> reach{};
};

// The frames [n_graphs] of a batch given as to radius_graph_batch, after exactly its checks of the
// options, the offsets and every graph (the same errors, in the same order).
std::vector<PeriodicFrame> radius_graph_frames(const double* pos, const int64_t* atom_offsets,
                                               int64_t n_graphs, const double* cells,
                                               const uint8_t* pbc,
                                               const RadiusGraphOptions& options);

// Number of atoms in [0, n_atoms) that receive no edge (no neighbour within the radius).
// edges: any Edges (dst must be in [0, n_atoms)).
int64_t count_isolated_atoms(const Edges& edges, int64_t n_atoms);

// ---- tensor glue (declared torch-free; include <ATen/ATen.h> to call) ----

// pos [n_atoms, 3] float32/float64 Å, any device, may require grad: used detached, in float64
// on the CPU. cell [9] float64 Å and pbc [3] as in radius_graph above.
Edges radius_graph(const at::Tensor& pos, const double* cell, const uint8_t* pbc,
                   const RadiusGraphOptions& options);

// edge_index int64 [2, n_edges] (row 0 = src j, row 1 = dst i) on the CPU.
at::Tensor edge_index_tensor(const Edges& edges);
// edge shift [n_edges, 3] of the given dtype (Float or Double), Å, on the CPU, no grad.
at::Tensor edge_shift_tensor(const Edges& edges, c10::ScalarType dtype);

// r_ij = pos[j] - pos[i] + shift -> [n_edges, 3] Å, differentiable with respect to pos.
// pos [n_atoms, 3] float32/float64 Å; edge_index int64 [2, n_edges]; shift [n_edges, 3] same
// dtype as pos, Å. All on pos's device.
at::Tensor edge_vectors(const at::Tensor& pos, const at::Tensor& edge_index,
                        const at::Tensor& shift);
// |r_ij| -> [n_edges] Å, differentiable. vec [n_edges, 3] float32/float64 Å (from edge_vectors;
// nonzero rows, which the radius graph guarantees).
at::Tensor edge_lengths(const at::Tensor& vec);

}  // namespace ddgnn
