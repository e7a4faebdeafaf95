// Dataset statistics: streaming moments, composition least squares by a symmetric eigensolver
// (Jacobi: n_species is small), and brute-force periodic neighbour counts on sampled graphs.
#include "loader/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/log.h"
#include "core/units.h"
#include "loader/cell.h"

namespace ddgnn {

namespace {
// Pair distances a periodic frame's neighbour count may compute (about a second or two).
constexpr double kMaxPairChecks = 2e9;
}  // namespace

std::vector<int> count_neighbours(const Frame& f, double radius) {
  const size_t n = f.n_atoms();
  std::vector<int> count(n, 0);
  // Images needed along each periodic axis: the cutoff sphere spans ceil(r / d_k) cells, where
  // d_k = 1 / |b_k| is the distance between lattice planes (b_k: rows of inv(cell)^T).
  int reps[3] = {0, 0, 0};
  std::array<double, 9> inv{};
  if (f.has_cell && cell_invert(f.cell.data(), inv.data())) {
    // In floating point first: a radius of 1e300 must not overflow the count into a small one.
    double images = 1.0, spacing = 0.0;
    for (int k = 0; k < 3; ++k) {
      if (!f.pbc[k]) continue;
      const double bk =
          std::sqrt(inv[0 + k] * inv[0 + k] + inv[3 + k] * inv[3 + k] + inv[6 + k] * inv[6 + k]);
      const double r = std::ceil(radius * bk);
      images *= 2.0 * r + 1.0;
      if (r > 0 && (spacing == 0.0 || 1.0 / bk < spacing)) spacing = 1.0 / bk;
      reps[k] = r < 1e6 ? int(r) : 1'000'000;
    }
    if (images > 1.0 && !(images * double(n) * double(n) <= kMaxPairChecks))
      throw DataError("the cell is far too small for radius " + std::to_string(radius) +
                          " Å (plane spacing " + std::to_string(spacing) +
                          " Å): " + fmt("%.3g", images) + " periodic images of " +
                          std::to_string(n) + " atoms to search",
                      "check the cell (units: Å) and the radius; `ddgnn train` refuses such a "
                      "radius too");
  }
  const double r2 = radius * radius;
  for (int ia = -reps[0]; ia <= reps[0]; ++ia)
    for (int ib = -reps[1]; ib <= reps[1]; ++ib)
      for (int ic = -reps[2]; ic <= reps[2]; ++ic) {
        double s[3];
        for (int d = 0; d < 3; ++d) s[d] = ia * f.cell[d] + ib * f.cell[3 + d] + ic * f.cell[6 + d];
        const bool home = ia == 0 && ib == 0 && ic == 0;
        for (size_t i = 0; i < n; ++i)
          for (size_t j = 0; j < n; ++j) {
            if (home && i == j) continue;
            const double dx = f.pos[3 * j] - f.pos[3 * i] + s[0];
            const double dy = f.pos[3 * j + 1] - f.pos[3 * i + 1] + s[1];
            const double dz = f.pos[3 * j + 2] - f.pos[3 * i + 2] + s[2];
            if (dx * dx + dy * dy + dz * dz < r2) ++count[i];
          }
      }
  return count;
}

std::vector<double> solve_normal_equations(const std::vector<long double>& ata,
                                           const std::vector<long double>& atb, int& rank) {
  const size_t n = atb.size();
  // Jacobi eigen-decomposition of the symmetric matrix: ata = V diag(w) V^T.
  std::vector<long double> a = ata, v(n * n, 0.0L);
  for (size_t i = 0; i < n; ++i) v[i * n + i] = 1.0L;
  for (int sweep = 0; sweep < 100; ++sweep) {
    long double off = 0;
    for (size_t p = 0; p < n; ++p)
      for (size_t q = p + 1; q < n; ++q) off += a[p * n + q] * a[p * n + q];
    if (off < 1e-30L) break;
    for (size_t p = 0; p < n; ++p)
      for (size_t q = p + 1; q < n; ++q) {
        const long double apq = a[p * n + q];
        if (std::abs(apq) < 1e-300L) continue;
        const long double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        const long double t =
            (theta >= 0 ? 1 : -1) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const long double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (size_t k = 0; k < n; ++k) {  // A <- A J
          const long double akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (size_t k = 0; k < n; ++k) {  // A <- J^T A
          const long double apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (size_t k = 0; k < n; ++k) {  // V <- V J
          const long double vkp = v[k * n + p], vkq = v[k * n + q];
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
  }
  long double wmax = 0;
  for (size_t i = 0; i < n; ++i) wmax = std::max(wmax, std::abs(a[i * n + i]));
  const long double tol = wmax * 1e-12L;
  std::vector<long double> x(n, 0.0L);
  rank = 0;
  for (size_t k = 0; k < n; ++k) {
    const long double w = a[k * n + k];
    if (std::abs(w) <= tol) continue;  // pseudo-inverse: drop null directions
    ++rank;
    long double proj = 0;
    for (size_t i = 0; i < n; ++i) proj += v[i * n + k] * atb[i];
    for (size_t i = 0; i < n; ++i) x[i] += v[i * n + k] * proj / w;
  }
  return std::vector<double>(x.begin(), x.end());
}

DatasetStats compute_stats(const Dataset& ds, double radius, int64_t max_neighbour_graphs) {
  DatasetStats st;
  st.n_graphs = ds.n_graphs();
  st.n_atoms = ds.n_atoms();
  st.species = ds.species();
  st.radius = radius;
  const size_t ns = st.species.size();
  int col_of[kMaxAtomicNumber + 1];
  std::fill(col_of, col_of + kMaxAtomicNumber + 1, -1);
  for (size_t s = 0; s < ns; ++s) col_of[st.species[s]] = int(s);

  std::vector<long double> ata(ns * ns, 0.0L), atb(ns, 0.0L);
  long double e_sum = 0, e_sq = 0, epa_sum = 0, epa_sq = 0, f_norm = 0, f_sq = 0;
  st.atoms_min = std::numeric_limits<int64_t>::max();
  st.energy_min = std::numeric_limits<double>::infinity();
  st.energy_max = -st.energy_min;
  const int64_t stride =
      max_neighbour_graphs > 0 ? std::max<int64_t>(1, st.n_graphs / max_neighbour_graphs) : 0;
  long double nb_sum = 0;
  int64_t nb_atoms = 0;
  st.neighbours_min = std::numeric_limits<int64_t>::max();
  // Residual of the reference-energy fit per atom, from sums weighted by 1/n_atoms^2, so that
  // memory stays constant: |E - c.x|^2/n^2 = E^2/n^2 - 2 x.(E c/n^2) + x^T (c c^T/n^2) x.
  long double w_ee = 0;
  std::vector<long double> w_ec(ns, 0.0L), w_cc(ns * ns, 0.0L);
  Frame frame;
  OutlierScan scan;
  constexpr int64_t kStep = 16384;
  for (int64_t g0 = 0; g0 < st.n_graphs; g0 += kStep) {
    const GraphBlock b = ds.read(g0, std::min(kStep, st.n_graphs - g0));
    for (size_t i = 0; i < b.n_graphs(); ++i) {
      const int64_t na = b.n_atoms[i];
      st.atoms_min = std::min(st.atoms_min, na);
      st.atoms_max = std::max(st.atoms_max, na);
      const double e = b.energy[i];
      e_sum += e;
      e_sq += (long double)e * e;
      epa_sum += e / na;
      epa_sq += (long double)(e / na) * (e / na);
      st.energy_min = std::min(st.energy_min, e);
      st.energy_max = std::max(st.energy_max, e);
      if (b.pbc[3 * i] || b.pbc[3 * i + 1] || b.pbc[3 * i + 2]) ++st.n_periodic;
      if (b.stress[9 * i] == b.stress[9 * i]) ++st.n_with_stress;
      std::vector<int> comp(ns, 0);
      const size_t s0 = size_t(b.atom_start[i]);
      for (int64_t a = 0; a < na; ++a) {
        const uint8_t z = b.z[s0 + size_t(a)];
        ++st.species_count[z];
        ++comp[size_t(col_of[z])];
      }
      for (size_t p = 0; p < ns; ++p) {
        atb[p] += (long double)comp[p] * e;
        for (size_t q = 0; q < ns; ++q) ata[p * ns + q] += (long double)comp[p] * comp[q];
      }
      const long double w = 1.0L / ((long double)na * na);
      w_ee += w * e * e;
      for (size_t p = 0; p < ns; ++p) {
        w_ec[p] += w * e * comp[p];
        for (size_t q = 0; q < ns; ++q) w_cc[p * ns + q] += w * comp[p] * comp[q];
      }
      if (!b.forces.empty())
        for (int64_t a = 0; a < na; ++a) {
          const double* f = &b.forces[3 * (s0 + size_t(a))];
          const double n2 = f[0] * f[0] + f[1] * f[1] + f[2] * f[2];
          f_norm += std::sqrt(n2);
          f_sq += n2;
          st.force_max = std::max(st.force_max, std::sqrt(n2));
        }
      const int64_t g = g0 + int64_t(i);
      b.frame(i, frame);
      scan.add(frame);
      if (stride > 0 && g % stride == 0 && st.neighbour_graphs < max_neighbour_graphs) {
        std::vector<int> counts;
        try {
          counts = count_neighbours(frame, radius);
        } catch (const DataError& e) {
          throw DataError("graph " + std::to_string(g) + ": " + e.what(), e.hint());
        }
        for (int c : counts) {
          nb_sum += c;
          ++nb_atoms;
          st.neighbours_min = std::min<int64_t>(st.neighbours_min, c);
          st.neighbours_max = std::max<int64_t>(st.neighbours_max, c);
        }
        ++st.neighbour_graphs;
      }
    }
  }
  st.outliers = scan.finish();
  st.energy_unjudged = scan.energy_unjudged();
  const long double ng = st.n_graphs;
  st.atoms_mean = double(st.n_atoms / ng);
  st.energy_mean = double(e_sum / ng);
  st.energy_std = double(std::sqrt(std::max(0.0L, e_sq / ng - (e_sum / ng) * (e_sum / ng))));
  st.epa_mean = double(epa_sum / ng);
  st.epa_std = double(std::sqrt(std::max(0.0L, epa_sq / ng - (epa_sum / ng) * (epa_sum / ng))));
  if (ds.has_forces()) {
    st.force_norm_mean = double(f_norm / st.n_atoms);
    st.force_rms = double(std::sqrt(f_sq / (3.0L * st.n_atoms)));
  }
  st.ref_energy = solve_normal_equations(ata, atb, st.ref_rank);
  long double res_sq = w_ee;
  for (size_t p = 0; p < ns; ++p) {
    res_sq -= 2 * st.ref_energy[p] * w_ec[p];
    for (size_t q = 0; q < ns; ++q)
      res_sq += st.ref_energy[p] * w_cc[p * ns + q] * st.ref_energy[q];
  }
  st.ref_residual_rms_per_atom = double(std::sqrt(std::max(0.0L, res_sq) / ng));
  if (nb_atoms > 0) {
    st.neighbours_mean = double(nb_sum / nb_atoms);
  } else {
    st.neighbours_min = 0;
  }
  return st;
}

}  // namespace ddgnn
