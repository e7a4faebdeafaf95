// One training step (train/step.h).
#include "train/step.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "comm/watchdog.h"
#include "core/error.h"
#include "core/log.h"
#include "train/spikes.h"
#include "train/step_graphs.h"
#include "train/upload.h"

namespace ddgnn {

namespace {

using Clock = std::chrono::steady_clock;

// Test hooks, "R:S" = rank R at step S: DDGNN_DEBUG_FAIL_AT_STEP throws (a rank that fails),
// DDGNN_DEBUG_STOP_AT_STEP stops the process with SIGSTOP (a rank that stops answering).
struct Hook {
  int64_t rank = -1, step = -1;
  explicit Hook(const char* name) {
    const char* v = std::getenv(name);
    const char* colon = v ? std::strchr(v, ':') : nullptr;
    if (!colon) return;
    rank = std::atoll(v);
    step = std::atoll(colon + 1);
  }
  bool now(const StepPlace& p) const { return step == p.step && rank == p.rank; }
};

std::string where(const StepPlace& p) {
  return "epoch " + std::to_string(p.epoch) + " step " + std::to_string(p.step);
}

// A value for a message: "nan" whatever its sign bit, else %.4g.
std::string number(double v) {
  return std::isnan(v) ? std::string("nan") : fmt("%.4g", v);
}

// What the spike guard judged of a skipped step (its record `guard`, SpikeGuard::Record).
std::string skip_reason(const PendingSteps::Read& r, const double* guard, double factor,
                        int world) {
  const double loss_median = guard[SpikeGuard::kLossMedian];
  const double norm_median = guard[SpikeGuard::kNormMedian];
  const std::string times = " (more than Training.spike_factor " + fmt("%g", factor) +
                            " times the median of the last steps, ";
  if (guard[SpikeGuard::kLossSpike] != 0.0) {
    if (!std::isfinite(r.loss)) return "the loss is " + number(r.loss);
    return "the loss " + number(r.loss) + times + number(loss_median) + ")";
  }
  if (!std::isfinite(r.grad_norm))
    return "the gradient norm is " + number(r.grad_norm) +
           (world > 1 ? " (the loss of another rank's part of the step)" : std::string());
  return "the gradient norm " + number(r.grad_norm) + times + number(norm_median) + ")";
}

}  // namespace

TrainStep::TrainStep(Gnn& gnn, const std::vector<at::Tensor>& params,
                     torch::optim::Optimizer& optimizer, DataParallel* ddp, WeightAverage* average,
                     const ModelSetup& setup, const TrainSettings& settings)
    : m_gnn(gnn),
      m_params(params),
      m_optimizer(optimizer),
      m_ddp(ddp),
      m_average(average),
      m_setup(setup),
      m_s(settings),
      m_warmup_inside(set_warmup(optimizer, settings.warmup_steps)) {
  if (settings.cuda_graphs && setup.device.is_cuda())
    m_graphs = std::make_unique<StepGraphs>(*this, setup.device);
  if (settings.spike_factor > 0)
    m_guard = std::make_unique<SpikeGuard>(settings.spike_factor, setup.device);
}

TrainStep::~TrainStep() = default;

void TrainStep::forget_spike_history() {
  if (m_guard) m_guard->forget();
}

StepResult TrainStep::run(const StepBatch& sb, const StepPlace& place) {
  static const Hook fail("DDGNN_DEBUG_FAIL_AT_STEP"), stop("DDGNN_DEBUG_STOP_AT_STEP");
  if (fail.now(place))
    throw Error("DDGNN_DEBUG_FAIL_AT_STEP: rank " + std::to_string(place.rank) + " fails at step " +
                std::to_string(place.step) + " as asked");
  if (stop.now(place)) std::raise(SIGSTOP);
  if (!sb.empty) wait_for_upload(sb.prepared);  // on the device: the step's stream waits
  if (m_graphs && !sb.empty && sb.prepared.bucket >= 0) return m_graphs->run(sb, place);
  return run_eager(sb, place);
}

StepResult TrainStep::run_eager(const StepBatch& sb, const StepPlace& place) {
  StepResult r;
  StepTimes& t = r.times;
  t.start = t.forward = t.forces = t.backward = Clock::now();
  if (m_ddp) m_ddp->begin_step();  // the loss carries each rank's share: gradients add up
  if (sb.empty) {
    zero_gradients(m_params);
  } else {
    StepShare share;
    if (!sb.prepared.share.defined() && m_ddp) {
      share.graphs = double(sb.prepared.batch.n_graphs) / double(sb.graphs_all);
      share.atoms = double(sb.prepared.batch.n_atoms()) / double(sb.atoms_all);
    }
    const Prediction p = forward_backward(sb.prepared, share, r.loss, &t);
    c10::NoGradGuard no_grad;
    r.prediction.energy = p.energy.defined() ? p.energy.detach() : p.energy;
    r.prediction.forces = p.forces.defined() ? p.forces.detach() : p.forces;
    r.prediction.stress = p.stress.defined() ? p.stress.detach() : p.stress;
    for (const auto& o : p.outputs) r.prediction.outputs.push_back(o.detach());
  }
  if (m_ddp) {
    Waiting waiting("gradient all-reduce");
    m_ddp->finish_step();
  }
  t.synced = Clock::now();
  Update u = update(place);
  r.grad_norm = std::move(u.grad_norm);
  r.guard = std::move(u.guard);
  t.done = Clock::now();
  return r;
}

Prediction TrainStep::forward_backward(const PreparedBatch& b, StepShare share, at::Tensor& loss,
                                       StepTimes* t) {
  zero_gradients(m_params);  // in place: one memset or zero_ of the flat gradient buffer
  // Forward and the energy, then the forces (their backward keeps the graph for the loss).
  Prediction p =
      predict(m_gnn, m_setup.targets, b.batch, /*create_graph=*/true, t ? &t->forward : nullptr);
  if (t) t->forces = Clock::now();
  if (b.share.defined()) share.device = b.share;  // a padded batch: its shares are device data
  const at::Tensor l =
      total_loss(p, b.batch, b.columns, m_setup.targets, m_s.weights, m_s.loss, share);
  loss = l.detach();
  backward_to_parameters(m_guard ? m_guard->judge_loss(l) : l, m_params);
  if (t) t->backward = Clock::now();
  return p;
}

TrainStep::Update TrainStep::update(const StepPlace& place) {
  Update u;
  if (m_s.grad_clip > 0)
    u.grad_norm = clip_grad_norm(m_params, m_s.grad_clip);
  else if (m_guard)
    u.grad_norm = grad_norm_tensor(m_params);
  bool apply = true;
  if (m_guard) {
    SpikeGuard::Verdict v = m_guard->judge_step(u.grad_norm);
    u.guard = std::move(v.record);
    // Adam and AdamW apply the gate inside their step; the others' is read here (a wait for the
    // device off the CPU).
    if (!set_step_gate(m_optimizer, v.apply)) apply = v.apply.item<bool>();
    if (m_average) m_average->set_gate(v.apply);
  }
  if (apply) {
    // Adam and AdamW take the warm-up from their own step count (on the device); the others here.
    const ScaledLr warmup(m_optimizer,
                          m_warmup_inside ? 1.0 : warmup_factor(place.step, m_s.warmup_steps));
    m_optimizer.step();
    if (m_average) m_average->update();
  }
  return u;
}

void PendingSteps::add(const StepResult& r, const StepBatch& batch, const StepPlace& place) {
  Step s;
  s.place = place;
  s.graphs = batch.graphs_all;
  s.has_loss = r.loss.defined();
  s.has_norm = r.grad_norm.defined();
  s.has_guard = r.guard.defined();
  if (s.has_loss) {
    const auto& ids = batch.prepared.ids;
    s.ids.assign(ids.begin(), ids.begin() + long(std::min<size_t>(ids.size(), 65)));
  }
  if (s.has_loss || s.has_norm) {
    const at::Tensor like = s.has_loss ? r.loss : r.grad_norm;
    const auto zero = [&] { return at::zeros({}, like.options().dtype(at::kDouble)); };
    at::Tensor values = at::stack({s.has_loss ? r.loss.to(at::kDouble).reshape({}) : zero(),
                                   s.has_norm ? r.grad_norm.to(at::kDouble).reshape({}) : zero()});
    m_values.push_back(s.has_guard ? at::cat({values, r.guard}) : values);
  }
  m_steps.push_back(std::move(s));
}

std::vector<PendingSteps::Read> PendingSteps::read() {
  std::vector<Read> out;
  at::Tensor host;
  if (!m_values.empty()) host = at::cat(m_values).to(at::kCPU).contiguous();
  const double* v = host.defined() ? host.data_ptr<double>() : nullptr;
  for (const Step& s : m_steps) {
    Read r;
    r.step = s.place.step;
    r.graphs = s.graphs;
    r.has_loss = s.has_loss;
    double guard[SpikeGuard::kRecordSize] = {};
    if (s.has_loss || s.has_norm) {
      r.loss = v[0];
      r.grad_norm = v[1];
      v += 2;
      if (s.has_guard) {
        std::copy(v, v + SpikeGuard::kRecordSize, guard);
        v += SpikeGuard::kRecordSize;
      }
    }
    const StepPlace& p = s.place;
    const std::string at =
        where(p) + (p.world > 1 ? " (rank " + std::to_string(p.rank) + ")" : std::string());
    const auto graphs = [&] {
      std::string ids;
      for (size_t k = 0; k < s.ids.size() && k < 64; ++k)
        ids += (k ? "," : "") + std::to_string(s.ids[k]);
      if (s.ids.size() > 64) ids += ",...";
      return ids.empty() ? std::string()
                         : " on the batch of graphs [" + ids + "] (indices in " + p.data_path + ")";
    };
    r.where = at;
    r.graphs_text = graphs();
    if (s.has_guard) {
      r.skipped = guard[SpikeGuard::kSkipped] != 0.0;
      r.spike_applied = guard[SpikeGuard::kPersisted] != 0.0;
      if (r.skipped) r.why = skip_reason(r, guard, m_factor, p.world);
      out.push_back(r);
      continue;
    }
    if (s.has_loss && !std::isfinite(r.loss))
      throw TrainingError(at + ": the loss is " + fmt("%g", r.loss) + graphs(),
                          "lower Training.Optimizer.learning_rate or set Training.grad_clip; check "
                          "those graphs (overlapping atoms, huge forces) with `ddgnn info`");
    if (s.has_norm && !std::isfinite(r.grad_norm))
      throw TrainingError(
          at + ": the gradient norm is " + fmt("%g", r.grad_norm) +
              (s.has_loss ? " (the loss " + fmt("%g", r.loss) + ")" : std::string()) + graphs(),
          "a finite loss with an overflowing gradient in the first epochs is most often a "
          "learning rate too high for the start: lower Training.Optimizer.learning_rate or "
          "raise it gradually (Training.warmup_steps, e.g. one or two epochs' steps); check "
          "those graphs with `ddgnn info`");
    out.push_back(r);
  }
  m_steps.clear();
  m_values.clear();
  return out;
}

namespace {

double seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

void PhaseSeconds::add(std::chrono::steady_clock::time_point asked, const StepBatch& batch,
                       const StepTimes& t) {
  load += seconds(asked, t.start);
  fetch += batch.fetch_s;
  if (!batch.empty) graph += batch.prepared.seconds;
  forward += seconds(t.start, t.forward);
  forces += seconds(t.forward, t.forces);
  backward += seconds(t.forces, t.backward);
  sync += seconds(t.backward, t.synced);
  optimizer += seconds(t.synced, t.done);
}

void PhaseSeconds::put(nlohmann::json& row) const {
  row["load_s"] = load;
  row["fetch_s"] = fetch;
  row["graph_s"] = graph;
  row["forward_s"] = forward;
  row["forces_s"] = forces;
  row["backward_s"] = backward;
  row["sync_s"] = sync;
  row["optimizer_s"] = optimizer;
}

void trace_step(ChromeTrace& trace, std::chrono::steady_clock::time_point asked, const StepBatch& b,
                const StepTimes& t, int64_t step, bool grad_sync) {
  for (const auto& span : b.note.spans) trace.add(span.name.c_str(), span.begin, span.end, step, 2);
  trace.add("fetch", b.t_fetch, b.t_fetched, step, 1);
  trace.add("collate", b.t_fetched, b.t_built, step, 1);
  trace.add("load", asked, t.start, step);
  trace.add("forward", t.start, t.forward, step);
  trace.add("forces", t.forward, t.forces, step);
  trace.add("backward", t.forces, t.backward, step);
  if (grad_sync) trace.add("grad_sync", t.backward, t.synced, step);
  trace.add("optimizer", t.synced, t.done, step);
  trace.end_step();
}

}  // namespace ddgnn
