// The energy of a training job (train/job_energy.h).
#include "train/job_energy.h"

#include <map>
#include <string>

#include "comm/communicator.h"
#include "comm/mpi.h"
#include "core/log.h"

namespace ddgnn {

JobEnergy::JobEnergy(EnergySource source, MPI_Comm comm) : m_comm(comm) {
  const Communicator node = Communicator::split_node(comm, comm_rank(comm));
  const int leader = node.rank() == 0 ? 1 : 0;
  int active = 0;
  if (leader && source != EnergySource::kNone) {
    m_meter = std::make_unique<EnergyMeter>(source);
    active = m_meter->active() ? 1 : 0;
  }
  int counts[2] = {leader, active};  // nodes, nodes measuring
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_SUM, comm));
  if (comm_rank(comm) == 0 && m_meter) {
    if (m_meter->active())
      m_line = "energy measured by " + m_meter->description() + " on " + std::to_string(counts[1]) +
               " of " + std::to_string(counts[0]) + " node(s); metrics.csv has energy_j per epoch";
    else
      m_line = m_meter->notice();
  }
}

JobEnergy::~JobEnergy() = default;

std::string JobEnergy::start_line() const {
  return m_line;
}

void JobEnergy::add_epoch(nlohmann::json& row, int64_t graphs) {
  const auto& domains = energy_domains();
  // Per domain: joules so far, and how many nodes measure it.
  std::array<double, 8> v{};
  if (m_meter && m_meter->active()) {
    const auto total = m_meter->total();
    for (size_t k = 0; k < domains.size(); ++k) {
      const auto it = total.find(domains[k]);
      if (it == total.end()) continue;
      v[k] = it->second;
      v[4 + k] = 1;
    }
  }
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v.data(), int(v.size()), MPI_DOUBLE, MPI_SUM, m_comm));
  if (comm_rank(m_comm) != 0) return;
  std::map<std::string, double> epoch;  // this epoch's joules of the domains measured
  for (size_t k = 0; k < domains.size(); ++k) {
    if (v[4 + k] == 0) continue;
    epoch[domains[k]] = v[k] - m_last[k];
    m_last[k] = v[k];
    row["energy_" + domains[k] + "_j"] = epoch[domains[k]];
  }
  if (epoch.empty()) return;
  const double energy = energy_total(epoch);
  row["energy_j"] = energy;
  if (graphs > 0) row["energy_j_per_graph"] = energy / double(graphs);
}

std::vector<std::string> JobEnergy::take_warnings() {
  return m_meter ? m_meter->take_warnings() : std::vector<std::string>{};
}

}  // namespace ddgnn
