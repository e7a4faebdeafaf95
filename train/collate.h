// Collate: graphs held in memory (a loader GraphBlock) -> one model GraphBatch for a list of
// graph ids (gathering their atoms, cells and targets, then building the radius graph).
// Here because it wires loader/ (no torch) to model/ (torch).
#pragma once

#include <cstdint>
#include <vector>

#include "loader/dataset.h"
#include "model/batch.h"

namespace ddgnn {

// ids: indices into `block` (0-based, block-relative), any order, repeats allowed; the batch
// keeps that order. dtype: the model's Float or Double. Targets: energy always, forces when the
// block has them. periodic = false treats every graph as non-periodic (HydraGNN's
// periodic_boundary_conditions false: the cell is ignored). device: where the batch is built (the
// radius graph too, model/batch.h).
GraphBatch collate(const GraphBlock& block, const std::vector<int64_t>& ids,
                   const RadiusGraphOptions& graph_options, c10::ScalarType dtype,
                   bool periodic = true, c10::Device device = c10::Device(c10::kCPU));

}  // namespace ddgnn
