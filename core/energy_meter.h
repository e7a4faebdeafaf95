// Energy measured from the machine's own counters, not modelled: HPE Cray EX nodes' pm_counters
// (/sys/cray/pm_counters: node, cpu, memory and accelerator joules), NVIDIA GPUs through NVML
// and AMD GPUs through ROCm SMI (both loaded at run time: no build dependency), and Linux RAPL
// (/sys/class/powercap: each package, and its dram zone, in µJ; readable by root on recent
// kernels). A counter that is missing or unreadable is never an error: the meter says so once
// (notice()) and measures what it can. RAPL's counters wrap at max_energy_range_uj: every reading
// adds the difference modulo that range, and a thread reads every few seconds so that no counter
// wraps twice between readings.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ddgnn {

// Output.energy_meter: auto (Cray's counters where there are some, else RAPL, NVML and ROCm SMI),
// none, or one source.
enum class EnergySource { kAuto, kNone, kNvml, kCray, kRapl, kRocm };
std::optional<EnergySource> parse_energy_source(const std::string& name);
const char* to_string(EnergySource source);

// The domains a source may report, in this order: the whole node, the CPUs, the memory, the GPUs.
const std::vector<std::string>& energy_domains();

// Joules by domain as one number: the node's where it is known (it includes the parts), else
// the sum of the parts.
double energy_total(const std::map<std::string, double>& by_domain);

class EnergyMeter {
 public:
  // The counters of `source` below `root` ("" = the machine's own; a test points the meter at a
  // tree it wrote); without one, below the environment's DDGNN_ENERGY_ROOT where it is set.
  // `poll_s` > 0 starts a thread that reads them that often; 0 reads only in poll() and total().
  explicit EnergyMeter(EnergySource source, std::optional<std::string> root = std::nullopt,
                       double poll_s = 5.0);
  ~EnergyMeter();
  EnergyMeter(const EnergyMeter&) = delete;
  EnergyMeter& operator=(const EnergyMeter&) = delete;

  // Whether any counter is read.
  bool active() const;
  // "Cray pm_counters (node, cpu, memory, 4 accelerators)", "RAPL (2 packages, dram)", ...
  std::string description() const;
  // One line when less than asked could be read ("no energy counters readable here: RAPL's
  // energy_uj needs root ..."), else empty.
  std::string notice() const;

  // Reads every counter and adds what each counted since its last reading.
  void poll();
  // Joules counted since the meter started, by domain (only the domains some counter reports;
  // a counter that went missing keeps what it had counted). Reads the counters first.
  std::map<std::string, double> total();
  // The same as one number (energy_total).
  double joules();
  // What happened since the last call that a run should hear once ("counter ... is no longer
  // readable: its domain counts no more").
  std::vector<std::string> take_warnings();

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace ddgnn
