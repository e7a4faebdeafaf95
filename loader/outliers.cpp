// Outlier frames (loader/outliers.h): robust energy statistics per composition and config_type,
// force bound, and close atoms by a sweep along one direction, with periodic images of the atoms
// near a face.
#include "loader/outliers.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/log.h"
#include "loader/cell.h"
#include "loader/elements.h"

namespace ddgnn {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double median(std::vector<double> v) {
  const size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + long(m), v.end());
  double hi = v[m];
  if (v.size() % 2 == 1) return hi;
  return 0.5 * (hi + *std::max_element(v.begin(), v.begin() + long(m)));
}

}  // namespace

ClosePair closest_pair_below(const Frame& f, double limit) {
  ClosePair best{kInf, -1, -1};
  const size_t n = f.n_atoms();
  if (n < 2 || !(limit > 0.0)) return best;
  // Atoms wrapped into the cell along periodic axes; copies of those within `limit` of a face,
  // shifted by the lattice vector, so that a pair across the boundary meets in one grid.
  struct Point {
    std::array<double, 3> x;
    int32_t atom;
  };
  std::vector<Point> points;
  points.reserve(n);
  double inv[9];
  const bool periodic = f.pbc[0] || f.pbc[1] || f.pbc[2];
  const bool wrap = periodic && f.has_cell && cell_invert(f.cell.data(), inv);
  double margin[3] = {0, 0, 0};  // fractional width of `limit` along each axis
  if (wrap)
    for (int k = 0; k < 3; ++k)
      if (f.pbc[k]) margin[k] = limit / std::max(cell_height(f.cell.data(), k), limit);
  for (size_t i = 0; i < n; ++i) {
    const double* r = &f.pos[3 * i];
    if (!wrap) {
      points.push_back({{r[0], r[1], r[2]}, int32_t(i)});
      continue;
    }
    double s[3];
    for (int k = 0; k < 3; ++k) {
      s[k] = r[0] * inv[0 + k] + r[1] * inv[3 + k] + r[2] * inv[6 + k];
      if (f.pbc[k]) s[k] -= std::floor(s[k]);
    }
    // This atom and its images across the faces it is near: shifts in {-1, 0, 1} per axis.
    int lo[3], hi[3];
    for (int k = 0; k < 3; ++k) {
      lo[k] = f.pbc[k] && s[k] > 1.0 - margin[k] ? -1 : 0;
      hi[k] = f.pbc[k] && s[k] < margin[k] ? 1 : 0;
    }
    for (int a = lo[0]; a <= hi[0]; ++a)
      for (int b = lo[1]; b <= hi[1]; ++b)
        for (int c = lo[2]; c <= hi[2]; ++c) {
          const double t[3] = {s[0] + a, s[1] + b, s[2] + c};
          Point p{{0, 0, 0}, int32_t(i)};
          for (int d = 0; d < 3; ++d)
            p.x[d] = t[0] * f.cell[0 + d] + t[1] * f.cell[3 + d] + t[2] * f.cell[6 + d];
          points.push_back(p);
        }
  }
  // Sweep along a direction no lattice plane is perpendicular to (irrational components): a pair
  // closer than `limit` is closer than `limit` in projection, and projections of a crystal's atoms
  // spread out, so each atom meets few candidates. O(n log n).
  const double u[3] = {1.0 / std::sqrt(6.0), std::sqrt(2.0 / 6.0), std::sqrt(3.0 / 6.0)};
  std::vector<std::pair<double, int32_t>> order(points.size());
  for (size_t k = 0; k < points.size(); ++k)
    order[k] = {points[k].x[0] * u[0] + points[k].x[1] * u[1] + points[k].x[2] * u[2], int32_t(k)};
  std::sort(order.begin(), order.end());
  for (size_t k = 0; k < order.size(); ++k) {
    const Point& p = points[size_t(order[k].second)];
    for (size_t m = k + 1; m < order.size() && order[m].first - order[k].first < limit; ++m) {
      const Point& q = points[size_t(order[m].second)];
      if (q.atom == p.atom) continue;
      double d2 = 0;
      for (int d = 0; d < 3; ++d) {
        const double e = q.x[size_t(d)] - p.x[size_t(d)];
        d2 += e * e;
      }
      const double dist = std::sqrt(d2);
      if (dist < limit && dist < best.distance)
        best = {dist, std::min(p.atom, q.atom), std::max(p.atom, q.atom)};
    }
  }
  return best;
}

OutlierScan::OutlierScan(OutlierOptions options) : m_options(options) {}

void OutlierScan::add(const Frame& f) {
  Summary s;
  const size_t n = f.n_atoms();
  std::array<int32_t, 119> count{};
  for (uint8_t z : f.z) count[z < count.size() ? z : 0] += 1;
  uint64_t h = 1469598103934665603ull;  // FNV-1a over (Z, count) of the present elements
  for (size_t z = 0; z < count.size(); ++z) {
    if (!count[z]) continue;
    for (uint64_t v : {uint64_t(z), uint64_t(count[z])}) {
      h ^= v;
      h *= 1099511628211ull;
    }
  }
  // Frames of one composition but another config_type (isomers, other molecules of a set of
  // molecules) are another group: their energies differ by chemistry, not by error.
  for (unsigned char c : f.config_type) {
    h ^= c;
    h *= 1099511628211ull;
  }
  s.composition = h;
  if (!m_formula.count(h)) {
    auto& counts = m_counts[h];
    for (size_t z = 1; z < count.size(); ++z)
      if (count[z]) counts.push_back({uint8_t(z), count[z]});
    std::string formula;
    for (size_t z = 1; z < count.size(); ++z)
      if (count[z])
        formula += element_symbol(int(z)) + (count[z] > 1 ? std::to_string(count[z]) : "");
    if (!f.config_type.empty())
      formula += " frames of config_type " + f.config_type;
    else
      formula += " frames";
    m_formula[h] = formula;
  }
  s.energy_per_atom = n ? f.energy / double(n) : 0.0;
  s.n_atoms = int32_t(n);
  for (size_t i = 0; i < f.forces.size() / 3; ++i) {
    const double* F = &f.forces[3 * i];
    const double norm = std::sqrt(F[0] * F[0] + F[1] * F[1] + F[2] * F[2]);
    if (norm > s.max_force) {
      s.max_force = norm;
      s.force_atom = int32_t(i);
    }
  }
  const ClosePair close = closest_pair_below(f, m_options.min_distance);
  s.min_distance = close.distance;
  s.close_a = close.a;
  s.close_b = close.b;
  m_frames.push_back(s);
}

std::unordered_map<uint64_t, std::vector<double>> OutlierScan::distinct_energies() const {
  std::unordered_map<uint64_t, std::vector<double>> out;
  for (const auto& s : m_frames) out[s.composition].push_back(s.energy_per_atom);
  for (auto& [c, e] : out) {
    std::sort(e.begin(), e.end());
    e.erase(std::unique(e.begin(), e.end()), e.end());
  }
  return out;
}

int64_t OutlierScan::energy_unjudged() const {
  const auto distinct = distinct_energies();
  int64_t out = 0;
  for (const auto& s : m_frames)
    if (int64_t(distinct.at(s.composition).size()) < m_options.min_composition) ++out;
  return out;
}

std::vector<double> OutlierScan::fit_residuals() const {
  // The elements present, as columns 0..k-1.
  std::array<int, 119> column;
  column.fill(-1);
  int k = 0;
  for (const auto& [c, counts] : m_counts)
    for (const auto& [z, n] : counts)
      if (column[z] < 0) column[z] = k++;
  std::vector<double> residual(m_frames.size(), std::nan(""));
  std::vector<char> kept(m_frames.size(), 0);
  for (size_t g = 0; g < m_frames.size(); ++g)
    kept[g] = m_frames[g].n_atoms > 0 &&
              std::abs(m_frames[g].energy_per_atom) <= m_options.max_energy_per_atom;
  // Least squares over the kept frames, then the frames beyond the bound and beyond half the
  // largest residual left out and the fit made again: a wild label drags a plain fit (and so every
  // residual) its way; dropped first, it no longer does. A few rounds even for many such frames.
  for (int round = 0; round < 60; ++round) {
    std::vector<double> a(size_t(k) * size_t(k), 0.0), b(size_t(k), 0.0);
    for (size_t g = 0; g < m_frames.size(); ++g) {
      if (!kept[g]) continue;
      const auto& counts = m_counts.at(m_frames[g].composition);
      const double energy = m_frames[g].energy_per_atom * m_frames[g].n_atoms;
      for (const auto& [zi, ni] : counts) {
        b[size_t(column[zi])] += ni * energy;
        for (const auto& [zj, nj] : counts)
          a[size_t(column[zi]) * size_t(k) + size_t(column[zj])] += double(ni) * nj;
      }
    }
    // A small ridge: an element that only appears with others in fixed ratio (every frame
    // C2H6O) leaves the fit free along that ratio; any solution gives the same residuals.
    double top = 0;
    for (int i = 0; i < k; ++i) top = std::max(top, a[size_t(i) * size_t(k) + size_t(i)]);
    for (int i = 0; i < k; ++i) a[size_t(i) * size_t(k) + size_t(i)] += 1e-10 * top + 1e-300;
    // Gaussian elimination with partial pivoting (k is at most 118).
    for (int c = 0; c < k; ++c) {
      int p = c;
      for (int r = c + 1; r < k; ++r)
        if (std::abs(a[size_t(r) * size_t(k) + size_t(c)]) >
            std::abs(a[size_t(p) * size_t(k) + size_t(c)]))
          p = r;
      for (int j = 0; j < k; ++j)
        std::swap(a[size_t(c) * size_t(k) + size_t(j)], a[size_t(p) * size_t(k) + size_t(j)]);
      std::swap(b[size_t(c)], b[size_t(p)]);
      const double pivot = a[size_t(c) * size_t(k) + size_t(c)];
      if (pivot == 0.0) continue;
      for (int r = c + 1; r < k; ++r) {
        const double f = a[size_t(r) * size_t(k) + size_t(c)] / pivot;
        if (f == 0.0) continue;
        for (int j = c; j < k; ++j)
          a[size_t(r) * size_t(k) + size_t(j)] -= f * a[size_t(c) * size_t(k) + size_t(j)];
        b[size_t(r)] -= f * b[size_t(c)];
      }
    }
    std::vector<double> mu(size_t(k), 0.0);
    for (int c = k - 1; c >= 0; --c) {
      double v = b[size_t(c)];
      for (int j = c + 1; j < k; ++j) v -= a[size_t(c) * size_t(k) + size_t(j)] * mu[size_t(j)];
      const double pivot = a[size_t(c) * size_t(k) + size_t(c)];
      mu[size_t(c)] = pivot != 0.0 ? v / pivot : 0.0;
    }
    double largest = 0;
    for (size_t g = 0; g < m_frames.size(); ++g) {
      const Summary& s = m_frames[g];
      if (s.n_atoms == 0) continue;
      double fit = 0;
      for (const auto& [z, n] : m_counts.at(s.composition)) fit += n * mu[size_t(column[z])];
      residual[g] = s.energy_per_atom - fit / s.n_atoms;
      if (kept[g] && std::isfinite(residual[g])) largest = std::max(largest, std::abs(residual[g]));
    }
    const double cut = std::max(m_options.max_fit_residual, 0.5 * largest);
    bool dropped = false;
    for (size_t g = 0; g < m_frames.size(); ++g)
      if (kept[g] && !(std::abs(residual[g]) <= cut)) {
        kept[g] = 0;
        dropped = true;
      }
    if (!dropped) break;
  }
  return residual;
}

std::vector<Outlier> OutlierScan::finish() const {
  std::vector<Outlier> out;
  // Each distinct energy once: exact copies of a frame (a set repeated to weight it) say nothing
  // about the spread, and counted would make the MAD zero and flag every other frame.
  const auto energies = distinct_energies();
  struct Stats {
    double median, mad;
  };
  std::unordered_map<uint64_t, Stats> stats;
  for (const auto& [c, e] : energies) {
    if (int64_t(e.size()) < m_options.min_composition) continue;
    const double m = median(e);
    std::vector<double> dev(e.size());
    for (size_t k = 0; k < e.size(); ++k) dev[k] = std::abs(e[k] - m);
    stats[c] = {m, median(dev)};
  }
  // The fit judges only the frames of groups too small for their spread: none, no fit.
  const std::vector<double> residual =
      stats.size() == energies.size() ? std::vector<double>(m_frames.size(), 0.0) : fit_residuals();
  for (size_t g = 0; g < m_frames.size(); ++g) {
    const Summary& s = m_frames[g];
    auto it = stats.find(s.composition);
    if (it != stats.end()) {
      const double dev = std::abs(s.energy_per_atom - it->second.median);
      const double limit = std::max(m_options.energy_mads * it->second.mad, m_options.energy_floor);
      if (dev > limit)
        out.push_back(
            {int64_t(g), "energy " + fmt("%.6g", s.energy_per_atom) + " eV/atom lies " +
                             (it->second.mad > 0 ? fmt("%.3g", dev / it->second.mad) + " MADs"
                                                 : fmt("%.3g", dev * 1000) + " meV/atom") +
                             " from the median " + fmt("%.6g", it->second.median) + " of its " +
                             m_formula.at(s.composition) + " (MAD " +
                             fmt("%.3g", it->second.mad * 1000) + " meV/atom)"});
    } else if (!(std::abs(s.energy_per_atom) <= m_options.max_energy_per_atom)) {
      out.push_back({int64_t(g), "energy " + fmt("%.6g", s.energy_per_atom) +
                                     " eV/atom is beyond any element's (" +
                                     fmt("%.3g", m_options.max_energy_per_atom) + " eV/atom; its " +
                                     m_formula.at(s.composition) +
                                     " are too few to judge by their spread)"});
    } else if (!(std::abs(residual[g]) <= m_options.max_fit_residual) && s.n_atoms > 0) {
      out.push_back({int64_t(g), "energy " + fmt("%.6g", s.energy_per_atom) + " eV/atom lies " +
                                     fmt("%.4g", residual[g]) +
                                     " eV/atom from the per-element fit of the set (bound " +
                                     fmt("%.3g", m_options.max_fit_residual) + " eV/atom; its " +
                                     m_formula.at(s.composition) +
                                     " are too few to judge by their spread)"});
    }
    if (s.max_force > m_options.max_force)
      out.push_back({int64_t(g), "largest force " + fmt("%.6g", s.max_force) + " eV/Å (atom " +
                                     std::to_string(s.force_atom) + ") is above " +
                                     fmt("%.6g", m_options.max_force) + " eV/Å"});
    if (s.close_a >= 0)
      out.push_back({int64_t(g), "atoms " + std::to_string(s.close_a) + " and " +
                                     std::to_string(s.close_b) + " are " +
                                     fmt("%.3g", s.min_distance) + " Å apart (below " +
                                     fmt("%.6g", m_options.min_distance) + " Å)"});
  }
  return out;
}

std::string outlier_lines(const std::vector<Outlier>& outliers, size_t max_lines,
                          const std::string& indent) {
  std::string out;
  for (size_t k = 0; k < outliers.size() && k < max_lines; ++k)
    out += indent + "graph " + std::to_string(outliers[k].graph) + ": " + outliers[k].what + "\n";
  if (outliers.size() > max_lines)
    out += indent + "... and " + std::to_string(outliers.size() - max_lines) + " more\n";
  return out;
}

}  // namespace ddgnn
