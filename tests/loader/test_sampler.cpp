// The distributed sampler: over every (n, batch, ranks) tried, each rank gets the same number of
// steps and the ranks' batches together hold every sample exactly once per epoch; the remainder
// is dealt out evenly; the order is a function of (seed, epoch) only; drop_remainder drops the
// last short step everywhere. The atom-budget sampler keeps each step under the budget, deals a
// step's samples so that the ranks' atoms are balanced, and equals the budget cuts on one rank.
// Packed records round-trip a GraphBlock exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "../common/lj_dataset.h"
#include "../common/temp_dir.h"
#include "core/error.h"
#include "loader/packed.h"
#include "loader/sampler.h"

namespace ddgnn {
namespace {

TEST(Sampler, EverySampleOnceEqualStepsEvenRemainder) {
  for (int64_t n : {0, 1, 5, 37, 64, 100})
    for (int64_t b : {1, 3, 8})
      for (int p : {1, 2, 3, 4, 7}) {
        SamplerOptions o;
        o.n_samples = n;
        o.batch_size = b;
        o.world = p;
        o.seed = 9;
        std::vector<int64_t> all;
        for (int r = 0; r < p; ++r) {
          o.rank = r;
          const auto batches = sampler_epoch(o, 3);
          ASSERT_EQ(int64_t(batches.size()), sampler_steps(o));
          EXPECT_EQ(int64_t(batches.size()), (n + b * p - 1) / (b * p));
          for (size_t s = 0; s < batches.size(); ++s) {
            const int64_t size = int64_t(batches[s].size());
            if (s + 1 < batches.size())
              EXPECT_EQ(size, b);
            else
              EXPECT_LE(size, b);
            all.insert(all.end(), batches[s].begin(), batches[s].end());
          }
          // The last step's sizes differ by at most one between ranks.
          if (!batches.empty()) {
            const int64_t rem = n - (int64_t(batches.size()) - 1) * b * p;
            const int64_t last = int64_t(batches.back().size());
            EXPECT_TRUE(last == rem / p || last == rem / p + 1) << n << " " << b << " " << p;
          }
        }
        std::sort(all.begin(), all.end());
        std::vector<int64_t> expected(static_cast<size_t>(n));
        std::iota(expected.begin(), expected.end(), int64_t(0));
        EXPECT_EQ(all, expected) << "n " << n << " batch " << b << " ranks " << p;
      }
}

TEST(Sampler, DeterministicPerEpochAndDropRemainder) {
  SamplerOptions o;
  o.n_samples = 50;
  o.batch_size = 4;
  o.world = 3;
  o.rank = 1;
  o.seed = 2;
  EXPECT_EQ(sampler_epoch(o, 4), sampler_epoch(o, 4));
  EXPECT_NE(sampler_epoch(o, 4), sampler_epoch(o, 5));
  o.shuffle = false;
  EXPECT_EQ(sampler_epoch(o, 1)[0], (std::vector<int64_t>{4, 5, 6, 7}));
  o.drop_remainder = true;
  EXPECT_EQ(sampler_steps(o), 4);  // 50 / 12
  for (const auto& batch : sampler_epoch(o, 1)) EXPECT_EQ(batch.size(), 4u);
  o.rank = 3;
  EXPECT_THROW(sampler_steps(o), Error);
}

// The epoch's order, one index at a time: a bijection of 0..n-1 for every n (powers of 4 and
// their neighbours too), a function of the seed, and a shuffle (no fixed structure left: few
// fixed points, the first half's ids spread over the whole range).
TEST(IndexPermutation, ABijectionForEveryNThatShuffles) {
  for (int64_t n : {0, 1, 2, 3, 4, 5, 15, 16, 17, 63, 64, 65, 1000, 4096, 4097, 100003}) {
    const IndexPermutation p(n, 17);
    std::vector<int64_t> seen(size_t(n), 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = p(i);
      ASSERT_GE(v, 0);
      ASSERT_LT(v, n);
      ++seen[size_t(v)];
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), n) << n;
  }
  const int64_t n = 100000;
  const IndexPermutation a(n, 1), b(n, 1), c(n, 2);
  int64_t same = 0, fixed = 0, low = 0;
  for (int64_t i = 0; i < n; ++i) {
    same += a(i) == c(i);
    fixed += a(i) == i;
    low += i < n / 2 && a(i) < n / 2;
    EXPECT_EQ(a(i), b(i));
  }
  EXPECT_LT(same, 100);   // another seed, another order (about 1 in n alike by chance)
  EXPECT_LT(fixed, 100);  // a shuffle: about one fixed point
  EXPECT_NEAR(double(low) / (n / 4), 1.0, 0.05);  // half of the first half lands in each half
}

TEST(SamplerBalanced, BudgetRespectedAtomsBalancedEverySampleOnce) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> graph_atoms(3, 60);
  for (int64_t n : {1, 7, 100, 333})
    for (int p : {1, 2, 3, 4}) {
      std::vector<uint16_t> atoms(static_cast<size_t>(n));
      for (auto& a : atoms) a = uint16_t(graph_atoms(rng));
      SamplerOptions o;
      o.n_samples = n;
      o.batch_size = 6;
      o.world = p;
      o.seed = 4;
      const int64_t budget = 90;  // per rank
      std::vector<std::vector<std::vector<int64_t>>> per_rank;
      for (int r = 0; r < p; ++r) {
        o.rank = r;
        per_rank.push_back(sampler_epoch_balanced(o, atoms, budget, 2));
      }
      std::vector<int64_t> all;
      for (int r = 0; r < p; ++r) ASSERT_EQ(per_rank[size_t(r)].size(), per_rank[0].size());
      double worst_imbalance = 0.0;
      for (size_t s = 0; s < per_rank[0].size(); ++s) {
        int64_t step_atoms = 0, step_samples = 0, most = 0, least = INT64_MAX;
        for (int r = 0; r < p; ++r) {
          int64_t a = 0;
          for (int64_t id : per_rank[size_t(r)][s]) a += atoms[size_t(id)];
          step_atoms += a;
          step_samples += int64_t(per_rank[size_t(r)][s].size());
          most = std::max(most, a);
          least = std::min(least, a);
          all.insert(all.end(), per_rank[size_t(r)][s].begin(), per_rank[size_t(r)][s].end());
        }
        EXPECT_LE(step_samples, o.batch_size * p);
        if (step_samples > 1) {
          EXPECT_LE(step_atoms, budget * p);
        }
        // Longest first to the least loaded: no rank exceeds another by more than one sample.
        if (step_samples >= p) {
          EXPECT_LE(most - least, 60) << n << " " << p << " step " << s;
        }
        if (step_samples >= 2 * p)
          worst_imbalance = std::max(worst_imbalance, double(most) / double(step_atoms / p));
      }
      if (p > 1 && n >= 100) {
        EXPECT_LT(worst_imbalance, 1.5) << n << " " << p;
      }
      std::sort(all.begin(), all.end());
      std::vector<int64_t> expected(static_cast<size_t>(n));
      std::iota(expected.begin(), expected.end(), int64_t(0));
      EXPECT_EQ(all, expected) << n << " " << p;
    }
}

TEST(SamplerBalanced, OneRankIsTheBudgetCutsOfTheEpochOrder) {
  const std::vector<uint16_t> atoms = {5, 5, 5, 20, 5, 5, 30, 1};
  SamplerOptions o;
  o.n_samples = 8;
  o.batch_size = 3;
  o.shuffle = false;
  const auto batches = sampler_epoch_balanced(o, atoms, 12, 1);
  // [5,5] (a third would pass 12), [5], [20] (alone: over the budget), [5,5], [30], [1]
  const std::vector<std::vector<int64_t>> expected = {{0, 1}, {2}, {3}, {4, 5}, {6}, {7}};
  EXPECT_EQ(batches, expected);
  o.drop_remainder = true;
  EXPECT_EQ(sampler_epoch_balanced(o, atoms, 0, 1).size(), 2u);  // 8 / 3: the short step dropped
  EXPECT_THROW(sampler_epoch_balanced(o, {1, 2}, 12, 1), Error);
}

TEST(Packed, RecordsRoundTripAGraphBlock) {
  testing::TempDir dir;
  testing::LjOptions lo;
  lo.n_frames = 9;
  lo.charges = true;
  lo.gap = true;
  lo.periodic = true;
  lo.single_atom_frame = 4;
  testing::write_lj_dataset(dir.file("d.h5"), lo);
  const Dataset ds(dir.file("d.h5"));
  const GraphBlock b = ds.read(2, 6);
  std::vector<uint8_t> bytes;
  const std::vector<int64_t> off = pack_records(b, bytes);
  const GraphBlock u =
      unpack_records(bytes.data(), off.data(), 6, ds.extra_columns(), ds.graph_columns());
  EXPECT_EQ(u.n_atoms, b.n_atoms);
  EXPECT_EQ(u.atom_start, b.atom_start);
  EXPECT_EQ(u.energy, b.energy);
  EXPECT_EQ(u.cell, b.cell);
  EXPECT_EQ(u.pbc, b.pbc);
  EXPECT_EQ(u.z, b.z);
  EXPECT_EQ(u.pos, b.pos);
  EXPECT_EQ(u.forces, b.forces);
  EXPECT_EQ(u.stress, b.stress);
  EXPECT_EQ(u.extra, b.extra);
  ASSERT_EQ(b.graph_extra.size(), 1u);
  EXPECT_EQ(b.graph_extra[0].size(), 12u);  // "gap": two numbers a graph
  EXPECT_EQ(u.graph_extra, b.graph_extra);
  // A record cut short is named.
  std::vector<int64_t> bad = off;
  bad[3] -= 8;
  try {
    unpack_records(bytes.data(), bad.data(), 6, ds.extra_columns(), ds.graph_columns());
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("record 3 of 6"), std::string::npos) << e.what();
  }
  const auto refused = [&](const std::vector<uint8_t>& b, const std::vector<ColumnInfo>& extra,
                           const std::string& needle) {
    try {
      unpack_records(b.data(), off.data(), 6, extra, ds.graph_columns());
      ADD_FAILURE() << "no error: " << needle;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // Records of a dataset with other columns (here a per-atom column more than the decoder is
  // told of): the record does not end where its arrays do.
  refused(bytes, {}, "record 1 of 6: ");
  refused(bytes, {}, " bytes left after its last array");
  // A damaged encoding byte: record 2's energy, after its header and atomic numbers
  // (neon and argon: a palette of 2, one bit an atom, where that is smaller than a byte an atom).
  const int64_t na = b.n_atoms[1];
  const bool palette = 1 + 2 + (na + 7) / 8 < na;
  ASSERT_EQ((bytes[size_t(off[1] + 8)] & 16) != 0, palette);
  std::vector<uint8_t> damaged = bytes;
  damaged[size_t(off[1] + kRecordHeaderBytes + (palette ? 1 + 2 + (na + 7) / 8 : na))] = 9;
  refused(damaged, ds.extra_columns(), "record 2 of 6: encoded array: unknown encoding 9");
}

TEST(Packed, AtomicNumbersTakeAPaletteWhereThatIsSmallerAndComeBackExactly) {
  // One graph per case: a one-element crystal, two elements, seven, a mixture whose palette
  // would not pay, and a single atom.
  const std::vector<std::vector<uint8_t>> cases = {
      std::vector<uint8_t>(64, 14),
      {29, 28, 28, 29, 29, 29, 28, 28, 29, 28, 29, 28, 28, 28, 29, 29, 28},
      {6, 1, 1, 1, 8, 1, 7, 9, 16, 17, 6, 6, 1, 1, 8, 7, 1, 1, 16, 1},
      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17},
      {79}};
  // Bytes of each record's atomic numbers: 1 + k + ceil(n bits / 8) as a palette, n raw.
  const std::vector<int64_t> z_bytes = {2, 1 + 2 + 3, 1 + 7 + 8, 17, 1};
  GraphBlock b;
  b.first = 0;
  for (const auto& z : cases) {
    b.atom_start.push_back(int64_t(b.z.size()));
    b.n_atoms.push_back(int32_t(z.size()));
    b.z.insert(b.z.end(), z.begin(), z.end());
  }
  const size_t n = cases.size();
  b.energy.assign(n, -1.0);
  b.cell.assign(9 * n, 0.0);
  b.pbc.assign(3 * n, 0);
  b.stress.assign(9 * n, 0.0);
  b.config_type.assign(n, 0);
  b.pos.assign(3 * b.z.size(), 0.5);
  std::vector<uint8_t> bytes;
  const std::vector<int64_t> off = pack_records(b, bytes);
  for (size_t g = 0; g < n; ++g) {
    // header, atomic numbers, energy, stress, positions: each array 9 bytes (constant); the
    // zero cell takes none
    EXPECT_EQ(off[g + 1] - off[g], kRecordHeaderBytes + z_bytes[g] + 3 * 9) << "graph " << g;
    EXPECT_EQ((bytes[size_t(off[g] + 8)] & 16) != 0, z_bytes[g] < int64_t(cases[g].size()));
  }
  EXPECT_EQ(unpack_records(bytes.data(), off.data(), int64_t(n), {}, {}).z, b.z);
  // Float64-as-is records keep the atomic numbers as they are.
  std::vector<uint8_t> raw;
  const std::vector<int64_t> raw_off = pack_records(b, raw, false);
  for (size_t g = 0; g < n; ++g) EXPECT_EQ(raw[size_t(raw_off[g] + 8)] & 16, 0) << "graph " << g;
  EXPECT_EQ(unpack_records(raw.data(), raw_off.data(), int64_t(n), {}, {}).z, b.z);
  // Damaged palettes are named, never read past (record 3: 7 values, 3 bits an atom).
  const auto refused = [&](size_t at, uint8_t value, const std::string& needle) {
    std::vector<uint8_t> d = bytes;
    d[at] = value;
    try {
      unpack_records(d.data(), off.data(), int64_t(n), {}, {});
      ADD_FAILURE() << "no error: " << needle;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const size_t z3 = size_t(off[2] + kRecordHeaderBytes);
  refused(z3, 0, "record 3 of 5: its 20 atomic numbers have a palette of 0 values");
  refused(z3, 40, "record 3 of 5: its 20 atomic numbers run past its end");
  refused(z3 + 2, 1, "not increasing atomic numbers");
  refused(z3 + 8, 0xFF, "index 7 past a palette of 7");
}

TEST(Packed, RecordsOfTextBornValuesAreUnderHalfTheirFloat64sAndComeBackBitForBit) {
  // Positions and forces as an extxyz file gives them: a few decimals.
  GraphBlock b;
  b.first = 0;
  b.n_atoms = {3, 2};
  b.atom_start = {0, 3};
  b.energy = {-12.34567, -8.5};
  b.cell.assign(18, 0.0);
  b.pbc.assign(6, 0);
  b.stress.assign(18, std::nan(""));
  b.config_type = {0, 0};
  b.z = {8, 1, 1, 6, 6};
  b.pos = {0.0,      0.0, 0.11730, 0.0, 0.75720, -0.46920, 0.0,    -0.75720,
           -0.46920, 0.0, 0.0,     0.0, 0.0,     0.0,      1.20300};
  b.forces = {0.012345, -0.000120, 0.5,    -0.25,     1.0e-6,  -3.141593, 0.1,    0.2,
              0.3,      -0.4,      0.5625, -0.000001, 2.71828, 0.0,       -0.0625};
  std::vector<uint8_t> bytes;
  const std::vector<int64_t> off = pack_records(b, bytes);
  EXPECT_LT(off[1], raw_record_bytes(3, true, 0, 0) / 2);
  const GraphBlock u = unpack_records(bytes.data(), off.data(), 2, {}, {});
  EXPECT_EQ(u.pos, b.pos);
  EXPECT_EQ(u.forces, b.forces);
  EXPECT_EQ(u.energy, b.energy);
  EXPECT_EQ(u.z, b.z);
  for (double s : u.stress) EXPECT_TRUE(std::isnan(s));  // "no stress" stays NaN
  // A molecule's zero cell and its stress of NaN (none) take no bytes, the header says so; only
  // those exact bits: a cell of -0.0 and a stress of another NaN are kept as they are, nine
  // bytes each (one constant).
  const auto bits = [](double v) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    return u;
  };
  std::fill_n(&b.cell[9], 9, -0.0);
  const uint64_t payload = bits(std::nan("")) | 1;
  for (int k = 9; k < 18; ++k) std::memcpy(&b.stress[size_t(k)], &payload, 8);
  bytes.clear();
  const std::vector<int64_t> off2 = pack_records(b, bytes);
  EXPECT_EQ(off2[1], off[1]);
  EXPECT_EQ(off2[2] - off2[1], off[2] - off[1] + 2 * 9);
  const GraphBlock v = unpack_records(bytes.data(), off2.data(), 2, {}, {});
  for (size_t k = 0; k < 18; ++k) {
    EXPECT_EQ(bits(v.cell[k]), bits(b.cell[k])) << k;
    EXPECT_EQ(bits(v.stress[k]), bits(b.stress[k])) << k;
  }
}

}  // namespace
}  // namespace ddgnn
