// Spherical harmonics and coupling tensors as tensors (model/irreps.h).
#include "model/irreps.h"

#include <ATen/ATen.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/so3.h"

namespace ddgnn {

at::Tensor spherical_harmonics(const at::Tensor& unit, int64_t lmax) {
  if (lmax < 0 || lmax > so3::kMaxL)
    throw Error("spherical_harmonics: degree " + std::to_string(lmax) + " requested; 0.." +
                std::to_string(so3::kMaxL) + " are implemented");
  // model/so3.h: Y_l(r) = S_l(z, x, y), S_l the textbook real harmonics of polar axis z.
  const at::Tensor x = unit.select(1, 2), y = unit.select(1, 0), z = unit.select(1, 1);
  std::vector<at::Tensor> cols = {at::ones_like(x)};
  if (lmax >= 1) {
    const double c = std::sqrt(3.0);
    cols.insert(cols.end(), {c * y, c * z, c * x});
  }
  if (lmax >= 2) {
    const double c = std::sqrt(15.0);
    cols.insert(cols.end(), {c * x * y, c * y * z, (std::sqrt(5.0) / 2) * (3.0 * z * z - 1.0),
                             c * x * z, (c / 2) * (x * x - y * y)});
  }
  if (lmax >= 3) {
    const double c3 = std::sqrt(70.0) / 4, c2 = std::sqrt(105.0), c1 = std::sqrt(42.0) / 4;
    const at::Tensor x2 = x * x, y2 = y * y, z2 = z * z;
    cols.insert(cols.end(), {c3 * y * (3.0 * x2 - y2), c2 * x * y * z, c1 * y * (5.0 * z2 - 1.0),
                             (std::sqrt(7.0) / 2) * z * (5.0 * z2 - 3.0), c1 * x * (5.0 * z2 - 1.0),
                             (c2 / 2) * (x2 - y2) * z, c3 * x * (x2 - 3.0 * y2)});
  }
  return at::stack(cols, 1);
}

at::Tensor coupling_tensor(int64_t l1, int64_t l2, int64_t l3) {
  const std::vector<double> c = so3::real_coupling(int(l1), int(l2), int(l3));
  return at::tensor(c, at::kDouble).view({2 * l1 + 1, 2 * l2 + 1, 2 * l3 + 1});
}

}  // namespace ddgnn
