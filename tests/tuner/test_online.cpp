// tuner/online: the online switcher's decisions on given times: the fastest candidate wins, a
// near-tie keeps the current backend, exploration rotates the order, the first check after a
// decision calibrates and later drift re-explores, prior models prune hopeless candidates and
// are calibrated by the measurements.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "tuner/cost_model.h"
#include "tuner/online.h"

namespace ddgnn {
namespace {

FetchFeatures features(double batch = 4, double bytes = 13000) {
  FetchFeatures f;
  f.batch = batch;
  f.bytes_mean = bytes;
  f.ranks = f.ranks_per_node = 2;
  f.cores_per_node = 2;
  f.remote = 0.5;
  return f;
}

OnlineOptions options() {
  OnlineOptions o;
  o.candidates = {"shm", "rma", "collective", "file"};
  o.explore_batches = 3;
  return o;
}

TEST(OnlineTuner, ChoosesTheFastestMedianAndRotatesTheOrder) {
  OnlineTuner t(options());
  EXPECT_TRUE(t.exploring());
  EXPECT_EQ(t.current(), "shm");
  EXPECT_EQ(t.explore_order(0), (std::vector<std::string>{"shm", "rma", "collective", "file"}));
  EXPECT_EQ(t.explore_order(1), (std::vector<std::string>{"rma", "collective", "file", "shm"}));
  EXPECT_EQ(t.explore_order(5).front(), "rma");
  // rma has one slow outlier; its median is still the lowest.
  const OnlineDecision d = t.decide({{"shm", {3e-5, 3.1e-5, 2.9e-5}},
                                     {"rma", {2e-5, 9e-4, 2.1e-5}},
                                     {"collective", {8e-5, 8e-5, 8e-5}},
                                     {"file", {1e-3, 1e-3, 1e-3}}},
                                    features(), "start");
  EXPECT_EQ(d.backend, "rma");
  EXPECT_EQ(d.previous, "shm");
  EXPECT_EQ(t.current(), "rma");
  EXPECT_FALSE(t.exploring());
  EXPECT_DOUBLE_EQ(d.measured.at("rma"), 2.1e-5);
  EXPECT_TRUE(std::isnan(d.predicted.at("rma")));  // no prior models
  // Without prior models the prediction is the measured time per byte, scaled by the bytes.
  EXPECT_NEAR(t.predict("rma", features()), 2.1e-5, 1e-12);
  EXPECT_NEAR(t.predict("rma", features(8)), 4.2e-5, 1e-12);
}

TEST(OnlineTuner, NearTieKeepsTheCurrentBackend) {
  // Before the first decision the first candidate (shm) is the current one: rma measured 3%
  // faster does not displace it, 10% faster does.
  EXPECT_EQ(OnlineTuner(options())
                .decide({{"shm", {1.0e-4}}, {"rma", {0.97e-4}}}, features(), "start")
                .backend,
            "shm");
  EXPECT_EQ(OnlineTuner(options())
                .decide({{"shm", {1.0e-4}}, {"rma", {0.9e-4}}}, features(), "start")
                .backend,
            "rma");
  OnlineTuner t(options());
  t.decide({{"shm", {1.0e-4}}, {"rma", {2e-4}}}, features(), "start");
  ASSERT_EQ(t.current(), "shm");
  t.explore(features());
  // rma is 3% faster: within the 5% margin, shm stays; 10% faster: rma takes over.
  EXPECT_EQ(t.decide({{"shm", {1.0e-4}}, {"rma", {0.97e-4}}}, features(), "drift").backend, "shm");
  t.explore(features());
  EXPECT_EQ(t.decide({{"shm", {1.0e-4}}, {"rma", {0.9e-4}}}, features(), "drift").backend, "rma");
}

TEST(OnlineTuner, FirstCheckCalibratesThenDriftReExplores) {
  OnlineTuner t(options());
  t.decide({{"shm", {1e-4}}, {"rma", {3e-4}}}, features(), "start");
  double predicted = 0;
  // Serving runs 40% slower than the exploration measured (a cold cache): calibrated, no drift.
  EXPECT_FALSE(t.check(1.4e-4, features(), &predicted));
  EXPECT_NEAR(predicted, 1e-4, 1e-12);
  EXPECT_FALSE(t.exploring());
  // Within 25% of the calibrated prediction: nothing.
  EXPECT_FALSE(t.check(1.6e-4, features(), &predicted));
  EXPECT_NEAR(predicted, 1.4e-4, 1e-12);
  // Twice the prediction: explore again.
  EXPECT_TRUE(t.check(2.8e-4, features(), &predicted));
  EXPECT_TRUE(t.exploring());
  // Larger batches predicted proportionally slower are not drift.
  t.decide({{"shm", {1e-4}}, {"rma", {3e-4}}}, features(), "drift");
  EXPECT_FALSE(t.check(1e-4, features(), &predicted));  // calibration
  EXPECT_FALSE(t.check(2e-4, features(8), &predicted));
}

TEST(OnlineTuner, PriorModelsPruneAndAreCalibrated) {
  // Prior models: collective 100x slower than shm in these conditions.
  auto model = [](const std::string& b, double per_byte) {
    std::map<std::string, double> terms;
    for (const auto& name : CostModel::backend_terms(b)) terms[name] = 0.0;
    terms["local_byte"] = per_byte;
    if (terms.count("remote_byte")) terms["remote_byte"] = per_byte;
    return CostModel::from_parameters(b, terms, 1.0);
  };
  std::map<std::string, CostModel> prior;
  prior.emplace("shm", model("shm", 1e-10));
  prior.emplace("rma", model("rma", 2e-10));
  prior.emplace("collective", model("collective", 1e-8));
  OnlineTuner t(options(), prior);
  // The first exploration tries everything (nothing measured on this machine yet).
  EXPECT_EQ(t.explore_order(0).size(), 4u);
  const OnlineDecision d =
      t.decide({{"shm", {1e-5}}, {"rma", {3e-5}}, {"collective", {2e-4}}, {"file", {1e-3}}},
               features(), "start");
  EXPECT_EQ(d.backend, "shm");
  EXPECT_NEAR(d.predicted.at("shm"), 1e-10 * 4 * 13000, 1e-15);
  // Calibrated: the prediction equals the measurement at the measured features.
  EXPECT_NEAR(t.predict("shm", features()), 1e-5, 1e-12);
  // Re-exploration: collective is predicted (calibrated) 20x slower than shm and file (no prior:
  // its time per byte) 100x: both pruned; the current backend is always explored.
  t.explore(features());
  EXPECT_EQ(t.pruned(), (std::vector<std::string>{"collective", "file"}));
  EXPECT_EQ(t.explore_order(0), (std::vector<std::string>{"shm", "rma"}));
}

TEST(OnlineTuner, DriftComparesWithTheObservedTimeAndIgnoresTinyChanges) {
  OnlineTuner t(options());
  t.decide({{"shm", {1e-5}}, {"rma", {1e-4}}, {"collective", {2e-4}}, {"file", {1e-3}}}, features(),
           "start");
  double predicted = 0;
  EXPECT_FALSE(t.check(1e-5, features(), &predicted));  // calibration
  // 60% slower but 6 µs against a 1 ms floor (1% of a 100 ms step): not worth exploring.
  EXPECT_FALSE(t.check(1.6e-5, features(), &predicted, 1e-3));
  // shm now takes 1 ms: rma (0.1 ms predicted) and collective (0.2 ms) are worth trying again,
  // file (1 ms, 10x rma) is not; with shm's stale 10 µs prediction all three would be pruned.
  EXPECT_TRUE(t.check(1e-3, features(), &predicted, 1e-4));
  EXPECT_EQ(t.pruned(), std::vector<std::string>{"file"});
  EXPECT_EQ(t.explore_order(0), (std::vector<std::string>{"shm", "rma", "collective"}));
}

TEST(OnlineTuner, BadOptionsAreClearErrors) {
  OnlineOptions o;
  EXPECT_THROW(OnlineTuner{o}, ConfigError);
  o = options();
  o.explore_batches = 0;
  EXPECT_THROW(OnlineTuner{o}, ConfigError);
  OnlineTuner t(options());
  EXPECT_THROW(t.decide({{"shm", {0.0}}}, features(), "start"), Error);  // nothing usable
}

}  // namespace
}  // namespace ddgnn
