// Outlier frames: an energy per atom far from the median of its composition and config_type (in
// MADs), or, in groups too small for that, far from the set's per-element fit; a force beyond 100
// eV/Å, two atoms closer than 0.1 Å (across a periodic face too); ordinary MD-like data gives none.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "loader/outliers.h"

namespace ddgnn {
namespace {

using ::testing::HasSubstr;

// A periodic Cu4 cell (a = 3.6 Å) with thermal noise, energy -3.5 eV/atom + noise.
Frame cu4(std::mt19937& rng) {
  std::normal_distribution<double> noise(0.0, 0.05), de(0.0, 0.005);
  Frame f;
  const double base[4][3] = {{0, 0, 0}, {1.8, 1.8, 0}, {1.8, 0, 1.8}, {0, 1.8, 1.8}};
  for (const auto& b : base) {
    f.z.push_back(29);
    for (int d = 0; d < 3; ++d) {
      f.pos.push_back(b[d] + noise(rng));
      f.forces.push_back(10 * noise(rng));
    }
  }
  f.has_energy = true;
  f.energy = 4 * (-3.5 + de(rng));
  f.has_cell = true;
  f.cell = {3.6, 0, 0, 0, 3.6, 0, 0, 0, 3.6};
  f.pbc = {true, true, true};
  return f;
}

TEST(Outliers, OrdinaryDataHasNone) {
  std::mt19937 rng(7);
  OutlierScan scan;
  for (int k = 0; k < 500; ++k) scan.add(cu4(rng));
  EXPECT_TRUE(scan.finish().empty());
  EXPECT_EQ(scan.energy_unjudged(), 0);
}

TEST(Outliers, EachKindIsNamedWithItsFrameAndValue) {
  std::mt19937 rng(7);
  OutlierScan scan;
  for (int k = 0; k < 40; ++k) {
    Frame f = cu4(rng);
    if (k == 7) f.energy = 1e10;              // a unit error, or a broken calculation
    if (k == 11) f.forces[7] = 1e30;          // atom 2
    if (k == 13) f.pos[3] = f.pos[0] + 0.01;  // atom 1 onto atom 0
    if (k == 13) f.pos[4] = f.pos[1];
    if (k == 13) f.pos[5] = f.pos[2];
    scan.add(f);
  }
  const auto out = scan.finish();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].graph, 7);
  EXPECT_THAT(out[0].what, HasSubstr("energy 2.5e+09 eV/atom lies"));
  EXPECT_THAT(out[0].what, HasSubstr("MADs from the median -3.49"));
  EXPECT_THAT(out[0].what, HasSubstr("of its Cu4 frames"));
  EXPECT_EQ(out[1].graph, 11);
  EXPECT_THAT(out[1].what, HasSubstr("largest force 1e+30 eV/Å (atom 2) is above 100 eV/Å"));
  EXPECT_EQ(out[2].graph, 13);
  EXPECT_THAT(out[2].what, HasSubstr("atoms 0 and 1 are 0.01 Å apart"));
  EXPECT_THAT(outlier_lines(out, 2), HasSubstr("graph 7: energy"));
  EXPECT_THAT(outlier_lines(out, 2), HasSubstr("... and 1 more"));
}

TEST(Outliers, CloseAtomsAcrossAPeriodicFaceAreFoundAndNotWithoutThePeriodicity) {
  Frame f;
  f.z = {1, 1};
  f.pos = {0.01, 1.0, 1.0, 4.98, 1.0, 1.0};  // 0.03 Å apart through the face x = 0 | 5
  f.has_energy = true;
  f.has_cell = true;
  f.cell = {5, 0, 0, 0, 5, 0, 0, 0, 5};
  f.pbc = {true, false, false};
  ClosePair p = closest_pair_below(f, 0.1);
  EXPECT_NEAR(p.distance, 0.03, 1e-12);
  EXPECT_EQ(p.a, 0);
  EXPECT_EQ(p.b, 1);
  f.pbc = {false, true, true};  // periodic along y and z only: 4.97 Å apart
  EXPECT_EQ(closest_pair_below(f, 0.1).a, -1);
  // A skewed cell: the image lies along the tilted lattice vector.
  f.cell = {5, 0, 0, 2, 5, 0, 0, 0, 5};
  f.pbc = {true, true, true};
  f.pos = {1.0, 0.02, 1.0, 3.0, 4.99, 1.0};  // (1, 0.02) + b - (3, 4.99) = (0, 0.03)
  p = closest_pair_below(f, 0.1);
  EXPECT_NEAR(p.distance, 0.03, 1e-12);
}

// A set of molecules: two isomers (one composition, two config_types) 0.2 eV/atom apart, twenty
// thermal frames each, are no outliers; each is judged against its own frames, and one of them
// 0.2 eV/atom above its isomer's energy is named with its config_type.
TEST(Outliers, IsomersAreJudgedEachAgainstItsOwnFrames) {
  std::mt19937 rng(5);
  OutlierScan scan;
  for (int k = 0; k < 40; ++k) {
    Frame f = cu4(rng);
    f.config_type = k % 2 ? "isomer_b" : "isomer_a";
    if (k % 2) f.energy += 4 * 0.2;
    if (k == 6) f.energy += 4 * 0.2;  // isomer_a at isomer_b's energy: an error
    scan.add(f);
  }
  const auto out = scan.finish();
  ASSERT_EQ(out.size(), 1u) << outlier_lines(out, 5);
  EXPECT_EQ(out[0].graph, 6);
  EXPECT_THAT(out[0].what, HasSubstr("of its Cu4 frames of config_type isomer_a"));
  EXPECT_EQ(scan.energy_unjudged(), 0);
}

TEST(Outliers, SmallCompositionsAreNotJudgedOnEnergy) {
  std::mt19937 rng(3);
  OutlierScan scan;
  for (int k = 0; k < 30; ++k) scan.add(cu4(rng));
  Frame odd = cu4(rng);
  odd.z[0] = 28;       // NiCu3: one frame of its kind
  odd.energy = -50.0;  // far from Cu4's, but nothing to compare with
  scan.add(odd);
  // Five frames of a molecule (as a set of molecules holds): their spread says too little.
  for (int k = 0; k < 5; ++k) {
    Frame f = cu4(rng);
    f.config_type = "five_frames";
    if (k == 2) f.energy += 0.05;
    scan.add(f);
  }
  EXPECT_TRUE(scan.finish().empty());
  EXPECT_EQ(scan.energy_unjudged(), 6);
  // ... but an energy beyond any element's, 10^10 eV, is flagged in a group of one frame.
  Frame absurd = cu4(rng);
  absurd.z[0] = 47;  // AgCu3: alone
  absurd.energy = 1e10;
  scan.add(absurd);
  const std::vector<Outlier> found = scan.finish();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].graph, 36);
  EXPECT_THAT(found[0].what, HasSubstr("eV/atom is beyond any element's"));
}

// A set of molecules: many compositions of C, H, N and O, five frames each, too few for their
// spread. Energies are per-element sums plus a chemistry term of up to 1 eV/atom; a frame in
// hartree instead of eV, and one 30 eV/atom too high, are found by the per-element fit, and no
// other frame is.
TEST(Outliers, FramesTooFewToJudgeBySpreadAreJudgedByThePerElementFit) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> atoms(1, 6);
  std::uniform_real_distribution<double> chemistry(-1.0, 1.0), jitter(-0.02, 0.02);
  const std::map<int, double> mu = {{1, -13.6}, {6, -1030.0}, {7, -1480.0}, {8, -2040.0}};
  OutlierScan scan;
  int64_t hartree = -1, high = -1, g = 0;
  for (int m = 0; m < 60; ++m) {
    Frame base;
    for (const auto& [z, e] : mu)
      for (int k = atoms(rng) - (z == 7 ? 3 : 0); k > 0; --k) base.z.push_back(uint8_t(z));
    double reference = 0;
    for (uint8_t z : base.z) reference += mu.at(z);
    const double per_atom = chemistry(rng);
    for (size_t i = 0; i < base.z.size(); ++i)
      for (int d = 0; d < 3; ++d) base.pos.push_back(1.2 * double(i) + 0.3 * d);
    base.has_energy = true;
    base.config_type = "molecule_" + std::to_string(m);
    for (int k = 0; k < 5; ++k, ++g) {
      Frame f = base;
      const double n = double(f.z.size());
      f.energy = reference + n * (per_atom + jitter(rng));
      if (m == 17 && k == 2) {
        f.energy /= 27.211386;  // in hartree
        hartree = g;
      }
      if (m == 41 && k == 0) {
        f.energy += 30.0 * n;
        high = g;
      }
      scan.add(f);
    }
  }
  EXPECT_EQ(scan.energy_unjudged(), 300);
  const std::vector<Outlier> found = scan.finish();
  ASSERT_EQ(found.size(), 2u) << outlier_lines(found, 10);
  EXPECT_EQ(found[0].graph, hartree);
  EXPECT_EQ(found[1].graph, high);
  EXPECT_THAT(found[1].what, HasSubstr("from the per-element fit of the set"));
  EXPECT_THAT(found[1].what, HasSubstr("frames of config_type molecule_41"));
}

// Exact copies of a frame (a set repeated to weight it) say nothing about the spread: one frame
// copied 1,000 times beside 20 others made the MAD zero, and every other frame an outlier at the
// 1 meV/atom floor. Each distinct energy counts once; a group of fewer distinct energies than
// min_composition is left to the per-element fit, whatever its copies.
TEST(Outliers, ExactCopiesSayNothingAboutTheSpread) {
  std::mt19937 rng(5);
  OutlierScan scan;
  const Frame copied = cu4(rng);
  for (int k = 0; k < 1000; ++k) scan.add(copied);
  for (int k = 0; k < 20; ++k) scan.add(cu4(rng));
  EXPECT_TRUE(scan.finish().empty()) << outlier_lines(scan.finish(), 5);
  EXPECT_EQ(scan.energy_unjudged(), 0);
  // ... and a genuine outlier among them is still found, each copy of it.
  Frame wrong = cu4(rng);
  wrong.energy += 4 * 0.2;
  scan.add(wrong);
  scan.add(wrong);
  const std::vector<Outlier> found = scan.finish();
  ASSERT_EQ(found.size(), 2u) << outlier_lines(found, 5);
  EXPECT_EQ(found[0].graph, 1020);
  EXPECT_EQ(found[1].graph, 1021);

  OutlierScan few;  // 5 distinct frames, 1,000 copies each: too few to judge by their spread
  std::vector<Frame> five;
  for (int k = 0; k < 5; ++k) five.push_back(cu4(rng));
  for (int copy = 0; copy < 1000; ++copy)
    for (const Frame& f : five) few.add(f);
  EXPECT_TRUE(few.finish().empty());
  EXPECT_EQ(few.energy_unjudged(), 5000);
}

}  // namespace
}  // namespace ddgnn
