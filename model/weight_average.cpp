// The weight average (model/optim.h): exponential moving average of the parameters, over their
// flat buffers (model/flat_params.h) where they lie in one, gated by the spike guard's verdict.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/types.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/device.h"
#include "model/flat_params.h"
#include "model/optim.h"

namespace ddgnn {

// The shadows of one flat buffer of parameters (model/flat_params.h), themselves one buffer.
struct WeightAverage::Flat {
  torch::Tensor values, shadows;    // [n]: the parameters' range and the average's
  std::vector<size_t> params;       // those in the range
  std::vector<const void*> starts;  // where each one's values start while the range holds
  torch::Tensor count;              // 0-dim float64 on the device: the updates so far
  int64_t count_on_device = -1;     // what `count` holds (-1: not made)

  bool in_place(const std::vector<torch::Tensor>& params) const {
    for (size_t i = 0; i < this->params.size(); ++i) {
      const torch::Tensor& p = params[this->params[i]];
      if (p.data_ptr() != starts[i] || !p.is_contiguous()) return false;
    }
    return true;
  }
};

WeightAverage::WeightAverage(const std::vector<torch::Tensor>& parameters, double decay)
    : m_params(parameters), m_decay(decay) {
  if (!(decay > 0.0 && decay < 1.0))
    throw ConfigError("Training.ema_decay: " + std::to_string(decay) + " is not in (0, 1)",
                      "use 0.99 to 0.9999, or 0 to train without a weight average");
  c10::NoGradGuard no_grad;
  m_shadows.resize(m_params.size());
  // The parameters by device and dtype: those that cover a flat range get one flat shadow.
  for (const auto& set : by_device_and_dtype(m_params)) {
    std::vector<torch::Tensor> members;
    for (size_t k : set) members.push_back(m_params[k]);
    const torch::Tensor range =
        set.size() > 1 && members[0].is_floating_point() ? covered_range(members) : torch::Tensor();
    if (!range.defined()) continue;
    Flat f;
    f.values = range;
    f.shadows = range.clone();
    for (size_t k : set) {
      const auto& p = m_params[k];
      m_shadows[k] = alias_of(f.shadows, p.storage_offset() - range.storage_offset(), p.sizes());
      f.params.push_back(k);
      f.starts.push_back(p.data_ptr());
    }
    m_flat.push_back(std::move(f));
  }
  for (size_t k = 0; k < m_params.size(); ++k)
    if (!m_shadows[k].defined()) m_shadows[k] = m_params[k].detach().clone();
}

WeightAverage::~WeightAverage() = default;

namespace {

// shadow = d shadow + (1 - d) parameter, element by element (two ATen operations per parameter
// otherwise, which for a model of small tensors cost more than the arithmetic).
template <typename T>
void average_elements(T* shadow, const T* param, int64_t n, double d) {
  const T a = T(d), b = T(1.0 - d);
  for (int64_t i = 0; i < n; ++i) shadow[i] = a * shadow[i] + b * param[i];
}

// One shadow and its parameter (any device; dense): the CPU's loop where it can, else ATen.
void average_one(const at::Tensor& s, const at::Tensor& p, double d) {
  const bool plain = fused_kernels(s) && p.device().is_cpu() && s.is_contiguous() &&
                     p.is_contiguous() && s.scalar_type() == p.scalar_type();
  if (plain && s.scalar_type() == at::kFloat)
    average_elements(s.data_ptr<float>(), p.data_ptr<float>(), s.numel(), d);
  else if (plain && s.scalar_type() == at::kDouble)
    average_elements(s.data_ptr<double>(), p.data_ptr<double>(), s.numel(), d);
  else
    s.mul_(d).add_(p.detach(), 1.0 - d);
}

}  // namespace

void WeightAverage::set_gate(const torch::Tensor& apply) {
  m_gate = apply.defined() ? std::make_unique<torch::Tensor>(apply) : nullptr;
}

void WeightAverage::sync_count() {
  if (!m_gated_on_device) return;
  m_gated_on_device = false;
  for (Flat& f : m_flat)
    if (f.count.defined() && f.count_on_device == m_updates) {
      m_updates = int64_t(f.count.item<double>());
      break;
    }
  for (Flat& f : m_flat)
    if (f.count.defined()) f.count_on_device = m_updates;
}

void WeightAverage::update() {
  c10::NoGradGuard no_grad;
  // The gate inside the device operations when every parameter's update runs there; else read on
  // the host (free on the CPU), a rejected update changing nothing.
  bool gate_on_device = m_gate != nullptr;
  size_t n_flat = 0;
  for (const Flat& f : m_flat) {
    const bool device = f.in_place(m_params) && !fused_kernels(f.values);
    gate_on_device = gate_on_device && device;
    n_flat += device ? f.params.size() : 0;
  }
  gate_on_device = gate_on_device && n_flat == m_params.size();
  if (m_gate && !gate_on_device && !m_gate->item<bool>()) return;
  at::Tensor gate;
  if (gate_on_device) {
    gate = m_gate->to(at::kDouble);
    m_gated_on_device = true;
  }
  const double n = double(m_updates);
  const double d = std::min(m_decay, (1.0 + n) / (10.0 + n));
  std::vector<bool> done(m_params.size(), false);
  for (Flat& f : m_flat) {
    if (!f.in_place(m_params)) continue;
    for (size_t k : f.params) done[k] = true;
    if (fused_kernels(f.values)) {  // the CPU's loop over the buffer, d from the host
      average_one(f.shadows, f.values, d);
      continue;
    }
    // d from the update count on the device (written when the host's differs), two operations
    // over the buffer.
    if (!f.count.defined()) {
      f.count = at::zeros({}, f.values.options().dtype(at::kDouble));
      f.count_on_device = 0;
    }
    if (f.count_on_device != m_updates) f.count.fill_(double(m_updates));
    const torch::Tensor decay = at::clamp_max((f.count + 1.0) / (f.count + 10.0), m_decay);
    if (gate.defined()) {  // a rejected update: the shadows' weight 1, the count unchanged
      const torch::Tensor weight = at::rsub(decay, 1.0).mul_(gate);
      f.shadows.mul_(at::rsub(weight, 1.0)).addcmul_(f.values, weight);
      f.count.add_(gate);
    } else {
      f.shadows.mul_(decay).addcmul_(f.values, at::rsub(decay, 1.0));
      f.count.add_(1.0);
    }
    f.count_on_device = m_updates + 1;
  }
  for (size_t k = 0; k < m_params.size(); ++k)
    if (!done[k]) average_one(m_shadows[k], m_params[k], d);
  ++m_updates;
}

bool WeightAverage::replayed_update() {
  size_t flat = 0;
  for (const Flat& f : m_flat) {
    if (!f.in_place(m_params) || !f.count.defined() || f.count_on_device != m_updates) return false;
    flat += f.params.size();
  }
  if (flat != m_params.size()) return false;
  for (Flat& f : m_flat) f.count_on_device = m_updates + 1;
  ++m_updates;
  if (m_gate) m_gated_on_device = true;  // the replayed update was gated as captured
  return true;
}

void WeightAverage::swap() {
  c10::NoGradGuard no_grad;
  std::vector<bool> done(m_params.size(), false);
  for (Flat& f : m_flat) {
    if (!f.in_place(m_params)) continue;
    for (size_t k : f.params) done[k] = true;
    const at::Tensor keep = f.values.clone();
    f.values.copy_(f.shadows);
    f.shadows.copy_(keep);
  }
  for (size_t k = 0; k < m_params.size(); ++k) {
    if (done[k]) continue;
    at::Tensor keep = m_params[k].detach().clone();
    m_params[k].detach().copy_(m_shadows[k]);
    m_shadows[k].copy_(keep);
  }
}

const std::vector<torch::Tensor>& WeightAverage::shadows() const {
  return m_shadows;
}

void WeightAverage::load(const std::vector<torch::Tensor>& shadows, int64_t updates) {
  if (shadows.size() != m_shadows.size())
    throw DataError("weight average: " + std::to_string(shadows.size()) +
                    " saved tensors for a model of " + std::to_string(m_shadows.size()));
  for (size_t k = 0; k < shadows.size(); ++k)
    if (shadows[k].sizes() != m_shadows[k].sizes() ||
        shadows[k].scalar_type() != m_shadows[k].scalar_type())
      throw DataError("weight average: saved tensor " + std::to_string(k) +
                      " does not match the model's parameter (shape or dtype)");
  c10::NoGradGuard no_grad;
  for (size_t k = 0; k < shadows.size(); ++k) m_shadows[k].copy_(shadows[k]);
  m_updates = updates;  // the device counts follow at the next update
}

}  // namespace ddgnn
