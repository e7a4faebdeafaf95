// The online switcher's decisions (tuner/online.h).
#include "tuner/online.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ddgnn {

double median_seconds(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

double batch_bytes(const FetchFeatures& f) {
  return std::max(1.0, f.batch * f.bytes_mean);
}

}  // namespace

OnlineTuner::OnlineTuner(OnlineOptions options, std::map<std::string, CostModel> prior)
    : m_options(std::move(options)), m_prior(std::move(prior)) {
  if (m_options.candidates.empty())
    throw ConfigError("Tuner.candidates: no backend to choose from",
                      "list at least one of rma, collective, shm, file, or leave it empty for all");
  if (m_options.explore_batches < 1) throw ConfigError("Tuner.explore_batches: must be at least 1");
  m_current = m_options.candidates.front();
  m_explored = m_options.candidates;
}

std::vector<std::string> OnlineTuner::explore_order(int round) const {
  std::vector<std::string> order = m_explored;
  if (!order.empty())
    std::rotate(order.begin(), order.begin() + (size_t(std::max(round, 0)) % order.size()),
                order.end());
  return order;
}

void OnlineTuner::explore(const FetchFeatures& features, double current_s) {
  m_exploring = true;
  m_explored.clear();
  m_pruned.clear();
  // Prune with the calibrated models: candidates far slower than the best predicted one are not
  // worth their exploration cost. The current backend is always explored (the baseline).
  double best = INFINITY;
  std::map<std::string, double> pred;
  for (const auto& c : m_options.candidates) {
    const double p = c == m_current && current_s > 0 ? current_s : predict(c, features);
    if (!(p > 0)) continue;  // never measured: explored
    pred[c] = p;
    best = std::min(best, p);
  }
  for (const auto& c : m_options.candidates) {
    const auto p = pred.find(c);
    if (c != m_current && p != pred.end() && p->second > m_options.prune_factor * best)
      m_pruned.push_back(c);
    else
      m_explored.push_back(c);
  }
}

OnlineDecision OnlineTuner::decide(const std::map<std::string, std::vector<double>>& times,
                                   const FetchFeatures& features, const std::string& reason) {
  OnlineDecision d;
  d.previous = m_current;
  d.reason = reason;
  for (const auto& [backend, t] : times) {
    const double m = median_seconds(t);
    if (!(m > 0) || !std::isfinite(m)) continue;
    d.measured[backend] = m;
    const double prior = prior_prediction(backend, features);
    d.predicted[backend] = prior;
    // The times go to the models: the prior calibrated to this run, or seconds per batch byte.
    m_scale[backend] = prior > 0 ? m / prior : m / batch_bytes(features);
  }
  if (d.measured.empty()) throw Error("backend tuner: no candidate was measured");
  auto best = std::min_element(d.measured.begin(), d.measured.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  const auto cur = d.measured.find(m_current);
  const bool keep =
      cur != d.measured.end() && cur->second <= best->second * (1.0 + m_options.switch_margin);
  d.backend = keep ? m_current : best->first;
  m_current = d.backend;
  m_exploring = false;
  m_rebase = true;
  return d;
}

double OnlineTuner::predict(const std::string& backend, const FetchFeatures& features) const {
  const auto s = m_scale.find(backend);
  if (s == m_scale.end()) return NAN;
  const double prior = prior_prediction(backend, features);
  return prior > 0 ? prior * s->second : s->second * batch_bytes(features);
}

double OnlineTuner::prior_prediction(const std::string& backend,
                                     const FetchFeatures& features) const {
  const auto it = m_prior.find(backend);
  return it != m_prior.end() ? it->second.predict(features) : NAN;
}

bool OnlineTuner::check(double observed, const FetchFeatures& features, double* predicted,
                        double floor) {
  const double p = predict(m_current, features);
  if (predicted) *predicted = p;
  if (!(p > 0) || !(observed > 0)) return false;
  if (m_rebase) {
    m_rebase = false;
    m_scale[m_current] *= observed / p;
    return false;
  }
  if (std::abs(observed / p - 1.0) <= m_options.drift || std::abs(observed - p) <= floor)
    return false;
  explore(features, observed);
  return true;
}

}  // namespace ddgnn
