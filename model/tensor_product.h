// The channel-wise tensor-product message of the MACE layer and its derivatives, fused over edges
// so that no [E, rows, F] edge intermediate is materialised. The three ops below form a family
// closed under differentiation: each backward is made of the three, so every order works.
// Shapes: E edges, I rows, J columns, P paths, F channels; src / dst map edges to the rows of the
// sender-side ([N_src, J, F]) and receiver-side ([N_dst, I, F]) node tensors. Off the CPU (or
// without fused kernels, model/device.h) the *_reference versions run: plain ATen ops that
// autograd differentiates, no host synchronisation.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <vector>

#include "model/device_table.h"
#include "model/segment.h"

namespace ddgnn {

// A sparse coupling of rows i in [0, I) and columns j in [0, J) through paths p in [0, P): a list
// of (i, j, p) triples, each (i, j) at most once.
struct CouplingPattern {
  int64_t I = 0, J = 0, P = 0;
  std::vector<std::array<int64_t, 3>> entries;  // (i, j, p)
  // The entries as index tensors on each device the ATen versions ran on (shared by copies; the
  // entries must not change once a version has run).
  SharedDeviceTables tables = std::make_shared<DeviceTables>();
  // The same coupling with rows and columns swapped: (j, i, p), J x I.
  CouplingPattern transposed() const;
};

// out[dst(e), i, f] = sum over e and entries (i, j, p) of G[e, i, j] W[e, p, f] X[src(e), j, f].
// G [E, I, J], W [E, P, F], X [src.n_rows, J, F] -> [dst.n_rows, I, F]. Derivatives:
// X: tp_message(G^T, W, gout, pattern^T, dst, src); W: tp_weight_grad(G, X, gout, pattern, src,
// dst); G: tp_coupling_grad(W, X, gout, pattern, src, dst). Any order; src, dst and the tensors
// must outlive the autograd graph (the pattern is copied).
at::Tensor tp_message(const at::Tensor& G, const at::Tensor& W, const at::Tensor& X,
                      const CouplingPattern& pattern, const SegmentIndex& src,
                      const SegmentIndex& dst);

// out[e, p, f] = sum over entries (i, j, p) of G[e, i, j] X[src(e), j, f] Y[dst(e), i, f].
// G [E, I, J], X [src.n_rows, J, F], Y [dst.n_rows, I, F] -> [E, P, F]. Differentiable to any
// order (G: tp_coupling_grad; X, Y: tp_message).
at::Tensor tp_weight_grad(const at::Tensor& G, const at::Tensor& X, const at::Tensor& Y,
                          const CouplingPattern& pattern, const SegmentIndex& src,
                          const SegmentIndex& dst);

// out[e, i, j] = sum over f of W[e, p, f] X[src(e), j, f] Y[dst(e), i, f] for each entry (i, j, p),
// 0 at the (i, j) of no entry. W [E, P, F], X [src.n_rows, J, F], Y [dst.n_rows, I, F] ->
// [E, I, J]. Differentiable to any order (W: tp_weight_grad; X, Y: tp_message).
at::Tensor tp_coupling_grad(const at::Tensor& W, const at::Tensor& X, const at::Tensor& Y,
                            const CouplingPattern& pattern, const SegmentIndex& src,
                            const SegmentIndex& dst);

// The same three ops from ATen ops (gathers of rows and entries, elementwise products, index_add
// over entries, segment sums of model/segment_generic.h), on any device, differentiated by
// autograd; [E, entries, F] intermediates. What runs off the CPU or under GenericKernels.
at::Tensor tp_message_reference(const at::Tensor& G, const at::Tensor& W, const at::Tensor& X,
                                const CouplingPattern& pattern, const SegmentIndex& src,
                                const SegmentIndex& dst);
at::Tensor tp_weight_grad_reference(const at::Tensor& G, const at::Tensor& X, const at::Tensor& Y,
                                    const CouplingPattern& pattern, const SegmentIndex& src,
                                    const SegmentIndex& dst);
at::Tensor tp_coupling_grad_reference(const at::Tensor& W, const at::Tensor& X, const at::Tensor& Y,
                                      const CouplingPattern& pattern, const SegmentIndex& src,
                                      const SegmentIndex& dst);

}  // namespace ddgnn
