// model/optim: optimizers against hand-written references of torch.optim's algorithms, lr access,
// ReduceLROnPlateau and EarlyStopping (including resume from saved state), gradient clipping,
// and optimizer checkpoints that resume bitwise. Adam against torch's own on every path of its
// step, and the flat buffers' operation counts: test_optim_device.cpp.
#include <gtest/gtest.h>

#include <torch/optim/optimizer.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/temp_dir.h"
#include "core/error.h"
#include "model/optim.h"

namespace ddgnn {
namespace {

const std::vector<OptimizerType> kAllTypes = {OptimizerType::kSGD, OptimizerType::kAdam,
                                              OptimizerType::kAdamW, OptimizerType::kRMSprop};

// The quadratic ||W x − y||² with W [2,3], fp64; its minimum is 0 (W x = y has solutions).
const std::vector<double> kX = {1.0, -0.5, 2.0};
const std::vector<double> kY = {0.3, -1.2};
const std::vector<double> kW0 = {0.5, -0.25, 0.75, -1.0, 0.2, 0.4};  // row-major [2,3]

torch::Tensor make_w(const std::vector<double>& w = kW0) {
  return torch::tensor(w, torch::kDouble).reshape({2, 3}).requires_grad_(true);
}

torch::Tensor quadratic_loss(const torch::Tensor& w) {
  const auto x = torch::tensor(kX, torch::kDouble);
  const auto y = torch::tensor(kY, torch::kDouble);
  return (w.matmul(x) - y).pow(2).sum();
}

// One optimizer step on the quadratic; returns the loss before the step.
double step_quadratic(torch::optim::Optimizer& optimizer, const torch::Tensor& w) {
  optimizer.zero_grad();
  auto loss = quadratic_loss(w);
  loss.backward();
  optimizer.step();
  return loss.item<double>();
}

std::vector<double> to_vector(const torch::Tensor& t) {
  const auto c = t.detach().contiguous().to(torch::kDouble).reshape({-1});
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// Gradient of the quadratic by hand: 2 (W x − y) xᵀ, row-major.
std::vector<double> reference_grad(const std::vector<double>& w) {
  std::vector<double> g(6);
  for (int i = 0; i < 2; ++i) {
    double r = -kY[i];
    for (int j = 0; j < 3; ++j) r += w[i * 3 + j] * kX[j];
    for (int j = 0; j < 3; ++j) g[i * 3 + j] = 2.0 * r * kX[j];
  }
  return g;
}

// torch.optim's algorithms (PyTorch 1.13 documentation), written out for plain doubles.
std::vector<double> reference_steps(OptimizerType type, std::vector<double> w, double lr, double wd,
                                    int n_steps) {
  const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, alpha = 0.99;
  std::vector<double> m(w.size(), 0.0), v(w.size(), 0.0);
  for (int t = 1; t <= n_steps; ++t) {
    const auto grad = reference_grad(w);
    for (size_t k = 0; k < w.size(); ++k) {
      double g = grad[k];
      switch (type) {
        case OptimizerType::kSGD:
          g += wd * w[k];
          w[k] -= lr * g;
          break;
        case OptimizerType::kAdam:
        case OptimizerType::kAdamW: {
          if (type == OptimizerType::kAdam) {
            g += wd * w[k];  // L2 penalty in the gradient
          } else {
            w[k] *= 1.0 - lr * wd;  // decoupled weight decay
          }
          m[k] = beta1 * m[k] + (1.0 - beta1) * g;
          v[k] = beta2 * v[k] + (1.0 - beta2) * g * g;
          const double bc1 = 1.0 - std::pow(beta1, t);
          const double bc2 = 1.0 - std::pow(beta2, t);
          w[k] -= (lr / bc1) * m[k] / (std::sqrt(v[k]) / std::sqrt(bc2) + eps);
          break;
        }
        case OptimizerType::kRMSprop:
          g += wd * w[k];
          v[k] = alpha * v[k] + (1.0 - alpha) * g * g;
          w[k] -= lr * g / (std::sqrt(v[k]) + eps);
          break;
      }
    }
  }
  return w;
}

// ---- optimizers ----

TEST(Schedule, TimeExponentialGoesGeometricallyFromStartToFinal) {
  EXPECT_DOUBLE_EQ(time_exponential_lr(1e-2, 1e-4, 0.0), 1e-2);
  EXPECT_DOUBLE_EQ(time_exponential_lr(1e-2, 1e-4, 0.5), 1e-3);
  EXPECT_DOUBLE_EQ(time_exponential_lr(1e-2, 1e-4, 1.0), 1e-4);
  EXPECT_DOUBLE_EQ(time_exponential_lr(1e-2, 1e-4, 7.0), 1e-4);   // past the budget
  EXPECT_DOUBLE_EQ(time_exponential_lr(1e-2, 1e-4, -1.0), 1e-2);  // clock before the start
  EXPECT_LT(time_exponential_lr(1e-2, 1e-4, 0.3), time_exponential_lr(1e-2, 1e-4, 0.2));
}

TEST(Optimizer, NamesRoundTrip) {
  for (auto type : kAllTypes) EXPECT_EQ(parse_optimizer_type(to_string(type)), type);
  EXPECT_EQ(known_optimizer_names().size(), kAllTypes.size());
}

TEST(Optimizer, UnknownNameListsKnownOnes) {
  auto w = make_w();
  try {
    make_optimizer(parse_optimizer_type("FusedLAMB"), {w}, /*learning_rate=*/0.1,
                   /*weight_decay=*/0.0);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("FusedLAMB"), std::string::npos);
    EXPECT_NE(e.hint().find("SGD, Adam, AdamW, RMSprop"), std::string::npos) << e.hint();
  }
  EXPECT_THROW(make_optimizer(parse_optimizer_type("adam"), {w}, 0.1, 0.0),
               ConfigError);  // names are exact
  EXPECT_THROW(make_optimizer(parse_optimizer_type("Adam"), {w}, /*learning_rate=*/0.0, 0.0),
               ConfigError);
  EXPECT_THROW(make_optimizer(parse_optimizer_type("Adam"), {w}, 0.1, /*weight_decay=*/-1.0),
               ConfigError);
}

TEST(Optimizer, ReportsItsType) {
  for (auto type : kAllTypes) {
    auto w = make_w();
    auto optimizer = make_optimizer(type, {w}, 0.1, 0.0);
    EXPECT_EQ(optimizer_type(*optimizer), type);
  }
}

TEST(Optimizer, EachMinimizesAQuadratic) {
  struct Case {
    OptimizerType type;
    double lr;
    int n_steps;
  };
  // RMSprop and Adam move by ~lr per step while far away; the lr is lowered once to settle.
  for (const Case c :
       {Case{OptimizerType::kSGD, 0.05, 200}, Case{OptimizerType::kAdam, 0.05, 600},
        Case{OptimizerType::kAdamW, 0.05, 600}, Case{OptimizerType::kRMSprop, 0.01, 600}}) {
    auto w = make_w();
    auto optimizer = make_optimizer(c.type, {w}, c.lr, /*weight_decay=*/0.0);
    const double initial = step_quadratic(*optimizer, w);
    for (int i = 1; i < c.n_steps; ++i) {
      if (i == c.n_steps / 2) set_lr(*optimizer, c.lr * 0.01);
      step_quadratic(*optimizer, w);
    }
    const double final_loss = quadratic_loss(w).item<double>();
    EXPECT_GT(initial, 1.0);
    EXPECT_LT(final_loss, 1e-10) << to_string(c.type);
  }
}

TEST(OptimizerReference, FirstStepsMatchTorchOptimAlgorithms) {
  for (auto type : kAllTypes) {
    for (double wd : {0.0, 0.05}) {
      auto w = make_w();
      auto optimizer = make_optimizer(type, {w}, /*learning_rate=*/0.01, wd);
      for (int i = 0; i < 4; ++i) step_quadratic(*optimizer, w);
      const auto expected = reference_steps(type, kW0, 0.01, wd, /*n_steps=*/4);
      const auto got = to_vector(w);
      for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_NEAR(got[k], expected[k], 1e-13) << to_string(type) << " wd " << wd << " k " << k;
      }
    }
  }
}

TEST(OptimizerReference, AdamFirstStepMovesByLrTimesSign) {
  const double lr = 0.01;
  const auto grad = reference_grad(kW0);
  for (auto type : {OptimizerType::kAdam, OptimizerType::kAdamW, OptimizerType::kRMSprop}) {
    auto w = make_w();
    auto optimizer = make_optimizer(type, {w}, lr, /*weight_decay=*/0.0);
    step_quadratic(*optimizer, w);
    const auto got = to_vector(w);
    // RMSprop's first step is lr·g/(|g|·√(1−α) + eps) ≈ 10·lr·sign(g): eps weighs 10× more.
    const bool rmsprop = type == OptimizerType::kRMSprop;
    const double scale = rmsprop ? 1.0 / std::sqrt(0.01) : 1.0;
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_GT(std::abs(grad[k]), 1e-3);
      const double sign = grad[k] > 0 ? 1.0 : -1.0;
      EXPECT_NEAR(got[k] - kW0[k], -scale * lr * sign, rmsprop ? 1e-6 : 1e-8)
          << to_string(type) << " k " << k;
    }
  }
}

TEST(OptimizerReference, AdamWDecaysWeightsBeforeTheAdamStep) {
  const double lr = 0.01, wd = 0.01;
  const auto grad = reference_grad(kW0);
  auto w = make_w();
  auto optimizer = make_optimizer(parse_optimizer_type("AdamW"), {w}, lr, wd);
  step_quadratic(*optimizer, w);
  const auto got = to_vector(w);
  for (size_t k = 0; k < got.size(); ++k) {
    const double sign = grad[k] > 0 ? 1.0 : -1.0;
    EXPECT_NEAR(got[k], kW0[k] * (1.0 - lr * wd) - lr * sign, 1e-8);
  }
}

TEST(Optimizer, SetLrGetLrRoundTripOnEveryType) {
  for (auto type : kAllTypes) {
    auto w = make_w();
    auto extra = torch::zeros({4}, torch::kDouble).requires_grad_(true);
    auto optimizer = make_optimizer(type, {w}, /*learning_rate=*/0.125, 0.0);
    EXPECT_EQ(get_lr(*optimizer), 0.125);
    optimizer->add_param_group(torch::optim::OptimizerParamGroup({extra}));  // a second group
    set_lr(*optimizer, 3.0e-4);
    EXPECT_EQ(get_lr(*optimizer), 3.0e-4) << to_string(type);
    EXPECT_EQ(get_lrs(*optimizer), (std::vector<double>{3.0e-4, 3.0e-4}));
  }
}

TEST(Optimizer, SetLrChangesTheStep) {
  auto w = make_w();
  auto optimizer = make_optimizer(parse_optimizer_type("SGD"), {w}, /*learning_rate=*/1.0, 0.0);
  set_lr(*optimizer, 0.001);
  step_quadratic(*optimizer, w);
  const auto expected = reference_steps(OptimizerType::kSGD, kW0, 0.001, 0.0, 1);
  const auto got = to_vector(w);
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], expected[k], 1e-15);
}

TEST(Schedule, WarmupRisesLinearlyThenStaysAtOne) {
  EXPECT_DOUBLE_EQ(warmup_factor(1, 4), 0.25);
  EXPECT_DOUBLE_EQ(warmup_factor(3, 4), 0.75);
  EXPECT_DOUBLE_EQ(warmup_factor(4, 4), 1.0);
  EXPECT_DOUBLE_EQ(warmup_factor(9, 4), 1.0);
  EXPECT_DOUBLE_EQ(warmup_factor(0, 4), 0.25);  // a step before the first counts as the first
  EXPECT_DOUBLE_EQ(warmup_factor(1, 0), 1.0);   // off
  EXPECT_DOUBLE_EQ(warmup_factor(1, 1), 1.0);
}

// ScaledLr scales every group's own rate for one step and puts each back: the SGD step on the
// quadratic is the reference step at the scaled rate.
TEST(Optimizer, ScaledLrScalesTheStepAndPutsEveryGroupsRateBack) {
  auto w = make_w();
  auto extra = torch::zeros({4}, torch::kDouble).requires_grad_(true);
  auto optimizer = make_optimizer(OptimizerType::kSGD, {w}, /*learning_rate=*/0.01, 0.0);
  optimizer->add_param_group(
      torch::optim::OptimizerParamGroup({extra}, std::make_unique<torch::optim::SGDOptions>(0.5)));
  {
    const ScaledLr scaled(*optimizer, 0.25);
    EXPECT_EQ(get_lrs(*optimizer), (std::vector<double>{0.0025, 0.125}));
    step_quadratic(*optimizer, w);
  }
  EXPECT_EQ(get_lrs(*optimizer), (std::vector<double>{0.01, 0.5}));
  const auto expected = reference_steps(OptimizerType::kSGD, kW0, 0.0025, 0.0, 1);
  const auto got = to_vector(w);
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], expected[k], 1e-15);
  {
    const ScaledLr unscaled(*optimizer, 1.0);
    EXPECT_EQ(get_lrs(*optimizer), (std::vector<double>{0.01, 0.5}));
  }
  EXPECT_EQ(get_lrs(*optimizer), (std::vector<double>{0.01, 0.5}));
}

TEST(Optimizer, ZeroGradientsKeepsTheTensors) {
  auto w = torch::ones({3, 2}).requires_grad_(true);
  auto v = torch::ones({2}).requires_grad_(true);  // no gradient yet
  (w * 2.0).sum().backward();
  const void* before = w.grad().data_ptr();
  zero_gradients({w, v});
  EXPECT_EQ(w.grad().data_ptr(), before);
  EXPECT_EQ(w.grad().abs().sum().item<double>(), 0.0);
  EXPECT_FALSE(v.grad().defined());
  (w * 3.0).sum().backward();  // accumulates into the same tensor
  EXPECT_EQ(w.grad().data_ptr(), before);
  EXPECT_EQ(w.grad().sum().item<double>(), 18.0);
}

// ---- optimizer checkpoints ----

TEST(OptimizerCheckpoint, SaveLoadResumesBitwise) {
  testing::TempDir dir;
  for (auto type : kAllTypes) {
    SCOPED_TRACE(to_string(type));
    auto w = make_w();
    auto optimizer = make_optimizer(type, {w}, /*learning_rate=*/0.01, /*weight_decay=*/0.01);
    for (int i = 0; i < 3; ++i) step_quadratic(*optimizer, w);
    set_lr(*optimizer, 0.004);  // as a scheduler would
    const std::string path = dir.file(to_string(type) + ".pt");
    save_optimizer(*optimizer, path);
    std::stringstream stream;
    save_optimizer(*optimizer, stream);

    // Resumed runs: fresh parameters with the saved values, fresh optimizers with another lr.
    auto w_file = make_w(to_vector(w));
    auto w_stream = make_w(to_vector(w));
    auto from_file = make_optimizer(type, {w_file}, /*learning_rate=*/0.5, 0.01);
    auto from_stream = make_optimizer(type, {w_stream}, /*learning_rate=*/0.5, 0.01);
    load_optimizer(*from_file, path);
    load_optimizer(*from_stream, stream);
    EXPECT_EQ(get_lr(*from_file), 0.004);
    EXPECT_EQ(get_lr(*from_stream), 0.004);

    for (int i = 0; i < 3; ++i) {
      step_quadratic(*optimizer, w);  // the uninterrupted run
      step_quadratic(*from_file, w_file);
      step_quadratic(*from_stream, w_stream);
    }
    EXPECT_TRUE(torch::equal(w, w_file));
    EXPECT_TRUE(torch::equal(w, w_stream));
  }
}

TEST(OptimizerCheckpoint, WrongTypeOrFileIsADataError) {
  testing::TempDir dir;
  auto w = make_w();
  auto adam = make_optimizer(parse_optimizer_type("Adam"), {w}, 0.01, 0.0);
  step_quadratic(*adam, w);
  const std::string path = dir.file("adam.pt");
  save_optimizer(*adam, path);
  auto sgd = make_optimizer(parse_optimizer_type("SGD"), {w}, 0.01, 0.0);
  try {
    load_optimizer(*sgd, path);
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("Adam"), std::string::npos) << what;
    EXPECT_NE(what.find("SGD"), std::string::npos) << what;
  }
  const std::string garbage = dir.file("garbage.pt");
  { std::ofstream(garbage) << "not a torch archive"; }
  EXPECT_THROW(load_optimizer(*adam, garbage), DataError);
  EXPECT_THROW(load_optimizer(*adam, dir.file("missing.pt")), DataError);
  // Same type, other parameter shapes.
  auto other = torch::zeros({5}, torch::kDouble).requires_grad_(true);
  auto adam_other = make_optimizer(parse_optimizer_type("Adam"), {other}, 0.01, 0.0);
  try {
    load_optimizer(*adam_other, path);
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("1 parameters [(2,3)]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1 parameters [(5)]"), std::string::npos) << e.what();
  }
}

// ---- ReduceLROnPlateau ----

PlateauOptions plateau_options(double factor, int patience, double min_lr = 0.0) {
  PlateauOptions o;
  o.factor = factor;
  o.patience = patience;
  o.min_lr = min_lr;
  return o;
}

TEST(ReduceLROnPlateau, ReducesAfterPatiencePlusOneBadEpochs) {
  auto w = make_w();
  auto optimizer = make_optimizer(parse_optimizer_type("Adam"), {w}, /*learning_rate=*/1.0, 0.0);
  ReduceLROnPlateau scheduler(*optimizer, plateau_options(/*factor=*/0.5, /*patience=*/2));
  EXPECT_FALSE(scheduler.step(1.0));  // first metric: the best
  EXPECT_FALSE(scheduler.step(1.0));  // bad 1
  EXPECT_FALSE(scheduler.step(1.0));  // bad 2 = patience
  EXPECT_EQ(scheduler.state().num_bad_epochs, 2);
  EXPECT_EQ(get_lr(*optimizer), 1.0);
  EXPECT_TRUE(scheduler.step(1.0));  // bad 3 = patience + 1
  EXPECT_EQ(get_lr(*optimizer), 0.5);
  EXPECT_EQ(scheduler.state().num_bad_epochs, 0);
  EXPECT_EQ(scheduler.state().last_lr, std::vector<double>{0.5});
  EXPECT_FALSE(scheduler.step(1.0));
  EXPECT_FALSE(scheduler.step(1.0));
  EXPECT_TRUE(scheduler.step(1.0));  // again after patience + 1
  EXPECT_EQ(get_lr(*optimizer), 0.25);
  EXPECT_FALSE(scheduler.step(0.5));  // an improvement resets the count
  EXPECT_EQ(scheduler.state().best, 0.5);
  EXPECT_EQ(scheduler.state().num_bad_epochs, 0);
  EXPECT_EQ(scheduler.state().last_epoch, 8);
}

TEST(ReduceLROnPlateau, ImprovementMustBeatTheRelativeThreshold) {
  auto w = make_w();
  auto optimizer = make_optimizer(parse_optimizer_type("SGD"), {w}, /*learning_rate=*/1.0, 0.0);
  ReduceLROnPlateau scheduler(*optimizer, plateau_options(0.5, /*patience=*/1));
  scheduler.step(1.0);
  scheduler.step(0.99995);  // only 5e-5 better: below threshold 1e-4 (rel), a bad epoch
  EXPECT_EQ(scheduler.state().num_bad_epochs, 1);
  EXPECT_EQ(scheduler.state().best, 1.0);
  scheduler.step(0.9998);  // 2e-4 better: an improvement
  EXPECT_EQ(scheduler.state().num_bad_epochs, 0);
  EXPECT_EQ(scheduler.state().best, 0.9998);
  scheduler.step(std::numeric_limits<double>::quiet_NaN());  // nan never improves
  EXPECT_EQ(scheduler.state().num_bad_epochs, 1);
  EXPECT_EQ(get_lr(*optimizer), 1.0);
}

TEST(ReduceLROnPlateau, RespectsMinLr) {
  auto w = make_w();
  auto optimizer = make_optimizer(parse_optimizer_type("RMSprop"), {w}, /*learning_rate=*/1.0, 0.0);
  ReduceLROnPlateau scheduler(*optimizer, plateau_options(0.1, /*patience=*/0, /*min_lr=*/0.05));
  scheduler.step(1.0);
  EXPECT_TRUE(scheduler.step(1.0));
  EXPECT_DOUBLE_EQ(get_lr(*optimizer), 0.1);
  EXPECT_TRUE(scheduler.step(1.0));
  EXPECT_EQ(get_lr(*optimizer), 0.05);  // 0.01 clamped to min_lr
  EXPECT_FALSE(scheduler.step(1.0));    // already at min_lr: no reduction reported
  EXPECT_EQ(get_lr(*optimizer), 0.05);
}

TEST(ReduceLROnPlateau, CooldownSkipsBadEpochs) {
  auto w = make_w();
  auto optimizer = make_optimizer(parse_optimizer_type("SGD"), {w}, /*learning_rate=*/1.0, 0.0);
  auto options = plateau_options(0.5, /*patience=*/0);
  options.cooldown = 2;
  ReduceLROnPlateau scheduler(*optimizer, options);
  scheduler.step(1.0);
  EXPECT_TRUE(scheduler.step(1.0));
  EXPECT_FALSE(scheduler.step(1.0));  // cooldown 2 → 1
  EXPECT_FALSE(scheduler.step(1.0));  // cooldown 1 → 0
  EXPECT_TRUE(scheduler.step(1.0));
  EXPECT_EQ(get_lr(*optimizer), 0.25);
}

TEST(ReduceLROnPlateau, RejectsBadOptions) {
  auto w = make_w();
  auto optimizer = make_optimizer(parse_optimizer_type("SGD"), {w}, 1.0, 0.0);
  EXPECT_THROW(ReduceLROnPlateau(*optimizer, plateau_options(/*factor=*/1.0, 1)), ConfigError);
  EXPECT_THROW(ReduceLROnPlateau(*optimizer, plateau_options(0.5, /*patience=*/-1)), ConfigError);
  EXPECT_THROW(ReduceLROnPlateau(*optimizer, plateau_options(0.5, 1, /*min_lr=*/-1.0)),
               ConfigError);
}

TEST(ReduceLROnPlateau, ResumesFromSavedStateIdentically) {
  const std::vector<double> metrics = {1.0,  0.9,  0.9,  0.9,     0.9, 0.85, 0.85, 0.85,
                                       0.85, 0.85, 0.84, 0.84999, 0.7, 0.7,  0.7,  0.7};
  auto options = plateau_options(/*factor=*/0.5, /*patience=*/2, /*min_lr=*/0.1);
  options.cooldown = 1;

  // The uninterrupted run.
  auto w = make_w();
  auto optimizer = make_optimizer(parse_optimizer_type("AdamW"), {w}, /*learning_rate=*/1.0, 0.01);
  ReduceLROnPlateau scheduler(*optimizer, options);
  std::vector<bool> reduced;
  for (double m : metrics) {
    reduced.push_back(scheduler.step(m));
    step_quadratic(*optimizer, w);
  }

  // The same run, stopped after 7 epochs and resumed from a checkpoint.
  auto w_a = make_w();
  auto optimizer_a = make_optimizer(parse_optimizer_type("AdamW"), {w_a}, 1.0, 0.01);
  ReduceLROnPlateau scheduler_a(*optimizer_a, options);
  std::vector<bool> reduced_resumed;
  for (size_t i = 0; i < 7; ++i) {
    reduced_resumed.push_back(scheduler_a.step(metrics[i]));
    step_quadratic(*optimizer_a, w_a);
  }
  const std::string saved_scheduler = nlohmann::json(scheduler_a.state()).dump();
  std::stringstream saved_optimizer;
  save_optimizer(*optimizer_a, saved_optimizer);

  auto w_b = make_w(to_vector(w_a));
  auto optimizer_b = make_optimizer(parse_optimizer_type("AdamW"), {w_b}, 1.0, 0.01);
  load_optimizer(*optimizer_b, saved_optimizer);
  ReduceLROnPlateau scheduler_b(*optimizer_b, options);
  scheduler_b.load_state(nlohmann::json::parse(saved_scheduler).get<PlateauState>());
  EXPECT_TRUE(scheduler_b.state() == scheduler_a.state());
  for (size_t i = 7; i < metrics.size(); ++i) {
    reduced_resumed.push_back(scheduler_b.step(metrics[i]));
    step_quadratic(*optimizer_b, w_b);
  }

  EXPECT_EQ(reduced_resumed, reduced);
  EXPECT_GE(std::count(reduced.begin(), reduced.end(), true), 2);
  EXPECT_TRUE(scheduler_b.state() == scheduler.state());
  EXPECT_EQ(get_lr(*optimizer_b), get_lr(*optimizer));
  EXPECT_TRUE(torch::equal(w_b, w));
}

TEST(ReduceLROnPlateau, StateJsonRoundTripsInfinityAndDigits) {
  PlateauState state;
  state.best = std::numeric_limits<double>::infinity();
  state.num_bad_epochs = 3;
  state.cooldown_counter = 1;
  state.last_epoch = 42;
  state.last_lr = {0.1 * 0.5 * 0.5 * 0.3, 1.0 / 3.0};
  const auto text = nlohmann::json(state).dump();
  EXPECT_TRUE(nlohmann::json::parse(text).get<PlateauState>() == state) << text;
  state.best = 0.1 + 0.2;
  EXPECT_TRUE(nlohmann::json::parse(nlohmann::json(state).dump()).get<PlateauState>() == state);
  EXPECT_THROW(nlohmann::json::parse(R"({"best": 1.0})").get<PlateauState>(), DataError);

  auto w = make_w();
  auto optimizer = make_optimizer(parse_optimizer_type("SGD"), {w}, 1.0, 0.0);
  ReduceLROnPlateau scheduler(*optimizer, PlateauOptions{});
  state.last_lr = {0.1, 0.2};  // two groups, the optimizer has one
  EXPECT_THROW(scheduler.load_state(state), DataError);
}

// ---- EarlyStopping ----

TEST(EarlyStopping, StopsAfterPatienceEpochsWithoutImprovement) {
  EarlyStopping stopping(/*patience=*/3);
  EXPECT_FALSE(stopping.step(1.0));
  EXPECT_FALSE(stopping.step(0.9));   // improvement
  EXPECT_FALSE(stopping.step(0.95));  // bad 1
  EXPECT_FALSE(stopping.step(0.9));   // a tie counts as improvement (HydraGNN), resets
  EXPECT_EQ(stopping.state().num_bad_epochs, 0);
  EXPECT_FALSE(stopping.step(0.95));                                      // bad 1
  EXPECT_FALSE(stopping.step(std::numeric_limits<double>::quiet_NaN()));  // bad 2
  EXPECT_FALSE(stopping.should_stop());
  EXPECT_TRUE(stopping.step(0.96));  // bad 3 = patience
  EXPECT_TRUE(stopping.should_stop());
  EXPECT_EQ(stopping.state().best, 0.9);
  EXPECT_THROW(EarlyStopping(/*patience=*/0), ConfigError);
}

// A loss that changes meaning (a second stage of loss weights): a larger value after
// forget_best is the new best, not a bad epoch; the learning rate is kept.
TEST(ReduceLROnPlateau, ForgetBestCountsAfresh) {
  auto w = make_w();
  auto optimizer = make_optimizer(parse_optimizer_type("Adam"), {w}, /*learning_rate=*/1.0, 0.0);
  ReduceLROnPlateau scheduler(*optimizer, plateau_options(/*factor=*/0.5, /*patience=*/1));
  EXPECT_FALSE(scheduler.step(1.0));
  EXPECT_FALSE(scheduler.step(2.0));  // bad 1 = patience
  EXPECT_TRUE(scheduler.step(2.0));   // bad 2: reduced
  EXPECT_EQ(get_lr(*optimizer), 0.5);
  scheduler.step(3.0);  // bad 1
  scheduler.forget_best();
  EXPECT_EQ(scheduler.state().num_bad_epochs, 0);
  EXPECT_FALSE(scheduler.step(100.0));  // the new loss's first value: its best
  EXPECT_EQ(scheduler.state().best, 100.0);
  EXPECT_EQ(get_lr(*optimizer), 0.5);
}

TEST(EarlyStopping, ForgetBestCountsAfresh) {
  EarlyStopping stopping(/*patience=*/2);
  EXPECT_FALSE(stopping.step(1.0));
  EXPECT_FALSE(stopping.step(2.0));  // bad 1
  stopping.forget_best();
  EXPECT_FALSE(stopping.step(50.0));  // the new best
  EXPECT_FALSE(stopping.step(60.0));  // bad 1
  EXPECT_EQ(stopping.state().best, 50.0);
  EXPECT_TRUE(stopping.step(70.0));  // bad 2 = patience
}

TEST(EarlyStopping, ResumesFromSavedState) {
  const std::vector<double> losses = {1.0, 0.8, 0.85, 0.9, 0.7, 0.75, 0.71, 0.72, 0.73};
  EarlyStopping uninterrupted(/*patience=*/4);
  std::vector<bool> stops;
  for (double l : losses) stops.push_back(uninterrupted.step(l));

  EarlyStopping first(/*patience=*/4);
  std::vector<bool> stops_resumed;
  for (size_t i = 0; i < 5; ++i) stops_resumed.push_back(first.step(losses[i]));
  const auto text = nlohmann::json(first.state()).dump();
  EarlyStopping second(/*patience=*/4);
  second.load_state(nlohmann::json::parse(text).get<EarlyStoppingState>());
  for (size_t i = 5; i < losses.size(); ++i) stops_resumed.push_back(second.step(losses[i]));

  EXPECT_EQ(stops_resumed, stops);
  EXPECT_TRUE(stops.back());
  EXPECT_TRUE(second.state() == uninterrupted.state());
}

// ---- gradient clipping ----

// Two parameters whose gradients are 3 and 4 (total 2-norm 5), and one without a gradient.
struct ThreeParams {
  torch::Tensor a = torch::zeros({1}, torch::kFloat).requires_grad_(true);
  torch::Tensor b = torch::zeros({1}, torch::kFloat).requires_grad_(true);
  torch::Tensor unused = torch::zeros({2}, torch::kFloat).requires_grad_(true);
  ThreeParams() { (a * 3.0 + b * 4.0).sum().backward(); }
  std::vector<torch::Tensor> all() const { return {a, b, unused}; }
};

TEST(ClipGradNorm, ScalesGradientsToMaxNorm) {
  ThreeParams p;
  EXPECT_NEAR(grad_norm(p.all()), 5.0, 1e-6);
  EXPECT_NEAR(clip_grad_norm(p.all(), /*max_norm=*/1.0).item<double>(), 5.0, 1e-6);
  EXPECT_NEAR(p.a.grad().item<double>(), 0.6, 1e-6);
  EXPECT_NEAR(p.b.grad().item<double>(), 0.8, 1e-6);
  EXPECT_NEAR(grad_norm(p.all()), 1.0, 1e-6);
  EXPECT_FALSE(p.unused.grad().defined());
}

TEST(ClipGradNorm, LeavesSmallGradientsAlone) {
  ThreeParams p;
  EXPECT_NEAR(clip_grad_norm(p.all(), /*max_norm=*/10.0).item<double>(), 5.0, 1e-6);
  EXPECT_EQ(p.a.grad().item<float>(), 3.0f);
  EXPECT_EQ(p.b.grad().item<float>(), 4.0f);
}

TEST(ClipGradNorm, OffWhenMaxNormIsZero) {
  ThreeParams p;
  EXPECT_EQ(clip_grad_norm(p.all(), /*max_norm=*/0.0).item<double>(), 0.0);
  EXPECT_EQ(p.a.grad().item<float>(), 3.0f);
  EXPECT_EQ(p.b.grad().item<float>(), 4.0f);
  EXPECT_EQ(clip_grad_norm({p.unused}, /*max_norm=*/1.0).item<double>(),
            0.0);  // no gradient at all
}

TEST(ClipGradNorm, MatchesTheQuadraticGradientNorm) {
  auto w = make_w();
  quadratic_loss(w).backward();
  double expected = 0.0;
  for (double g : reference_grad(kW0)) expected += g * g;
  expected = std::sqrt(expected);
  EXPECT_NEAR(clip_grad_norm({w}, /*max_norm=*/0.5).item<double>(), expected, 1e-12);
  EXPECT_NEAR(grad_norm({w}), 0.5, 1e-6);
}

}  // namespace
}  // namespace ddgnn
