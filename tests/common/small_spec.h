// The small model the model tests share: any mpnn_type, hidden 16, two layers, a per-atom energy
// head summed over atoms (an interatomic potential), PNA's degree normaliser fixed so that a batch
// predicts what its graphs predict alone.
#pragma once

#include <string>
#include <vector>

#include "model/spec.h"

namespace ddgnn::testing {

inline GnnSpec small_spec(const std::string& type, double radius) {
  GnnSpec s;
  s.mpnn_type = type;
  s.layer.hidden_dim = 16;
  s.layer.radius = radius;
  s.layer.num_gaussians = 12;
  s.layer.num_filters = 16;
  s.layer.num_radial = 6;
  s.layer.pna_deg = std::vector<int64_t>(40, 1);
  s.num_conv_layers = 2;
  s.graph_pooling = Pooling::kAdd;
  s.num_sharedlayers = 1;
  s.dim_sharedlayers = 16;
  s.num_headlayers = 1;
  s.dim_headlayers = {16};
  s.node_num_headlayers = 2;
  s.node_dim_headlayers = {16, 16};
  s.heads = {{"energy", HeadSpec::kNode, 1}};
  s.interatomic_potential = true;
  return s;
}

}  // namespace ddgnn::testing
