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

#include <array>
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

// Which part of a split each graph of a file is in (train 0, validate 1, test 2, none 3: left
// out by train_fraction), 2 bits a graph, with each part's count before every block of 512
// graphs: a part's k-th graph (ascending ids, as Split's lists) in O(log N + 512) steps, in 0.3
// bytes a graph instead of the lists' 8 (154 M graphs: 46 MB on every rank, not 1.2 GB).
class SplitMap {
 public:
  static constexpr int kNone = 3;
  SplitMap() = default;
  // The parts of `split`'s lists, of a file of n_graphs; a graph in no list is kNone.
  SplitMap(const Split& split, int64_t n_graphs);
  int64_t n_graphs() const { return m_n; }
  int64_t size(int part) const { return m_size[size_t(part)]; }
  int part_of(int64_t id) const { return int((m_words[size_t(id >> 5)] >> (2 * (id & 31))) & 3); }
  // The graph at `position` (0 .. size(part) - 1) of `part`; Error when out of range.
  int64_t id(int part, int64_t position) const;
  // The bytes it holds.
  int64_t bytes() const;

 private:
  static constexpr int kBlockWords = 16;  // 512 graphs
  int64_t m_n = 0;
  std::array<int64_t, 3> m_size{};
  std::vector<uint64_t> m_words;                 // 32 graphs a word; past n_graphs: kNone
  std::vector<std::array<int64_t, 3>> m_before;  // each part's graphs before each block
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
