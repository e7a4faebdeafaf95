// tuner/tpe: Optuna's gamma and weights; seeded reproducibility; every kind of parameter stays in
// its space; on standard functions TPE beats random search with the same budget over many seeds;
// bad spaces and points are refused, naming the parameter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "../common/opt_functions.h"
#include "core/error.h"
#include "tuner/tpe.h"

namespace ddgnn {
namespace {

TEST(Tpe, GammaAndWeightsAreOptunas) {
  EXPECT_EQ(tpe_gamma(1), 1);
  EXPECT_EQ(tpe_gamma(10), 1);
  EXPECT_EQ(tpe_gamma(11), 2);
  EXPECT_EQ(tpe_gamma(100), 10);
  EXPECT_EQ(tpe_gamma(1000), 25);
  EXPECT_EQ(tpe_weights(10), std::vector<double>(10, 1.0));
  const auto w = tpe_weights(30);  // 5 old trials ramp from 1/30 up to 1, then 25 at 1
  ASSERT_EQ(w.size(), 30u);
  EXPECT_DOUBLE_EQ(w[0], 1.0 / 30);
  EXPECT_DOUBLE_EQ(w[4], 1.0);
  EXPECT_LT(w[1], w[2]);
  for (size_t i = 5; i < 30; ++i) EXPECT_EQ(w[i], 1.0);
}

TEST(Tpe, SameSeedSameTrialsAndEveryKindInItsSpace) {
  const std::vector<TpeParam> space = {TpeParam::real("x", -1, 2),
                                       TpeParam::real("lr", 1e-5, 1e-1, /*log=*/true),
                                       TpeParam::integer("n", 3, 9), TpeParam::categorical("c", 3)};
  auto run = [&](uint64_t seed) {
    Tpe tpe(space, seed);
    std::vector<std::vector<double>> xs;
    for (int t = 0; t < 40; ++t) {
      const auto x = tpe.ask();
      EXPECT_GE(x[0], -1);
      EXPECT_LE(x[0], 2);
      EXPECT_GE(x[1], 1e-5);
      EXPECT_LE(x[1], 1e-1);
      EXPECT_EQ(x[2], std::round(x[2]));
      EXPECT_GE(x[2], 3);
      EXPECT_LE(x[2], 9);
      EXPECT_EQ(x[3], std::round(x[3]));
      EXPECT_GE(x[3], 0);
      EXPECT_LE(x[3], 2);
      tpe.tell(x, x[0] * x[0] + std::log(x[1]) + x[2] + x[3]);
      xs.push_back(x);
    }
    return xs;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Tpe, AfterStartupItConcentratesNearTheOptimum) {
  Tpe tpe({TpeParam::real("x", 0, 10)}, 3);
  int near = 0;
  for (int t = 0; t < 60; ++t) {
    const auto x = tpe.ask();
    if (t >= 30 && std::abs(x[0] - 7.0) < 1.0) ++near;
    tpe.tell(x, (x[0] - 7.0) * (x[0] - 7.0));
  }
  EXPECT_GE(near, 15);  // random search: 6 of 30 expected, 15 or more with p ≈ 2e-4
  EXPECT_NEAR(tpe.best()[0], 7.0, 0.1);
}

// Over 25 seeds and 60 trials, TPE's median (and mean) true best value is lower than random
// search's on every problem.
TEST(Tpe, BeatsRandomSearchWithTheSameBudget) {
  for (const auto& p : testing::opt_problems()) {
    std::vector<double> tpe, rnd;
    for (uint64_t seed = 1; seed <= 25; ++seed) {
      tpe.push_back(testing::optimise(p, 60, seed, false));
      rnd.push_back(testing::optimise(p, 60, seed, true));
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    auto mean = [](const std::vector<double>& v) {
      double s = 0;
      for (double x : v) s += x;
      return s / double(v.size());
    };
    EXPECT_LT(median(tpe), median(rnd)) << p.name;
    EXPECT_LT(mean(tpe), mean(rnd)) << p.name;
  }
}

TEST(TpeBadInput, SpacesAndPointsAreRefusedByName) {
  EXPECT_THROW(Tpe({}, 1), Error);
  try {
    Tpe({TpeParam::real("rate", 1.0, 1.0)}, 1);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'rate'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tpe({TpeParam::real("lr", 0.0, 1.0, true)}, 1), Error);
  EXPECT_THROW(Tpe({TpeParam::categorical("c", 0)}, 1), Error);
  Tpe tpe({TpeParam::integer("n", 1, 4)}, 1);
  EXPECT_THROW(tpe.tell({2.5}, 1.0), Error);
  EXPECT_THROW(tpe.tell({5}, 1.0), Error);
  EXPECT_THROW(tpe.tell({1, 2}, 1.0), Error);
  tpe.tell({2}, NAN);  // a failed trial counts as the worst
  tpe.tell({3}, 4.0);
  EXPECT_EQ(tpe.best_value(), 4.0);
  EXPECT_EQ(tpe.best()[0], 3.0);
}

}  // namespace
}  // namespace ddgnn
