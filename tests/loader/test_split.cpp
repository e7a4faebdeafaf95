// The train / validation / test split: a partition, sizes by HydraGNN's rule, deterministic and
// seed-dependent, with a fixed reference so a change of algorithm cannot pass unnoticed; by
// block, group and composition; the training part thinned by train_fraction.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <set>

#include "../common/lj_dataset.h"
#include "../common/temp_dir.h"
#include "core/error.h"
#include "loader/dataset.h"
#include "loader/split.h"

namespace ddgnn {

TEST(Split, IsAPartitionWithHydraGnnSizes) {
  const Split s = split_graphs(2000, 0.8, 7);
  EXPECT_EQ(s.train.size(), 1600u);
  EXPECT_EQ(s.validate.size(), 200u);
  EXPECT_EQ(s.test.size(), 200u);
  std::set<int64_t> all(s.train.begin(), s.train.end());
  all.insert(s.validate.begin(), s.validate.end());
  all.insert(s.test.begin(), s.test.end());
  EXPECT_EQ(all.size(), 2000u);
  EXPECT_EQ(*all.begin(), 0);
  EXPECT_EQ(*all.rbegin(), 1999);
  const Split odd = split_graphs(11, 0.7, 1);  // 8 train, the other 3 halved: 1 and 2
  EXPECT_EQ(odd.train.size(), 8u);
  EXPECT_EQ(odd.validate.size(), 1u);
  EXPECT_EQ(odd.test.size(), 2u);
}

TEST(Split, DeterministicAndSeedDependent) {
  EXPECT_EQ(split_graphs(500, 0.8, 42).test, split_graphs(500, 0.8, 42).test);
  EXPECT_NE(split_graphs(500, 0.8, 42).test, split_graphs(500, 0.8, 43).test);
}

TEST(Split, PermutationMatchesFixedReference) {
  // Fisher–Yates on std::mt19937_64 (whose output the standard fixes): the same on every
  // platform. Reference computed once with this implementation; a change here changes splits.
  // Pinned from this implementation (2026-11-22); if it changes, every split changes.
  EXPECT_EQ(permutation(10, 2024), (std::vector<int64_t>{1, 3, 6, 0, 2, 8, 7, 5, 9, 4}));
  const std::vector<int64_t> big = permutation(100000, 5);
  std::vector<int64_t> sorted = big;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(100000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
}

// The map answers what the lists did: every position of every part, for sizes around its words
// (32 graphs) and blocks (512), with training graphs left out by train_fraction in no part; in
// under 0.35 bytes a graph.
TEST(SplitMap, GivesEachPartsGraphsInTheListsOrder) {
  for (int64_t n : {10, 31, 32, 33, 511, 512, 513, 5000, 100000}) {
    SplitOptions o;
    o.perc_train = 0.7;
    o.seed = uint64_t(n);
    o.train_fraction = n % 2 ? 0.5 : 1.0;
    const Split split = split_graphs(n, o);
    const SplitMap map(split, n);
    const std::vector<int64_t>* lists[3] = {&split.train, &split.validate, &split.test};
    int64_t in_parts = 0;
    for (int part = 0; part < 3; ++part) {
      ASSERT_EQ(map.size(part), int64_t(lists[part]->size())) << n;
      for (size_t k = 0; k < lists[part]->size(); ++k) {
        ASSERT_EQ(map.id(part, int64_t(k)), (*lists[part])[k]) << n << " part " << part;
        ASSERT_EQ(map.part_of((*lists[part])[k]), part);
      }
      EXPECT_THROW(map.id(part, map.size(part)), Error);
      in_parts += map.size(part);
    }
    EXPECT_EQ(in_parts + split.train_dropped, n);
    int64_t none = 0;
    for (int64_t g = 0; g < n; ++g) none += map.part_of(g) == SplitMap::kNone;
    EXPECT_EQ(none, split.train_dropped) << n;
    if (n >= 5000) {
      EXPECT_LT(double(map.bytes()) / double(n), 0.35) << n;
    }
  }
  Split twice;
  twice.train = {0, 1};
  twice.test = {1};
  EXPECT_THROW(SplitMap(twice, 4), Error);
}

TEST(Split, BadFractionAndTooFewGraphs) {
  EXPECT_THROW(split_graphs(100, 1.0, 1), ConfigError);
  EXPECT_THROW(split_graphs(100, 0.0, 1), ConfigError);
  try {
    split_graphs(3, 0.8, 1);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("leaves an empty part"), std::string::npos);
  }
}

// The part (0 train, 1 validate, 2 test) of every graph.
std::vector<int> parts(const Split& s, int64_t n) {
  std::vector<int> part(size_t(n), -1);
  for (int k = 0; k < 3; ++k)
    for (int64_t g : k == 0 ? s.train : k == 1 ? s.validate : s.test) {
      EXPECT_EQ(part[size_t(g)], -1) << "graph " << g << " in two parts";
      part[size_t(g)] = k;
    }
  for (int64_t g = 0; g < n; ++g) EXPECT_NE(part[size_t(g)], -1) << "graph " << g << " in none";
  return part;
}

TEST(Split, ByFrameIsTheFrameSplitWithUnitCounts) {
  const Split a = split_graphs(500, 0.8, 42);
  const Split b = split_graphs(500, SplitOptions{0.8, 42, SplitBy::kFrame, 7});
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.validate, b.validate);
  EXPECT_EQ(a.test, b.test);
  EXPECT_EQ(b.units, (std::array<int64_t, 3>{400, 50, 50}));
  EXPECT_EQ(b.n_units, 500);
}

TEST(Split, ByBlockKeepsEveryBlockWholeAndTheSizesNearTheRule) {
  // 1003 frames in blocks of 50: 20 whole blocks and a last one of 3.
  const int64_t n = 1003;
  const Split s = split_graphs(n, SplitOptions{0.8, 3, SplitBy::kBlock, 50});
  const std::vector<int> part = parts(s, n);
  for (int64_t g = 0; g < n; ++g) EXPECT_EQ(part[size_t(g)], part[size_t(g / 50 * 50)]) << g;
  EXPECT_EQ(s.n_units, 21);
  EXPECT_EQ(s.units[0] + s.units[1] + s.units[2], 21);
  // Training reaches round(0.8 n) = 802 with its last block; validation half of the rest.
  EXPECT_GE(int64_t(s.train.size()), 802);
  EXPECT_LT(int64_t(s.train.size()), 802 + 50);
  EXPECT_GE(int64_t(s.validate.size()), (n - 802) / 2);
  EXPECT_FALSE(s.test.empty());
  // Deterministic, seed-dependent.
  EXPECT_EQ(split_graphs(n, SplitOptions{0.8, 3, SplitBy::kBlock, 50}).test, s.test);
  EXPECT_NE(split_graphs(n, SplitOptions{0.8, 4, SplitBy::kBlock, 50}).test, s.test);
}

TEST(Split, ByGroupKeepsEveryGroupInOnePart) {
  // 600 graphs of 60 groups (ids interleaved, as frames of molecules written in any order).
  const int64_t n = 600;
  std::vector<int32_t> group(static_cast<size_t>(n));
  for (int64_t g = 0; g < n; ++g) group[size_t(g)] = int32_t((g * 7) % 60);
  const Split s = split_graphs(n, SplitOptions{0.8, 11, SplitBy::kGroup, 1}, group);
  const std::vector<int> part = parts(s, n);
  std::vector<int> part_of_group(60, -1);
  for (int64_t g = 0; g < n; ++g) {
    int& p = part_of_group[size_t(group[size_t(g)])];
    if (p == -1) p = part[size_t(g)];
    EXPECT_EQ(p, part[size_t(g)]) << "group " << group[size_t(g)] << " split";
  }
  EXPECT_EQ(s.n_units, 60);
  EXPECT_EQ(s.units, (std::array<int64_t, 3>{48, 6, 6}));  // groups of 10 graphs each
}

TEST(Split, ByCompositionSplitsEveryCompositionInTheSameProportions) {
  // 300 graphs of three compositions, 210, 60 and 30 graphs, interleaved.
  const int64_t n = 300;
  std::vector<int32_t> composition(static_cast<size_t>(n));
  for (int64_t g = 0; g < n; ++g) composition[size_t(g)] = g % 10 < 2 ? 1 : g % 10 == 2 ? 2 : 0;
  const Split s = split_graphs(n, SplitOptions{0.8, 5, SplitBy::kComposition, 1}, composition);
  const std::vector<int> part = parts(s, n);
  std::array<std::array<int64_t, 3>, 3> count{};
  for (int64_t g = 0; g < n; ++g) ++count[size_t(composition[size_t(g)])][size_t(part[size_t(g)])];
  EXPECT_EQ(count[0], (std::array<int64_t, 3>{168, 21, 21}));  // round(0.8 n), half the rest each
  EXPECT_EQ(count[1], (std::array<int64_t, 3>{48, 6, 6}));
  EXPECT_EQ(count[2], (std::array<int64_t, 3>{24, 3, 3}));
  EXPECT_EQ(s.units, (std::array<int64_t, 3>{240, 30, 30}));  // every graph a unit
  EXPECT_EQ(split_graphs(n, SplitOptions{0.8, 5, SplitBy::kComposition, 1}, composition).test,
            s.test);
  EXPECT_NE(split_graphs(n, SplitOptions{0.8, 6, SplitBy::kComposition, 1}, composition).test,
            s.test);
  // Compositions too small for three parts leave one empty: an error that says why.
  try {
    split_graphs(6, SplitOptions{0.7, 1, SplitBy::kComposition, 1}, {0, 1, 0, 1, 0, 1});
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("(2 compositions)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.hint()).find("each composition"), std::string::npos) << e.hint();
  }
}

TEST(Split, CompositionIdsOfADatasetCountEachElement) {
  testing::TempDir dir;
  testing::LjOptions o;
  o.n_frames = 12;
  o.vary_atoms = 2;  // 6, 7, 8 atoms, repeated: Ne2Ar4, Ne3Ar4, Ne3Ar5
  testing::write_lj_dataset(dir.file("lj.h5"), o);
  const Dataset ds(dir.file("lj.h5"));
  EXPECT_EQ(composition_ids(ds), (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}));
  const Split s = split_dataset(ds, SplitOptions{0.5, 2, SplitBy::kComposition, 1});
  EXPECT_EQ(s.train.size(), 6u);  // 2 of each composition's 4
  EXPECT_EQ(s.validate.size(), 3u);
  EXPECT_EQ(s.test.size(), 3u);
}

TEST(Split, TrainFractionThinsTrainingByWholeNestedUnitsAndLeavesValidationAndTestAlone) {
  // 600 graphs of 60 groups of 10, interleaved.
  const int64_t n = 600;
  std::vector<int32_t> group(static_cast<size_t>(n));
  for (int64_t g = 0; g < n; ++g) group[size_t(g)] = int32_t((g * 7) % 60);
  const auto split = [&](double fraction, SplitBy by) {
    SplitOptions o{0.8, 11, by, 20};
    o.train_fraction = fraction;
    return split_graphs(n, o, by == SplitBy::kBlock ? std::vector<int32_t>{} : group);
  };
  for (const SplitBy by :
       {SplitBy::kGroup, SplitBy::kBlock, SplitBy::kFrame, SplitBy::kComposition}) {
    const Split all = split(1.0, by), half = split(0.5, by), quarter = split(0.25, by);
    SCOPED_TRACE(to_string(by));
    EXPECT_EQ(all.train_dropped, 0);
    EXPECT_EQ(half.validate, all.validate);
    EXPECT_EQ(half.test, all.test);
    EXPECT_EQ(quarter.test, all.test);
    // Nested: a quarter within the half within all.
    EXPECT_TRUE(
        std::includes(all.train.begin(), all.train.end(), half.train.begin(), half.train.end()));
    EXPECT_TRUE(std::includes(half.train.begin(), half.train.end(), quarter.train.begin(),
                              quarter.train.end()));
    EXPECT_EQ(int64_t(half.train.size()) + half.train_dropped, int64_t(all.train.size()));
    EXPECT_NEAR(double(half.train.size()), 0.5 * double(all.train.size()),
                by == SplitBy::kBlock ? 20.0 : 10.0);
    EXPECT_NEAR(double(quarter.train.size()), 0.25 * double(all.train.size()),
                by == SplitBy::kBlock ? 20.0 : 10.0);
  }
  // By group, whole groups: 48 training groups, 24 and 12 kept.
  const Split half = split(0.5, SplitBy::kGroup);
  EXPECT_EQ(half.units, (std::array<int64_t, 3>{24, 6, 6}));
  EXPECT_EQ(half.train.size(), 240u);
  std::set<int32_t> kept;
  for (int64_t g : half.train) kept.insert(group[size_t(g)]);
  EXPECT_EQ(kept.size(), 24u);
  // Out of range, and a fraction that keeps nothing.
  EXPECT_THROW(split(0.0, SplitBy::kGroup), ConfigError);
  EXPECT_THROW(split(1.5, SplitBy::kGroup), ConfigError);
  try {
    split(0.001, SplitBy::kGroup);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.hint()).find("raise Dataset.train_fraction"), std::string::npos)
        << e.hint();
  }
}

TEST(Split, ByBlockOrGroupWithTooFewUnitsSaysSo) {
  try {
    split_graphs(100, SplitOptions{0.8, 1, SplitBy::kBlock, 50});  // 2 blocks for 3 parts
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("(2 blocks of 50)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.hint()).find("Dataset.split_block"), std::string::npos) << e.hint();
  }
  EXPECT_THROW(split_graphs(10, SplitOptions{0.8, 1, SplitBy::kGroup, 1},
                            std::vector<int32_t>(10, 0)),  // one group
               DataError);
  EXPECT_THROW(split_graphs(10, SplitOptions{0.8, 1, SplitBy::kBlock, 0}), ConfigError);
  EXPECT_THROW(split_graphs(10, SplitOptions{0.8, 1, SplitBy::kGroup, 1}, {1, 2}), DataError);
}

}  // namespace ddgnn
