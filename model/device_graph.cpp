// Radius graph from tensor ops. For a center i of graph g and a neighbour j of the same graph,
// the images n that can reach the radius satisfy, along each periodic axis k,
//   |s_k(j) - s_k(i) + n_k| < reach_k = radius |b_k|   (s = fractional coordinates, unwrapped),
// so n_k runs over at most U_k = floor(2 reach_k) + 1 integers from a lower bound of the pair.
// Candidates (i, j, n) are enumerated center by center, j ascending, n lexicographically
// ascending, with arange / repeat_interleave arithmetic; the distance test repeats the cell
// lists' arithmetic operation by operation (so |r_ij|^2 is bitwise the same and ties break alike),
// stable sorts order each receiver's edges by (|r_ij|, j, image), and max_neighbours keeps the
// first of each receiver's segment.
#include "model/device_graph.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "core/error.h"

namespace ddgnn {
namespace {

// Margin on the image ranges in fractional units: rounding of s = x . b (|s| <= 1e8 cells, as
// the cell lists allow) and of |r_ij| < radius stays far below it.
constexpr double kFracSlack = 1e-6;

// Columns of the per-graph integer table.
enum IntColumn : int64_t { kFirst, kAtoms, kImages, kImages1, kImages2, kIntColumns };
// Columns of the per-graph float64 table: lattice rows, reciprocal rows, reach.
constexpr int64_t kLattice = 0, kReciprocal = 9, kReach = 18, kFloatColumns = 21;

// A contiguous range of centers [first, end) and the sizes of its enumeration.
struct Chunk {
  int64_t first = 0, end = 0;
  int64_t n_pairs = 0, n_candidates = 0;
  bool several_images = false;  // some graph of the chunk has more than one image per pair
};

// Splits the centers of the batch into chunks of at most `limit` candidates (or one center).
// images[g]: images per pair of graph g.
std::vector<Chunk> plan_chunks(const int64_t* atom_offsets, int64_t n_graphs,
                               const std::vector<int64_t>& images, int64_t limit) {
  std::vector<Chunk> chunks;
  Chunk cur;
  auto flush = [&] {
    if (cur.end > cur.first) chunks.push_back(cur);
    cur = Chunk{};
  };
  for (int64_t g = 0; g < n_graphs; ++g) {
    const int64_t n = atom_offsets[g + 1] - atom_offsets[g];
    const int64_t per_center = n * images[g];
    for (int64_t c = 0; c < n;) {
      const bool empty = cur.end == cur.first;
      const int64_t room =
          std::max<int64_t>(0, limit - cur.n_candidates) / std::max<int64_t>(1, per_center);
      const int64_t take = std::min(n - c, empty ? std::max<int64_t>(1, room) : room);
      if (take == 0) {
        flush();
        continue;
      }
      if (empty) cur.first = cur.end = atom_offsets[g] + c;
      cur.end += take;
      cur.n_pairs += take * n;
      cur.n_candidates += take * per_center;
      cur.several_images = cur.several_images || images[g] > 1;
      c += take;
    }
  }
  flush();
  return chunks;
}

// [total] int64: k repeated counts[k] times (counts [n] int64 >= 0 summing to total, which saves
// the device a synchronisation).
at::Tensor repeat_index(const at::Tensor& counts, int64_t total) {
  return at::repeat_interleave(counts, c10::optional<int64_t>(total));
}

// Sorted edges of one chunk and its receiver statistics (0-d tensors on the device).
struct ChunkEdges {
  at::Tensor src, dst, shift;
  at::Tensor most, cut;
};

// Per-batch tensors on the device that every chunk reads.
struct BatchTables {
  at::Tensor pos;            // [n_atoms, 3] float64 Å
  at::Tensor frac;           // [n_atoms, 3] s_k = x . b_k of the atom's graph (0 if not periodic)
  at::Tensor graph_of_atom;  // [n_atoms] int64
  at::Tensor ints;           // [n_graphs, kIntColumns] int64
  at::Tensor floats;         // [n_graphs, kFloatColumns] float64
};

ChunkEdges chunk_edges(const BatchTables& t, const Chunk& chunk,
                       const RadiusGraphOptions& options) {
  const auto i64 = t.graph_of_atom.options();
  const int64_t n_centers = chunk.end - chunk.first;
  // Pairs (i, j): each center of the chunk with every atom of its graph, j ascending.
  const at::Tensor graph_c = t.graph_of_atom.slice(0, chunk.first, chunk.end);  // [n_centers]
  const at::Tensor ints_c = t.ints.index_select(0, graph_c);
  const at::Tensor atoms_c = ints_c.select(1, kAtoms);
  const at::Tensor center_p = repeat_index(atoms_c, chunk.n_pairs);  // [P] local center
  const at::Tensor pair_start = atoms_c.cumsum(0) - atoms_c;
  const at::Tensor i_p = center_p + chunk.first;
  const at::Tensor j_p = ints_c.select(1, kFirst).index_select(0, center_p) +
                         at::arange(chunk.n_pairs, i64) - pair_start.index_select(0, center_p);
  const at::Tensor graph_p = graph_c.index_select(0, center_p);
  const at::Tensor r_p = t.pos.index_select(0, j_p) - t.pos.index_select(0, i_p);  // [P, 3]
  const at::Tensor reach_p = t.floats.slice(1, kReach, kReach + 3).index_select(0, graph_p);
  const at::Tensor lo_p =
      at::ceil(-reach_p - (t.frac.index_select(0, j_p) - t.frac.index_select(0, i_p)) - kFracSlack);

  // Candidates (i, j, image): image_k = lo_k + t_k, t_k in [0, U_k), lexicographically ascending.
  at::Tensor pair_c, graph_cand, image, r_base;
  if (chunk.several_images) {
    const at::Tensor images_p = t.ints.select(1, kImages).index_select(0, graph_p);
    pair_c = repeat_index(images_p, chunk.n_candidates);  // [C] pair of each candidate
    const at::Tensor local = at::arange(chunk.n_candidates, i64) -
                             (images_p.cumsum(0) - images_p).index_select(0, pair_c);
    graph_cand = graph_p.index_select(0, pair_c);
    const at::Tensor u2 = t.ints.select(1, kImages2).index_select(0, graph_cand);
    const at::Tensor u1 = t.ints.select(1, kImages1).index_select(0, graph_cand);
    const at::Tensor t2 = at::remainder(local, u2), q = at::div(local, u2, "floor");
    const at::Tensor t1 = at::remainder(q, u1), t0 = at::div(q, u1, "floor");
    image = lo_p.index_select(0, pair_c) + at::stack({t0, t1, t2}, 1).to(at::kDouble);
    r_base = r_p.index_select(0, pair_c);
  } else {
    graph_cand = graph_p;
    image = lo_p;
    r_base = r_p;
  }
  // shift = ((n_0 a_0 + n_1 a_1) + n_2 a_2) and r = (pos[j] - pos[i]) + shift, |r|^2 summed
  // x, y, z: the cell lists' operations in their order.
  const at::Tensor lattice = t.floats.slice(1, kLattice, kLattice + 9).index_select(0, graph_cand);
  at::Tensor shift = image.slice(1, 0, 1) * lattice.slice(1, 0, 3) +
                     image.slice(1, 1, 2) * lattice.slice(1, 3, 6) +
                     image.slice(1, 2, 3) * lattice.slice(1, 6, 9);
  const at::Tensor r = r_base + shift;
  const at::Tensor rx = r.select(1, 0), ry = r.select(1, 1), rz = r.select(1, 2);
  const at::Tensor d2_all = rx * rx + ry * ry + rz * rz;
  const double r2 = options.radius * options.radius;
  const at::Tensor hit = at::nonzero(d2_all.lt(r2).logical_and_(d2_all.gt(0.0))).squeeze(1);

  const at::Tensor pair_e = chunk.several_images ? pair_c.index_select(0, hit) : hit;
  const at::Tensor d2 = d2_all.index_select(0, hit);
  // Order: receiver, then |r_ij|, then (j, image) from the enumeration (stable sorts).
  const at::Tensor by_d2 = std::get<1>(at::sort(d2, c10::optional<bool>(true), 0, false));
  const at::Tensor i_e = i_p.index_select(0, pair_e).index_select(0, by_d2);
  at::Tensor dst, by_i;
  std::tie(dst, by_i) = at::sort(i_e, c10::optional<bool>(true), 0, false);
  const at::Tensor order = pair_e.index_select(0, by_d2).index_select(0, by_i);  // pairs, sorted
  const at::Tensor edge = hit.index_select(0, by_d2).index_select(0, by_i);      // candidates
  ChunkEdges out;
  out.dst = dst;
  out.src = j_p.index_select(0, order);
  out.shift = shift.index_select(0, edge);

  // Each receiver's segment [ptr[c], ptr[c + 1]) among the sorted edges.
  const at::Tensor ptr = at::searchsorted(dst, at::arange(chunk.first, chunk.end + 1, i64));
  const at::Tensor count = ptr.slice(0, 1) - ptr.slice(0, 0, n_centers);
  out.most = count.max();
  out.cut = at::zeros({}, i64);
  if (options.max_neighbours > 0) {
    out.cut = count.gt(options.max_neighbours).sum();
    const at::Tensor rank = at::arange(dst.size(0), i64) - ptr.index_select(0, dst - chunk.first);
    const at::Tensor keep =
        at::nonzero(rank.lt(options.max_neighbours + (options.smooth_cap ? 1 : 0))).squeeze(1);
    out.dst = out.dst.index_select(0, keep);
    out.src = out.src.index_select(0, keep);
    out.shift = out.shift.index_select(0, keep);
  }
  return out;
}

}  // namespace

at::Tensor to_device(const at::Tensor& host, c10::Device device) {
  if (host.device() == device) return host;
  if (device.is_cuda()) return host.pin_memory().to(device, host.scalar_type(), true);
  return host.to(device, host.scalar_type());
}

DeviceEdges radius_graph_tensors(const at::Tensor& pos_in, const double* pos_host,
                                 const int64_t* atom_offsets, int64_t n_graphs, const double* cells,
                                 const uint8_t* pbc, const RadiusGraphOptions& options,
                                 int64_t chunk_candidates) {
  const std::vector<PeriodicFrame> frames =
      radius_graph_frames(pos_host, atom_offsets, n_graphs, cells, pbc, options);
  const int64_t n_atoms = n_graphs > 0 ? atom_offsets[n_graphs] : 0;
  if (pos_in.dim() != 2 || pos_in.size(1) != 3 || pos_in.size(0) != n_atoms ||
      pos_in.scalar_type() != at::kDouble) {
    throw Error("radius graph: pos must be float64 [n_atoms, 3] with n_atoms = " +
                std::to_string(n_atoms) + " (atom_offsets[n_graphs])");
  }
  if (chunk_candidates < 0) {
    throw Error("radius graph: chunk_candidates must be >= 0 (0: the device's default), got " +
                std::to_string(chunk_candidates));
  }
  const c10::Device device = pos_in.device();
  const auto i64 = at::TensorOptions().dtype(at::kLong).device(device);
  DeviceEdges out;
  out.edges_per_graph.assign(n_graphs, 0);
  out.edge_index = at::empty({2, 0}, i64);
  out.shift = at::empty({0, 3}, pos_in.options());
  if (n_graphs == 0) return out;

  // Per-graph tables, built on the host and copied once.
  at::Tensor ints = at::empty({n_graphs, kIntColumns}, at::kLong);
  at::Tensor floats = at::empty({n_graphs, kFloatColumns}, at::kDouble);
  std::vector<int64_t> images(n_graphs);
  for (int64_t g = 0; g < n_graphs; ++g) {
    const PeriodicFrame& f = frames[g];
    int64_t per_axis[3];
    for (int k = 0; k < 3; ++k) {
      per_axis[k] = static_cast<int64_t>(std::floor(2.0 * f.reach[k] + 4.0 * kFracSlack)) + 1;
    }
    images[g] = per_axis[0] * per_axis[1] * per_axis[2];
    int64_t* row = ints.data_ptr<int64_t>() + g * kIntColumns;
    row[kFirst] = atom_offsets[g];
    row[kAtoms] = atom_offsets[g + 1] - atom_offsets[g];
    row[kImages] = images[g];
    row[kImages1] = per_axis[1];
    row[kImages2] = per_axis[2];
    double* frow = floats.data_ptr<double>() + g * kFloatColumns;
    std::copy(f.lattice.begin(), f.lattice.end(), frow + kLattice);
    std::copy(f.reciprocal.begin(), f.reciprocal.end(), frow + kReciprocal);
    std::copy(f.reach.begin(), f.reach.end(), frow + kReach);
  }
  const std::vector<Chunk> chunks = plan_chunks(
      atom_offsets, n_graphs, images,
      chunk_candidates > 0 ? chunk_candidates
                           : (device.is_cpu() ? kChunkCandidatesCpu : kChunkCandidates));
  const at::Tensor offsets = to_device(
      at::from_blob(const_cast<int64_t*>(atom_offsets), {n_graphs + 1}, at::kLong).clone(), device);

  BatchTables t;
  t.pos = pos_in.detach();
  t.ints = to_device(ints, device);
  t.floats = to_device(floats, device);
  // Atoms before atom_offsets[0] belong to no graph (-1 never indexes: they are never centers).
  const at::Tensor atoms = t.ints.select(1, kAtoms);
  t.graph_of_atom = at::cat(
      {at::full({atom_offsets[0]}, -1, i64), repeat_index(atoms, n_atoms - atom_offsets[0])});
  const at::Tensor reciprocal = t.floats.slice(1, kReciprocal, kReciprocal + 9)
                                    .index_select(0, t.graph_of_atom.clamp_min(0))
                                    .view({n_atoms, 3, 3});
  t.frac = (t.pos.unsqueeze(1) * reciprocal).sum(2);

  std::vector<at::Tensor> src, dst, shift, most, cut;
  for (const Chunk& chunk : chunks) {
    ChunkEdges e = chunk_edges(t, chunk, options);
    src.push_back(e.src);
    dst.push_back(e.dst);
    shift.push_back(e.shift);
    most.push_back(e.most.reshape({1}));
    cut.push_back(e.cut.reshape({1}));
  }
  if (chunks.empty()) return out;
  const at::Tensor dst_all = at::cat(dst);
  out.edge_index = at::stack({at::cat(src), dst_all});
  out.shift = at::cat(shift);
  // Edges per graph from the receivers' graph boundaries, and the counts: one copy to the host.
  const at::Tensor bounds = at::searchsorted(dst_all, offsets);
  const at::Tensor stats =
      at::cat({bounds.slice(0, 1) - bounds.slice(0, 0, n_graphs), at::cat(most).max().reshape({1}),
               at::cat(cut).sum().reshape({1})})
          .to(at::kCPU);
  const int64_t* s = stats.data_ptr<int64_t>();
  std::copy(s, s + n_graphs, out.edges_per_graph.begin());
  out.most_neighbours = s[n_graphs];
  out.cut_atoms = s[n_graphs + 1];
  return out;
}

}  // namespace ddgnn
