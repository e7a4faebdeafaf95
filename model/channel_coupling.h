// The channel-wise coupling of two node tensors through a sparse list of coefficients: MACE's
// product basis (products of the neighbour sums coupled to a degree, model/layers/mace.cpp) as one
// fused CPU kernel per product order, with no [atoms, (2l1+1)(2l2+1), F] outer product. The op is
// closed under differentiation (its derivative w.r.t. either input is the op with the entries'
// roles swapped), so every order of derivative runs fused.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "model/device_table.h"

namespace ddgnn {

// out[n, r, f] = sum over entries (r, i, j, c) of c X[n, i, f] Y[n, j, f], for R rows r, I rows
// i of X and J rows j of Y. An (r, i, j) may appear more than once (the values add).
struct ChannelCoupling {
  struct Entry {
    int64_t r, i, j;
    double c;
  };
  int64_t R = 0, I = 0, J = 0;
  std::vector<Entry> entries;
  // The entries as index and coefficient tensors on each device the reference ran on (shared by
  // copies; the entries must not change once it has run).
  SharedDeviceTables tables = std::make_shared<DeviceTables>();

  // The couplings of the derivatives: dX = couple_channels(G, Y, for_x()) with G [N, R, F] the
  // gradient of out, dY = couple_channels(G, X, for_y()).
  ChannelCoupling for_x() const;  // entries (i, r, j, c): R' = I, I' = R, J' = J
  ChannelCoupling for_y() const;  // entries (j, r, i, c): R' = J, I' = R, J' = I
};

// X [N, I, F], Y [N, J, F] (one dtype and device) -> [N, R, F]. Differentiable to any order; on
// the CPU the fused kernel (model/device.h's fused_kernels), elsewhere the reference below. Throws
// on entries out of range or shapes that do not match.
at::Tensor couple_channels(const at::Tensor& X, const at::Tensor& Y, const ChannelCoupling& c);

// The same from ATen ops (gathers of rows, elementwise products, index_add): [N, entries, F]
// intermediates; any device, differentiated by autograd.
at::Tensor couple_channels_reference(const at::Tensor& X, const at::Tensor& Y,
                                     const ChannelCoupling& c);

}  // namespace ddgnn
