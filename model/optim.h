// Optimizers by name (SGD, Adam, AdamW, RMSprop) with PyTorch's defaults, learning-rate access
// through param groups and the warm-up, ReduceLROnPlateau, early stopping, gradient-norm clipping,
// the weight average, and the checkpoint helpers that save and load optimizer state. Header free
// of torch (declarations only).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/spec.h"

namespace at {
class Tensor;
}
namespace torch {
using at::Tensor;
namespace optim {
class Optimizer;
}
namespace serialize {
class OutputArchive;
class InputArchive;
}  // namespace serialize
}  // namespace torch

namespace ddgnn {

// ---- optimizers (`NeuralNetwork.Training.Optimizer`) ----

// OptimizerType and its names: model/spec.h.

// The type of an optimizer made by make_optimizer (found by downcast); an Error for other types.
OptimizerType optimizer_type(const torch::optim::Optimizer& optimizer);

// One optimizer over `parameters` (any shapes, fp32 or fp64) with torch.optim's defaults:
// SGD momentum 0; Adam and AdamW betas (0.9, 0.999), eps 1e-8, no amsgrad; RMSprop alpha 0.99,
// eps 1e-8, momentum 0, not centered. First lays the parameters out in flat buffers
// (flatten_parameters, model/flat_params.h: values and gradients become views into one buffer per
// device and dtype, every gradient defined; nothing changes where DataParallel did so already), so
// that every parameter is stepped at every step, a zero gradient included. Adam and AdamW are
// optim::Adam and optim::AdamW (their state, checkpoints and options) whose step runs over the
// flat buffers: one loop on the CPU, elsewhere ATen operations that read the step count and the
// rate from 0-dim tensors on the device, no host value that changes between steps, no operation
// per parameter (model/optim_fused.cpp); equal to torch's to rounding. `weight_decay` is used as
// given (the config supplies AdamW's 0.01 default). learning_rate must be > 0 and
// weight_decay ≥ 0 (else ConfigError).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(
    OptimizerType type, const std::vector<torch::Tensor>& parameters, double learning_rate,
    double weight_decay);

// Sets every defined gradient of `parameters` to zero in place (as LibTorch 1.13's
// Optimizer::zero_grad: the tensors stay, so the next backward accumulates into them, and
// gradients that are views into flat buffers stay so): one memset (CPU) or zero_ per flat buffer
// the gradients cover, one multi-tensor operation for the others. Undefined gradients stay
// undefined.
void zero_gradients(const std::vector<torch::Tensor>& parameters);

// Learning rate of the first param group / of every group, and set_lr for every group (and into
// the device tensor that Adam's step reads, written there when it changes: never inside a step).
// Work for every OptimizerType (the options of each group are downcast to their concrete type).
double get_lr(const torch::optim::Optimizer& optimizer);
std::vector<double> get_lrs(const torch::optim::Optimizer& optimizer);
void set_lr(torch::optim::Optimizer& optimizer, double learning_rate);

// ---- learning-rate warm-up (`NeuralNetwork.Training.warmup_steps`) ----

// The share of the scheduled rate that optimizer step `step` (1-based, counted over the run) takes
// when the rate rises linearly over the first `warmup_steps` steps: step / warmup_steps, 1 from
// there on and when warmup_steps ≤ 0.
double warmup_factor(std::int64_t step, std::int64_t warmup_steps);

// Makes Adam and AdamW (of make_optimizer) scale their rate by warmup_factor(step, warmup_steps)
// themselves, `step` being their own step count (the run's, through checkpoints), the factor
// computed on the device when they step there; true for them. False for the other types: their
// caller scales the rate (ScaledLr). The schedules never see the warm-up either way.
bool set_warmup(torch::optim::Optimizer& optimizer, std::int64_t warmup_steps);

// The optimizer's last step ran again on the device without the host (a replayed CUDA graph of
// it): Adam's and AdamW's host step counts advance as that step would have advanced them, and
// nothing is launched. False (nothing changed) for another optimizer, or when the last step was
// not every parameter's flat device step (one that reads its step count and rate from the
// device, the only kind a graph can replay).
bool note_replayed_step(torch::optim::Optimizer& optimizer);

// Makes the steps that follow apply only where `apply` (a 0-dim bool tensor on the parameters'
// device; undefined: always) holds: a step it rejects changes nothing, neither the parameters nor
// the moments nor the step count (a step skipped by the loss-spike guard, train/spikes.h). Read on
// the host where the step runs there anyway (the CPU's loop, parameters outside the flat
// buffers: a wait for the device there); for the flat device step, inside its operations, the
// gradient masked to zero, the rate and the moments' decay gated and the device step count
// advanced by the gate: the host's counts then run ahead until sync_step_counts. True for Adam
// and AdamW of make_optimizer; false for the others (their caller reads the gate and skips
// step()).
bool set_step_gate(torch::optim::Optimizer& optimizer, const torch::Tensor& apply);

// The host's step counts from the device's after gated device steps (one wait for the device;
// nothing when no such step ran since the last call): call where the host reads the device
// anyway, before a checkpoint.
void sync_step_counts(torch::optim::Optimizer& optimizer);

// Multiplies the lr of every param group by `factor` for its lifetime and puts the rates back
// when it ends (so the schedules, which read and set the optimizer's rate, never see the warm-up):
// the warm-up of optimizers that do not take it themselves (set_warmup). A factor of 1 touches
// nothing.
class ScaledLr {
 public:
  ScaledLr(torch::optim::Optimizer& optimizer, double factor);
  ~ScaledLr();
  ScaledLr(const ScaledLr&) = delete;
  ScaledLr& operator=(const ScaledLr&) = delete;

 private:
  torch::optim::Optimizer* m_optimizer = nullptr;  // null when the factor is 1
  std::vector<double> m_lrs;
};

// ---- learning-rate schedule (`NeuralNetwork.Training.Scheduler`) ----

// The TimeExponential schedule: lr0 (final / lr0)^f at the fraction f of the time budget spent
// (clamped to [0, 1]): geometric decay from lr0 to `final` over the budget.
double time_exponential_lr(double lr0, double final, double fraction);

// ReduceLROnPlateau's options (PlateauOptions): model/spec.h.

// Everything ReduceLROnPlateau carries between epochs; restoring it (and the optimizer's own
// state, which holds the lr) continues a run bit-identically.
struct PlateauState {
  double best = 0.0;  // best metric so far (+inf before the first step)
  std::int64_t num_bad_epochs = 0;
  std::int64_t cooldown_counter = 0;
  std::int64_t last_epoch = 0;  // number of step() calls
  std::vector<double> last_lr;  // lr of each param group after the last step
};
bool operator==(const PlateauState& a, const PlateauState& b);  // bitwise on the doubles

// JSON for checkpoints: doubles round-trip exactly; ±inf and nan are written as strings.
void to_json(nlohmann::json& j, const PlateauState& state);
void from_json(const nlohmann::json& j, PlateauState& state);

// Reduces the lr of every param group by `factor` once the metric (validation loss) has not
// improved for more than `patience` epochs, like PyTorch's scheduler with mode 'min'.
// Keeps a reference to the optimizer, which must outlive it.
class ReduceLROnPlateau {
 public:
  // A ConfigError when factor ∉ (0, 1), patience < 0, cooldown < 0, min_lr < 0 or eps < 0.
  ReduceLROnPlateau(torch::optim::Optimizer& optimizer, const PlateauOptions& options);

  // One epoch's metric (a loss, any units); true when it reduced the lr of some group.
  // A nan metric never improves on the best.
  bool step(double metric);

  // The metric changes meaning (another loss from here on): the best so far and the count of
  // bad epochs start again; the lr and the cooldown stay.
  void forget_best();

  const PlateauOptions& options() const { return m_options; }
  const PlateauState& state() const { return m_state; }
  // Restores a saved state. The lr lives in the optimizer: restore the optimizer's state too
  // (load_optimizer). A DataError when the number of param groups differs.
  void load_state(const PlateauState& state);

 private:
  torch::optim::Optimizer* m_optimizer;
  PlateauOptions m_options;
  PlateauState m_state;
};

// ---- early stopping (`NeuralNetwork.Training.EarlyStopping`, `patience`) ----

struct EarlyStoppingState {
  double best = 0.0;  // lowest validation loss so far (+inf before the first step)
  std::int64_t num_bad_epochs = 0;
  bool stopped = false;
};
bool operator==(const EarlyStoppingState& a, const EarlyStoppingState& b);
void to_json(nlohmann::json& j, const EarlyStoppingState& state);
void from_json(const nlohmann::json& j, EarlyStoppingState& state);

// HydraGNN's EarlyStopping: a loss ≤ the best so far is an improvement (ties count) and resets
// the count; `patience` consecutive epochs without one stop the run. A nan loss is no
// improvement (HydraGNN would take it as the new best and never stop).
class EarlyStopping {
 public:
  explicit EarlyStopping(int patience);  // patience ≥ 1, else ConfigError

  // One epoch's validation loss; true when training should stop (and from then on).
  bool step(double validation_loss);
  bool should_stop() const { return m_state.stopped; }
  // The loss changes meaning: the best so far and the count start again (not a stop already made).
  void forget_best();
  int patience() const { return m_patience; }

  const EarlyStoppingState& state() const { return m_state; }
  void load_state(const EarlyStoppingState& state) { m_state = state; }

 private:
  int m_patience;
  EarlyStoppingState m_state;
};

// ---- gradient clipping (`NeuralNetwork.Training.grad_clip`) ----

// torch.nn.utils.clip_grad_norm_ with norm type 2: the 2-norm of all gradients together (params
// without a gradient are skipped), and every gradient scaled by min(1, max_norm / (norm + 1e-6)),
// a factor computed on the device (no host branch on the norm). Gradients that cover a flat buffer
// (model/flat_params.h) take one norm and one multiplication for the buffer; the others one
// multi-tensor norm (and, before LibTorch 2.2, one multiplication each). Returns the norm before
// clipping as a 0-dim tensor on the gradients' device, so that the host need not wait for the
// device (read it when needed).
// max_norm ≤ 0 means off: nothing is computed or changed, and it returns 0. A non-finite norm is
// returned as it is (the gradients then become nan, as in PyTorch): the caller decides.
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm);

// The same 2-norm without clipping (0 when no parameter has a gradient).
double grad_norm(const std::vector<torch::Tensor>& parameters);
// That norm as a 0-dim tensor on the gradients' device (float64 zero on the CPU when no parameter
// has a gradient), for the host to read later.
torch::Tensor grad_norm_tensor(const std::vector<torch::Tensor>& parameters);

// ---- optimizer state in checkpoints ----

// Writes the state (moments, step counts) and param groups (lr and other options) with
// torch::serialize, plus the optimizer's type name. Loading into an optimizer of the same type
// over parameters of the same shapes, in the same order, makes its next step bitwise equal to
// that of the saved one. Loading a different type, or a file that is not such an archive, is a
// DataError that names the file.
void save_optimizer(const torch::optim::Optimizer& optimizer, torch::serialize::OutputArchive& out);
void load_optimizer(torch::optim::Optimizer& optimizer, torch::serialize::InputArchive& in,
                    const std::string& where = "optimizer archive");
void save_optimizer(const torch::optim::Optimizer& optimizer, const std::string& path);
void load_optimizer(torch::optim::Optimizer& optimizer, const std::string& path);
void save_optimizer(const torch::optim::Optimizer& optimizer, std::ostream& stream);
void load_optimizer(torch::optim::Optimizer& optimizer, std::istream& stream);

// ---- exponential moving average of the weights (`NeuralNetwork.Training.ema_decay`) ----

// Shadow copies of the parameters, updated after every optimizer step with
//   d = min(decay, (1 + n) / (10 + n)),   shadow = d shadow + (1 - d) parameter
// (n: updates so far; the warm-up lets the average follow the fast early changes, as in
// TensorFlow's ExponentialMovingAverage with num_updates and NequIP's ema_use_num_updates).
// Validation, test and the saved model use the average (MACE's --ema, NequIP's use_ema): it
// smooths the step-to-step noise of small batches. swap() exchanges the parameters' values with
// the shadows' in place (tensors keep their identity, so optimizer and DDP hooks stay valid).
// Parameters in a flat buffer (make_optimizer's, made before this) get one flat shadow buffer:
// an update is one loop over it on the CPU, elsewhere two ATen operations over it with d computed
// on the device from a device count of the updates (no host value that changes between updates);
// the others one loop or two operations each.
class WeightAverage {
 public:
  // decay in (0, 1) (else ConfigError).
  WeightAverage(const std::vector<torch::Tensor>& parameters, double decay);
  ~WeightAverage();
  void update();
  // The last update ran again on the device without the host (a replayed CUDA graph of it): the
  // count advances, nothing is launched. False (nothing changed) unless every parameter is in a
  // flat buffer off the CPU (the update that reads its count from the device).
  bool replayed_update();
  // The updates that follow apply only where `apply` (0-dim bool on the parameters' device;
  // undefined: always) holds, as set_step_gate for the optimizer: read on the host for the CPU's
  // loop, inside the device operations otherwise (the device count advanced by the gate, the
  // host's corrected by sync_count).
  void set_gate(const torch::Tensor& apply);
  void sync_count();
  void swap();
  int64_t updates() const { return m_updates; }
  // The shadows, in parameter order, and restoring them (shapes and dtypes must match:
  // DataError otherwise) with the update count.
  const std::vector<torch::Tensor>& shadows() const;
  void load(const std::vector<torch::Tensor>& shadows, int64_t updates);

 private:
  struct Flat;
  std::vector<torch::Tensor> m_params, m_shadows;  // m_shadows: views into m_flat's where flat
  std::vector<Flat> m_flat;
  double m_decay;
  int64_t m_updates = 0;                  // on the host; the device counts follow it
  std::unique_ptr<torch::Tensor> m_gate;  // set_gate's (null: none)
  bool m_gated_on_device = false;         // a gated device update since sync_count
};

// Swaps the average in for the scope (nothing when `average` is null).
class AverageSwapped {
 public:
  explicit AverageSwapped(WeightAverage* average) : m_average(average) {
    if (m_average) m_average->swap();
  }
  ~AverageSwapped() {
    if (m_average) m_average->swap();
  }
  AverageSwapped(const AverageSwapped&) = delete;
  AverageSwapped& operator=(const AverageSwapped&) = delete;

 private:
  WeightAverage* m_average;
};

}  // namespace ddgnn
