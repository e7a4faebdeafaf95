// Factories of the built-in message-passing layers, one file each under model/layers/; the
// registry (model/layer.cpp) lists them by their HydraGNN `mpnn_type` names.
#pragma once

#include <memory>

#include "model/layer.h"

namespace ddgnn {

// (Each layer's file adds its factory here, e.g.
//  std::shared_ptr<MessagePassing> make_schnet(const LayerSpec& spec);)

// model/layers/schnet.cpp: SchNet interaction block (continuous-filter convolution).
std::shared_ptr<MessagePassing> make_schnet(const LayerSpec& spec);
// model/layers/egnn.cpp: EGNN (invariant, or equivariant with spec.equivariance).
std::shared_ptr<MessagePassing> make_egnn(const LayerSpec& spec);
// model/layers/cgcnn.cpp: CGCNN (CGConv).
std::shared_ptr<MessagePassing> make_cgcnn(const LayerSpec& spec);
// model/layers/painn.cpp: PaiNN (equivariant).
std::shared_ptr<MessagePassing> make_painn(const LayerSpec& spec);
// model/layers/gin.cpp: GIN.
std::shared_ptr<MessagePassing> make_gin(const LayerSpec& spec);
// model/layers/pna.cpp: PNA, and PNAPlus (PNA with DimeNet's radial basis).
std::shared_ptr<MessagePassing> make_pna(const LayerSpec& spec);
std::shared_ptr<MessagePassing> make_pna_plus(const LayerSpec& spec);
// model/layers/pna_eq.cpp: PNAEq (PaiNN with PNA's aggregation of the scalar messages).
std::shared_ptr<MessagePassing> make_pna_eq(const LayerSpec& spec);
// model/layers/mace.cpp: MACE (equivariant many-body, spherical-tensor features).
std::shared_ptr<MessagePassing> make_mace(const LayerSpec& spec);
// model/layers/dimenet.cpp: DimeNet++ (triplets of the radius graph, angular basis).
std::shared_ptr<MessagePassing> make_dimenet(const LayerSpec& spec);
// model/layers/gat.cpp: GAT (GATv2 attention, heads averaged, distances in the logits).
std::shared_ptr<MessagePassing> make_gat(const LayerSpec& spec);
// model/layers/sage.cpp: GraphSAGE (SAGEConv, mean aggregation).
std::shared_ptr<MessagePassing> make_sage(const LayerSpec& spec);
// model/layers/mfc.cpp: MFC (MFConv, degree-specific weights).
std::shared_ptr<MessagePassing> make_mfc(const LayerSpec& spec);

}  // namespace ddgnn
