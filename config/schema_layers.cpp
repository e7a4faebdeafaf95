// The keys that one message-passing layer type reads (SchNet's filters, GAT's heads, MFC's
// degrees, DimeNet's and MACE's bases and widths), part of the table of config/config_schema.cpp.
#include "config/schema_layers.h"

#include "model/spec.h"

namespace ddgnn {

void add_layer_type_keys(std::vector<KeySpec>& s) {
  using T = KeyType;
  const std::string arch = "NeuralNetwork.Architecture.";
  auto add = [&s](KeySpec spec) { s.push_back(std::move(spec)); };
  auto key = [](std::string dotted, KeyType type, std::string description) {
    return make_key_spec(std::move(dotted), type, std::move(description));
  };
  add(key(arch + "num_gaussians", T::kInt, "SchNet and GAT: Gaussians expanding each distance")
          .def(50)
          .ge(1));
  add(key(arch + "num_filters", T::kInt, "SchNet: width of the continuous filters").def(128).ge(1));
  add(key(arch + "num_radial", T::kInt,
          "PAINN, MACE, DimeNet, PNAPlus and PNAEq: radial basis functions per distance")
          .def(6)
          .ge(1));
  add(key(arch + "heads", T::kInt,
          "GAT: attention heads of each layer, averaged (HydraGNN fixes 6 and concatenates them "
          "between layers)")
          .def(6)
          .ge(1)
          .ddgnn_only());
  add(key(arch + "negative_slope", T::kNumber,
          "GAT: slope of the leaky ReLU in the attention logits (HydraGNN fixes 0.05)")
          .def(0.05)
          .ge(0)
          .ddgnn_only());
  add(key(arch + "max_degree", T::kInt,
          "MFC: atoms with up to this many neighbours get weights of their own, the others "
          "share those of max_degree (HydraGNN passes max_neighbours)")
          .derived_default("max_neighbours")
          .ge(1)
          .ddgnn_only());
  add(key(arch + "num_spherical", T::kInt,
          "DimeNet: spherical harmonics of the angle (with num_radial Bessel functions each)")
          .def(7)
          .ge(2));
  add(key(arch + "basis_emb_size", T::kInt, "DimeNet: width of the basis embedding").def(8).ge(1));
  add(key(arch + "int_emb_size", T::kInt, "DimeNet: width of the triplet messages").def(64).ge(1));
  add(key(arch + "out_emb_size", T::kInt, "DimeNet: width of the output block").def(256).ge(1));
  add(key(arch + "num_before_skip", T::kInt,
          "DimeNet: residual layers before the skip connection of each interaction")
          .def(1)
          .ge(0));
  add(key(arch + "num_after_skip", T::kInt,
          "DimeNet: residual layers after the skip connection of each interaction")
          .def(2)
          .ge(0));
  add(key(arch + "max_triplets", T::kInt,
          "DimeNet: the most triplets (pairs of edges through an atom) a batch may have; more "
          "stops the run with a message instead of exhausting the memory (about 1 KB each at "
          "int_emb_size 64)")
          .def(20000000)
          .ge(1)
          .ddgnn_only());
  add(key(arch + "max_ell", T::kInt,
          "MACE: highest degree of the edges' spherical harmonics and of the messages")
          .def(3)
          .ge(0)
          .le(kMaxMaceEll));
  add(key(arch + "node_max_ell", T::kInt,
          "MACE: highest degree of the node features between layers (at most max_ell)")
          .def(1)
          .ge(0)
          .le(kMaxMaceEll));
  add(key(arch + "correlation", T::kInt,
          "MACE: body order of each layer's product basis (products of up to this many "
          "neighbour sums); HydraGNN's list form takes its first entry for every layer")
          .def(2)
          .ge(1)
          .le(3));
  add(key(arch + "radial_type", T::kEnum, "MACE: radial basis of the distances")
          .def("bessel")
          .one_of({"bessel", "gaussian", "chebyshev"}));
  add(key(arch + "distance_transform", T::kEnum, "MACE: transform of the distances")
          .def("None")
          .one_of({"None"})
          .refuses({"Agnesi", "Soft"})
          .with_hint("remove the key: the covalent-radius transforms (Agnesi, Soft) are not "
                     "implemented"));
  add(key(arch + "avg_num_neighbors", T::kNumber,
          "MACE: divisor of the neighbour sums (absent: the mean number of neighbours of the "
          "training set)")
          .gt(0));
}

}  // namespace ddgnn
