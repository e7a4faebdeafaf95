// Static shapes: a batch padded into one of a few fixed shapes (buckets), so that every step of a
// bucket runs the same operators on tensors of the same shapes (what a CUDA graph replays; on any
// device, the allocator reuses the same blocks). Padding never touches a real atom:
//   - the batch's own graphs, atoms, edges (and DimeNet's triplets) come first, padding after;
//   - pad atoms sit in pad graphs of their own after the real graphs (each of at most
//     ShapeBucket::graph_atoms atoms, so that the per-graph dense layouts of max pooling and GPS
//     attention keep their width), any remaining graph slots are empty graphs;
//   - every pad edge is a self-edge of a pad atom with a periodic shift of the radius: a length of
//     rc, never zero, where every envelope (cosine, DimeNet's polynomial) is zero, so that the
//     models that weigh their messages by it send none along a pad edge (beyond rc the polynomial
//     grows fast: at 2 rc MACE's order-5 envelope is -351, and its products overflow float32 in a
//     pad atom); spread evenly over the pad atoms so that the receivers stay sorted and no pad atom
//     has more than ShapeBucket::pad_degree of them (the data's largest in-degree, so that models
//     without an envelope see sums no larger than real atoms'); a pad triplet pairs a pad edge with
//     itself, spread likewise;
//   - the loss and the metrics weigh rows by GraphBatch::graph_weight and atom_weight, 0 for
//     padding; batch statistics (PNA's batch degrees, GPS's batch norms) count real atoms only.
// Shapes: G graphs, N atoms, E edges, T triplets of a bucket.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/batch.h"

namespace ddgnn {

// Capacities of one fixed shape.
struct ShapeBucket {
  int64_t graphs = 0, atoms = 0, edges = 0;
  int64_t triplets = 0;     // DimeNet's; 0 for other models
  int64_t graph_atoms = 0;  // the most atoms of one graph, real or pad
  int64_t pad_degree = 0;   // the most pad edges into one pad atom (pad triplets into one edge)
  bool operator==(const ShapeBucket& o) const;
};

// "G graphs, N atoms, E edges[, T triplets]" for the log.
std::string to_string(const ShapeBucket& b);

// What a batch holds before padding (host counts).
struct BatchSizes {
  int64_t graphs = 0, atoms = 0, edges = 0, triplets = 0, graph_atoms = 0;
};
BatchSizes sizes_of(const GraphBatch& batch);

// Whether a batch of `s` fits `b`: every size within its capacity, room for its pad atoms in the
// spare graph slots, and its pad edges (pad triplets) spread over its pad atoms (pad edges) within
// pad_degree each.
bool fits(const BatchSizes& s, const ShapeBucket& b);
// The smallest (first) bucket of `buckets` that `s` fits, -1 when none does.
int fit_bucket(const std::vector<ShapeBucket>& buckets, const BatchSizes& s);

struct PadOptions {
  double radius = 0.0;  // Å: the length of pad edges
  int64_t pad_z = 1;    // the atomic number of pad atoms (one the model has weights for)
  // Keep these defined in every padded batch (zero where the batch has none), so that every batch
  // of a bucket runs the same operators: stress and stress_mask (the model predicts a stress),
  // cap_boundary (a smooth neighbour cap is on).
  bool stress = false, cap_boundary = false;
};

// `batch` (on the CPU, its graph inputs made: add_graph_inputs) padded to `bucket`, which it must
// fit (an Error otherwise). Targets, cells, per-atom inputs, graph attributes and branches get zero
// (branch 0) rows for padding; the segment maps are made for the padded edges; graph_weight and
// atom_weight are set. The batch's own rows keep their values and order.
GraphBatch pad_batch(const GraphBatch& batch, const ShapeBucket& bucket, const PadOptions& options);

}  // namespace ddgnn
