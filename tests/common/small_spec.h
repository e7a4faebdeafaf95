// The small model the model tests share, and its targets as training binds them: any mpnn_type,
// hidden 16, two layers, a per-atom energy head summed over atoms (an interatomic potential), PNA's
// degree normaliser fixed so that a batch predicts what its graphs predict alone.
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
  s.head.num_sharedlayers = 1;
  s.head.dim_sharedlayers = 16;
  s.head.num_headlayers = 1;
  s.head.dim_headlayers = {16};
  s.head.node_num_headlayers = 2;
  s.head.node_dim_headlayers = {16, 16};
  s.heads = {{"energy", HeadSpec::kNode, 1}};
  s.interatomic_potential = true;
  return s;
}

// What the heads learn, as training binds them: the head named "energy" is the energy (summed
// over atoms for a node head), a head named "forces" gives direct forces; conservative forces are
// -dE/dx.
inline TargetSpec targets_of(const GnnSpec& spec, bool conservative) {
  TargetSpec t;
  t.conservative = conservative;
  for (size_t k = 0; k < spec.heads.size(); ++k) {
    HeadTarget h;
    h.name = spec.heads[k].name;
    h.kind = spec.heads[k].kind;
    h.dim = spec.heads[k].output_dim;
    h.source = h.name == "forces" ? TargetSource::kForces : TargetSource::kEnergy;
    if (h.name == "energy") t.energy_head = int(k);
    t.heads.push_back(h);
  }
  return t;
}

}  // namespace ddgnn::testing
