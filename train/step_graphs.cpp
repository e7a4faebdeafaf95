// The training step replayed as CUDA graphs (train/step_graphs.h).
#include "train/step_graphs.h"

#include <ATen/ATen.h>

#include <map>

#include "comm/watchdog.h"
#include "core/error.h"
#include "model/optim.h"
#include "train/ddp.h"
#include "train/step.h"
#include "train/upload.h"

#ifdef DDGNN_TORCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ddgnn {

#ifdef DDGNN_TORCH_CUDA

namespace {

using Clock = std::chrono::steady_clock;

// One fixed shape's graphs and the tensors they read and write.
struct Shape {
  int64_t eager = 0;  // steps run eagerly so far (the warm-up)
  PackedLayout layout;
  at::Tensor input;     // [layout.bytes] kByte on the device: the batch a replay reads
  PreparedBatch batch;  // views of `input`
  std::unique_ptr<at::cuda::CUDAGraph> forward, update;
  Prediction outputs;  // what `forward` writes
  at::Tensor loss, grad_norm, guard;
};

}  // namespace

struct StepGraphs::Impl {
  TrainStep& step;
  c10::Device device;
  std::map<int, Shape> shapes;
  at::cuda::MempoolId_t pool{0, 0};  // the first graph's, shared by the others
  int64_t replayed = 0, eager = 0;

  Impl(TrainStep& s, c10::Device d) : step(s), device(d) {}

  // The shape's input buffer and batch views, and its two graphs, captured with `in` (which fills
  // the input): nothing runs during a capture, so the caller replays them for this step.
  void capture(Shape& s, const PreparedBatch& in, const StepPlace& place) {
    s.layout = in.upload->layout;
    s.input = at::empty({s.layout.bytes}, at::TensorOptions().dtype(at::kByte).device(device));
    s.input.copy_(in.upload->buffer, /*non_blocking=*/true);
    s.batch = in;
    s.batch.upload.reset();
    const bool species_is_z = s.batch.batch.species.is_same(s.batch.batch.z);
    unpack_views(batch_tensors(s.batch), s.layout, s.input);
    if (species_is_z) s.batch.batch.species = s.batch.batch.z;
    try {
      s.forward = std::make_unique<at::cuda::CUDAGraph>();
      s.forward->capture_begin(pool);
      s.outputs = step.forward_backward(s.batch, StepShare{}, s.loss);
      s.forward->capture_end();
      if (pool.first == 0 && pool.second == 0) pool = s.forward->pool();
      s.update = std::make_unique<at::cuda::CUDAGraph>();
      s.update->capture_begin(pool);
      TrainStep::Update u = step.update(place);
      s.grad_norm = u.grad_norm;
      s.guard = u.guard;
      s.update->capture_end();
    } catch (const std::exception& e) {
      throw Error(std::string("capturing the training step as a CUDA graph failed: ") + e.what(),
                  "set Runtime.cuda_graphs to false (the step then runs eagerly)");
    }
  }

  StepResult run(const StepBatch& sb, const StepPlace& place) {
    const PreparedBatch& in = sb.prepared;
    Shape& s = shapes[in.bucket];
    const bool first = !s.forward;
    if (!in.upload || (first && s.eager < kWarmupSteps) ||
        (!first && !(in.upload->layout == s.layout))) {
      ++s.eager;
      ++eager;
      return step.run_eager(sb, place);
    }
    StepResult r;
    StepTimes& t = r.times;
    t.start = Clock::now();
    if (first) {
      capture(s, in, place);
    } else {
      s.input.copy_(in.upload->buffer, /*non_blocking=*/true);
    }
    s.forward->replay();
    t.forward = t.forces = t.backward = Clock::now();
    if (DataParallel* ddp = step.ddp()) {
      ddp->begin_step();
      Waiting waiting("gradient all-reduce");
      ddp->finish_step();
    }
    t.synced = Clock::now();
    s.update->replay();
    // The capture advanced the host's counts once, for this step; a replay does not.
    if (!first) {
      if (!note_replayed_step(step.optimizer()) ||
          (step.average() && !step.average()->replayed_update()))
        throw Error(
            "a replayed training step left the optimizer's or the weight average's "
            "counts behind the device's (a parameter outside the flat buffers)",
            "set Runtime.cuda_graphs to false");
    }
    t.done = Clock::now();
    ++replayed;
    r.loss = s.loss;
    r.grad_norm = s.grad_norm;
    r.guard = s.guard;
    r.prediction = s.outputs;
    return r;
  }
};

bool StepGraphs::available() {
  return true;
}

StepGraphs::StepGraphs(TrainStep& step, c10::Device device)
    : m(std::make_unique<Impl>(step, device)) {
  if (!device.is_cuda()) throw Error("CUDA graphs: the model is not on a CUDA device");
  // Captures need a stream other than the default one: the training thread's steps (and all it
  // does after) run on a stream of their own from here on.
  c10::cuda::setCurrentCUDAStream(c10::cuda::getStreamFromPool(false, device.index()));
}

StepResult StepGraphs::run(const StepBatch& batch, const StepPlace& place) {
  return m->run(batch, place);
}

int64_t StepGraphs::replayed() const {
  return m->replayed;
}

int64_t StepGraphs::eager() const {
  return m->eager;
}

#else  // a build without CUDA

struct StepGraphs::Impl {};

bool StepGraphs::available() {
  return false;
}

StepGraphs::StepGraphs(TrainStep&, c10::Device) {
  throw ConfigError("Runtime.cuda_graphs: this build has no CUDA",
                    "build with jobs/build.sh --gpu, or set Runtime.cuda_graphs to false");
}

StepResult StepGraphs::run(const StepBatch& batch, const StepPlace& place) {
  throw Error("CUDA graphs in a build without CUDA");
}

int64_t StepGraphs::replayed() const {
  return 0;
}

int64_t StepGraphs::eager() const {
  return 0;
}

#endif

StepGraphs::~StepGraphs() = default;

}  // namespace ddgnn
