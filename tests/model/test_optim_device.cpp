// model/optim over flat buffers (model/flat_params.h): Adam and AdamW equal torch's optim::Adam
// and optim::AdamW on every path of their step (the CPU's loop over a flat buffer, the path of a
// GPU with the step count and rate as device tensors, forced on the CPU by GenericKernels, and one
// parameter at a time), warm-up and rate changes included, and share their state; the device path
// reads no host value and makes as many ATen calls for 40 parameters as for 3, and so do the
// zeroing, clipping and the weight average; optimizer archives written before the flat buffers
// load and continue exactly.
#include <gtest/gtest.h>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../common/aten_calls.h"
#include "../common/torch_adam.h"
#include "model/device.h"
#include "model/flat_params.h"
#include "model/optim.h"

namespace ddgnn {
namespace {

using Shapes = std::vector<std::vector<int64_t>>;

std::vector<torch::Tensor> make_params(const Shapes& shapes, torch::Dtype dtype, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> params;
  for (const auto& shape : shapes)
    params.push_back(torch::randn(shape, dtype).requires_grad_(true));
  return params;
}

std::vector<torch::Tensor> copies(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone().requires_grad_(true));
  return out;
}

// n parameters of small shapes (as a model of small tensors has).
Shapes many_shapes(int n) {
  Shapes shapes;
  for (int k = 0; k < n; ++k) shapes.push_back({1 + k % 5, 3 + k % 4});
  return shapes;
}

double max_rel(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / (b.abs().max() + 1e-300)).item<double>();
}

// Writes `g` into p's gradient in place (the flat buffer's view stays).
void set_grad(const torch::Tensor& p, const torch::Tensor& g) {
  p.grad().copy_(g);
}

bool reads_the_host(const std::vector<std::string>& ops) {
  return testing::called(ops, "aten::item") || testing::called(ops, "aten::_local_scalar_dense");
}

int64_t count(const std::vector<std::string>& ops, const std::string& op) {
  return std::count(ops.begin(), ops.end(), op);
}

bool any_foreach(const std::vector<std::string>& ops) {
  return std::any_of(ops.begin(), ops.end(),
                     [](const std::string& op) { return op.rfind("aten::_foreach_", 0) == 0; });
}

// The host step count of every parameter's state (Adam's and AdamW's state types).
std::vector<int64_t> state_steps(const torch::optim::Optimizer& optimizer) {
  std::vector<int64_t> steps;
  for (const auto& entry : optimizer.state()) {
    if (auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(entry.second.get()))
      steps.push_back(s->step());
    else if (auto* s = dynamic_cast<const torch::optim::AdamParamState*>(entry.second.get()))
      steps.push_back(s->step());
  }
  return steps;
}

// fn(type, dtype, device) for Adam and AdamW in float32 and float64, each on the flat buffer's
// CPU loop (device false) and on its device path, forced on the CPU by GenericKernels (device
// true), under a trace that names them.
template <typename Fn>
void for_each_adam_path(Fn&& fn) {
  for (auto type : {OptimizerType::kAdam, OptimizerType::kAdamW})
    for (auto dtype : {torch::kFloat, torch::kDouble})
      for (bool device : {false, true}) {
        SCOPED_TRACE(to_string(type) + (dtype == torch::kFloat ? " float32" : " float64") +
                     (device ? ", device tensors" : ", CPU loop"));
        std::unique_ptr<GenericKernels> generic;
        if (device) generic = std::make_unique<GenericKernels>();
        fn(type, dtype, device);
      }
}

enum class Path { kFlatLoop, kFlatDevice, kPerParameterLoop, kPerParameterForeach };

std::string path_name(Path p) {
  switch (p) {
    case Path::kFlatLoop:
      return "flat buffer, CPU loop";
    case Path::kFlatDevice:
      return "flat buffer, device tensors";
    case Path::kPerParameterLoop:
      return "per parameter, CPU loop";
    case Path::kPerParameterForeach:
      return "per parameter, multi-tensor operations";
  }
  return "";
}

// Adam and AdamW against torch's own, on several tensors of float32 or float64 with the same
// gradients, the state written by one read by the other in the middle of the run. In a flat
// buffer the gradients are written in place and the last tensor's stays zero (stepped by both);
// per parameter they are reassigned and the last is undefined (skipped by both).
TEST(OptimizerReference, FusedAdamEqualsTorchAdamOnEveryPathAndSharesItsState) {
  const Shapes shapes = {{7, 5}, {5}, {3, 4, 2}, {1}};
  for (auto type : {OptimizerType::kAdam, OptimizerType::kAdamW})
    for (auto dtype : {torch::kFloat, torch::kDouble})
      for (Path path : {Path::kFlatLoop, Path::kFlatDevice, Path::kPerParameterLoop,
                        Path::kPerParameterForeach}) {
        SCOPED_TRACE(to_string(type) + (dtype == torch::kFloat ? " float32, " : " float64, ") +
                     path_name(path));
        const bool flat = path == Path::kFlatLoop || path == Path::kFlatDevice;
        std::unique_ptr<GenericKernels> generic;
        if (path == Path::kFlatDevice || path == Path::kPerParameterForeach)
          generic = std::make_unique<GenericKernels>();
        auto mine = make_params(shapes, dtype, 3);
        auto theirs = copies(mine);
        const auto initial = copies(mine);
        const double lr = 0.01, wd = 0.05;
        auto fused = make_optimizer(type, mine, lr, wd);
        const auto reference = testing::torch_adam(type, theirs, lr, wd);
        const double tol = dtype == torch::kFloat ? 2e-6 : 1e-14;
        for (int step = 0; step < 12; ++step) {
          if (step == 6) {  // swap states: each continues from the other's
            std::stringstream a, b;
            save_optimizer(*fused, a);
            save_optimizer(*reference, b);
            load_optimizer(*fused, b);
            load_optimizer(*reference, a);
          }
          zero_gradients(mine);
          reference->zero_grad();
          for (size_t k = 0; k + 1 < shapes.size(); ++k) {
            const auto g = torch::randn(shapes[k], dtype) * double(step + 1);
            if (flat)
              set_grad(mine[k], g);
            else
              mine[k].mutable_grad() = g.clone();
            theirs[k].mutable_grad() = g.clone();
          }
          if (flat)
            theirs.back().mutable_grad() = torch::zeros_like(theirs.back());
          else
            mine.back().mutable_grad().reset();
          if (step > 0) {  // after the first step, which makes the state
            const auto ops = testing::aten_calls([&] { fused->step(); });
            switch (path) {
              case Path::kFlatLoop:  // after the swap, the loaded state is copied in once
                if (step != 6) {
                  EXPECT_TRUE(ops.empty()) << ops.size() << " ATen operations, first " << ops[0];
                }
                break;
              case Path::kPerParameterLoop:
                EXPECT_TRUE(ops.empty()) << ops.size() << " ATen operations, first " << ops[0];
                break;
              case Path::kFlatDevice:
                EXPECT_FALSE(reads_the_host(ops));
                EXPECT_EQ(count(ops, "aten::addcdiv_"), 1);  // one flat buffer
                EXPECT_FALSE(any_foreach(ops));
                break;
              case Path::kPerParameterForeach:
                EXPECT_TRUE(testing::called(ops, "aten::_foreach_addcdiv_"));
                break;
            }
          } else {
            fused->step();
          }
          reference->step();
          for (size_t k = 0; k < shapes.size(); ++k)
            EXPECT_LT(max_rel(mine[k], theirs[k]), tol) << "tensor " << k << " step " << step;
        }
        if (flat) {
          EXPECT_FALSE(torch::equal(mine.back(), initial.back()));  // stepped: weight decay
          EXPECT_EQ(state_steps(*fused), std::vector<int64_t>(shapes.size(), 12));
        } else {
          EXPECT_TRUE(torch::equal(mine.back(), initial.back()));  // never stepped
          EXPECT_EQ(state_steps(*fused), std::vector<int64_t>(shapes.size() - 1, 12));
        }
      }
}

// The warm-up taken from the optimizer's own step count (set_warmup) and a rate set between steps
// (as a schedule does) give torch's steps at the scaled rates, on the flat buffer's CPU loop and
// on its device tensors; the rate the schedules read stays the unscaled one.
TEST(OptimizerReference, WarmupAndRateChangesEqualTorchsScaledSteps) {
  const Shapes shapes = {{6, 4}, {4}, {2, 3}};
  const int64_t warmup = 4;
  for_each_adam_path([&](OptimizerType type, torch::Dtype dtype, bool device) {
    auto mine = make_params(shapes, dtype, 8);
    auto theirs = copies(mine);
    auto fused = make_optimizer(type, mine, /*learning_rate=*/0.02, /*weight_decay=*/0.05);
    const auto reference = testing::torch_adam(type, theirs, 0.02, 0.05);
    ASSERT_TRUE(set_warmup(*fused, warmup));
    const double tol = dtype == torch::kFloat ? 2e-6 : 1e-14;
    for (int64_t step = 1; step <= 10; ++step) {
      if (step == 3 || step == 7) {  // inside the warm-up and after it
        set_lr(*fused, 0.02 / double(step));
        set_lr(*reference, 0.02 / double(step));
      }
      zero_gradients(mine);
      reference->zero_grad();
      for (size_t k = 0; k < shapes.size(); ++k) {
        const auto g = torch::randn(shapes[k], dtype);
        set_grad(mine[k], g);
        theirs[k].mutable_grad() = g.clone();
      }
      fused->step();
      {
        const ScaledLr scaled(*reference, warmup_factor(step, warmup));
        reference->step();
      }
      for (size_t k = 0; k < shapes.size(); ++k)
        EXPECT_LT(max_rel(mine[k], theirs[k]), tol) << "tensor " << k << " step " << step;
    }
    EXPECT_EQ(get_lr(*fused), 0.02 / 7.0);
    EXPECT_EQ(state_steps(*fused), std::vector<int64_t>(shapes.size(), 10));
  });
  auto w = make_params({{3}}, torch::kDouble, 1);
  EXPECT_FALSE(set_warmup(*make_optimizer(OptimizerType::kSGD, w, 0.1, 0.0), warmup));
}

// The device-tensor path's step: no read of a device value on the host, as many ATen calls for 40
// parameters as for 3 (none per parameter, no multi-tensor operation with host scalars); a rate
// set between steps is written to the device then, not by the steps.
TEST(OptimizerDevice, AdamStepReadsNoHostValueAndDoesNotGrowWithParameters) {
  const GenericKernels generic;
  struct Calls {
    std::vector<std::string> step, set_lr, step_after;
  };
  const auto calls = [](int n_params) {
    const Shapes shapes = many_shapes(n_params);
    auto params = make_params(shapes, torch::kFloat, 2);
    auto adam = make_optimizer(OptimizerType::kAdamW, params, 0.01, /*weight_decay=*/0.01);
    set_warmup(*adam, 100);
    const auto step = [&] {
      zero_gradients(params);
      for (const auto& p : params) set_grad(p, torch::randn_like(p));
      return testing::aten_calls([&] { adam->step(); });
    };
    step();
    step();
    Calls c;
    c.step = step();
    c.set_lr = testing::aten_calls([&] { set_lr(*adam, 0.003); });
    c.step_after = step();
    return c;
  };
  const Calls few = calls(3), many = calls(40);
  for (const Calls* c : {&few, &many}) {
    EXPECT_FALSE(reads_the_host(c->step));
    EXPECT_FALSE(reads_the_host(c->step_after));
    EXPECT_FALSE(any_foreach(c->step));
    EXPECT_FALSE(testing::called(c->step, "aten::fill_"));
    EXPECT_TRUE(testing::called(c->set_lr, "aten::fill_"));  // the rate, written once
    EXPECT_FALSE(testing::called(c->step_after, "aten::fill_"));
  }
  EXPECT_EQ(few.step.size(), many.step.size());
  EXPECT_EQ(few.step_after, few.step);
  // torch's own step makes several calls per parameter.
  auto params = make_params(many_shapes(40), torch::kFloat, 2);
  for (const auto& p : params) p.mutable_grad() = torch::randn_like(p);
  const auto reference = testing::torch_adam(OptimizerType::kAdamW, params, 0.01, 0.01);
  reference->step();
  const auto torchs = testing::aten_calls([&] { reference->step(); });
  EXPECT_GT(torchs.size(), 4 * many.step.size());
}

// Zeroing, clipping and the weight average over flat buffers: as many ATen calls for 40
// parameters as for 3, no read on the host in the clipping or in the device path of the average.
TEST(OptimizerDevice, ZeroingClippingAndAverageMakeAFixedNumberOfCalls) {
  struct Calls {
    std::vector<std::string> zero, clip, average;
  };
  const auto calls = [](int n_params) {
    auto params = make_params(many_shapes(n_params), torch::kFloat, 4);
    auto adam = make_optimizer(OptimizerType::kAdam, params, 0.01, 0.0);  // lays them out
    for (const auto& p : params) set_grad(p, torch::randn_like(p));
    std::vector<const void*> starts;
    for (const auto& p : params) starts.push_back(p.grad().data_ptr());
    Calls c;
    c.zero = testing::aten_calls([&] { zero_gradients(params); });
    for (size_t k = 0; k < params.size(); ++k) {
      EXPECT_EQ(params[k].grad().data_ptr(), starts[k]);
      EXPECT_EQ(params[k].grad().abs().max().item<float>(), 0.0f);
    }
    for (const auto& p : params) set_grad(p, torch::randn_like(p));
    c.clip = testing::aten_calls([&] { clip_grad_norm(params, /*max_norm=*/0.1); });
    WeightAverage average(params, 0.99);
    const GenericKernels generic;
    average.update();
    c.average = testing::aten_calls([&] { average.update(); });
    return c;
  };
  const Calls few = calls(3), many = calls(40);
  EXPECT_EQ(few.zero.size(), many.zero.size());
  EXPECT_FALSE(testing::called(many.zero, "aten::zero_"));  // a memset of the buffer
  EXPECT_EQ(few.clip.size(), many.clip.size());
  EXPECT_EQ(count(many.clip, "aten::mul_"), 1);
  EXPECT_FALSE(reads_the_host(many.clip));
  EXPECT_EQ(few.average.size(), many.average.size());
  EXPECT_EQ(count(many.average, "aten::addcmul_"), 1);
  EXPECT_FALSE(reads_the_host(many.average));
}

// Clipping a flat buffer's gradients gives the norm and scaled gradients of the per-tensor path.
TEST(ClipGradNorm, FlatBufferEqualsTheTensorsOneByOne) {
  for (auto dtype : {torch::kFloat, torch::kDouble})
    for (double max_norm : {0.5, 1e6}) {
      auto flat = make_params(many_shapes(7), dtype, 5);
      auto loose = copies(flat);
      flatten_parameters(flat);
      for (size_t k = 0; k < flat.size(); ++k) {
        const auto g = torch::randn_like(flat[k]);
        set_grad(flat[k], g);
        loose[k].mutable_grad() = g.clone();
      }
      const double tol = dtype == torch::kFloat ? 1e-6 : 1e-14;
      double sum = 0;
      for (const auto& p : loose) sum += (p.grad() * p.grad()).sum().item<double>();
      const auto norm_flat = clip_grad_norm(flat, max_norm);
      const auto norm_loose = clip_grad_norm(loose, max_norm);
      EXPECT_LT(max_rel(norm_flat, norm_loose), tol);
      EXPECT_LT(std::abs(norm_flat.item<double>() / std::sqrt(sum) - 1.0), tol);
      for (size_t k = 0; k < flat.size(); ++k)
        EXPECT_LT(max_rel(flat[k].grad(), loose[k].grad()), tol) << k;
      EXPECT_LE(grad_norm(flat), std::min(max_norm, norm_loose.item<double>()) * (1 + tol));
    }
}

// The weight average's device path (d from a device count) equals its CPU loop, updates, load and
// swap included, and both equal the formula.
TEST(WeightAverage, DevicePathEqualsTheLoopAndTheFormula) {
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    auto a = make_params(many_shapes(6), dtype, 6);
    auto b = copies(a);
    flatten_parameters(a);
    flatten_parameters(b);
    const double decay = 0.9;
    WeightAverage loop(a, decay), device(b, decay);
    const auto expected = copies(a);  // the formula's shadows
    const double tol = dtype == torch::kFloat ? 1e-6 : 1e-15;
    torch::NoGradGuard no_grad;
    for (int n = 0; n < 8; ++n) {
      for (size_t k = 0; k < a.size(); ++k) {
        const auto step = torch::randn_like(a[k]);
        a[k].add_(step);
        b[k].add_(step);
      }
      loop.update();
      {
        const GenericKernels generic;
        device.update();
      }
      const double d = std::min(decay, (1.0 + n) / (10.0 + n));
      for (size_t k = 0; k < a.size(); ++k) expected[k].mul_(d).add_(a[k], 1.0 - d);
      if (n == 4) device.load(loop.shadows(), loop.updates());  // the device count follows
    }
    EXPECT_EQ(loop.updates(), 8);
    EXPECT_EQ(device.updates(), 8);
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_LT(max_rel(device.shadows()[k], loop.shadows()[k]), tol) << k;
      EXPECT_LT(max_rel(loop.shadows()[k], expected[k]), tol) << k;
    }
    const auto trained = copies(b);
    device.swap();  // the average into the parameters, theirs into the shadows
    for (size_t k = 0; k < b.size(); ++k) {
      EXPECT_LT(max_rel(b[k], loop.shadows()[k]), tol) << k;
      EXPECT_TRUE(torch::equal(device.shadows()[k], trained[k])) << k;
    }
    device.swap();
    for (size_t k = 0; k < b.size(); ++k) EXPECT_TRUE(torch::equal(b[k], trained[k]));
  }
}

// A step gate (the spike guard's, set_step_gate) that rejects a step leaves the parameters, the
// moments and, once synced, the step counts as they were, on the CPU's loop (the gate read there)
// and on the device path (the gate inside the operations, no host read), the first step and a
// nan gradient included; the run then goes on exactly as one that never saw the rejected steps.
// The weight average's gate likewise.
TEST(OptimizerGate, ARejectedStepChangesNothingAndTheRunGoesOnAsWithoutIt) {
  for_each_adam_path([&](OptimizerType type, torch::Dtype dtype, bool device) {
    auto gated = make_params(many_shapes(5), dtype, 11);
    auto plain = copies(gated);
    flatten_parameters(gated);
    flatten_parameters(plain);
    auto opt_gated = make_optimizer(type, gated, 0.01, 0.05);
    auto opt_plain = make_optimizer(type, plain, 0.01, 0.05);
    set_warmup(*opt_gated, 3);
    set_warmup(*opt_plain, 3);
    WeightAverage avg_gated(gated, 0.9), avg_plain(plain, 0.9);
    const auto yes = torch::ones({}, torch::kBool), no = torch::zeros({}, torch::kBool);
    ASSERT_TRUE(set_step_gate(*opt_gated, yes));
    const double tol = dtype == torch::kFloat ? 1e-6 : 1e-14;
    torch::manual_seed(5);
    // Steps 0 and 3 rejected (nan gradients); the others the same on both.
    for (int k = 0; k < 7; ++k) {
      const bool rejected = k == 0 || k == 3;
      std::vector<torch::Tensor> grads;
      for (const auto& p : gated)
        grads.push_back(rejected ? torch::full_like(p, NAN) : torch::randn_like(p));
      const auto before = copies(gated);
      const auto shadows_before = copies(avg_gated.shadows());
      for (size_t j = 0; j < gated.size(); ++j) set_grad(gated[j], grads[j]);
      const auto gate = rejected ? no : yes;
      set_step_gate(*opt_gated, gate);
      avg_gated.set_gate(gate);
      const auto ops = testing::aten_calls([&] {
        opt_gated->step();
        avg_gated.update();
      });
      if (device) {
        EXPECT_FALSE(reads_the_host(ops)) << "step " << k;
      }
      if (rejected) {
        for (size_t j = 0; j < gated.size(); ++j) {
          EXPECT_TRUE(torch::equal(gated[j], before[j])) << "step " << k << " param " << j;
          EXPECT_TRUE(torch::equal(avg_gated.shadows()[j], shadows_before[j])) << j;
        }
        continue;
      }
      for (size_t j = 0; j < plain.size(); ++j) set_grad(plain[j], grads[j]);
      opt_plain->step();
      avg_plain.update();
    }
    sync_step_counts(*opt_gated);
    avg_gated.sync_count();
    EXPECT_EQ(state_steps(*opt_gated), state_steps(*opt_plain));
    EXPECT_EQ(state_steps(*opt_gated), std::vector<int64_t>(gated.size(), 5));
    EXPECT_EQ(avg_gated.updates(), 5);
    for (size_t j = 0; j < gated.size(); ++j) {
      EXPECT_LT(max_rel(gated[j], plain[j]), tol) << j;
      EXPECT_LT(max_rel(avg_gated.shadows()[j], avg_plain.shadows()[j]), tol) << j;
    }
    // With the counts synced, an ungated step goes on in step with the plain run.
    set_step_gate(*opt_gated, torch::Tensor());
    avg_gated.set_gate(torch::Tensor());
    for (size_t j = 0; j < gated.size(); ++j) {
      const auto g = torch::randn_like(gated[j]);
      set_grad(gated[j], g);
      set_grad(plain[j], g);
    }
    opt_gated->step();
    opt_plain->step();
    for (size_t j = 0; j < gated.size(); ++j) EXPECT_LT(max_rel(gated[j], plain[j]), tol) << j;
  });
}

// An archive written by save_optimizer before the flat buffers (one state tensor each, step 3,
// lr 0.004, weight decay 0.05; tests/model/data) loads into the flat state, on either path, and the
// steps then equal torch's from the same archive; a flat state's archive is no larger than torch's.
TEST(OptimizerCheckpoint, ArchivesFromBeforeTheFlatBuffersLoadAndContinue) {
  for (auto type : {OptimizerType::kAdam, OptimizerType::kAdamW})
    for (bool device : {false, true}) {
      SCOPED_TRACE(to_string(type) + (device ? ", device tensors" : ", CPU loop"));
      const std::string path = std::string(DDGNN_SOURCE_DIR) + "/tests/model/data/" +
                               (type == OptimizerType::kAdam ? "adam" : "adamw") +
                               "_per_parameter.pt";
      torch::serialize::InputArchive in;
      in.load_from(path);
      std::vector<torch::Tensor> mine;
      for (int k = 0; k < 3; ++k) {
        torch::Tensor p;
        in.read("param_" + std::to_string(k), p);
        mine.push_back(p.clone().requires_grad_(true));
      }
      auto theirs = copies(mine);
      auto fused = make_optimizer(type, mine, /*learning_rate=*/0.5, /*weight_decay=*/0.0);
      const auto reference = testing::torch_adam(type, theirs, 0.5, 0.0);
      load_optimizer(*fused, path);
      load_optimizer(*reference, path);
      EXPECT_EQ(get_lr(*fused), 0.004);
      std::unique_ptr<GenericKernels> generic;
      if (device) generic = std::make_unique<GenericKernels>();
      torch::manual_seed(9);
      for (int step = 0; step < 3; ++step) {
        zero_gradients(mine);
        reference->zero_grad();
        for (size_t k = 0; k < mine.size(); ++k) {
          const auto g = torch::randn_like(mine[k]);
          set_grad(mine[k], g);
          theirs[k].mutable_grad() = g.clone();
        }
        fused->step();
        reference->step();
        for (size_t k = 0; k < mine.size(); ++k)
          EXPECT_LT(max_rel(mine[k], theirs[k]), 1e-14) << "tensor " << k << " step " << step;
      }
      EXPECT_EQ(state_steps(*fused), std::vector<int64_t>(3, 6));
      std::stringstream ours, torchs;
      save_optimizer(*fused, ours);
      save_optimizer(*reference, torchs);
      EXPECT_LE(ours.str().size(), torchs.str().size());
    }
}

}  // namespace
}  // namespace ddgnn
