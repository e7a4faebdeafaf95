// Radius graph of a batch built from ATen tensor ops, on whatever device the positions are on
// (the GPU training path builds its graphs on the GPU), with the semantics of radius_graph_batch
// (model/radius_graph.h): the same edges in the same order, the same counts and the same errors.
// All pairs within each graph and the periodic images that can reach the radius, in chunks of
// bounded size; one host synchronisation per chunk (compaction; two with max_neighbours) and one
// per batch (the counts).
// Shapes: n_atoms, n_edges, n_graphs. Units: Å.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

#include "model/radius_graph.h"

namespace ddgnn {

// Default bounds on the candidates of one chunk of radius_graph_tensors: large on a GPU (one
// chunk, one compaction for a training batch), small on the CPU, where temporaries that stay in
// the cache and the allocator's pool are several times faster than large ones.
constexpr int64_t kChunkCandidates = int64_t(1) << 22;
constexpr int64_t kChunkCandidatesCpu = int64_t(1) << 14;

// Edges of a batch on the device, as Edges (model/radius_graph.h) holds them on the host.
struct DeviceEdges {
  at::Tensor edge_index;  // [2, n_edges] int64 on the device: row 0 sender j, row 1 receiver i
  at::Tensor shift;       // [n_edges, 3] float64 Å on the device: r_ij = pos[j] - pos[i] + shift
  std::vector<int64_t> edges_per_graph;        // [n_graphs], host
  int64_t cut_atoms = 0, most_neighbours = 0;  // as in Edges
};

// The radius graph of a batch given as to radius_graph_batch, computed on pos's device.
// pos [n_atoms, 3] float64 Å on the target device (n_atoms = atom_offsets[n_graphs]); pos_host
// the same positions on the host (for radius_graph_batch's checks of them); atom_offsets
// [n_graphs + 1], cells [n_graphs, 9] float64 Å, pbc [n_graphs, 3] on the host. The result equals
// radius_graph_batch's exactly: edge_index identical, shift equal but for the sign of zeros.
// chunk_candidates bounds the candidates (i, j, image) examined at once (~300 bytes each at the
// peak; 0: kChunkCandidatesCpu on the CPU, kChunkCandidates elsewhere); a chunk always holds one
// center's candidates whole.
// Errors: those of radius_graph_batch; pos of another shape or dtype, chunk_candidates < 0 (Error).
DeviceEdges radius_graph_tensors(const at::Tensor& pos, const double* pos_host,
                                 const int64_t* atom_offsets, int64_t n_graphs, const double* cells,
                                 const uint8_t* pbc, const RadiusGraphOptions& options,
                                 int64_t chunk_candidates = 0);

// A host tensor on `device`: through pinned memory and a non-blocking copy when the device is
// CUDA, a plain copy on other devices, the tensor itself when it is already there.
at::Tensor to_device(const at::Tensor& host, c10::Device device);

}  // namespace ddgnn
