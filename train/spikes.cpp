// The loss-spike guard (train/spikes.h).
#include "train/spikes.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <limits>

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
