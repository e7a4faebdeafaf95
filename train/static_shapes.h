// Static shapes for training (Loader.static_shapes): the few fixed batch shapes (model/pad_batch.h)
// chosen from the training set at start-up, and the padding of a step's batch into the smallest
// one it fits. A batch that fits none runs as it is (counted per epoch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/pad_batch.h"

namespace ddgnn {

struct TrainSettings;
struct ModelSetup;
class TrainData;

struct StaticShapes {
  std::vector<ShapeBucket> buckets;  // ascending
  PadOptions pad;
  // From the simulated batches the buckets were chosen on: the share that fits a bucket, and the
  // atoms and edges of the shapes over those of the batches (padding's cost), for the log.
  double fit_share = 0.0, atom_overhead = 0.0, edge_overhead = 0.0;
};

// Shapes for the batches that training draws: the sizes (atoms, edges, DimeNet's triplets) of up to
// 2048 training graphs spread over the split, their most atoms of one graph and most neighbours of
// one atom, then batches of Training.batch_size graphs (or Loader.atom_budget atoms) drawn from
// them at random, sorted by atoms and cut into Loader.static_buckets groups; each group's shape
// holds its largest batch with room for the padding. Identical on every rank (collective over the
// data's ranks).
StaticShapes choose_static_shapes(const TrainSettings& settings, const TrainData& data,
                                  const ModelSetup& setup);

// "3 shapes: [...]; 99.8% of sampled batches fit, padding adds 6% atoms and 4% edges".
std::string describe(const StaticShapes& shapes);

}  // namespace ddgnn
