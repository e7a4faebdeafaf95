// The time-energy plan (plan.h).
#include "tuner/plan.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"

namespace ddgnn {

const char* const kPlanCsvHeader =
    "platform,global_batch,time_bound_s,ranks,nodes,within_platform,batch_per_rank,backend,epoch_s,"
    "energy_j,"
    "pareto,within_bound,choice";

Workload workload_at_batch(const Workload& w, double batch, double compute_fixed_s) {
  Workload out = w;
  const double scale = batch / w.batch;
  out.batch = batch;
  out.compute_s = compute_fixed_s + (w.compute_s - compute_fixed_s) * scale;
  out.collate_s = w.collate_s * scale;
  return out;
}

Plan time_energy_plan(const std::map<std::string, CostModel>& models, const Platform& platform,
                      const Workload& workload, const std::vector<int64_t>& ranks,
                      double global_batch, double compute_fixed_s, double time_bound_s) {
  if (!(global_batch >= 1) || global_batch != std::floor(global_batch) || global_batch > 1e12)
    throw ConfigError("--global-batch " + std::to_string(global_batch) +
                          ": the graphs of one step over all ranks, a whole number >= 1",
                      "e.g. --global-batch 256");
  if (!(compute_fixed_s >= 0) || compute_fixed_s > workload.compute_s)
    throw ConfigError("--compute-fixed-s " + std::to_string(compute_fixed_s) +
                          ": the part of a step's compute that does not grow with its graphs "
                          "must lie in [0, --compute-s = " +
                          std::to_string(workload.compute_s) + "]",
                      "0 on the CPU; on a launch-bound GPU the step time at a batch of one");
  if (!(time_bound_s >= 0))
    throw ConfigError("--time-bound " + std::to_string(time_bound_s) +
                          ": seconds an epoch may take, >= 0 (0: no bound)",
                      "e.g. --time-bound 60");
  if (!(platform.node_busy_w > 0))
    throw ConfigError("the time-energy plan needs the platform's power figures, and " +
                          platform.name + " has none",
                      "give --node-idle-w, --node-busy-w (and --gpus-per-node, --gpu-idle-w, "
                      "--gpu-busy-w, --network-w), or use a preset that has them");
  Plan plan;
  plan.global_batch = global_batch;
  plan.time_bound_s = time_bound_s;
  const auto whole = int64_t(global_batch);
  bool any_rank_count = false;
  for (const int64_t p : ranks) {
    if (p < 1 || p > whole || whole % p != 0) continue;
    any_rank_count = true;
    const double b = global_batch / double(p);
    const Workload w = workload_at_batch(workload, b, compute_fixed_s);
    for (const ScalePoint& pt : simulate(models, platform, w, {p})) {
      for (const BackendPoint& bp : pt.backends) {
        if (!bp.feasible || !std::isfinite(bp.energy_j)) continue;
        PlanPoint q;
        q.ranks = p;
        q.nodes = pt.nodes;
        q.batch_per_rank = b;
        q.backend = bp.backend;
        q.epoch_s = bp.epoch_s;
        q.energy_j = bp.energy_j;
        q.within_platform = pt.within_platform;
        q.within_bound = time_bound_s <= 0 || bp.epoch_s <= time_bound_s;
        plan.points.push_back(q);
      }
    }
  }
  if (!any_rank_count) {
    std::ostringstream list;
    for (size_t k = 0; k < ranks.size(); ++k) list << (k ? "," : "") << ranks[k];
    throw ConfigError("--global-batch " + std::to_string(whole) + ": no rank count of --ranks (" +
                          list.str() + ") divides it",
                      "give a global batch that a power of two divides, or --ranks that do");
  }
  auto& pts = plan.points;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (!pts[i].within_platform) continue;
    bool dominated = false;
    for (size_t j = 0; j < pts.size() && !dominated; ++j) {
      if (j == i || !pts[j].within_platform) continue;
      dominated = pts[j].epoch_s <= pts[i].epoch_s && pts[j].energy_j <= pts[i].energy_j &&
                  (pts[j].epoch_s < pts[i].epoch_s || pts[j].energy_j < pts[i].energy_j);
    }
    pts[i].pareto = !dominated;
    const auto faster = [&](size_t a, size_t b) {  // on a tie in time, the frugal one
      return pts[a].epoch_s < pts[b].epoch_s ||
             (pts[a].epoch_s == pts[b].epoch_s && pts[a].energy_j < pts[b].energy_j);
    };
    if (plan.fastest < 0 || faster(i, size_t(plan.fastest))) plan.fastest = int(i);
    if (pts[i].within_bound &&
        (plan.choice < 0 || pts[i].energy_j < pts[size_t(plan.choice)].energy_j))
      plan.choice = int(i);
  }
  return plan;
}

std::string plan_csv(const Platform& platform, const Plan& plan) {
  std::ostringstream out;
  out << kPlanCsvHeader << "\n";
  char buf[512];
  for (size_t i = 0; i < plan.points.size(); ++i) {
    const PlanPoint& q = plan.points[i];
    std::snprintf(buf, sizeof buf, "%s,%.0f,%.6g,%lld,%lld,%d,%.6g,%s,%.6g,%.6g,%d,%d,%d\n",
                  platform.name.c_str(), plan.global_batch, plan.time_bound_s, (long long)q.ranks,
                  (long long)q.nodes, q.within_platform ? 1 : 0, q.batch_per_rank,
                  q.backend.c_str(), q.epoch_s, q.energy_j, q.pareto ? 1 : 0,
                  q.within_bound ? 1 : 0, int(i) == plan.choice ? 1 : 0);
    out << buf;
  }
  return out.str();
}

}  // namespace ddgnn
