// Seeded permutation and the train / validation / test split.
#include "loader/split.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "core/error.h"

namespace ddgnn {

namespace {

// Uniform integer in [0, bound) from a 64-bit engine, by rejection (no modulo bias).
uint64_t bounded(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % bound;
}

}  // namespace

std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = i;
  std::mt19937_64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[size_t(i)], p[bounded(rng, uint64_t(i) + 1)]);
  return p;
}

Split split_graphs(int64_t n_graphs, double perc_train, uint64_t seed) {
  if (!(perc_train > 0.0 && perc_train < 1.0))
    throw ConfigError(
        "NeuralNetwork.Training.perc_train must be in (0, 1), got " + std::to_string(perc_train),
        "e.g. 0.8 keeps 80% for training and splits the rest between validation "
        "and test");
  const int64_t n_train = std::llround(perc_train * double(n_graphs));
  const int64_t n_val = (n_graphs - n_train) / 2;
  const int64_t n_test = n_graphs - n_train - n_val;
  if (n_train < 1 || n_val < 1 || n_test < 1)
    throw DataError("a dataset of " + std::to_string(n_graphs) + " graphs split with perc_train " +
                        std::to_string(perc_train) + " leaves an empty part (train " +
                        std::to_string(n_train) + ", validate " + std::to_string(n_val) +
                        ", test " + std::to_string(n_test) + ")",
                    "use more graphs, another perc_train, or explicit split files "
                    "(Dataset.path {train, validate, test})");
  const std::vector<int64_t> p = permutation(n_graphs, seed);
  Split s;
  s.train.assign(p.begin(), p.begin() + n_train);
  s.validate.assign(p.begin() + n_train, p.begin() + n_train + n_val);
  s.test.assign(p.begin() + n_train + n_val, p.end());
  for (auto* part : {&s.train, &s.validate, &s.test}) std::sort(part->begin(), part->end());
  return s;
}

}  // namespace ddgnn
