// Radius graph by cell lists: positions are wrapped into the cell along periodic axes, binned into
// bins at least `radius` thick (plane spacing), and each atom visits the bins (and their periodic
// images) that can hold a neighbour. Small cells visit ceil(radius / spacing) images per side.
#include "model/radius_graph.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"

namespace ddgnn {
namespace {

constexpr double kSlack = 1e-9;             // relative margin on the radius for binning
constexpr double kDegenerate = 1e-8;        // |volume| / prod |a_k| below this: degenerate cell
constexpr double kMaxVisitedBins = 1e6;     // bins an atom may visit (small cells, large radius)
constexpr double kMaxWrap = 1e8;            // cells an atom may sit away from the home cell
constexpr int64_t kMinBinsPerAtomCap = 64;  // bins cap = max(this, 2 n_atoms)

using Vec3 = std::array<double, 3>;

Vec3 cross(const Vec3& a, const Vec3& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
double dot(const Vec3& a, const Vec3& b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
double norm(const Vec3& a) {
  return std::sqrt(dot(a, a));
}
Vec3 scaled(const Vec3& a, double s) {
  return {a[0] * s, a[1] * s, a[2] * s};
}

// Rows m: periodic lattice vectors, completed on non-periodic axes by an orthonormal complement;
// rows b: reciprocal (m_k . b_l = delta_kl), so fractional s_k = x . b_k.
struct Basis {
  std::array<Vec3, 3> m{}, b{};
  std::array<bool, 3> periodic{};
};

std::string graph_label(int64_t graph) {
  return graph >= 0 ? "radius graph, graph " + std::to_string(graph) : std::string("radius graph");
}

Basis make_basis(const double* cell, const uint8_t* pbc, int64_t graph) {
  Basis basis;
  std::array<int, 3> per{}, non{};
  int n_per = 0, n_non = 0;
  for (int k = 0; k < 3; ++k) {
    basis.periodic[k] = pbc != nullptr && pbc[k] != 0;
    (basis.periodic[k] ? per[n_per++] : non[n_non++]) = k;
  }
  const std::string hint =
      "a periodic axis needs linearly independent, finite lattice vectors (cell rows, Å)";
  double prod_len = 1.0;
  for (int p = 0; p < n_per; ++p) {
    const int k = per[p];
    if (cell == nullptr)
      throw DataError(graph_label(graph) + ": periodic axis without a cell", hint);
    for (int c = 0; c < 3; ++c) {
      basis.m[k][c] = cell[3 * k + c];
      if (!std::isfinite(basis.m[k][c])) {
        throw DataError(graph_label(graph) + ": non-finite lattice vector " + std::to_string(k),
                        hint);
      }
    }
    prod_len *= norm(basis.m[k]);
  }
  // Size of the periodic part (length, area or volume) relative to the product of lengths.
  double measure = 1.0;
  if (n_per == 1) measure = norm(basis.m[per[0]]);
  if (n_per == 2) measure = norm(cross(basis.m[per[0]], basis.m[per[1]]));
  if (n_per == 3) measure = std::abs(dot(cross(basis.m[0], basis.m[1]), basis.m[2]));
  if (n_per > 0 && !(prod_len > 0.0 && measure > kDegenerate * prod_len)) {
    throw DataError(graph_label(graph) + ": degenerate cell (zero volume) along the periodic axes",
                    hint);
  }
  // Orthonormal complement on the non-periodic axes.
  if (n_per == 0) {
    for (int k = 0; k < 3; ++k)
      basis.m[k] = {k == 0 ? 1.0 : 0.0, k == 1 ? 1.0 : 0.0, k == 2 ? 1.0 : 0.0};
  } else if (n_per == 1) {
    const Vec3 e = scaled(basis.m[per[0]], 1.0 / norm(basis.m[per[0]]));
    int t = 0;  // the Cartesian axis least aligned with e
    for (int c = 1; c < 3; ++c) t = std::abs(e[c]) < std::abs(e[t]) ? c : t;
    Vec3 axis{};
    axis[t] = 1.0;
    const Vec3 u = cross(e, axis);
    basis.m[non[0]] = scaled(u, 1.0 / norm(u));
    basis.m[non[1]] = cross(e, basis.m[non[0]]);
  } else if (n_per == 2) {
    const Vec3 n = cross(basis.m[per[0]], basis.m[per[1]]);
    basis.m[non[0]] = scaled(n, 1.0 / norm(n));
  }
  const double det = dot(cross(basis.m[0], basis.m[1]), basis.m[2]);
  for (int k = 0; k < 3; ++k) {
    basis.b[k] = scaled(cross(basis.m[(k + 1) % 3], basis.m[(k + 2) % 3]), 1.0 / det);
  }
  return basis;
}

struct Candidate {
  double d2;  // |r_ij|^2, Å^2
  int64_t j;
  std::array<int32_t, 3> image;
};

// Ordering of a center's neighbours: (distance, j, image). A functor, so that sorts inline it.
struct Nearer {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.d2 != b.d2) return a.d2 < b.d2;
    if (a.j != b.j) return a.j < b.j;
    return a.image < b.image;
  }
};

// image . cell over the periodic axes (Å): the shift of r_ij = pos[j] - pos[i] + shift.
Vec3 shift_of(const std::array<int32_t, 3>& image, const Basis& basis) {
  Vec3 shift{0.0, 0.0, 0.0};
  for (int k = 0; k < 3; ++k) {
    if (!basis.periodic[k] || image[k] == 0) continue;
    for (int c = 0; c < 3; ++c) shift[c] += image[k] * basis.m[k][c];
  }
  return shift;
}

// (bin along one axis, image along that axis) pairs visited from each bin of that axis.
struct AxisVisits {
  std::vector<int64_t> start;  // [n_bins + 1]
  std::vector<std::pair<int64_t, int32_t>> visit;
};

// Scratch reused across the graphs of a batch.
struct Workspace {
  std::vector<int32_t> wrap;       // [n, 3] cells each atom was moved by
  std::vector<double> xw;          // [n, 3] wrapped Cartesian positions, Å
  std::vector<int64_t> bin3;       // [n, 3] bin of each atom along each axis
  std::vector<int64_t> bin_start;  // [n_bins + 1]
  std::vector<int64_t> sorted;     // [n] atoms in bin order
  std::vector<int64_t> fill;       // [n_bins] counting-sort cursor
  std::vector<double> frac;        // [n, 3] fractional coordinates (Å on non-periodic axes)
  std::vector<double> sorted_xw;   // [n, 3] xw in bin order
  std::array<AxisVisits, 3> axis;
  std::vector<Candidate> candidates;
};

// Room for about n_edges edges in all (10% more), so that the output grows without copies.
void reserve_edges(Edges& out, size_t n_edges) {
  const size_t total = n_edges + n_edges / 10 + 16;
  if (out.src.capacity() >= total) return;
  out.src.reserve(total);
  out.dst.reserve(total);
  out.shift.reserve(3 * total);
  out.image.reserve(3 * total);
}

void check_options(const RadiusGraphOptions& options) {
  if (!(options.radius > 0.0) || !std::isfinite(options.radius)) {
    throw ConfigError(
        "radius graph: radius must be a finite number > 0 Å, got " + std::to_string(options.radius),
        "set NeuralNetwork.Architecture.radius");
  }
  if (options.max_neighbours < 0) {
    throw ConfigError("radius graph: max_neighbours must be >= 0 (0 = no limit), got " +
                          std::to_string(options.max_neighbours),
                      "set NeuralNetwork.Architecture.max_neighbours");
  }
}

// What build_one needs of one graph after its checks: the frame, the bins and their reach.
struct Prepared {
  Basis basis;
  std::array<int64_t, 3> n_bins{}, reach{};
  Vec3 lo{};  // lower corner of the bounding box along non-periodic axes, Å
  std::array<double, 3> extent{};
};

// The checks of one graph (atoms pos [n, 3]) and everything binning needs: fractional coordinates
// (ws.frac), the wrap into the cell (ws.wrap, ws.xw), the number of bins and the bins to visit
// along each axis. Throws DataError for a non-finite position, a degenerate cell, an atom absurdly
// far from the cell, or a cell far too small for the radius. With n == 0 only the first two.
Prepared prepare(const double* pos, int64_t n, const double* cell, const uint8_t* pbc,
                 const RadiusGraphOptions& options, int64_t graph, Workspace& ws) {
  for (int64_t a = 0; a < 3 * n; ++a) {
    if (!std::isfinite(pos[a])) {
      throw DataError(
          graph_label(graph) + ": atom " + std::to_string(a / 3) + " has a non-finite position",
          "check the positions of this structure (NaN or inf)");
    }
  }
  Prepared prep;
  prep.basis = make_basis(cell, pbc, graph);
  const Basis& basis = prep.basis;
  if (n == 0) return prep;
  const double radius = options.radius;
  const double r_bin = radius * (1.0 + kSlack);

  // Fractional coordinates: wrapped into [0, 1) along periodic axes (keeping the wrap), in Å
  // along the orthonormal non-periodic axes (keeping the bounding box).
  ws.wrap.assign(3 * n, 0);
  ws.xw.resize(3 * n);
  std::vector<double>& s = ws.frac;
  s.resize(3 * n);
  Vec3 hi{};
  Vec3& lo = prep.lo;
  for (int k = 0; k < 3; ++k) lo[k] = hi[k] = 0.0;
  for (int64_t a = 0; a < n; ++a) {
    const Vec3 x{pos[3 * a], pos[3 * a + 1], pos[3 * a + 2]};
    Vec3 xw = x;
    for (int k = 0; k < 3; ++k) {
      double f = dot(x, basis.b[k]);
      if (basis.periodic[k]) {
        const double w = std::floor(f);
        if (std::abs(w) > kMaxWrap) {
          throw DataError(graph_label(graph) + ": atom " + std::to_string(a) + " lies " +
                              std::to_string(w) + " cells away from the cell",
                          "check the positions and the cell (units: Å)");
        }
        f -= w;
        ws.wrap[3 * a + k] = static_cast<int32_t>(w);
        for (int c = 0; c < 3; ++c) xw[c] -= w * basis.m[k][c];
      } else {
        lo[k] = a == 0 ? f : std::min(lo[k], f);
        hi[k] = a == 0 ? f : std::max(hi[k], f);
      }
      s[3 * a + k] = f;
    }
    for (int c = 0; c < 3; ++c) ws.xw[3 * a + c] = xw[c];
  }

  // Bins along each axis, each at least r_bin thick; total capped for sparse structures.
  std::array<int64_t, 3>& n_bins = prep.n_bins;
  std::array<double, 3>& extent = prep.extent;
  for (int k = 0; k < 3; ++k) {
    extent[k] = basis.periodic[k] ? 1.0 / norm(basis.b[k]) : hi[k] - lo[k];
  }
  const int64_t cap = std::max<int64_t>(kMinBinsPerAtomCap, 2 * n);
  for (int k = 0; k < 3; ++k) {  // clamped before the cast: huge extents stay well-defined
    const double bins = std::min(std::floor(extent[k] / r_bin), static_cast<double>(cap));
    n_bins[k] = std::max<int64_t>(1, static_cast<int64_t>(bins));
  }
  while (n_bins[0] * n_bins[1] * n_bins[2] > cap) {
    const int k = static_cast<int>(std::max_element(n_bins.begin(), n_bins.end()) - n_bins.begin());
    n_bins[k] = std::max<int64_t>(1, n_bins[k] / 2);
  }
  double visited = 1.0;
  for (int k = 0; k < 3; ++k) {
    // Reach in bins: every neighbour lies within +-reach bins (plane spacing <= distance).
    const double thick = extent[k] / static_cast<double>(n_bins[k]);
    const double reach_d = basis.periodic[k] ? std::ceil(r_bin / thick) : 1.0;
    visited *= 2.0 * reach_d + 1.0;
    if (visited > kMaxVisitedBins) {
      throw DataError(graph_label(graph) + ": the cell is far too small for radius " +
                          std::to_string(radius) + " Å (plane spacing " +
                          std::to_string(extent[k]) + " Å)",
                      "check the cell (units: Å) and the radius");
    }
    prep.reach[k] = static_cast<int64_t>(reach_d);
  }
  return prep;
}

void check_offsets(const int64_t* atom_offsets, int64_t g) {
  if (atom_offsets[g] < 0 || atom_offsets[g + 1] < atom_offsets[g]) {
    throw DataError("radius graph: atom_offsets must be non-decreasing from 0, graph " +
                    std::to_string(g) + " has [" + std::to_string(atom_offsets[g]) + ", " +
                    std::to_string(atom_offsets[g + 1]) + ")");
  }
}

// Appends the edges of one graph (atoms pos [n, 3]) to out, atom indices offset by `first`.
void build_one(const double* pos, int64_t n, const double* cell, const uint8_t* pbc,
               const RadiusGraphOptions& options, int64_t first, int64_t graph, Workspace& ws,
               Edges& out) {
  const Prepared prep = prepare(pos, n, cell, pbc, options, graph, ws);
  if (n == 0) return;
  const Basis& basis = prep.basis;
  const std::array<int64_t, 3>& n_bins = prep.n_bins;
  const std::vector<double>& s = ws.frac;
  const double radius = options.radius;
  const double r_bin = radius * (1.0 + kSlack);
  for (int k = 0; k < 3; ++k) {
    const int64_t reach = prep.reach[k];
    AxisVisits& av = ws.axis[k];
    av.start.assign(n_bins[k] + 1, 0);
    av.visit.clear();
    for (int64_t c = 0; c < n_bins[k]; ++c) {
      for (int64_t o = -reach; o <= reach; ++o) {
        const int64_t b = c + o;
        if (basis.periodic[k]) {
          const int64_t img = b >= 0 ? b / n_bins[k] : -((-b + n_bins[k] - 1) / n_bins[k]);
          av.visit.emplace_back(b - img * n_bins[k], static_cast<int32_t>(img));
        } else if (b >= 0 && b < n_bins[k]) {
          av.visit.emplace_back(b, 0);
        }
      }
      av.start[c + 1] = static_cast<int64_t>(av.visit.size());
    }
  }

  // Counting sort of the atoms by bin.
  const Vec3& lo = prep.lo;
  const std::array<double, 3>& extent = prep.extent;
  ws.bin3.resize(3 * n);
  const int64_t total_bins = n_bins[0] * n_bins[1] * n_bins[2];
  ws.bin_start.assign(total_bins + 1, 0);
  for (int64_t a = 0; a < n; ++a) {
    int64_t id = 0;
    for (int k = 0; k < 3; ++k) {
      const double f = basis.periodic[k] ? s[3 * a + k] : s[3 * a + k] - lo[k];
      const double unit = basis.periodic[k] ? 1.0 : extent[k];
      int64_t c = unit > 0.0 ? static_cast<int64_t>(std::floor(f / unit * n_bins[k])) : 0;
      c = std::min<int64_t>(std::max<int64_t>(c, 0), n_bins[k] - 1);
      ws.bin3[3 * a + k] = c;
      id = id * n_bins[k] + c;
    }
    ++ws.bin_start[id + 1];
  }
  for (int64_t b = 0; b < total_bins; ++b) ws.bin_start[b + 1] += ws.bin_start[b];
  ws.sorted.resize(n);
  ws.fill.assign(ws.bin_start.begin(), ws.bin_start.end() - 1);
  for (int64_t a = 0; a < n; ++a) {
    const int64_t* c = &ws.bin3[3 * a];
    ws.sorted[ws.fill[(c[0] * n_bins[1] + c[1]) * n_bins[2] + c[2]]++] = a;
  }
  ws.sorted_xw.resize(3 * n);
  for (int64_t p = 0; p < n; ++p) {
    for (int c = 0; c < 3; ++c) ws.sorted_xw[3 * p + c] = ws.xw[3 * ws.sorted[p] + c];
  }
  const std::vector<double>& sxw = ws.sorted_xw;

  // Neighbours of each center, in atom order (so the output is sorted by receiver).
  const double r2 = radius * radius;
  const double r2_loose = r_bin * r_bin;
  const size_t out_before = out.src.size();
  for (int64_t i = 0; i < n; ++i) {
    if (i == 64 && n > 256)
      reserve_edges(out, out.src.size() + (out.src.size() - out_before) * n / 64);
    ws.candidates.clear();
    const double* xi = &ws.xw[3 * i];
    const int32_t* wi = &ws.wrap[3 * i];
    const int64_t* ci = &ws.bin3[3 * i];
    const AxisVisits& v0 = ws.axis[0];
    const AxisVisits& v1 = ws.axis[1];
    const AxisVisits& v2 = ws.axis[2];
    for (int64_t e0 = v0.start[ci[0]]; e0 < v0.start[ci[0] + 1]; ++e0) {
      const auto [b0, i0] = v0.visit[e0];
      const Vec3 t0 = scaled(basis.m[0], i0);
      for (int64_t e1 = v1.start[ci[1]]; e1 < v1.start[ci[1] + 1]; ++e1) {
        const auto [b1, i1] = v1.visit[e1];
        Vec3 t1 = t0;
        for (int c = 0; c < 3; ++c) t1[c] += i1 * basis.m[1][c];
        for (int64_t e2 = v2.start[ci[2]]; e2 < v2.start[ci[2] + 1]; ++e2) {
          const auto [b2, i2] = v2.visit[e2];
          Vec3 base = t1;  // translation of the visited bin minus x_i
          for (int c = 0; c < 3; ++c) base[c] += i2 * basis.m[2][c] - xi[c];
          const int64_t bin = (b0 * n_bins[1] + b1) * n_bins[2] + b2;
          for (int64_t p = ws.bin_start[bin]; p < ws.bin_start[bin + 1]; ++p) {
            const double dx = sxw[3 * p] + base[0];
            const double dy = sxw[3 * p + 1] + base[1];
            const double dz = sxw[3 * p + 2] + base[2];
            if (dx * dx + dy * dy + dz * dz >= r2_loose) continue;
            // Exact test on the positions as given: r_ij = pos[j] - pos[i] + image . cell.
            const int64_t j = ws.sorted[p];
            const int32_t* wj = &ws.wrap[3 * j];
            Candidate cand{0.0, j, {i0 - wj[0] + wi[0], i1 - wj[1] + wi[1], i2 - wj[2] + wi[2]}};
            if (j == i && cand.image == std::array<int32_t, 3>{0, 0, 0}) continue;
            const Vec3 shift = shift_of(cand.image, basis);
            for (int c = 0; c < 3; ++c) {
              const double d = (pos[3 * j + c] - pos[3 * i + c]) + shift[c];
              cand.d2 += d * d;
            }
            if (cand.d2 < r2 && cand.d2 > 0.0) ws.candidates.push_back(cand);
          }
        }
      }
    }
    auto& cands = ws.candidates;
    size_t keep = cands.size();
    out.most_neighbours = std::max(out.most_neighbours, static_cast<int64_t>(keep));
    if (options.max_neighbours > 0 && keep > static_cast<size_t>(options.max_neighbours)) {
      keep = static_cast<size_t>(options.max_neighbours + (options.smooth_cap ? 1 : 0));
      ++out.cut_atoms;
      std::partial_sort(cands.begin(), cands.begin() + keep, cands.end(), Nearer());
    } else {
      std::sort(cands.begin(), cands.end(), Nearer());
    }
    for (size_t e = 0; e < keep; ++e) {
      out.src.push_back(first + cands[e].j);
      out.dst.push_back(first + i);
      const Vec3 shift = shift_of(cands[e].image, basis);
      out.shift.insert(out.shift.end(), shift.begin(), shift.end());
      out.image.insert(out.image.end(), cands[e].image.begin(), cands[e].image.end());
    }
  }
}

}  // namespace

Edges radius_graph(const double* pos, int64_t n_atoms, const double* cell, const uint8_t* pbc,
                   const RadiusGraphOptions& options) {
  check_options(options);
  Workspace ws;
  Edges out;
  build_one(pos, n_atoms, cell, pbc, options, /*first=*/0, /*graph=*/-1, ws, out);
  out.edges_per_graph = {out.size()};
  return out;
}

Edges radius_graph_batch(const double* pos, const int64_t* atom_offsets, int64_t n_graphs,
                         const double* cells, const uint8_t* pbc,
                         const RadiusGraphOptions& options) {
  check_options(options);
  Workspace ws;
  Edges out;
  out.edges_per_graph.resize(n_graphs);
  for (int64_t g = 0; g < n_graphs; ++g) {
    check_offsets(atom_offsets, g);
    const int64_t first = atom_offsets[g];
    const int64_t n = atom_offsets[g + 1] - first;
    const int64_t before = out.size();
    if (g == 1) {  // reserve for the whole batch, from the first graph's edges per atom
      const int64_t atoms = atom_offsets[n_graphs] - atom_offsets[0];
      const double per_atom =
          static_cast<double>(before) / std::max<int64_t>(1, first - atom_offsets[0]);
      reserve_edges(out, static_cast<size_t>(per_atom * static_cast<double>(atoms)));
    }
    build_one(pos + 3 * first, n, cells + 9 * g, pbc + 3 * g, options, first, g, ws, out);
    out.edges_per_graph[g] = out.size() - before;
  }
  return out;
}

std::vector<PeriodicFrame> radius_graph_frames(const double* pos, const int64_t* atom_offsets,
                                               int64_t n_graphs, const double* cells,
                                               const uint8_t* pbc,
                                               const RadiusGraphOptions& options) {
  check_options(options);
  Workspace ws;
  std::vector<PeriodicFrame> frames(n_graphs);
  for (int64_t g = 0; g < n_graphs; ++g) {
    check_offsets(atom_offsets, g);
    const int64_t first = atom_offsets[g];
    const Prepared prep = prepare(pos + 3 * first, atom_offsets[g + 1] - first, cells + 9 * g,
                                  pbc + 3 * g, options, g, ws);
    PeriodicFrame& f = frames[g];
    for (int k = 0; k < 3; ++k) {
      if (!prep.basis.periodic[k]) continue;
      for (int c = 0; c < 3; ++c) {
        f.lattice[3 * k + c] = prep.basis.m[k][c];
        f.reciprocal[3 * k + c] = prep.basis.b[k][c];
      }
      f.reach[k] = options.radius * norm(prep.basis.b[k]);
    }
  }
  return frames;
}

int64_t count_isolated_atoms(const Edges& edges, int64_t n_atoms) {
  std::vector<char> receives(n_atoms, 0);
  for (int64_t i : edges.dst) {
    if (i < 0 || i >= n_atoms) {
      throw Error("count_isolated_atoms: edge receiver " + std::to_string(i) + " outside [0, " +
                  std::to_string(n_atoms) + ")");
    }
    receives[i] = 1;
  }
  return static_cast<int64_t>(std::count(receives.begin(), receives.end(), 0));
}

// ---- tensor glue ----

Edges radius_graph(const at::Tensor& pos, const double* cell, const uint8_t* pbc,
                   const RadiusGraphOptions& options) {
  if (pos.dim() != 2 || pos.size(1) != 3) {
    throw Error("radius graph: pos must be [n_atoms, 3], got " + std::to_string(pos.dim()) +
                " dimensions");
  }
  const at::Tensor p = pos.detach().to(at::kCPU, at::kDouble).contiguous();
  return radius_graph(p.data_ptr<double>(), p.size(0), cell, pbc, options);
}

at::Tensor edge_index_tensor(const Edges& edges) {
  const int64_t n = edges.size();
  at::Tensor index = at::empty({2, n}, at::TensorOptions().dtype(at::kLong));
  if (n > 0) {
    std::memcpy(index.data_ptr<int64_t>(), edges.src.data(), n * sizeof(int64_t));
    std::memcpy(index.data_ptr<int64_t>() + n, edges.dst.data(), n * sizeof(int64_t));
  }
  return index;
}

at::Tensor edge_shift_tensor(const Edges& edges, c10::ScalarType dtype) {
  const int64_t n = edges.size();
  if (n == 0) return at::empty({0, 3}, at::TensorOptions().dtype(dtype));
  const at::Tensor view = at::from_blob(const_cast<double*>(edges.shift.data()), {n, 3},
                                        at::TensorOptions().dtype(at::kDouble));
  return view.to(dtype, /*non_blocking=*/false, /*copy=*/true);
}

at::Tensor edge_vectors(const at::Tensor& pos, const at::Tensor& edge_index,
                        const at::Tensor& shift) {
  if (pos.dim() != 2 || pos.size(1) != 3 || edge_index.dim() != 2 || edge_index.size(0) != 2 ||
      edge_index.scalar_type() != at::kLong || shift.dim() != 2 ||
      shift.size(0) != edge_index.size(1) || shift.size(1) != 3 ||
      shift.scalar_type() != pos.scalar_type()) {
    throw Error(
        "edge_vectors: expected pos [n_atoms, 3], edge_index int64 [2, n_edges] and shift "
        "[n_edges, 3] of pos's dtype");
  }
  return pos.index_select(0, edge_index[0]).sub(pos.index_select(0, edge_index[1])).add(shift);
}

at::Tensor edge_lengths(const at::Tensor& vec) {
  return vec.mul(vec).sum(1).sqrt();
}

}  // namespace ddgnn
