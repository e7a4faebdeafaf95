// Train / validation / test split of a dataset's graphs: deterministic in (n_graphs, options) on
// every platform (own Fisher–Yates on std::mt19937_64, not std::shuffle, whose algorithm the
// standard leaves open). HydraGNN's rule: perc_train for training, the rest halved between
// validation and test. By frame, each graph is a unit; by block, runs of `block` consecutive
// graphs; by group, the graphs of one group id. Units are shuffled with the seed and dealt in
// that order: to training until it holds round(perc_train * n_graphs) graphs or more, then to
// validation until it holds half of the rest, then to test. By composition (stratified), each
// graph is a unit and the quotas hold within each composition (the count of each element):
// round(perc_train * n) of its n graphs to training, half of the rest to validation, the rest to
// test, dealt in the order of one seeded permutation of all graphs. With train_fraction below 1,
// training keeps the first round(train_fraction * units) of the units dealt to it, in the dealt
// order (by composition: of each composition's training graphs), and drops the rest; validation
// and test are those of the full split, and a smaller fraction's training graphs are among a
// larger's (a learning curve against training-set size). Unlike HydraGNN's
// compositional_stratified_splitting, a composition with too few graphs for every part is not
// copied into the parts it lacks (a copy in two parts would test on training graphs).
#pragma once

#include <cstdint>
#include <vector>

#include "core/split_by.h"

namespace ddgnn {

struct Split {
  std::vector<int64_t> train, validate, test;  // graph indices, each list sorted ascending
  std::array<int64_t, 3> units{};              // units (frames, blocks, groups) in each part
  int64_t n_units = 0;
  int64_t train_dropped = 0;  // training graphs left out by train_fraction
};

struct SplitOptions {
  double perc_train = 0.7;
  uint64_t seed = 0;
  SplitBy by = SplitBy::kFrame;
  int64_t block = 100;          // graphs per block (SplitBy::kBlock)
  double train_fraction = 1.0;  // of the training units kept, in (0, 1]
};

// `groups` [n_graphs]: each graph's group (SplitBy::kGroup) or composition (SplitBy::kComposition,
// any id per distinct composition); unused otherwise. Throws ConfigError when
// perc_train is not in (0, 1), train_fraction not in (0, 1] or block < 1, and DataError when a part
// would be empty (too few units), naming the counts.
Split split_graphs(int64_t n_graphs, const SplitOptions& options,
                   const std::vector<int32_t>& groups = {});
// By frame.
Split split_graphs(int64_t n_graphs, double perc_train, uint64_t seed);

class Dataset;
// The split of a dataset file, its group ids (config_type) read when splitting by group, its
// atomic numbers when splitting by composition.
Split split_dataset(const Dataset& dataset, const SplitOptions& options);

// A seeded permutation of 0..n-1 (Fisher–Yates, unbiased bounded integers by rejection).
std::vector<int64_t> permutation(int64_t n, uint64_t seed);

// Each graph's composition as an id [n_graphs]: graphs with the same count of each element share
// one, numbered in order of first appearance.
std::vector<int32_t> composition_ids(const Dataset& dataset);

}  // namespace ddgnn
