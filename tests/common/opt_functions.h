// Standard test functions for optimisers (minimisation), shared by tests/tuner and bench/:
// Branin (min 0.397887), Rosenbrock in 2-D (min 0 at (1, 1)), a 4-D quadratic with noise
// (true min 0 at 0.3 everywhere), and a mixed space (log-scale, integer, categorical; min 0).
#pragma once

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tuner/tpe.h"

namespace ddgnn::testing {

struct OptProblem {
  std::string name;
  std::vector<TpeParam> space;
  // Noisy objective (what the optimiser sees) and the true value (what is reported).
  std::function<double(const std::vector<double>&, std::mt19937_64&)> noisy;
  std::function<double(const std::vector<double>&)> truth;
};

inline double branin(const std::vector<double>& x) {
  const double a = 1, b = 5.1 / (4 * M_PI * M_PI), c = 5 / M_PI, r = 6, s = 10, t = 1 / (8 * M_PI);
  const double u = x[1] - b * x[0] * x[0] + c * x[0] - r;
  return a * u * u + s * (1 - t) * std::cos(x[0]) + s;
}

inline double rosenbrock(const std::vector<double>& x) {
  return (1 - x[0]) * (1 - x[0]) + 100 * (x[1] - x[0] * x[0]) * (x[1] - x[0] * x[0]);
}

inline double quadratic(const std::vector<double>& x) {
  double f = 0;
  for (double v : x) f += (v - 0.3) * (v - 0.3);
  return f;
}

inline double mixed(const std::vector<double>& x) {
  const double l = std::log10(x[0]) + 3;  // best lr 1e-3 on [1e-6, 1]
  return l * l + (x[1] - 7) * (x[1] - 7) / 10 + (x[2] != 2 ? 1.0 : 0.0);
}

inline std::vector<OptProblem> opt_problems() {
  auto exact = [](double (*f)(const std::vector<double>&)) {
    return [f](const std::vector<double>& x, std::mt19937_64&) { return f(x); };
  };
  std::vector<OptProblem> out;
  out.push_back({"branin",
                 {TpeParam::real("x1", -5, 10), TpeParam::real("x2", 0, 15)},
                 exact(branin),
                 branin});
  out.push_back({"rosenbrock",
                 {TpeParam::real("x", -2, 2), TpeParam::real("y", -2, 2)},
                 exact(rosenbrock),
                 rosenbrock});
  out.push_back({"noisy_quadratic",
                 {TpeParam::real("a", -1, 1), TpeParam::real("b", -1, 1),
                  TpeParam::real("c", -1, 1), TpeParam::real("d", -1, 1)},
                 [](const std::vector<double>& x, std::mt19937_64& rng) {
                   return quadratic(x) + std::normal_distribution<double>(0.0, 0.05)(rng);
                 },
                 quadratic});
  out.push_back({"mixed",
                 {TpeParam::real("lr", 1e-6, 1, /*log=*/true), TpeParam::integer("n", 1, 20),
                  TpeParam::categorical("kind", 4)},
                 exact(mixed),
                 mixed});
  return out;
}

// The true value at the best point (by the noisy values it saw) of `trials` trials: TPE, or
// random search (TpeOptions::n_startup = trials) with the same seed.
inline double optimise(const OptProblem& p, int trials, uint64_t seed, bool random) {
  TpeOptions o;
  if (random) o.n_startup = trials;
  Tpe tpe(p.space, seed, o);
  std::mt19937_64 noise(seed ^ 0x9e3779b97f4a7c15ULL);
  for (int t = 0; t < trials; ++t) {
    const std::vector<double> x = tpe.ask();
    tpe.tell(x, p.noisy(x, noise));
  }
  return p.truth(tpe.best());
}

}  // namespace ddgnn::testing
