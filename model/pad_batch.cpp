// Batches padded into fixed shapes (model/pad_batch.h).
#include "model/pad_batch.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"
#include "model/segment.h"

namespace ddgnn {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return b > 0 ? (a + b - 1) / b : 0;
}

// `x` [rows, ...] with `extra` rows of zeros after it (x itself when extra is 0).
at::Tensor with_zero_rows(const at::Tensor& x, int64_t extra) {
  if (!x.defined() || extra == 0) return x;
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = extra;
  return at::cat({x, at::zeros(shape, x.options())});
}

// [n] int64: the first + floor(k m / n) for k = 0 .. n - 1: n items spread over m slots from
// `first`, non-decreasing, each slot ceil(n / m) items at most.
at::Tensor spread(int64_t n, int64_t m, int64_t first) {
  return at::arange(n, at::kLong).mul_(m).floor_divide_(std::max<int64_t>(n, 1)).add_(first);
}

// [n] model dtype: `value` for the first `real` rows, 0 for the rest.
at::Tensor row_weights(int64_t n, int64_t real, c10::ScalarType dtype) {
  at::Tensor w = at::zeros({n}, at::TensorOptions().dtype(dtype));
  if (real > 0) w.narrow(0, 0, real).fill_(1.0 / double(real));
  return w;
}

}  // namespace

bool ShapeBucket::operator==(const ShapeBucket& o) const {
  return graphs == o.graphs && atoms == o.atoms && edges == o.edges && triplets == o.triplets &&
         graph_atoms == o.graph_atoms && pad_degree == o.pad_degree;
}

std::string to_string(const ShapeBucket& b) {
  std::string s = std::to_string(b.graphs) + " graphs, " + std::to_string(b.atoms) + " atoms, " +
                  std::to_string(b.edges) + " edges";
  if (b.triplets > 0) s += ", " + std::to_string(b.triplets) + " triplets";
  return s;
}

BatchSizes sizes_of(const GraphBatch& b) {
  BatchSizes s;
  s.graphs = b.n_graphs;
  s.atoms = b.n_atoms();
  s.edges = b.n_edges();
  s.triplets = b.triplets.defined() ? b.triplets.size(1) : 0;
  s.graph_atoms = b.max_graph_atoms;
  return s;
}

bool fits(const BatchSizes& s, const ShapeBucket& b) {
  const int64_t pad_atoms = b.atoms - s.atoms, pad_edges = b.edges - s.edges,
                pad_triplets = b.triplets - s.triplets;
  if (pad_atoms < 0 || pad_edges < 0 || pad_triplets < 0 || s.graph_atoms > b.graph_atoms)
    return false;
  if (s.graphs + ceil_div(pad_atoms, b.graph_atoms) > b.graphs) return false;
  if (pad_edges > 0 && (pad_atoms == 0 || ceil_div(pad_edges, pad_atoms) > b.pad_degree))
    return false;
  if (pad_triplets > 0 && (pad_edges == 0 || ceil_div(pad_triplets, pad_edges) > b.pad_degree))
    return false;
  return true;
}

int fit_bucket(const std::vector<ShapeBucket>& buckets, const BatchSizes& s) {
  for (size_t k = 0; k < buckets.size(); ++k)
    if (fits(s, buckets[k])) return int(k);
  return -1;
}

GraphBatch pad_batch(const GraphBatch& in, const ShapeBucket& bucket, const PadOptions& o) {
  const BatchSizes s = sizes_of(in);
  if (!fits(s, bucket))
    throw Error("pad_batch: a batch of " + std::to_string(s.graphs) + " graphs, " +
                std::to_string(s.atoms) + " atoms, " + std::to_string(s.edges) +
                " edges does not fit the shape of " + to_string(bucket));
  if (!in.z.device().is_cpu()) throw Error("pad_batch: the batch must be on the CPU");
  if (bucket.triplets > 0 && !in.triplets.defined())
    throw Error("pad_batch: the shape has triplets and the batch none (add_graph_inputs)");
  const int64_t n = s.atoms, e = s.edges, g = s.graphs;
  const int64_t pad_atoms = bucket.atoms - n, pad_edges = bucket.edges - e;
  const int64_t pad_graphs = bucket.graphs - g;
  const int64_t filled = ceil_div(pad_atoms, bucket.graph_atoms);  // pad graphs with atoms
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  const auto dtype = in.pos.scalar_type();
  GraphBatch b = in;
  b.n_graphs = bucket.graphs;
  b.pad_graphs = pad_graphs;
  b.pad_atoms = pad_atoms;
  b.max_graph_atoms = bucket.graph_atoms;
  // Atoms: pad atoms at the origin, in pad graphs g, g + 1, ... of graph_atoms atoms each.
  b.z = at::cat({in.z, at::full({pad_atoms}, o.pad_z, in.z.options())});
  b.species = b.z;
  b.pos = with_zero_rows(in.pos, pad_atoms);
  const at::Tensor pad_graph_of_atom =
      at::arange(pad_atoms, i64).floor_divide_(bucket.graph_atoms).add_(g);
  b.graph_of_atom = at::cat({in.graph_of_atom, pad_graph_of_atom});
  at::Tensor counts = at::zeros({pad_graphs}, i64);
  if (pad_atoms > 0) {
    counts.narrow(0, 0, filled).fill_(bucket.graph_atoms);
    counts[filled - 1] = pad_atoms - (filled - 1) * bucket.graph_atoms;
  }
  b.atoms_per_graph = at::cat({in.atoms_per_graph, counts});
  // Edges: self-edges of the pad atoms, rc long (where every envelope is zero).
  const at::Tensor pad_recv = spread(pad_edges, pad_atoms, n);
  b.edge_index = at::cat({in.edge_index, at::stack({pad_recv, pad_recv})}, 1);
  at::Tensor shift = at::zeros({pad_edges, 3}, in.edge_shift.options());
  if (pad_edges > 0) shift.select(1, 0).fill_(o.radius);
  b.edge_shift = at::cat({in.edge_shift, shift});
  if (in.cap_boundary.defined() || o.cap_boundary) {
    const at::Tensor real = in.cap_boundary.defined() ? in.cap_boundary : at::full({e}, -1, i64);
    b.cap_boundary = at::cat({real, at::full({pad_edges}, -1, i64)});
  }
  if (in.triplets.defined()) {
    const int64_t pad_triplets = bucket.triplets - s.triplets;
    const at::Tensor pad = spread(pad_triplets, pad_edges, e);
    b.triplets = at::cat({in.triplets, at::stack({pad, pad})}, 1);
  }
  b.laplacian_pe = with_zero_rows(in.laplacian_pe, pad_atoms);
  b.receivers = std::make_shared<SegmentIndex>(make_segment_index(b.edge_index[1], bucket.atoms));
  b.senders = std::make_shared<SegmentIndex>(make_segment_index(b.edge_index[0], bucket.atoms));
  b.graphs = std::make_shared<SegmentIndex>(make_segment_index(b.graph_of_atom, bucket.graphs));
  // Graph rows: no cell, no targets, branch 0.
  b.cell = with_zero_rows(in.cell, pad_graphs);
  b.node_inputs = with_zero_rows(in.node_inputs, pad_atoms);
  b.branch = with_zero_rows(in.branch, pad_graphs);
  b.graph_attr = with_zero_rows(in.graph_attr, pad_graphs);
  b.energy = with_zero_rows(in.energy, pad_graphs);
  b.forces = with_zero_rows(in.forces, pad_atoms);
  if (in.stress.defined()) {
    b.stress = with_zero_rows(in.stress, pad_graphs);
    b.stress_mask = with_zero_rows(in.stress_mask, pad_graphs);
  } else if (o.stress) {
    b.stress = at::zeros({bucket.graphs, 3, 3}, at::TensorOptions().dtype(dtype));
    b.stress_mask = at::zeros({bucket.graphs}, at::TensorOptions().dtype(dtype));
  }
  b.graph_weight = row_weights(bucket.graphs, g, dtype);
  b.atom_weight = row_weights(bucket.atoms, n, dtype);
  return b;
}

}  // namespace ddgnn
