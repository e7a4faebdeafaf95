// Spherical-tensor features as tensors (the MACE layer): real spherical harmonics of edge
// directions and the real coupling tensors of model/so3.h, in its basis and normalisation.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace ddgnn {

// Components of the degrees 0..lmax together: (lmax + 1)^2.
inline int64_t irreps_dim(int64_t lmax) {
  return (lmax + 1) * (lmax + 1);
}

// Y_0..Y_lmax of unit vectors, [E, 3] -> [E, (lmax + 1)^2] (degree l at columns l^2 .. l^2 + 2l),
// as so3::spherical_harmonics of the same vectors; differentiable to any order through `unit`.
// 0 <= lmax <= so3::kMaxL.
at::Tensor spherical_harmonics(const at::Tensor& unit, int64_t lmax);

// so3::real_coupling(l1, l2, l3) as a [2l1+1, 2l2+1, 2l3+1] float64 tensor on the CPU.
at::Tensor coupling_tensor(int64_t l1, int64_t l2, int64_t l3);

}  // namespace ddgnn
