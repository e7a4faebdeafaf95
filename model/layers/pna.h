// The aggregation that PNA, PNAPlus and PNAEq share (PyG's DegreeScalerAggregation with the
// aggregators mean, min, max, std), and the post Linear that follows it in PNAConv.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <vector>

#include "model/segment.h"

namespace ddgnn {

// The normalisers of the degree scalers: from the training set's in-degree histogram (pna_deg),
// the mean of log(deg + 1) and of deg; an empty histogram means each batch's own. A histogram
// with a negative count or no atom with a neighbour is a ConfigError.
struct PnaDegrees {
  explicit PnaDegrees(const std::vector<int64_t>& hist);
  bool from_batch;
  double avg_log = 0.0, avg_lin = 0.0;
};

// msg [n_edges, F] aggregated over each receiver's edges by mean, min, max and std, scaled by the
// first n_scalers of identity, amplification, attenuation, linear, inverse linear (deg clamped to
// 1, as PyG), then post([h, scaled...]) with post: Linear((4 n_scalers + 1) F, F_out). h
// [n_atoms, F]; returns [n_atoms, F_out]. Differentiable to any order; min and max exact except
// at ties. Normalisers from the batch are means over its atoms weighted by `atom_weight` [n_atoms]
// when given (a padded batch's GraphBatch::atom_weight: its own atoms only).
at::Tensor pna_aggregate_post(const at::Tensor& h, const at::Tensor& msg, const SegmentIndex& recv,
                              const PnaDegrees& degrees, int n_scalers, torch::nn::LinearImpl& post,
                              const at::Tensor& atom_weight = {});

}  // namespace ddgnn
