// Train / validation / test split of a dataset's graphs: deterministic in (n_graphs, perc_train,
// seed) on every platform (own Fisher–Yates on std::mt19937_64, not std::shuffle, whose
// algorithm the standard leaves open). HydraGNN's rule: perc_train for training, the rest
// halved between validation and test.
#pragma once

#include <cstdint>
#include <vector>

namespace ddgnn {

struct Split {
  std::vector<int64_t> train, validate, test;  // graph indices, each list sorted ascending
};

// Throws ConfigError when perc_train is not in (0, 1) and DataError when a part would be empty.
Split split_graphs(int64_t n_graphs, double perc_train, uint64_t seed);

// A seeded permutation of 0..n-1 (Fisher–Yates, unbiased bounded integers by rejection).
std::vector<int64_t> permutation(int64_t n, uint64_t seed);

}  // namespace ddgnn
