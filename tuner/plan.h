// The time-energy plan of `ddgnn simulate --global-batch`: at a fixed global batch (P ranks of
// B/P graphs each train exactly like one rank of B, so the model's accuracy does not depend on
// P or on the backend), every rank count and loader backend is a point (epoch seconds, epoch
// joules); the plan lists those on the Pareto front and names the least-energy choice within a
// time bound. Deterministic; no torch, no MPI.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tuner/cost_model.h"
#include "tuner/simulate.h"

namespace ddgnn {

// One rank count and backend at the fixed global batch.
struct PlanPoint {
  int64_t ranks = 1, nodes = 1;
  double batch_per_rank = 1;  // global batch / P
  std::string backend;
  double epoch_s = 0, energy_j = 0;
  bool within_platform = true;  // nodes <= the platform's
  bool pareto = false;          // no other point is at least as fast and as frugal, and better
  bool within_bound = true;     // epoch_s <= the time bound (always, without one)
};

struct Plan {
  double global_batch = 0;
  double time_bound_s = 0;        // 0: none
  std::vector<PlanPoint> points;  // feasible ones only, by P then backend
  int choice = -1;                // the least energy within the bound; -1: none meets it
  int fastest = -1;               // the least epoch time
};

// The step's compute at B graphs a rank, from the workload's `compute_s` at its `batch`:
// compute_fixed_s + (compute_s - compute_fixed_s) B / batch (a part independent of the batch,
// kernel launches on a GPU, and a part that grows with its graphs); collate grows with B alone.
Workload workload_at_batch(const Workload& w, double batch, double compute_fixed_s);

// The plan over the rank counts in `ranks` that divide `global_batch` (ConfigError when none
// does, for a global batch that is not a positive whole number, a fixed compute outside
// [0, compute_s], a negative bound, or a platform without power figures: the plan needs energy).
Plan time_energy_plan(const std::map<std::string, CostModel>& models, const Platform& platform,
                      const Workload& workload, const std::vector<int64_t>& ranks,
                      double global_batch, double compute_fixed_s, double time_bound_s);

// CSV: platform, global_batch, time_bound_s (0: none), ranks, nodes, within_platform,
// batch_per_rank, backend, epoch_s, energy_j, pareto (1/0), within_bound (1/0), choice (1 for the
// plan's choice).
std::string plan_csv(const Platform& platform, const Plan& plan);
extern const char* const kPlanCsvHeader;

}  // namespace ddgnn
