// Lattice cell arithmetic and the rule of a usable periodic cell (loader/cell.h).
#include "loader/cell.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ddgnn {

double cell_det(const double* m) {
  return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
         m[2] * (m[3] * m[7] - m[4] * m[6]);
}

bool cell_invert(const double* m, double* inv) {
  const double det = cell_det(m);
  if (!(std::abs(det) >= 1e-12) || !std::isfinite(det)) return false;
  const double r[9] = {
      (m[4] * m[8] - m[5] * m[7]), (m[2] * m[7] - m[1] * m[8]), (m[1] * m[5] - m[2] * m[4]),
      (m[5] * m[6] - m[3] * m[8]), (m[0] * m[8] - m[2] * m[6]), (m[2] * m[3] - m[0] * m[5]),
      (m[3] * m[7] - m[4] * m[6]), (m[1] * m[6] - m[0] * m[7]), (m[0] * m[4] - m[1] * m[3])};
  for (int k = 0; k < 9; ++k) {
    inv[k] = r[k] / det;
    if (!std::isfinite(inv[k])) return false;  // cofactors that overflow
  }
  return true;
}

double cell_height(const double* m, int k) {
  const double* a = m + 3 * ((k + 1) % 3);
  const double* b = m + 3 * ((k + 2) % 3);
  const double cx = a[1] * b[2] - a[2] * b[1], cy = a[2] * b[0] - a[0] * b[2],
               cz = a[0] * b[1] - a[1] * b[0];
  const double area = std::sqrt(cx * cx + cy * cy + cz * cz);
  return area > 0.0 ? std::abs(cell_det(m)) / area : 0.0;
}

std::string cell_problem(const double* cell, const bool pbc[3]) {
  for (int k = 0; k < 9; ++k)
    if (!std::isfinite(cell[k])) return "the cell has a non-finite entry";
  if (!pbc[0] && !pbc[1] && !pbc[2]) return "";
  char buf[160];
  const double volume = cell_det(cell);
  if (!std::isfinite(volume)) {  // entries near the largest double: no volume, no images
    std::snprintf(buf, sizeof buf, "the periodic cell's volume overflows (entries up to %.6g Å)",
                  [&] {
                    double m = 0;
                    for (int k = 0; k < 9; ++k) m = std::max(m, std::abs(cell[k]));
                    return m;
                  }());
    return buf;
  }
  if (!(volume > 0.0)) {
    std::snprintf(buf, sizeof buf, "the periodic cell has volume %.6g Å^3 (det of the cell)",
                  volume);
    return buf;
  }
  for (int k = 0; k < 3; ++k) {
    if (!pbc[k]) continue;
    const double h = cell_height(cell, k);
    if (!(h >= kMinCellHeight)) {  // NaN too: a face area that overflows
      std::snprintf(buf, sizeof buf,
                    "the periodic cell is %.6g Å thick along lattice vector %c (at least %g Å "
                    "needed)",
                    h, "abc"[k], kMinCellHeight);
      return buf;
    }
  }
  return "";
}

}  // namespace ddgnn
