// The loss-spike guard (train/spikes.h).
#include "train/spikes.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace ddgnn {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// Whether `value` (0-dim float64) is a spike against `history`: more than factor times the median
// of its finite values, once there are kMinHistory of them; the median as a second output.
at::Tensor above_history(const at::Tensor& value, const at::Tensor& history, double factor,
                         at::Tensor& median) {
  median = at::nanmedian(history);
  const at::Tensor enough = history.isnan().logical_not().sum().ge(SpikeGuard::kMinHistory);
  return enough.logical_and(value.gt(median * factor));
}

// `value` into the ring `history` at `at` (mod its length), nan when it is not finite; `at` + 1.
void keep(at::Tensor& history, at::Tensor& at, const at::Tensor& value) {
  const at::Tensor slot = at.remainder(history.size(0)).view({1});
  history.scatter_(0, slot, value.masked_fill(value.isfinite().logical_not(), kNan).view({1}));
  at.add_(1);
}

}  // namespace

SpikeGuard::SpikeGuard(double factor, c10::Device device) : m_factor(factor) {
  const auto real = at::TensorOptions().dtype(at::kDouble).device(device);
  const auto index = at::TensorOptions().dtype(at::kLong).device(device);
  m_losses = at::full({kWindow}, kNan, real);
  m_norms = at::full({kWindow}, kNan, real);
  m_loss_at = at::zeros({}, index);
  m_norm_at = at::zeros({}, index);
  m_spike = at::zeros({}, real.dtype(at::kBool));
  m_persisted = at::zeros({}, real.dtype(at::kBool));
  m_loss_median = at::full({}, kNan, real);
  m_in_a_row = at::zeros({}, real);
}

void SpikeGuard::forget() {
  m_losses.fill_(kNan);
  m_norms.fill_(kNan);
  m_in_a_row.zero_();
}

namespace {

// A float64 tensor's values, nan as null (JSON has no nan).
nlohmann::json values_of(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kCPU).contiguous();
  const double* p = c.data_ptr<double>();
  nlohmann::json out = nlohmann::json::array();
  for (int64_t i = 0; i < c.numel(); ++i)
    out.push_back(std::isnan(p[i]) ? nlohmann::json() : nlohmann::json(p[i]));
  return out;
}

void set_values(at::Tensor& t, const nlohmann::json& values) {
  if (!values.is_array() || int64_t(values.size()) != t.numel())
    throw std::invalid_argument("the spike guard's saved history has another length");
  std::vector<double> v;
  for (const auto& x : values) v.push_back(x.is_null() ? kNan : x.get<double>());
  t.copy_(at::tensor(v, at::kDouble).view(t.sizes()));
}

}  // namespace

nlohmann::json SpikeGuard::state() const {
  return {{"losses", values_of(m_losses)},
          {"norms", values_of(m_norms)},
          {"loss_at", m_loss_at.to(at::kCPU).item<int64_t>()},
          {"norm_at", m_norm_at.to(at::kCPU).item<int64_t>()},
          {"in_a_row", values_of(m_in_a_row.view({1}))}};
}

void SpikeGuard::load_state(const nlohmann::json& j) {
  set_values(m_losses, j.at("losses"));
  set_values(m_norms, j.at("norms"));
  m_loss_at.fill_(j.at("loss_at").get<int64_t>());
  m_norm_at.fill_(j.at("norm_at").get<int64_t>());
  at::Tensor row = m_in_a_row.view({1});
  set_values(row, j.at("in_a_row"));
}

at::Tensor SpikeGuard::skips_allowed() const {
  return m_in_a_row.lt(double(kMaxSpikesInARow));
}

at::Tensor SpikeGuard::judge_loss(const at::Tensor& loss) {
  at::Tensor median;
  at::Tensor l;
  {
    c10::NoGradGuard no_grad;
    l = loss.detach().to(at::kDouble).reshape({});
    // Far above the median: skipped, unless the steps before were skipped as many times in a row
    // (then the weights, not the batch, are the cause, and its gradient is what corrects them).
    const at::Tensor above = above_history(l, m_losses, m_factor, median);
    const at::Tensor spike =
        l.isfinite().logical_not().logical_or(above.logical_and(skips_allowed()));
    m_persisted.copy_(above.logical_and(spike.logical_not()));
    m_spike.copy_(spike);
    m_loss_median.copy_(median);
    keep(m_losses, m_loss_at, l);
  }
  // nan where judged a spike: the gradients, summed over the ranks, are then nan on every rank.
  return loss * at::ones_like(loss).masked_fill_(m_spike, kNan);
}

SpikeGuard::Verdict SpikeGuard::judge_step(const at::Tensor& grad_norm) {
  c10::NoGradGuard no_grad;
  const at::Tensor g = grad_norm.detach().to(at::kDouble).reshape({});
  at::Tensor median;
  const at::Tensor above = above_history(g, m_norms, m_factor, median);
  const at::Tensor bad =
      g.isfinite().logical_not().logical_or(above.logical_and(skips_allowed())).logical_or(m_spike);
  // Applied although far above the median (the spikes persisted).
  const at::Tensor persisted = bad.logical_not().logical_and(above.logical_or(m_persisted));
  Verdict v;
  v.apply = bad.logical_not();
  v.record = at::stack({m_spike.to(at::kDouble), bad.to(at::kDouble), m_loss_median, median,
                        persisted.to(at::kDouble)});
  keep(m_norms, m_norm_at, g);
  m_in_a_row.add_(1.0).mul_(bad.to(at::kDouble));  // skips in a row, 0 after an applied step
  m_spike.fill_(false);  // a rank without a sample in the next step judges no loss
  m_persisted.fill_(false);
  m_loss_median.fill_(kNan);
  return v;
}

}  // namespace ddgnn
