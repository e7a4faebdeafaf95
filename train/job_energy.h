// The energy of a training job from the machine's counters (core/energy_meter.h): one meter per
// node, read by the node's first rank, summed over the job at every epoch end into metrics.csv
// (energy_j, energy_j_per_graph, and per domain: node, cpu, memory, gpu).
#pragma once

#include <mpi.h>

#include <array>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/energy_meter.h"

namespace ddgnn {

class JobEnergy {
 public:
  // Collective over `comm`. The counters of `source` (core/energy_meter.h: the machine's own, or
  // below the environment's DDGNN_ENERGY_ROOT, a tree a test writes).
  JobEnergy(EnergySource source, MPI_Comm comm);
  ~JobEnergy();
  // Rank 0's line for the start of the run: what is measured ("energy measured by RAPL (1
  // package) on 2 of 2 node(s)"), or the meter's notice, or "" with Output.energy_meter none.
  std::string start_line() const;
  // Collective: every node's joules since the last call, summed; rank 0 puts energy_j (the
  // nodes' own counters where there are some, else cpu + memory + gpu), energy_j_per_graph (over
  // `graphs`) and energy_<domain>_j into `row`. Nothing when nothing is measured.
  void add_epoch(nlohmann::json& row, int64_t graphs);
  // This rank's meter's warnings (a counter gone missing), once each.
  std::vector<std::string> take_warnings();

 private:
  std::unique_ptr<EnergyMeter> m_meter;  // this node's first rank only
  MPI_Comm m_comm;
  std::string m_line;
  std::array<double, 4> m_last{};  // the job's totals at the last call, per energy_domains()
};

}  // namespace ddgnn
