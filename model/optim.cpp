// Optimizers by name with torch.optim's defaults, lr access through param groups,
// ReduceLROnPlateau and EarlyStopping (PyTorch / HydraGNN semantics), gradient-norm clipping and
// the weight average over the flat buffers of model/flat_params.h, and optimizer-state checkpoints
// through torch::serialize archives.
#include "model/optim.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>
#include <torch/version.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <istream>
#include <limits>
#include <ostream>
#include <tuple>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text.h"
#include "model/device.h"
#include "model/flat_params.h"

namespace ddgnn {

// model/optim_fused.cpp: optim::Adam (decoupled: AdamW) with betas (0.9, 0.999), eps 1e-8.
std::unique_ptr<torch::optim::Optimizer> make_fused_adam(
    bool decoupled, const std::vector<torch::Tensor>& parameters, double learning_rate,
    double weight_decay);
// model/optim_fused.cpp: the param groups' lr into the device tensors of an optimizer whose step
// reads it there (Adam, AdamW); nothing for the others.
void write_device_lr(torch::optim::Optimizer& optimizer);

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

template <typename From, typename To>
using same_const_t = std::conditional_t<std::is_const_v<From>, const To, To>;

// Calls fn with the options of one param group downcast to the concrete options type of a known
// optimizer (the way that compiles on LibTorch 1.13 and 2.x alike).
template <typename Options, typename Fn>
void visit_options(Options& options, Fn&& fn) {
  namespace optim = torch::optim;
  if (auto* o = dynamic_cast<same_const_t<Options, optim::SGDOptions>*>(&options)) return fn(*o);
  if (auto* o = dynamic_cast<same_const_t<Options, optim::AdamOptions>*>(&options)) return fn(*o);
  if (auto* o = dynamic_cast<same_const_t<Options, optim::AdamWOptions>*>(&options)) return fn(*o);
  if (auto* o = dynamic_cast<same_const_t<Options, optim::RMSpropOptions>*>(&options)) {
    return fn(*o);
  }
  throw Error(
      "optimizer options of an unknown type: cannot reach the learning rate",
      "use an optimizer made by make_optimizer (" + join_names(known_optimizer_names()) + ")");
}

double group_lr(const torch::optim::OptimizerParamGroup& group) {
  double lr = 0.0;
  visit_options(group.options(), [&](const auto& o) { lr = o.lr(); });
  return lr;
}

// Bitwise equality of doubles (nan equals nan, 0.0 differs from -0.0).
bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// JSON numbers cannot hold ±inf or nan: those travel as the strings "inf", "-inf", "nan".
nlohmann::json number_to_json(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

// `what` names the value in the error ("scheduler state: best").
double number_from_json(const nlohmann::json& v, const std::string& what) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (s == "inf") return kInf;
    if (s == "-inf") return -kInf;
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  throw DataError(what + " is not a number: " + v.dump(), "was this checkpoint written by ddgnn?");
}

std::vector<torch::Tensor> grads_of(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  return grads;
}

// Gradients as few tensors as they allow: one 1-d range for each storage whose gradients cover a
// range of it exactly (a flat buffer, model/flat_params.h), the others as they are.
struct GradTensors {
  std::vector<torch::Tensor> ranges, loose;
};

GradTensors grad_tensors(const std::vector<torch::Tensor>& grads) {
  GradTensors out;
  std::vector<std::pair<const c10::StorageImpl*, std::vector<torch::Tensor>>> by_storage;
  for (const auto& g : grads) {  // (the callers hold a NoGradGuard)
    if (g.layout() != c10::kStrided || !g.has_storage()) {
      out.loose.push_back(g);
      continue;
    }
    const c10::StorageImpl* storage = g.storage().unsafeGetStorageImpl();
    auto it = std::find_if(by_storage.begin(), by_storage.end(),
                           [&](const auto& entry) { return entry.first == storage; });
    if (it == by_storage.end()) it = by_storage.insert(by_storage.end(), {storage, {}});
    it->second.push_back(g);
  }
  for (auto& [storage, list] : by_storage) {
    torch::Tensor range = list.size() > 1 ? covered_range(list) : torch::Tensor();
    if (range.defined())
      out.ranges.push_back(std::move(range));
    else
      out.loose.insert(out.loose.end(), list.begin(), list.end());
  }
  return out;
}

// 2-norm of all gradients together, as a 0-d tensor on the first tensor's device and dtype: one
// norm per flat range and one multi-tensor norm of the rest.
torch::Tensor total_norm(const GradTensors& grads) {
  std::vector<torch::Tensor> norms;
  const auto dtype = (grads.ranges.empty() ? grads.loose : grads.ranges).front().scalar_type();
  for (const auto& r : grads.ranges) norms.push_back(r.norm(2).to(dtype));
  if (!grads.loose.empty())
    for (const auto& n : at::_foreach_norm(grads.loose)) norms.push_back(n.to(dtype));
  return norms.size() == 1 ? norms.front() : torch::stack(norms).norm(2);
}

// Every tensor of `tensors` times the 0-dim `factor` (on the device): one multi-tensor operation
// where LibTorch has the 0-dim overload of _foreach_mul_ (2.2), one operation per tensor before.
void scale_each(const std::vector<torch::Tensor>& tensors, const torch::Tensor& factor) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
  const bool alike = std::all_of(tensors.begin(), tensors.end(), [&](const torch::Tensor& t) {
    return t.device() == factor.device() && t.scalar_type() == factor.scalar_type();
  });
  if (alike) return at::_foreach_mul_(tensors, factor);
#endif
  for (const auto& t : tensors) t.mul_(factor.to(t.scalar_type()));
}

}  // namespace

// ---- optimizers ----

OptimizerType optimizer_type(const torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<const torch::optim::SGD*>(&optimizer)) return OptimizerType::kSGD;
  if (dynamic_cast<const torch::optim::Adam*>(&optimizer)) return OptimizerType::kAdam;
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer)) return OptimizerType::kAdamW;
  if (dynamic_cast<const torch::optim::RMSprop*>(&optimizer)) return OptimizerType::kRMSprop;
  throw Error("optimizer of an unknown type",
              "known optimizers: " + join_names(known_optimizer_names()));
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(
    OptimizerType type, const std::vector<torch::Tensor>& parameters, double learning_rate,
    double weight_decay) {
  if (!(learning_rate > 0.0)) {
    throw ConfigError("NeuralNetwork.Training.Optimizer.learning_rate must be > 0, got " +
                      std::to_string(learning_rate));
  }
  if (!(weight_decay >= 0.0)) {
    throw ConfigError("NeuralNetwork.Training.Optimizer.weight_decay must be >= 0, got " +
                      std::to_string(weight_decay));
  }
  flatten_parameters(parameters);  // a no-op where DataParallel laid them out already
  namespace optim = torch::optim;
  switch (type) {
    case OptimizerType::kSGD:
      return std::make_unique<optim::SGD>(parameters, optim::SGDOptions(learning_rate)
                                                          .momentum(/*momentum=*/0.0)
                                                          .dampening(/*dampening=*/0.0)
                                                          .nesterov(false)
                                                          .weight_decay(weight_decay));
    case OptimizerType::kAdam:
    case OptimizerType::kAdamW:  // optim::Adam and optim::AdamW with a fused step on the CPU
      return make_fused_adam(type == OptimizerType::kAdamW, parameters, learning_rate,
                             weight_decay);
    case OptimizerType::kRMSprop:
      return std::make_unique<optim::RMSprop>(parameters, optim::RMSpropOptions(learning_rate)
                                                              .alpha(/*alpha=*/0.99)
                                                              .eps(/*eps=*/1e-8)
                                                              .momentum(/*momentum=*/0.0)
                                                              .centered(false)
                                                              .weight_decay(weight_decay));
  }
  throw ConfigError("unknown optimizer type",
                    "known optimizers: " + join_names(known_optimizer_names()));
}

double get_lr(const torch::optim::Optimizer& optimizer) {
  if (optimizer.param_groups().empty()) throw Error("get_lr: the optimizer has no param group");
  return group_lr(optimizer.param_groups().front());
}

std::vector<double> get_lrs(const torch::optim::Optimizer& optimizer) {
  std::vector<double> lrs;
  for (const auto& group : optimizer.param_groups()) lrs.push_back(group_lr(group));
  return lrs;
}

void set_lr(torch::optim::Optimizer& optimizer, double learning_rate) {
  for (auto& group : optimizer.param_groups()) {
    visit_options(group.options(), [&](auto& o) { o.lr(learning_rate); });
  }
  write_device_lr(optimizer);
}

// ---- warm-up ----

double warmup_factor(std::int64_t step, std::int64_t warmup_steps) {
  if (warmup_steps <= 0 || step >= warmup_steps) return 1.0;
  return double(std::max<std::int64_t>(step, 1)) / double(warmup_steps);
}

namespace {

// Sets the lr of param group i to lrs[i] × factor.
void set_group_lrs(torch::optim::Optimizer& optimizer, const std::vector<double>& lrs,
                   double factor) {
  size_t i = 0;
  for (auto& group : optimizer.param_groups()) {
    const double lr = lrs[i++] * factor;
    visit_options(group.options(), [&](auto& o) { o.lr(lr); });
  }
}

}  // namespace

ScaledLr::ScaledLr(torch::optim::Optimizer& optimizer, double factor) {
  if (factor == 1.0) return;
  m_lrs = get_lrs(optimizer);
  set_group_lrs(optimizer, m_lrs, factor);
  m_optimizer = &optimizer;
}

ScaledLr::~ScaledLr() {
  if (m_optimizer) set_group_lrs(*m_optimizer, m_lrs, 1.0);
}

// ---- ReduceLROnPlateau ----

bool operator==(const PlateauState& a, const PlateauState& b) {
  if (a.last_lr.size() != b.last_lr.size()) return false;
  for (size_t i = 0; i < a.last_lr.size(); ++i) {
    if (!same_bits(a.last_lr[i], b.last_lr[i])) return false;
  }
  return same_bits(a.best, b.best) && a.num_bad_epochs == b.num_bad_epochs &&
         a.cooldown_counter == b.cooldown_counter && a.last_epoch == b.last_epoch;
}

void to_json(nlohmann::json& j, const PlateauState& state) {
  auto lrs = nlohmann::json::array();
  for (double lr : state.last_lr) lrs.push_back(number_to_json(lr));
  j = nlohmann::json{{"best", number_to_json(state.best)},
                     {"num_bad_epochs", state.num_bad_epochs},
                     {"cooldown_counter", state.cooldown_counter},
                     {"last_epoch", state.last_epoch},
                     {"last_lr", lrs}};
}

void from_json(const nlohmann::json& j, PlateauState& state) {
  try {
    state.best = number_from_json(j.at("best"), "scheduler state: best");
    state.num_bad_epochs = j.at("num_bad_epochs").get<std::int64_t>();
    state.cooldown_counter = j.at("cooldown_counter").get<std::int64_t>();
    state.last_epoch = j.at("last_epoch").get<std::int64_t>();
    state.last_lr.clear();
    for (const auto& lr : j.at("last_lr")) {
      state.last_lr.push_back(number_from_json(lr, "scheduler state: last_lr"));
    }
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("scheduler state: ") + e.what(),
                    "was this checkpoint written by ddgnn?");
  }
}

ReduceLROnPlateau::ReduceLROnPlateau(torch::optim::Optimizer& optimizer,
                                     const PlateauOptions& options)
    : m_optimizer(&optimizer), m_options(options) {
  const std::string where = "NeuralNetwork.Training.Scheduler: ";
  if (!(options.factor > 0.0 && options.factor < 1.0)) {
    throw ConfigError(where + "factor must be > 0 and < 1, got " + std::to_string(options.factor));
  }
  if (options.patience < 0) throw ConfigError(where + "patience must be >= 0");
  if (options.cooldown < 0) throw ConfigError(where + "cooldown must be >= 0");
  if (!(options.min_lr >= 0.0)) throw ConfigError(where + "min_lr must be >= 0");
  if (!(options.threshold >= 0.0)) throw ConfigError(where + "threshold must be >= 0");
  if (!(options.eps >= 0.0)) throw ConfigError(where + "eps must be >= 0");
  m_state.best = kInf;
  m_state.last_lr = get_lrs(optimizer);
}

bool ReduceLROnPlateau::step(double metric) {
  m_state.last_epoch += 1;
  // mode 'min', threshold_mode 'rel' (PyTorch's is_better); a nan metric compares false.
  if (metric < m_state.best * (1.0 - m_options.threshold)) {
    m_state.best = metric;
    m_state.num_bad_epochs = 0;
  } else {
    m_state.num_bad_epochs += 1;
  }
  if (m_state.cooldown_counter > 0) {
    m_state.cooldown_counter -= 1;
    m_state.num_bad_epochs = 0;
  }
  bool reduced = false;
  if (m_state.num_bad_epochs > m_options.patience) {
    for (auto& group : m_optimizer->param_groups()) {
      visit_options(group.options(), [&](auto& o) {
        const double old_lr = o.lr();
        const double new_lr = std::max(old_lr * m_options.factor, m_options.min_lr);
        if (old_lr - new_lr > m_options.eps) {
          o.lr(new_lr);
          reduced = true;
        }
      });
    }
    m_state.cooldown_counter = m_options.cooldown;
    m_state.num_bad_epochs = 0;
  }
  if (reduced) write_device_lr(*m_optimizer);
  m_state.last_lr = get_lrs(*m_optimizer);
  return reduced;
}

void ReduceLROnPlateau::forget_best() {
  m_state.best = kInf;
  m_state.num_bad_epochs = 0;
}

void ReduceLROnPlateau::load_state(const PlateauState& state) {
  if (state.last_lr.size() != m_optimizer->param_groups().size()) {
    throw DataError("scheduler state has " + std::to_string(state.last_lr.size()) +
                        " param groups, the optimizer " +
                        std::to_string(m_optimizer->param_groups().size()),
                    "resume with the same model and optimizer as the checkpoint");
  }
  m_state = state;
}

// ---- EarlyStopping ----

bool operator==(const EarlyStoppingState& a, const EarlyStoppingState& b) {
  return same_bits(a.best, b.best) && a.num_bad_epochs == b.num_bad_epochs &&
         a.stopped == b.stopped;
}

void to_json(nlohmann::json& j, const EarlyStoppingState& state) {
  j = nlohmann::json{{"best", number_to_json(state.best)},
                     {"num_bad_epochs", state.num_bad_epochs},
                     {"stopped", state.stopped}};
}

void from_json(const nlohmann::json& j, EarlyStoppingState& state) {
  try {
    state.best = number_from_json(j.at("best"), "early-stopping state: best");
    state.num_bad_epochs = j.at("num_bad_epochs").get<std::int64_t>();
    state.stopped = j.at("stopped").get<bool>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("early-stopping state: ") + e.what(),
                    "was this checkpoint written by ddgnn?");
  }
}

EarlyStopping::EarlyStopping(int patience) : m_patience(patience) {
  if (patience < 1) {
    throw ConfigError("NeuralNetwork.Training.patience must be >= 1, got " +
                      std::to_string(patience));
  }
  m_state.best = kInf;
}

void EarlyStopping::forget_best() {
  m_state.best = kInf;
  m_state.num_bad_epochs = 0;
}

bool EarlyStopping::step(double validation_loss) {
  if (validation_loss <= m_state.best) {  // false for nan
    m_state.best = validation_loss;
    m_state.num_bad_epochs = 0;
  } else {
    m_state.num_bad_epochs += 1;
    if (m_state.num_bad_epochs >= m_patience) m_state.stopped = true;
  }
  return m_state.stopped;
}

// ---- gradient clipping ----

double grad_norm(const std::vector<torch::Tensor>& parameters) {
  const auto grads = grads_of(parameters);
  if (grads.empty()) return 0.0;
  torch::NoGradGuard no_grad;
  return total_norm(grad_tensors(grads)).item<double>();
}

torch::Tensor grad_norm_tensor(const std::vector<torch::Tensor>& parameters) {
  const auto grads = grads_of(parameters);
  if (grads.empty()) return torch::zeros({}, torch::kDouble);
  torch::NoGradGuard no_grad;
  return total_norm(grad_tensors(grads));
}

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  const auto grads = max_norm > 0.0 ? grads_of(parameters) : std::vector<torch::Tensor>();
  if (grads.empty()) return torch::zeros({}, torch::kDouble);
  torch::NoGradGuard no_grad;
  const GradTensors tensors = grad_tensors(grads);
  const auto norm = total_norm(tensors);
  // As torch.nn.utils.clip_grad_norm_: always multiply by the clamped coefficient (≤ 1), computed
  // on the device, so that the host neither waits for the norm nor branches on it.
  const auto coefficient = torch::clamp_max(max_norm / (norm + 1e-6), 1.0);
  for (const auto& r : tensors.ranges) r.mul_(coefficient.to(r.scalar_type()));
  if (!tensors.loose.empty()) scale_each(tensors.loose, coefficient);
  return norm;
}

// ---- optimizer state in checkpoints ----

namespace {

// Keys ddgnn adds next to torch's own in an optimizer archive.
constexpr const char* kTypeKey = "ddgnn_optimizer_type";
constexpr const char* kShapesKey = "ddgnn_param_shapes";

// The shapes of all parameters, group after group, flattened: [n, ndim_0, sizes_0..., ...].
torch::Tensor parameter_shapes(const torch::optim::Optimizer& optimizer) {
  std::vector<std::int64_t> flat = {0};
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      flat[0] += 1;
      flat.push_back(p.dim());
      for (auto size : p.sizes()) flat.push_back(size);
    }
  }
  return torch::tensor(flat, torch::kLong);
}

// `shapes` as parameter_shapes() makes it (read where it is: on the host).
std::string describe_shapes(const torch::Tensor& shapes) {
  const auto flat = shapes.to(torch::kCPU, torch::kLong).contiguous();
  const auto* v = flat.data_ptr<std::int64_t>();
  const std::int64_t n = flat.numel();
  std::string out = std::to_string(n > 0 ? v[0] : 0) + " parameters [";
  for (std::int64_t k = 1; k < n;) {
    const std::int64_t ndim = v[k++];
    out += k > 2 ? " (" : "(";
    for (std::int64_t d = 0; d < ndim && k < n; ++d) out += (d ? "," : "") + std::to_string(v[k++]);
    out += ")";
  }
  return out + "]";
}

// LibTorch before 2.4 loads the moments but not the options of the param groups (lr, weight
// decay, ...; pytorch/pytorch#125215). Read them from the archive into the existing options.
void load_group_options(torch::optim::Optimizer& optimizer, torch::serialize::InputArchive& in) {
  torch::serialize::InputArchive groups;
  in.read("param_groups", groups);
  for (size_t i = 0; i < optimizer.param_groups().size(); ++i) {
    torch::serialize::InputArchive group;
    groups.read("param_groups/" + std::to_string(i), group);
    torch::serialize::InputArchive options;
    group.read("options", options);
    optimizer.param_groups()[i].options().serialize(options);
  }
}

}  // namespace

void save_optimizer(const torch::optim::Optimizer& optimizer,
                    torch::serialize::OutputArchive& out) {
  out.write(kTypeKey, c10::IValue(to_string(optimizer_type(optimizer))));
  out.write(kShapesKey, parameter_shapes(optimizer));
  optimizer.save(out);
}

void load_optimizer(torch::optim::Optimizer& optimizer, torch::serialize::InputArchive& in,
                    const std::string& where) {
  const std::string expected = to_string(optimizer_type(optimizer));
  try {
    c10::IValue saved_type;
    torch::Tensor saved_shapes;
    if (!in.try_read(kTypeKey, saved_type) || !saved_type.isString() ||
        !in.try_read(kShapesKey, saved_shapes)) {
      throw DataError(where + ": no optimizer state in it (keys of ddgnn's optimizer missing)",
                      "was it written by ddgnn's save_optimizer?");
    }
    if (saved_type.toStringRef() != expected) {
      throw DataError(where + ": holds " + saved_type.toStringRef() +
                          " state, but the optimizer is " + expected,
                      "resume with the optimizer type of the checkpoint, or start afresh");
    }
    const auto shapes = parameter_shapes(optimizer);
    if (!saved_shapes.sizes().equals(shapes.sizes()) ||
        !torch::equal(saved_shapes.to(shapes.device()), shapes)) {
      throw DataError(where + ": holds optimizer state for " + describe_shapes(saved_shapes) +
                          ", but the optimizer has " + describe_shapes(shapes),
                      "resume with the same model (parameter shapes and order) as the checkpoint");
    }
    optimizer.load(in);
    load_group_options(optimizer, in);
    write_device_lr(optimizer);
  } catch (const c10::Error& e) {
    throw DataError(
        where + ": cannot load the " + expected + " state: " + e.what_without_backtrace(),
        "resume with the same model (parameter shapes and order) as the checkpoint");
  }
}

void save_optimizer(const torch::optim::Optimizer& optimizer, const std::string& path) {
  torch::serialize::OutputArchive out;
  save_optimizer(optimizer, out);
  const std::string temporary = path + ".tmp";
  try {
    out.save_to(temporary);
  } catch (const c10::Error& e) {
    throw DataError(path + ": cannot write the optimizer state: " + e.what_without_backtrace(),
                    "is the checkpoint directory writable, with space left?");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw DataError(path + ": cannot rename " + temporary + " to it: " + std::strerror(errno));
  }
}

void load_optimizer(torch::optim::Optimizer& optimizer, const std::string& path) {
  torch::serialize::InputArchive in;
  try {
    in.load_from(path);
  } catch (const c10::Error& e) {
    throw DataError(path + ": not an optimizer archive: " + e.what_without_backtrace(),
                    "was it written by ddgnn's save_optimizer?");
  }
  load_optimizer(optimizer, in, path);
}

void save_optimizer(const torch::optim::Optimizer& optimizer, std::ostream& stream) {
  torch::serialize::OutputArchive out;
  save_optimizer(optimizer, out);
  out.save_to(stream);
}

void load_optimizer(torch::optim::Optimizer& optimizer, std::istream& stream) {
  torch::serialize::InputArchive in;
  try {
    in.load_from(stream);
  } catch (const c10::Error& e) {
    throw DataError(
        std::string("optimizer stream: not an optimizer archive: ") + e.what_without_backtrace(),
        "was it written by ddgnn's save_optimizer?");
  }
  load_optimizer(optimizer, in, "optimizer stream");
}

double time_exponential_lr(double lr0, double final, double fraction) {
  return lr0 * std::pow(final / lr0, std::clamp(fraction, 0.0, 1.0));
}

}  // namespace ddgnn
