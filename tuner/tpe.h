// Tree of Parzen Estimators (Bergstra et al., 2011) with Optuna's defaults: the first
// `n_startup` trials are random; then the trials are split into the best gamma(n) =
// min(ceil(0.1 n), 25) ("below") and the rest ("above"); each parameter gets a Parzen
// estimator l(x) over the below trials and g(x) over the above ones — truncated-normal kernels
// at the observations plus a prior kernel (the middle of the range, as wide as the range),
// bandwidths from the distances to the neighbouring observations clipped to
// [range / min(100, 1 + n), range] ("magic clip"), weights that fade the oldest trials once
// there are more than 25 — and the next value is the best of 24 candidates drawn from l by
// log l(x) - log g(x). Parameters are independent (Optuna's univariate TPE). Minimises.
//
// Kinds: float on [low, high]; log-scale float (the estimator works on log x); integer (a float
// on [low - 0.5, high + 0.5] rounded); categorical (kernels: the observed choice plus uniform
// smoothing; the prior is uniform). Seeded: the same seed and the same told values give the
// same trials on every platform (own normal and uniform draws from std::mt19937_64).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace ddgnn {

struct TpeParam {
  enum Kind { kFloat, kLogFloat, kInt, kCategorical };
  std::string name;
  Kind kind = kFloat;
  double low = 0.0, high = 1.0;  // bounds (inclusive); kCategorical: ignored
  int n_choices = 0;             // kCategorical: values 0 .. n_choices - 1

  static TpeParam real(std::string name, double low, double high, bool log = false);
  static TpeParam integer(std::string name, int64_t low, int64_t high);
  static TpeParam categorical(std::string name, int n_choices);
};

struct TpeOptions {
  int n_startup = 10;     // random trials before the estimators take over
  int n_candidates = 24;  // draws from l(x) per parameter, scored by log l - log g
  double prior_weight = 1.0;
  bool magic_clip = true;  // lower bound on the bandwidths
};

class Tpe {
 public:
  // Throws Error for an empty space or a bad parameter (low >= high, log with low <= 0,
  // fewer than one choice), naming it.
  Tpe(std::vector<TpeParam> space, uint64_t seed, TpeOptions options = {});

  // The next point to try: one value per parameter (integers and choice indices as doubles).
  std::vector<double> ask();
  // Records the objective at x (any point, asked or not; a NaN or infinite value counts as the
  // worst seen). Throws Error when x has the wrong size or lies outside the space.
  void tell(const std::vector<double>& x, double value);

  int64_t n_trials() const { return int64_t(m_values.size()); }
  double best_value() const;                // +inf before any trial
  const std::vector<double>& best() const;  // empty before any trial
  const std::vector<TpeParam>& space() const { return m_space; }

 private:
  double uniform();  // [0, 1), 53 bits
  double normal();   // Box-Muller
  double random_value(const TpeParam& p);
  double suggest(size_t param, const std::vector<size_t>& below, const std::vector<size_t>& above);

  std::vector<TpeParam> m_space;
  TpeOptions m_options;
  std::mt19937_64 m_rng;
  bool m_has_spare = false;
  double m_spare = 0.0;
  std::vector<std::vector<double>> m_x;  // [trial][param], in trial order
  std::vector<double> m_values;          // [trial]
  size_t m_best = SIZE_MAX;
};

// Optuna's gamma: how many of n trials count as "below" (good).
int64_t tpe_gamma(int64_t n);
// Optuna's default weights of n trials in trial order: 1 for the newest 25, a ramp from 1/n
// up to 1 for the older ones.
std::vector<double> tpe_weights(int64_t n);

}  // namespace ddgnn
