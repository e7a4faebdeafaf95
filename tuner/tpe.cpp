// TPE: the split of the trials, the Parzen estimators (truncated-normal and categorical
// kernels), candidate scoring. Rules and defaults in tpe.h.
#include "tuner/tpe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace ddgnn {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double normal_cdf(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

double log_sum_exp(const std::vector<double>& v) {
  double m = -kInf;
  for (double x : v) m = std::max(m, x);
  if (!std::isfinite(m)) return m;
  double s = 0.0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}

// A mixture of truncated normals on [low, high]: the observations' kernels, then the prior's.
struct NumericParzen {
  std::vector<double> mu, sigma, weight, log_norm;  // log_norm: log of the truncated mass
  double low = 0, high = 1;

  NumericParzen(const std::vector<double>& obs, double lo, double hi, const TpeOptions& o)
      : low(lo), high(hi) {
    const size_t n = obs.size();
    weight = tpe_weights(int64_t(n));
    weight.push_back(o.prior_weight);
    const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
    for (double& w : weight) w /= total;
    mu = obs;
    mu.push_back(0.5 * (low + high));
    const size_t m = mu.size();
    // Bandwidth: the larger gap to a neighbour (endpoints count as neighbours, except that the
    // outermost kernels take their inner gap: Optuna's consider_endpoints = false).
    std::vector<size_t> order(m);
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return mu[a] < mu[b]; });
    std::vector<double> e(m + 2);
    e[0] = low;
    e[m + 1] = high;
    for (size_t i = 0; i < m; ++i) e[i + 1] = mu[order[i]];
    std::vector<double> s(m);
    for (size_t i = 0; i < m; ++i) s[i] = std::max(e[i + 1] - e[i], e[i + 2] - e[i + 1]);
    if (m >= 2) {
      s[0] = e[2] - e[1];
      s[m - 1] = e[m] - e[m - 1];
    }
    sigma.assign(m, 0.0);
    for (size_t i = 0; i < m; ++i) sigma[order[i]] = s[i];
    const double range = high - low;
    const double min_sigma =
        o.magic_clip ? range / std::min(100.0, 1.0 + double(m)) : 1e-12 * range;
    for (double& v : sigma) v = std::clamp(v, min_sigma, range);
    sigma[m - 1] = range;  // the prior
    log_norm.resize(m);
    for (size_t i = 0; i < m; ++i) {
      const double mass =
          normal_cdf((high - mu[i]) / sigma[i]) - normal_cdf((low - mu[i]) / sigma[i]);
      log_norm[i] = std::log(std::max(mass, 1e-300));
    }
  }

  double log_pdf(double x) const {
    std::vector<double> terms(mu.size());
    for (size_t i = 0; i < mu.size(); ++i) {
      const double z = (x - mu[i]) / sigma[i];
      terms[i] = std::log(weight[i]) - 0.5 * z * z - std::log(sigma[i] * std::sqrt(2 * M_PI)) -
                 log_norm[i];
    }
    return log_sum_exp(terms);
  }
};

// A mixture of categorical kernels: each observation's kernel puts 1 on its choice plus
// prior_weight / n_kernels on every choice (normalised); the prior's kernel is uniform.
struct CategoricalParzen {
  std::vector<double> prob;  // [n_choices] the mixture
  std::vector<double> weight;
  std::vector<std::vector<double>> kernel;

  CategoricalParzen(const std::vector<double>& obs, int k, const TpeOptions& o) {
    const size_t n = obs.size();
    weight = tpe_weights(int64_t(n));
    weight.push_back(o.prior_weight);
    const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
    for (double& w : weight) w /= total;
    const double fill = o.prior_weight / double(n + 1);
    kernel.assign(n + 1, std::vector<double>(size_t(k), fill));
    for (size_t i = 0; i < n; ++i) kernel[i][size_t(obs[i])] += 1.0;
    for (auto& row : kernel) {
      const double sum = std::accumulate(row.begin(), row.end(), 0.0);
      for (double& v : row) v /= sum;
    }
    prob.assign(size_t(k), 0.0);
    for (size_t i = 0; i <= n; ++i)
      for (int c = 0; c < k; ++c) prob[size_t(c)] += weight[i] * kernel[i][size_t(c)];
  }
};

// Index drawn from normalised `weights` with a uniform u in [0, 1) (the last one takes what
// rounding leaves).
size_t draw(const std::vector<double>& weights, double u) {
  double acc = 0.0;
  size_t i = 0;
  for (; i + 1 < weights.size(); ++i)
    if ((acc += weights[i]) > u) break;
  return i;
}

// The estimator's coordinate of a parameter value, and its bounds there.
double to_internal(const TpeParam& p, double v) {
  return p.kind == TpeParam::kLogFloat ? std::log(v) : v;
}

void internal_bounds(const TpeParam& p, double& lo, double& hi) {
  lo = p.low;
  hi = p.high;
  if (p.kind == TpeParam::kLogFloat) {
    lo = std::log(p.low);
    hi = std::log(p.high);
  } else if (p.kind == TpeParam::kInt) {
    lo -= 0.5;
    hi += 0.5;
  }
}

double from_internal(const TpeParam& p, double v) {
  switch (p.kind) {
    case TpeParam::kLogFloat:
      return std::clamp(std::exp(v), p.low, p.high);
    case TpeParam::kInt:
      return std::clamp(std::round(v), p.low, p.high);
    default:
      return std::clamp(v, p.low, p.high);
  }
}

}  // namespace

TpeParam TpeParam::real(std::string name, double low, double high, bool log) {
  TpeParam p;
  p.name = std::move(name);
  p.kind = log ? kLogFloat : kFloat;
  p.low = low;
  p.high = high;
  return p;
}

TpeParam TpeParam::integer(std::string name, int64_t low, int64_t high) {
  TpeParam p;
  p.name = std::move(name);
  p.kind = kInt;
  p.low = double(low);
  p.high = double(high);
  return p;
}

TpeParam TpeParam::categorical(std::string name, int n_choices) {
  TpeParam p;
  p.name = std::move(name);
  p.kind = kCategorical;
  p.n_choices = n_choices;
  p.low = 0;
  p.high = n_choices - 1;
  return p;
}

int64_t tpe_gamma(int64_t n) {
  return std::min<int64_t>((n + 9) / 10, 25);
}

std::vector<double> tpe_weights(int64_t n) {
  std::vector<double> w(size_t(std::max<int64_t>(n, 0)), 1.0);
  if (n > 25) {
    const int64_t ramp = n - 25;  // linspace(1/n, 1, ramp) for the oldest
    for (int64_t i = 0; i < ramp; ++i)
      w[size_t(i)] = ramp == 1
                         ? 1.0 / double(n)
                         : 1.0 / double(n) + (1.0 - 1.0 / double(n)) * double(i) / double(ramp - 1);
  }
  return w;
}

Tpe::Tpe(std::vector<TpeParam> space, uint64_t seed, TpeOptions options)
    : m_space(std::move(space)), m_options(options), m_rng(seed) {
  if (m_space.empty()) throw Error("TPE: the search space has no parameter");
  for (const auto& p : m_space) {
    const std::string what = "TPE: parameter '" + p.name + "': ";
    if (p.kind == TpeParam::kCategorical) {
      if (p.n_choices < 1) throw Error(what + "a categorical parameter needs at least one choice");
    } else if (!(p.low < p.high) || !std::isfinite(p.low) || !std::isfinite(p.high)) {
      throw Error(what + "needs finite low < high (got " + std::to_string(p.low) + ", " +
                  std::to_string(p.high) + ")");
    } else if (p.kind == TpeParam::kLogFloat && p.low <= 0) {
      throw Error(what + "a log-scale parameter needs low > 0 (got " + std::to_string(p.low) + ")");
    }
  }
  if (m_options.n_candidates < 1) throw Error("TPE: n_candidates must be at least 1");
}

double Tpe::uniform() {
  return double(m_rng() >> 11) * 0x1.0p-53;
}

double Tpe::normal() {
  if (m_has_spare) {
    m_has_spare = false;
    return m_spare;
  }
  double u = 0.0;
  while (u <= 0.0) u = uniform();
  const double v = uniform();
  const double r = std::sqrt(-2.0 * std::log(u));
  m_spare = r * std::sin(2 * M_PI * v);
  m_has_spare = true;
  return r * std::cos(2 * M_PI * v);
}

double Tpe::random_value(const TpeParam& p) {
  switch (p.kind) {
    case TpeParam::kCategorical:
      return std::min(double(p.n_choices - 1), std::floor(uniform() * p.n_choices));
    case TpeParam::kInt:
      return std::min(p.high, p.low + std::floor(uniform() * (p.high - p.low + 1)));
    case TpeParam::kLogFloat:
      return std::clamp(
          std::exp(std::log(p.low) + uniform() * (std::log(p.high) - std::log(p.low))), p.low,
          p.high);
    default:
      return p.low + uniform() * (p.high - p.low);
  }
}

double Tpe::suggest(size_t k, const std::vector<size_t>& below, const std::vector<size_t>& above) {
  const TpeParam& p = m_space[k];
  auto observations = [&](const std::vector<size_t>& trials) {
    std::vector<double> v;
    for (size_t t : trials) v.push_back(to_internal(p, m_x[t][k]));
    return v;
  };
  const int n_cand = m_options.n_candidates;
  if (p.kind == TpeParam::kCategorical) {
    const CategoricalParzen l(observations(below), p.n_choices, m_options);
    const CategoricalParzen g(observations(above), p.n_choices, m_options);
    double best = 0, best_score = -kInf;
    for (int c = 0; c < n_cand; ++c) {
      // Draw a kernel by weight, then a choice from it.
      const size_t i = draw(l.weight, uniform());
      const int choice = int(draw(l.kernel[i], uniform()));
      const double score = std::log(l.prob[size_t(choice)]) - std::log(g.prob[size_t(choice)]);
      if (score > best_score) {
        best_score = score;
        best = choice;
      }
    }
    return best;
  }
  double lo = 0, hi = 0;
  internal_bounds(p, lo, hi);
  const NumericParzen l(observations(below), lo, hi, m_options);
  const NumericParzen g(observations(above), lo, hi, m_options);
  double best = 0, best_score = -kInf;
  for (int c = 0; c < n_cand; ++c) {
    const size_t i = draw(l.weight, uniform());
    // Truncated normal by rejection: every kernel's mean lies in [lo, hi] and its width is at
    // most the range, so at least a third of the draws land inside.
    double x = l.mu[i];
    for (int tries = 0; tries < 1000; ++tries) {
      const double y = l.mu[i] + l.sigma[i] * normal();
      if (y >= lo && y <= hi) {
        x = y;
        break;
      }
    }
    const double value = from_internal(p, x);
    const double xi = to_internal(p, value);  // integers are scored where they round to
    const double score = l.log_pdf(xi) - g.log_pdf(xi);
    if (score > best_score) {
      best_score = score;
      best = value;
    }
  }
  return best;
}

std::vector<double> Tpe::ask() {
  std::vector<double> x(m_space.size());
  const size_t n = m_values.size();
  if (int64_t(n) < m_options.n_startup) {
    for (size_t k = 0; k < m_space.size(); ++k) x[k] = random_value(m_space[k]);
    return x;
  }
  // The best gamma(n) trials are "below"; both groups in trial order (for the fading weights).
  std::vector<size_t> by_value(n);
  std::iota(by_value.begin(), by_value.end(), size_t(0));
  std::stable_sort(by_value.begin(), by_value.end(),
                   [&](size_t a, size_t b) { return m_values[a] < m_values[b]; });
  const size_t n_below = size_t(tpe_gamma(int64_t(n)));
  std::vector<size_t> below(by_value.begin(), by_value.begin() + long(n_below));
  std::vector<size_t> above(by_value.begin() + long(n_below), by_value.end());
  std::sort(below.begin(), below.end());
  std::sort(above.begin(), above.end());
  for (size_t k = 0; k < m_space.size(); ++k) x[k] = suggest(k, below, above);
  return x;
}

void Tpe::tell(const std::vector<double>& x, double value) {
  if (x.size() != m_space.size())
    throw Error("TPE: a point of " + std::to_string(x.size()) + " values for a space of " +
                std::to_string(m_space.size()) + " parameters");
  for (size_t k = 0; k < x.size(); ++k) {
    const TpeParam& p = m_space[k];
    const bool whole = p.kind == TpeParam::kInt || p.kind == TpeParam::kCategorical;
    if (!(x[k] >= p.low && x[k] <= p.high) || (whole && x[k] != std::round(x[k])))
      throw Error("TPE: parameter '" + p.name + "' = " + std::to_string(x[k]) +
                  " is outside its space");
  }
  m_x.push_back(x);
  m_values.push_back(std::isfinite(value) ? value : kInf);
  if (m_best == SIZE_MAX || m_values.back() < m_values[m_best]) m_best = m_values.size() - 1;
}

double Tpe::best_value() const {
  return m_best == SIZE_MAX ? kInf : m_values[m_best];
}

const std::vector<double>& Tpe::best() const {
  static const std::vector<double> none;
  return m_best == SIZE_MAX ? none : m_x[m_best];
}

}  // namespace ddgnn
