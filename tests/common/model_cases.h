// The models the step tests run: every mpnn_type (small_spec), and the options that run code of
// their own in a training step (equivariant EGNN, PNA's batch degrees, a conv node head, max and
// mean pooling into a graph head, GPS, multi-branch heads with column targets, the stress, a smooth
// neighbour cap, MACE's body order 3).
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "model/layer.h"
#include "model/spec.h"

namespace ddgnn::testing {

struct ModelCase {
  std::string name, mpnn_type;
  std::function<void(GnnSpec&)> adjust;  // on small_spec(mpnn_type)
  bool stress = false;                   // the model predicts (and the loss trains) a stress
  bool smooth_cap = false;  // the radius graph caps neighbours smoothly (max_neighbours 4..6)
  // Multi-branch heads (the graph's branch key in its column 0), a graph column head "gap" of two
  // values and a node column head "charge".
  bool columns = false;
};

inline void PrintTo(const ModelCase& c, std::ostream* os) {
  *os << c.name;
}

inline std::vector<ModelCase> model_cases() {
  std::vector<ModelCase> cases;
  for (const auto& type : known_layers()) cases.push_back({type, type, {}});
  cases.push_back({"EGNN_equivariant", "EGNN", [](GnnSpec& s) { s.layer.equivariance = true; }});
  cases.push_back({"PNA_batch_degrees", "PNA", [](GnnSpec& s) { s.layer.pna_deg.clear(); }});
  cases.push_back(
      {"PAINN_conv_head", "PAINN", [](GnnSpec& s) { s.node_head_type = NodeHeadType::kConv; }});
  for (Pooling pool : {Pooling::kMax, Pooling::kMean})
    cases.push_back({std::string("CGCNN_graph_head_") + (pool == Pooling::kMax ? "max" : "mean"),
                     "CGCNN", [pool](GnnSpec& s) {
                       s.graph_pooling = pool;
                       s.heads = {{"energy", HeadSpec::kGraph, 1}};
                     }});
  for (const char* type : {"SchNet", "GIN"})
    cases.push_back({std::string(type) + "_GPS", type, [](GnnSpec& s) {
                       s.gps_heads = 4;
                       s.pe_dim = 3;
                     }});
  ModelCase branches{"PAINN_branches_and_columns", "PAINN", [](GnnSpec& s) {
                       HeadBranch other = s.branch(0);
                       other.dim_headlayers = {7};
                       s.more_branches = {other};
                       s.heads.push_back({"gap", HeadSpec::kGraph, 2});
                       s.heads.push_back({"charge", HeadSpec::kNode, 1});
                     }};
  branches.columns = true;
  cases.push_back(branches);
  ModelCase stress{"SchNet_stress", "SchNet", {}};
  stress.stress = true;
  cases.push_back(stress);
  for (const char* type : {"MACE", "SchNet"}) {
    ModelCase cap{std::string(type) + "_smooth_cap", type, {}};
    cap.smooth_cap = true;
    cases.push_back(cap);
  }
  cases.push_back({"MACE_correlation_3", "MACE", [](GnnSpec& s) { s.layer.correlation = 3; }});
  return cases;
}

}  // namespace ddgnn::testing
