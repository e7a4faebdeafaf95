// Cost models of the loader backends: predicted seconds for one fetch of a batch, from the run's
// features. One parametric model per backend, every term a physical cost with its own
// non-negative parameter:
//   latency           L^k                       fixed cost of a fetch (calls, flushes, syncs)
//   local_sample      L^k B (1 - f)             per local sample (lookup, pointer, copy start)
//   local_byte        L^k B (1 - f) S           local bytes (memcpy bandwidth)
//   remote_sample     L^k B f                   per remote sample (a get, a message)
//   remote_byte       L^k B f S                 remote bytes (network / shared-memory bandwidth)
//   peers             L^k (P - 1)               per peer (collective exchanges with every rank)
//   rounds            L^k log2 P                collective latency (tree or dissemination rounds)
//   contention        c                         waiting for descheduled peers, per fetch
//   contention_peers  c (P - 1)                 the same, per peer of a collective exchange
// with B samples per rank, S mean bytes per sample, f the fraction held by another rank, P ranks
// in the loader group, R ranks per node, L = max(1, R / cores) the load of the cores (ranks
// time-sharing a core stretch every cost by L^k) and c = max(0, R / cores - 1). Which terms a
// backend has is in backend_terms(). For a given exponent k the model is linear in its
// parameters. Fits: least squares (non-negative coefficients minimising the relative squared
// error, k = 1: the linear baseline), and TPE (the published estimator fits its parameters with
// TPE): TPE searches k in [0, 3] by the mean |log(predicted / measured)|, each trial solving the
// linear coefficients by least squares (variable projection). No torch, no MPI.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddgnn {

struct FetchFeatures {
  double batch = 1;           // B, samples per rank per fetch
  double ranks = 1;           // P, ranks in the loader group
  double ranks_per_node = 1;  // R
  double cores_per_node = 1;
  double bytes_mean = 0;    // S
  double bytes_spread = 0;  // standard deviation of the sample size (recorded; not a term yet)
  double remote = 0;        // f
  bool device = false;      // destination in GPU memory (recorded; the CPU backends ignore it)
};

struct FetchMeasurement {
  std::string backend;
  FetchFeatures features;
  double seconds = 0;  // one fetch of a batch (the slowest rank's)
  // The same over the first repetitions (the online switcher's exploration) and over the rest,
  // when the grid has them (NAN otherwise).
  double explore_seconds = NAN, rest_seconds = NAN;
  // Timed repetitions, and in how many of them this backend was faster than the configuration's
  // fastest (lowest median) in the same repetition (-1: the grid does not say).
  int repetitions = 0, beats_best = -1;
};

enum class FitMethod { kTpe, kLeastSquares };
// "tpe" | "lsq" (the keys of `ddgnn tune --out`'s JSON); parse throws a ConfigError listing them.
std::string to_string(FitMethod m);
FitMethod parse_fit_method(const std::string& name);
const std::vector<std::string>& fit_method_names();

class CostModel {
 public:
  // The backends with a model: rma, collective, shm, replicated, file.
  static const std::vector<std::string>& backends();
  // Term names of a backend's model (ConfigError listing the known backends otherwise).
  static std::vector<std::string> backend_terms(const std::string& backend);

  explicit CostModel(std::string backend);
  // A fitted model from its parameters by term name (as `ddgnn tune --out` writes them): every
  // term of the backend must be given, and no other (ConfigError naming the term otherwise).
  static CostModel from_parameters(const std::string& backend,
                                   const std::map<std::string, double>& terms, double exponent);
  std::map<std::string, double> parameter_map() const;
  const std::string& backend() const { return m_backend; }
  const std::vector<std::string>& terms() const { return m_terms; }
  const std::vector<double>& parameters() const { return m_theta; }
  double contention_exponent() const { return m_exponent; }

  double predict(const FetchFeatures& f) const;
  // Fits to the measurements of this backend (others are ignored). Throws DataError when there
  // are fewer than terms().size() + 1 of them, saying how many are needed, or a time is not
  // positive. TPE: `trials` trials, seeded.
  void fit(const std::vector<FetchMeasurement>& data, FitMethod method, int trials = 60,
           uint64_t seed = 0);

 private:
  std::vector<double> term_values(const FetchFeatures& f, double exponent) const;
  // Non-negative coefficients minimising the relative squared error, at a given exponent.
  std::vector<double> least_squares(const std::vector<const FetchMeasurement*>& rows,
                                    double exponent) const;

  std::string m_backend;
  std::vector<std::string> m_terms;
  std::vector<double> m_theta;
  double m_exponent = 1.0;
};

// Median absolute percentage error of `model` on the measurements of its backend.
double median_ape(const CostModel& model, const std::vector<FetchMeasurement>& data);

// The upper median (the sorted values' element n / 2; NAN when empty): how every MdAPE here,
// fitted or held out, is taken.
double upper_median(std::vector<double> v);

}  // namespace ddgnn
