// train/spikes.h: the loss-spike guard skips a step whose loss or gradient norm is non-finite or
// far above the median of the last steps' (once enough are known), but applies spikes that
// persist, judges on the device without reading it on the host, makes a spiking loss
// differentiate to nan (so that the summed gradient of every rank rejects the step), records
// why, and starts afresh when told. train/divergence.h: an epoch diverged when the median of its
// batch losses or its validation loss passes divergence_factor times the run's lowest or best.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <random>

#include "../common/aten_calls.h"
#include "train/divergence.h"
#include "train/spikes.h"

namespace ddgnn {
namespace {

at::Tensor scalar(double v) {
  return at::full({}, v, at::kDouble);
}

struct StepOutcome {
  bool applied = false;
  double loss_spike = 0, skipped = 0, loss_median = 0, norm_median = 0;
  double persisted = 0;  // far above the median, applied after skips in a row
  double loss_grad = 0;  // d(returned loss)/d(loss)
};

// One step through the guard: a loss that requires grad, then the gradient norm.
StepOutcome step(SpikeGuard& guard, double loss, double norm) {
  const at::Tensor l = scalar(loss).requires_grad_(true);
  const at::Tensor judged = guard.judge_loss(l);
  judged.backward();
  const SpikeGuard::Verdict v = guard.judge_step(scalar(norm));
  StepOutcome o;
  o.applied = v.apply.item<bool>();
  o.loss_spike = v.record[SpikeGuard::kLossSpike].item<double>();
  o.skipped = v.record[SpikeGuard::kSkipped].item<double>();
  o.loss_median = v.record[SpikeGuard::kLossMedian].item<double>();
  o.norm_median = v.record[SpikeGuard::kNormMedian].item<double>();
  o.persisted = v.record[SpikeGuard::kPersisted].item<double>();
  o.loss_grad = l.grad().item<double>();
  return o;
}

TEST(SpikeGuard, SkipsNonFiniteAndFarAboveTheMedianOnceEnoughIsKnown) {
  SpikeGuard guard(10.0, at::kCPU);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  // Before kMinHistory finite values only non-finite ones are judged.
  EXPECT_FALSE(step(guard, std::nan(""), 1.0).applied);
  EXPECT_TRUE(step(guard, 1e6, 1.0).applied);  // no history yet: not judged
  StepOutcome inf = step(guard, 1.0, std::numeric_limits<double>::infinity());
  EXPECT_FALSE(inf.applied);
  EXPECT_EQ(inf.loss_spike, 0.0);
  EXPECT_EQ(inf.skipped, 1.0);
  for (int k = 0; k < 2 * SpikeGuard::kMinHistory; ++k) {
    const StepOutcome o = step(guard, u(rng), u(rng));
    EXPECT_TRUE(o.applied) << k;
    EXPECT_EQ(o.loss_grad, 1.0) << k;  // an accepted loss differentiates as itself
  }
  // A loss 50 times the median: skipped, its gradient nan, the medians recorded.
  const StepOutcome spike = step(guard, 50.0, 1.0);
  EXPECT_FALSE(spike.applied);
  EXPECT_EQ(spike.loss_spike, 1.0);
  EXPECT_EQ(spike.skipped, 1.0);
  EXPECT_TRUE(std::isnan(spike.loss_grad));
  EXPECT_GT(spike.loss_median, 0.5);
  EXPECT_LT(spike.loss_median, 1.5);
  // Five times the median is no spike for a factor of 10.
  EXPECT_TRUE(step(guard, 5.0 * spike.loss_median, 1.0).applied);
  // A gradient norm 50 times its median: skipped on the norm alone.
  const StepOutcome norm = step(guard, 1.0, 50.0);
  EXPECT_FALSE(norm.applied);
  EXPECT_EQ(norm.loss_spike, 0.0);
  EXPECT_GT(norm.norm_median, 0.5);
  EXPECT_LT(norm.norm_median, 1.5);
  // The spikes did not move the medians: the next ordinary step applies.
  EXPECT_TRUE(step(guard, 1.0, 1.0).applied);
  EXPECT_EQ(step(guard, 1.0, 1.0).persisted, 0.0);
  // A rank without a sample judges the norm only (no stale loss verdict).
  step(guard, 50.0, 1.0);
  EXPECT_TRUE(guard.judge_step(scalar(1.0)).apply.item<bool>());
  // Afresh: the same spike is no spike until kMinHistory values are known again.
  guard.forget();
  EXPECT_TRUE(step(guard, 50.0, 50.0).applied);
}

// Spikes that persist (every batch far above the median: the weights are the cause, not a batch)
// are skipped kMaxSpikesInARow times, then applied, marked as such, their gradient being what
// corrects the weights; an isolated spike after an applied step is skipped again. Non-finite
// steps are skipped however many come in a row.
TEST(SpikeGuard, PersistentSpikesAreAppliedAfterAFewSkips) {
  SpikeGuard guard(10.0, at::kCPU);
  for (int k = 0; k < SpikeGuard::kWindow; ++k) ASSERT_TRUE(step(guard, 1.0, 1.0).applied);
  for (int k = 0; k < SpikeGuard::kMaxSpikesInARow; ++k)
    EXPECT_FALSE(step(guard, 100.0, 1.0).applied) << k;
  StepOutcome through = step(guard, 100.0, 1.0);
  EXPECT_TRUE(through.applied);
  EXPECT_EQ(through.persisted, 1.0);
  EXPECT_EQ(through.loss_grad, 1.0);              // its gradient is the loss's own
  EXPECT_FALSE(step(guard, 100.0, 1.0).applied);  // after an applied step: skipped again
  // A gradient norm spike alike.
  for (int k = 0; k < SpikeGuard::kMaxSpikesInARow - 1; ++k)
    EXPECT_FALSE(step(guard, 1.0, 100.0).applied) << k;
  through = step(guard, 1.0, 100.0);
  EXPECT_TRUE(through.applied);
  EXPECT_EQ(through.persisted, 1.0);
  for (int k = 0; k < 3 * SpikeGuard::kMaxSpikesInARow; ++k)
    EXPECT_FALSE(step(guard, std::nan(""), 1.0).applied) << k;
}

// The judgement reads nothing on the host (a GPU step must not wait for the device) and its
// operations do not grow with the history.
TEST(SpikeGuard, JudgesWithoutReadingTheDevice) {
  SpikeGuard guard(20.0, at::kCPU);
  const auto judge = [&] {
    return testing::aten_calls([&] {
      const at::Tensor judged = guard.judge_loss(scalar(2.0));
      guard.judge_step(scalar(3.0));
    });
  };
  for (int k = 0; k < 30; ++k) step(guard, 1.0, 1.0);
  const auto ops = judge();
  EXPECT_FALSE(testing::called(ops, "aten::item"));
  EXPECT_FALSE(testing::called(ops, "aten::_local_scalar_dense"));
  EXPECT_TRUE(testing::called(ops, "aten::nanmedian"));
  for (int k = 0; k < 2 * SpikeGuard::kWindow; ++k) step(guard, 1.0, 1.0);
  EXPECT_EQ(judge().size(), ops.size());  // a full history costs the same operations
}

TEST(Divergence, JudgedOnTheMedianOrTheValidationLossNeverOnOneBatch) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  RunState state;
  state.best_validate_loss = inf;
  // The first epoch is no reference for itself; then the lowest median and the best validation
  // (the trainer keeps best_validate_loss; here by hand).
  EXPECT_FALSE(check_divergence(state, 50.0, 40.0, 1, 1000).diverged);
  state.best_validate_loss = 40.0;
  state.best_epoch = 1;
  EXPECT_FALSE(check_divergence(state, 2.0, 3.0, 2, 1000).diverged);
  state.best_validate_loss = 3.0;
  state.best_epoch = 2;
  EXPECT_EQ(state.lowest_train_loss, 2.0);
  // Below the factor on both: trains on (whatever one batch did to an epoch mean).
  EXPECT_FALSE(check_divergence(state, 1500.0, 2900.0, 3, 1000).diverged);
  // The median passes: diverged, not by validation.
  Divergence d = check_divergence(state, 2001.0, 10.0, 4, 1000);
  EXPECT_TRUE(d.diverged);
  EXPECT_FALSE(d.by_validation);
  EXPECT_EQ(d.lowest, 2.0);
  EXPECT_EQ(d.lowest_epoch, 2);
  // The validation loss passes while the median does not (weights blown up between batches, a
  // weight average gone wrong): diverged by validation, naming the best.
  d = check_divergence(state, 3.0, 3001.0, 5, 1000);
  EXPECT_TRUE(d.diverged);
  EXPECT_TRUE(d.by_validation);
  EXPECT_EQ(d.best_validate, 3.0);
  EXPECT_EQ(d.best_epoch, 2);
  TrainSettings s;
  s.divergence_factor = 1000;
  const std::string text = diverged_error(5, 3.0, d, s, "").what();
  EXPECT_NE(text.find("its validation loss 3001 is more than Training.divergence_factor (1000) "
                      "times the best, 3 in epoch 2"),
            std::string::npos)
      << text;
  // A validation loss that is not finite after a finite best.
  d = check_divergence(state, 3.0, nan, 6, 1000);
  EXPECT_TRUE(d.diverged && d.by_validation);
  EXPECT_NE(std::string(diverged_error(6, 3.0, d, s, "").what()).find("is not finite"),
            std::string::npos);
  EXPECT_TRUE(check_divergence(state, 3.0, inf, 7, 1000).diverged);
  // Off with factor 0.
  EXPECT_FALSE(check_divergence(state, 1e30, nan, 8, 0).diverged);
}

}  // namespace
}  // namespace ddgnn
