// A training step never waits for the device: the ATen calls of TrainStep::run and of what the
// trainer does after each step (the split metrics, the pending losses), recorded on the CPU under
// GenericKernels (the code that runs on a GPU), for every mpnn_type and the model options with
// code of their own. A read of a device value on the host (item, _local_scalar_dense), an op
// whose output size depends on the data (nonzero, repeat_interleave without its size, bincount,
// unique, masked_select) or a move between devices (to or _to_copy with a device: an upload or a
// copy to the host) fails the test, naming the op and the ops before it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "../common/aten_calls.h"
#include "../common/graph_block.h"
#include "../common/model_cases.h"
#include "../common/small_spec.h"
#include "../common/structures.h"
#include "model/device.h"
#include "model/gnn.h"
#include "model/layer.h"
#include "model/optim.h"
#include "train/split_metrics.h"
#include "train/static_shapes.h"
#include "train/step.h"

namespace ddgnn {
namespace {

constexpr double kRadius = 3.0;

// The ops that make the host wait for the device or move data between devices, with the op that
// made each (and the ops just before it), or "" when there is none.
std::string host_waits(const std::vector<testing::AtenCall>& calls) {
  static const std::vector<std::string> kWaits = {
      "aten::item",
      "aten::_local_scalar_dense",
      "aten::nonzero",
      "aten::nonzero_numpy",
      "aten::argwhere",
      "aten::masked_select",
      "aten::bincount",
      "aten::_unique",
      "aten::_unique2",
      "aten::unique_dim",
      "aten::unique_consecutive",
      "aten::is_nonzero",
      "aten::equal",
      "aten::allclose",
  };
  std::map<std::string, int> seen;  // each kind once, with how often it came
  std::vector<std::string> order;
  for (size_t k = 0; k < calls.size(); ++k) {
    const testing::AtenCall& c = calls[k];
    std::string why;
    if (std::find(kWaits.begin(), kWaits.end(), c.name) != kWaits.end())
      why = "reads the device on the host";
    else if ((c.name == "aten::to" || c.name == "aten::_to_copy") && c.has_device)
      why = "moves a tensor between devices";
    else if (c.name == "aten::repeat_interleave" && !c.has_size)
      why = "sizes its output from the data (no output_size)";
    if (why.empty()) continue;
    std::string line = c.name + " " + why + ", after";
    for (size_t j = k >= 4 ? k - 4 : 0; j < k; ++j) line += " " + calls[j].name;
    if (seen[line]++ == 0) order.push_back(line);
  }
  std::string out;
  for (const auto& line : order) out += line + " (" + std::to_string(seen[line]) + " times)\n";
  return out;
}

class StepWaits : public ::testing::TestWithParam<testing::ModelCase> {};

TEST_P(StepWaits, NoHostWaitOrDeviceMoveInAStep) {
  const testing::ModelCase& c = GetParam();
  GnnSpec spec = testing::small_spec(c.mpnn_type, kRadius);
  if (c.adjust) c.adjust(spec);
  ModelSetup setup;
  setup.spec = spec;
  setup.graph.radius = kRadius;
  setup.periodic = true;
  setup.precision = Precision::kFloat64;
  if (c.smooth_cap) {
    setup.graph.max_neighbours = 4;
    setup.graph.smooth_cap = true;
  }
  setup.targets = testing::targets_of(spec, /*conservative=*/true);
  setup.targets.stress = c.stress;
  const bool stress = c.stress;
  setup.norm.column_mean.resize(spec.heads.size());
  setup.norm.column_std.resize(spec.heads.size());
  for (size_t k = 0; k < spec.heads.size(); ++k) {
    HeadTarget& h = setup.targets.heads[k];
    if (h.name != "gap" && h.name != "charge") continue;
    h.source = TargetSource::kColumn;
    h.column = h.name == "gap" ? 1 : 0;  // graph column 1, per-atom column 0 (graph_block.h)
    setup.norm.column_mean[k].assign(size_t(h.dim), 0.5);
    setup.norm.column_std[k].assign(size_t(h.dim), 2.0);
  }
  if (c.columns) setup.branch_column = 0;

  at::manual_seed(7);
  Gnn gnn(spec);
  gnn.to(at::kDouble);
  const std::vector<at::Tensor> params = gnn.parameters();
  const auto optimizer = make_optimizer(OptimizerType::kAdamW, params, 1e-3, 0.01);
  WeightAverage average(params, 0.99);
  TrainSettings s;
  s.weights = {1.0, 0.5, 10.0, stress ? 1.0 : 0.0};
  s.grad_clip = 1.0;
  s.warmup_steps = 5;
  TrainStep step(gnn, params, *optimizer, /*ddp=*/nullptr, &average, setup, s);

  const GraphBlock block = testing::test_block();
  GenericKernels generic;
  // The batch as it is, then padded into a fixed shape (Loader.static_shapes: what a replayed
  // step reads), at steps 1-3 and 4-6.
  for (const bool padded : {false, true}) {
    SCOPED_TRACE(padded ? "padded" : "as it is");
    StepShare share;
    if (padded) {
      const BatchSizes n = sizes_of(prepare_batch(block, {0, 1}, setup).batch);
      auto shapes = std::make_shared<StaticShapes>();
      shapes->buckets = {ShapeBucket{n.graphs + 2, n.atoms + 8, n.edges + 16,
                                     n.triplets > 0 ? n.triplets + 16 : 0,
                                     std::max<int64_t>(n.graph_atoms, 8), 64}};
      shapes->pad.radius = kRadius;
      shapes->pad.stress = stress;
      shapes->pad.cap_boundary = c.smooth_cap;
      setup.static_shapes = shapes;
    }
    StepBatch sb;
    sb.prepared = prepare_batch(block, {0, 1}, setup, &share);
    ASSERT_EQ(sb.prepared.bucket, padded ? 0 : -1);
    sb.empty = false;
    sb.graphs_all = sb.prepared.batch.real_graphs();
    sb.atoms_all = sb.prepared.batch.real_atoms();
    ASSERT_EQ(sb.prepared.batch.n_stress, 1) << "the cell has a stress";
    SplitMetrics metrics(setup);
    PendingSteps pending;
    // The first steps make the optimizer's state and the layers' constant tables; the third is
    // what every later step does.
    StepPlace place;
    std::vector<testing::AtenCall> calls;
    for (int k = 1; k <= 3; ++k) {
      place.step = k + (padded ? 3 : 0);
      const auto one_step = [&] {
        const StepResult r = step.run(sb, place);
        metrics.add(r.prediction, sb.prepared, setup, r.loss, sb.graphs_all);
        pending.add(r, sb, place);
      };
      if (k < 3)
        one_step();
      else
        calls = testing::aten_calls_with_arguments(one_step);
    }
    ASSERT_GT(calls.size(), 50u) << "the step was recorded";
    EXPECT_EQ(host_waits(calls), "");
    // The step trained: the losses read afterwards are finite.
    for (const auto& r : pending.read()) EXPECT_TRUE(std::isfinite(r.loss)) << r.step;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryModel, StepWaits, ::testing::ValuesIn(testing::model_cases()),
                         [](const auto& info) { return info.param.name; });

// The recorder sees what it must: each kind of host wait it is meant to catch, in a small piece of
// code that makes it.
TEST(StepWaitsRecorder, CatchesEachKindOfHostWait) {
  const at::Tensor x = at::arange(6, at::kLong);
  const std::vector<std::pair<std::string, std::function<void()>>> makers = {
      {"item", [&] { (void)x.sum().item<int64_t>(); }},
      {"nonzero", [&] { (void)(x > 2).nonzero(); }},
      {"mask", [&] { (void)x.index({x > 2}); }},
      {"repeat", [&] { (void)at::repeat_interleave(x, x); }},
      {"bincount", [&] { (void)at::bincount(x); }},
      {"upload",
       [&] {
         (void)at::tensor(std::vector<int64_t>{1, 2}).to(x.device());
       }},
      {"to host", [&] { (void)x.cpu(); }},
      {"in a backward",
       [&] {  // what autograd runs during backward is recorded too
         const at::Tensor w = at::ones({3}, at::kDouble).requires_grad_(true);
         w.register_hook([](const at::Tensor& g) {
           (void)g.sum().item<double>();
           return g;
         });
         (w * w).sum().backward();
       }},
  };
  for (const auto& [name, fn] : makers)
    EXPECT_NE(host_waits(testing::aten_calls_with_arguments(fn)), "") << name;
  // And passes what does not wait: a dtype change, a repeat of known size, a gather.
  EXPECT_EQ(host_waits(testing::aten_calls_with_arguments([&] {
              (void)x.to(at::kDouble);
              (void)at::repeat_interleave(x, x, /*dim=*/c10::nullopt, /*output_size=*/15);
              (void)x.index_select(0, x.flip(0));
            })),
            "");
}

}  // namespace
}  // namespace ddgnn
