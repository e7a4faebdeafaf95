// GPU tests of the training step's data path (ctest label gpu; skipped where no GPU is visible):
// a batch uploaded by the loader's uploader (one pinned copy on its own stream) equals the batch
// built on the host, and a training step of every mpnn_type (padded batch, AdamW, clipping, the
// weight average, the metrics and pending losses the trainer adds after it) never synchronises
// with the host: LibTorch's synchronisation check (sync debug mode "error") is on while it runs;
// and steps replayed as CUDA graphs equal the same steps run eagerly.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#ifdef DDGNN_TORCH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "../common/graph_block.h"
#include "../common/small_spec.h"
#include "model/gnn.h"
#include "model/layer.h"
#include "model/optim.h"
#include "train/split_metrics.h"
#include "train/static_shapes.h"
#include "train/step.h"
#include "train/step_graphs.h"
#include "train/upload.h"

namespace ddgnn {
namespace {

#define REQUIRE_GPU_HERE()                                                                 \
  if (!torch::cuda::is_available())                                                        \
  GTEST_SKIP() << "no GPU visible to this process: the GPU tests run where one is (build " \
                  "with jobs/build.sh --gpu)"

const c10::Device kGpu(c10::kCUDA, 0);

ModelSetup setup_for(const std::string& type, c10::Device device) {
  ModelSetup s;
  s.spec = testing::small_spec(type, 3.0);
  s.graph.radius = 3.0;
  s.periodic = true;
  s.precision = Precision::kFloat32;
  s.targets = testing::targets_of(s.spec, true);
  s.device = device;
  if (!device.is_cpu()) s.uploader = std::make_shared<const BatchUploader>(device);
  return s;
}

TEST(GpuStep, AnUploadedBatchEqualsTheHostBatch) {
  REQUIRE_GPU_HERE();
  for (const std::string type : {"SchNet", "DimeNet"}) {
    const GraphBlock block = testing::test_block();
    const PreparedBatch host = prepare_batch(block, {0, 1}, setup_for(type, c10::kCPU));
    const PreparedBatch gpu = prepare_batch(block, {0, 1}, setup_for(type, kGpu));
    ASSERT_TRUE(gpu.upload) << "moved by the uploader";
    wait_for_upload(gpu);
    const GraphBatch &a = host.batch, &b = gpu.batch;
    EXPECT_EQ(b.pos.device(), kGpu);
    EXPECT_TRUE(at::equal(b.pos.cpu(), a.pos));
    EXPECT_TRUE(at::equal(b.edge_index.cpu(), a.edge_index));
    EXPECT_TRUE(at::equal(b.edge_shift.cpu(), a.edge_shift));
    EXPECT_TRUE(at::equal(b.forces.cpu(), a.forces));
    EXPECT_TRUE(at::equal(b.receivers->ptr.cpu(), a.receivers->ptr));
    EXPECT_TRUE(b.receivers->order.defined()) << "made explicit for the device";
    if (type == "DimeNet") {
      EXPECT_TRUE(at::equal(b.triplets.cpu(), a.triplets));
    }
  }
}

TEST(GpuStep, NoSynchronisationInsideAStep) {
  REQUIRE_GPU_HERE();
#ifdef DDGNN_TORCH_CUDA
  std::vector<std::string> types = known_layers();
  types.push_back("GPS");
  for (const std::string& name : types) {
    SCOPED_TRACE(name);
    const std::string type = name == "GPS" ? "SchNet" : name;
    ModelSetup setup = setup_for(type, kGpu);
    if (name == "GPS") {
      setup.spec.gps_heads = 4;
      setup.spec.pe_dim = 3;
    }
    const GraphBlock block = testing::test_block();
    // Padded into one shape with room (what Loader.static_shapes makes at start).
    {
      const PreparedBatch probe = prepare_batch(block, {0, 1}, setup_for(type, c10::kCPU));
      auto shapes = std::make_shared<StaticShapes>();
      const BatchSizes s = sizes_of(probe.batch);
      shapes->buckets = {ShapeBucket{s.graphs + 2, s.atoms + 8, s.edges + 16,
                                     s.triplets > 0 ? s.triplets + 16 : 0,
                                     std::max<int64_t>(s.graph_atoms, 8), 64}};
      shapes->pad.radius = setup.graph.radius;
      setup.static_shapes = shapes;
    }
    at::manual_seed(7);
    Gnn gnn(setup.spec);
    gnn.to(kGpu, at::kFloat);
    const std::vector<at::Tensor> params = gnn.parameters();
    const auto optimizer = make_optimizer(OptimizerType::kAdamW, params, 1e-3, 0.01);
    WeightAverage average(params, 0.99);
    TrainSettings ts;
    ts.weights = {1.0, 0.5, 10.0, 0.0};
    ts.grad_clip = 1.0;
    ts.warmup_steps = 5;
    TrainStep step(gnn, params, *optimizer, nullptr, &average, setup, ts);
    SplitMetrics metrics(setup);
    PendingSteps pending;
    const StepShare share;
    for (int k = 1; k <= 4; ++k) {
      StepBatch sb;
      sb.prepared = prepare_batch(block, {0, 1}, setup, &share);
      ASSERT_EQ(sb.prepared.bucket, 0);
      sb.empty = false;
      sb.graphs_all = sb.prepared.batch.real_graphs();
      sb.atoms_all = sb.prepared.batch.real_atoms();
      StepPlace place;
      place.step = k;
      // The first steps make the optimizer's state and the layers' constant tables.
      if (k >= 3) c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR);
      try {
        const StepResult r = step.run(sb, place);
        metrics.add(r.prediction, sb.prepared, setup, r.loss, sb.graphs_all);
        pending.add(r, sb, place);
      } catch (const std::exception& e) {
        c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
        FAIL() << "step " << k << " synchronised: " << e.what();
      }
      c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
    }
    for (const auto& r : pending.read()) EXPECT_TRUE(std::isfinite(r.loss));
  }
#endif
}

// Runtime.cuda_graphs: the steps of a shape after its warm-up, captured once and replayed, leave
// the parameters, the optimizer's and the weight average's state as the same steps run eagerly
// do (float64, every mpnn_type), with the same losses and gradient norms.
TEST(GpuStep, CapturedStepsEqualEagerSteps) {
  REQUIRE_GPU_HERE();
  std::vector<std::string> types = known_layers();
  types.push_back("GPS");
  for (const std::string& name : types) {
    SCOPED_TRACE(name);
    const std::string type = name == "GPS" ? "SchNet" : name;
    const GraphBlock block = testing::test_block();
    auto shapes = std::make_shared<StaticShapes>();
    {
      const PreparedBatch probe = prepare_batch(block, {0, 1}, setup_for(type, c10::kCPU));
      const BatchSizes s = sizes_of(probe.batch);
      shapes->buckets = {ShapeBucket{s.graphs + 2, s.atoms + 8, s.edges + 16,
                                     s.triplets > 0 ? s.triplets + 16 : 0,
                                     std::max<int64_t>(s.graph_atoms, 8), 64}};
      shapes->pad.radius = 3.0;
    }
    struct Run {
      ModelSetup setup;
      std::unique_ptr<Gnn> gnn;
      std::vector<at::Tensor> params;
      std::unique_ptr<torch::optim::Optimizer> opt;
      std::unique_ptr<WeightAverage> average;
      TrainSettings ts;
      std::unique_ptr<TrainStep> step;
    };
    const auto make = [&](bool graphs) {
      auto r = std::make_unique<Run>();
      r->setup = setup_for(type, kGpu);
      r->setup.precision = Precision::kFloat64;
      if (name == "GPS") {
        r->setup.spec.gps_heads = 4;
        r->setup.spec.pe_dim = 3;
      }
      r->setup.static_shapes = shapes;
      at::manual_seed(7);
      r->gnn = std::make_unique<Gnn>(r->setup.spec);
      r->gnn->to(kGpu, at::kDouble);
      r->params = r->gnn->parameters();
      r->opt = make_optimizer(OptimizerType::kAdamW, r->params, 1e-3, 0.01);
      r->average = std::make_unique<WeightAverage>(r->params, 0.99);
      r->ts.weights = {1.0, 0.5, 10.0, 0.0};
      r->ts.grad_clip = 1.0;
      r->ts.warmup_steps = 5;
      r->ts.cuda_graphs = graphs;
      r->step = std::make_unique<TrainStep>(*r->gnn, r->params, *r->opt, nullptr, r->average.get(),
                                            r->setup, r->ts);
      return r;
    };
    const auto eager = make(false), captured = make(true);
    ASSERT_NE(captured->step->graphs(), nullptr);
    const StepShare share;
    // Two batches of one shape, alternating (the cell's atoms moved between them).
    const std::vector<std::vector<int64_t>> ids = {{0, 1}, {1, 0}};
    for (int k = 1; k <= 8; ++k) {
      StepPlace place;
      place.step = k;
      double loss[2], norm[2];
      int i = 0;
      for (Run* run : {eager.get(), captured.get()}) {
        StepBatch sb;
        sb.prepared = prepare_batch(block, ids[size_t(k % 2)], run->setup, &share);
        sb.empty = false;
        sb.graphs_all = sb.prepared.batch.real_graphs();
        sb.atoms_all = sb.prepared.batch.real_atoms();
        const StepResult r = run->step->run(sb, place);
        loss[i] = r.loss.item<double>();
        norm[i] = r.grad_norm.item<double>();
        ++i;
      }
      EXPECT_NEAR(loss[1], loss[0], 1e-10 * std::abs(loss[0])) << "step " << k;
      EXPECT_NEAR(norm[1], norm[0], 1e-10 * std::abs(norm[0])) << "step " << k;
      for (size_t p = 0; p < eager->params.size(); ++p)
        ASSERT_LT((captured->params[p] - eager->params[p]).abs().max().item<double>(),
                  1e-10 * (1.0 + eager->params[p].abs().max().item<double>()))
            << "step " << k << " parameter " << p;
    }
    EXPECT_EQ(captured->step->graphs()->replayed(), 8 - StepGraphs::kWarmupSteps);
    EXPECT_EQ(captured->average->updates(), eager->average->updates());
    for (size_t p = 0; p < eager->params.size(); ++p)
      EXPECT_LT((captured->average->shadows()[p] - eager->average->shadows()[p])
                    .abs()
                    .max()
                    .item<double>(),
                1e-10);
  }
}

}  // namespace
}  // namespace ddgnn
