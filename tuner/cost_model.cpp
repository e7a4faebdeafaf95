// The loader backends' cost models: terms, prediction, and the two fits (terms in cost_model.h).
#include "tuner/cost_model.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/backend.h"
#include "core/error.h"
#include "tuner/tpe.h"

namespace ddgnn {

namespace {

const std::map<std::string, std::vector<std::string>>& model_terms() {
  static const std::map<std::string, std::vector<std::string>> terms = {
      {to_string(Backend::kRma),
       {"latency", "local_sample", "local_byte", "remote_sample", "remote_byte", "contention"}},
      {to_string(Backend::kCollective),
       {"latency", "local_sample", "local_byte", "remote_sample", "remote_byte", "peers", "rounds",
        "contention", "contention_peers"}},
      {to_string(Backend::kShm),
       {"latency", "local_sample", "local_byte", "remote_sample", "remote_byte", "contention"}},
      {to_string(Backend::kReplicated), {"latency", "local_sample", "local_byte", "contention"}},
      {to_string(Backend::kFile), {"latency", "local_sample", "local_byte", "contention"}},
  };
  return terms;
}

}  // namespace

const std::vector<std::string>& fit_method_names() {
  static const std::vector<std::string> names = {"tpe", "lsq"};
  return names;
}

std::string to_string(FitMethod m) {
  return fit_method_names()[size_t(m)];
}

FitMethod parse_fit_method(const std::string& name) {
  for (size_t i = 0; i < fit_method_names().size(); ++i)
    if (fit_method_names()[i] == name) return FitMethod(i);
  throw ConfigError("unknown fit method '" + name + "'", "use tpe or lsq");
}

const std::vector<std::string>& CostModel::backends() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [name, terms] : model_terms()) n.push_back(name);
    return n;
  }();
  return names;
}

std::vector<std::string> CostModel::backend_terms(const std::string& backend) {
  const auto it = model_terms().find(backend);
  if (it == model_terms().end()) {
    std::string known;
    for (const auto& b : backends()) known += (known.empty() ? "" : ", ") + b;
    throw ConfigError("no cost model for backend '" + backend + "'", "known backends: " + known);
  }
  return it->second;
}

CostModel::CostModel(std::string backend)
    : m_backend(std::move(backend)), m_terms(backend_terms(m_backend)) {
  m_theta.assign(m_terms.size(), 0.0);
}

CostModel CostModel::from_parameters(const std::string& backend,
                                     const std::map<std::string, double>& terms, double exponent) {
  CostModel m(backend);
  for (const auto& [name, value] : terms) {
    const auto it = std::find(m.m_terms.begin(), m.m_terms.end(), name);
    if (it == m.m_terms.end())
      throw ConfigError("cost model of '" + backend + "': no term '" + name + "'",
                        "refit the models with this version: ddgnn tune -m grid.csv --out FILE");
    if (!(value >= 0) || !std::isfinite(value))
      throw ConfigError("cost model of '" + backend + "': term '" + name + "' is " +
                        std::to_string(value) + ", not a non-negative number");
    m.m_theta[size_t(it - m.m_terms.begin())] = value;
  }
  for (const auto& t : m.m_terms)
    if (!terms.count(t))
      throw ConfigError("cost model of '" + backend + "': term '" + t + "' is missing",
                        "refit the models with this version: ddgnn tune -m grid.csv --out FILE");
  if (!(exponent >= 0) || !std::isfinite(exponent))
    throw ConfigError("cost model of '" + backend + "': contention exponent " +
                      std::to_string(exponent) + " is not positive");
  m.m_exponent = exponent;
  return m;
}

std::map<std::string, double> CostModel::parameter_map() const {
  std::map<std::string, double> out;
  for (size_t k = 0; k < m_terms.size(); ++k) out[m_terms[k]] = m_theta[k];
  return out;
}

std::vector<double> CostModel::term_values(const FetchFeatures& f, double exponent) const {
  const double b = f.batch, s = f.bytes_mean, r = std::clamp(f.remote, 0.0, 1.0);
  const double load = f.ranks_per_node / std::max(1.0, f.cores_per_node);
  // Ranks time-sharing cores: the work of a fetch stretches by (R / cores)^k, and each
  // synchronisation waits for descheduled peers (c = R / cores - 1 when positive).
  const double slow = load > 1 ? std::pow(load, exponent) : 1.0;
  const double over = std::max(0.0, load - 1.0);
  std::vector<double> v;
  v.reserve(m_terms.size());
  for (const auto& t : m_terms) {
    if (t == "latency")
      v.push_back(slow);
    else if (t == "local_sample")
      v.push_back(slow * b * (1 - r));
    else if (t == "local_byte")
      v.push_back(slow * b * (1 - r) * s);
    else if (t == "remote_sample")
      v.push_back(slow * b * r);
    else if (t == "remote_byte")
      v.push_back(slow * b * r * s);
    else if (t == "peers")
      v.push_back(slow * std::max(0.0, f.ranks - 1));
    else if (t == "rounds")
      v.push_back(slow * std::log2(std::max(1.0, f.ranks)));
    else if (t == "contention")
      v.push_back(over);
    else if (t == "contention_peers")
      v.push_back(over * std::max(0.0, f.ranks - 1));
    else
      throw Error("cost model: unknown term " + t);
  }
  return v;
}

double CostModel::predict(const FetchFeatures& f) const {
  const std::vector<double> v = term_values(f, m_exponent);
  double t = 0;
  for (size_t k = 0; k < v.size(); ++k) t += m_theta[k] * v[k];
  return t;
}

void CostModel::fit(const std::vector<FetchMeasurement>& data, FitMethod method, int trials,
                    uint64_t seed) {
  std::vector<const FetchMeasurement*> rows;
  for (const auto& m : data)
    if (m.backend == m_backend) rows.push_back(&m);
  const size_t k = m_terms.size();
  if (rows.size() < k + 1)
    throw DataError("cost model of '" + m_backend + "': " + std::to_string(rows.size()) +
                        " measurements, and its " + std::to_string(k) +
                        " parameters need at least " + std::to_string(k + 1),
                    "measure more configurations (ddgnn bench-loader over sample sizes, batches "
                    "and ranks)");
  for (const auto* m : rows)
    if (!(m->seconds > 0) || !std::isfinite(m->seconds))
      throw DataError("cost model of '" + m_backend + "': a measured time of " +
                      std::to_string(m->seconds) + " s is not positive");

  // Least squares: exponent 1, non-negative coefficients minimising the relative error.
  m_exponent = 1.0;
  m_theta = least_squares(rows, 1.0);
  if (method == FitMethod::kLeastSquares) return;

  // TPE (variable projection): TPE searches the contention exponent, scored by the mean
  // |log(predicted / measured)|; every trial solves the linear coefficients by least squares.
  // (TPE over every coefficient as well, six decades each in up to seven dimensions, predicted
  // held-out points worse than least squares; see results/tuner.md.)
  bool contention = false;
  for (const auto* m : rows) contention |= m->features.ranks_per_node > m->features.cores_per_node;
  if (!contention) return;  // the exponent does not matter: least squares is the fit
  auto log_error = [&](const std::vector<double>& theta, double exponent) {
    CostModel trial = *this;
    trial.m_theta = theta;
    trial.m_exponent = exponent;
    double sum = 0;
    for (const auto* m : rows) {
      const double pred = trial.predict(m->features);
      sum += pred > 0 ? std::abs(std::log(pred / m->seconds)) : 50.0;
    }
    return sum / double(rows.size());
  };
  Tpe tpe({TpeParam::real("contention_exponent", 0.0, 3.0)}, seed);
  tpe.tell({1.0}, log_error(m_theta, 1.0));
  for (int t = 0; t < trials; ++t) {
    const double k = tpe.ask()[0];
    tpe.tell({k}, log_error(least_squares(rows, k), k));
  }
  m_exponent = tpe.best()[0];
  m_theta = least_squares(rows, m_exponent);
}

std::vector<double> CostModel::least_squares(const std::vector<const FetchMeasurement*>& rows,
                                             double exponent) const {
  // minimise sum_i (sum_k theta_k a_ik / t_i - 1)^2, theta >= 0, by coordinate descent on the
  // normal equations (columns scaled to unit norm first).
  const size_t k = m_terms.size();
  std::vector<std::vector<double>> a(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    a[i] = term_values(rows[i]->features, exponent);
    for (double& x : a[i]) x /= rows[i]->seconds;
  }
  std::vector<double> norm(k, 0.0);
  for (const auto& row : a)
    for (size_t j = 0; j < k; ++j) norm[j] += row[j] * row[j];
  for (double& n : norm) n = std::sqrt(n);
  std::vector<double> g(k * k, 0.0), h(k, 0.0), x(k, 0.0);
  for (const auto& row : a)
    for (size_t p = 0; p < k; ++p) {
      if (norm[p] == 0) continue;
      h[p] += row[p] / norm[p];
      for (size_t q = 0; q < k; ++q)
        if (norm[q] > 0) g[p * k + q] += row[p] * row[q] / (norm[p] * norm[q]);
    }
  for (int sweep = 0; sweep < 5000; ++sweep) {
    double change = 0;
    for (size_t p = 0; p < k; ++p) {
      if (g[p * k + p] <= 0) continue;
      double r = h[p];
      for (size_t q = 0; q < k; ++q)
        if (q != p) r -= g[p * k + q] * x[q];
      const double v = std::max(0.0, r / g[p * k + p]);
      change = std::max(change, std::abs(v - x[p]));
      x[p] = v;
    }
    if (change < 1e-13) break;
  }
  std::vector<double> theta(k);
  for (size_t p = 0; p < k; ++p) theta[p] = norm[p] > 0 ? x[p] / norm[p] : 0.0;
  return theta;
}

double upper_median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double median_ape(const CostModel& model, const std::vector<FetchMeasurement>& data) {
  std::vector<double> e;
  for (const auto& m : data)
    if (m.backend == model.backend())
      e.push_back(std::abs(model.predict(m.features) - m.seconds) / m.seconds);
  return upper_median(e);
}

}  // namespace ddgnn
