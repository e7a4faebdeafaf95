// Energy counters of the machine (core/energy_meter.h).
#include "core/energy_meter.h"

#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

namespace ddgnn {

namespace fs = std::filesystem;

std::optional<EnergySource> parse_energy_source(const std::string& name) {
  if (name == "auto") return EnergySource::kAuto;
  if (name == "none") return EnergySource::kNone;
  if (name == "nvml") return EnergySource::kNvml;
  if (name == "cray") return EnergySource::kCray;
  if (name == "rapl") return EnergySource::kRapl;
  if (name == "rocm") return EnergySource::kRocm;
  return std::nullopt;
}

const char* to_string(EnergySource source) {
  switch (source) {
    case EnergySource::kAuto:
      return "auto";
    case EnergySource::kNone:
      return "none";
    case EnergySource::kNvml:
      return "nvml";
    case EnergySource::kCray:
      return "cray";
    case EnergySource::kRapl:
      return "rapl";
    case EnergySource::kRocm:
      return "rocm";
  }
  return "?";
}

const std::vector<std::string>& energy_domains() {
  static const std::vector<std::string> domains = {"node", "cpu", "memory", "gpu"};
  return domains;
}

namespace {

// The first number of a counter file ("123456", or Cray's "123456 J"): nullopt when the file
// cannot be read (errno tells why) or holds no number.
std::optional<double> read_number(const std::string& path, int* error = nullptr) {
  std::ifstream in(path);
  if (!in) {
    if (error) *error = errno;
    return std::nullopt;
  }
  unsigned long long v = 0;
  if (!(in >> v)) {
    if (error) *error = EIO;  // a zone whose read fails (EACCES on some kernels comes here)
    return std::nullopt;
  }
  return double(v);
}

std::string read_word(const std::string& path) {
  std::ifstream in(path);
  std::string w;
  in >> w;
  return w;
}

// NVML, loaded at run time. Only the few calls the meter makes.
struct Nvml {
  void* lib = nullptr;
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned*);
  using HandleFn = int (*)(unsigned, void**);
  using EnergyFn = int (*)(void*, unsigned long long*);
  using ShutdownFn = int (*)();
  EnergyFn energy = nullptr;
  ShutdownFn shutdown = nullptr;
  std::vector<void*> devices;

  // The GPUs whose energy can be read; empty (with `why`) otherwise.
  void open(std::string& why) {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      why = "no NVML (libnvidia-ml.so.1)";
      return;
    }
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
    auto count = reinterpret_cast<CountFn>(dlsym(lib, "nvmlDeviceGetCount_v2"));
    auto handle = reinterpret_cast<HandleFn>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    energy = reinterpret_cast<EnergyFn>(dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
    shutdown = reinterpret_cast<ShutdownFn>(dlsym(lib, "nvmlShutdown"));
    unsigned n = 0;
    if (!init || !count || !handle || !energy || init() != 0 || count(&n) != 0) {
      why = "NVML found but not usable (no driver?)";
      return;
    }
    for (unsigned i = 0; i < n; ++i) {
      void* d = nullptr;
      unsigned long long mj = 0;
      if (handle(i, &d) == 0 && energy(d, &mj) == 0) devices.push_back(d);
    }
    if (devices.empty()) why = "NVML reports no GPU whose energy it can read";
  }
  ~Nvml() {
    if (lib && shutdown) shutdown();
    if (lib) dlclose(lib);
  }
};

// ROCm SMI (AMD GPUs), loaded at run time like NVML. Its energy counter is a 64-bit count of
// `resolution` µJ units.
struct RocmSmi {
  void* lib = nullptr;
  using InitFn = int (*)(uint64_t);
  using CountFn = int (*)(uint32_t*);
  using EnergyFn = int (*)(uint32_t, uint64_t*, float*, uint64_t*);
  using ShutdownFn = int (*)();
  EnergyFn energy = nullptr;
  ShutdownFn shutdown = nullptr;
  std::vector<uint32_t> devices;

  void open(std::string& why) {
    lib = dlopen("librocm_smi64.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("librocm_smi64.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      why = "no ROCm SMI (librocm_smi64.so)";
      return;
    }
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "rsmi_init"));
    auto count = reinterpret_cast<CountFn>(dlsym(lib, "rsmi_num_monitor_devices"));
    energy = reinterpret_cast<EnergyFn>(dlsym(lib, "rsmi_dev_energy_count_get"));
    shutdown = reinterpret_cast<ShutdownFn>(dlsym(lib, "rsmi_shut_down"));
    uint32_t n = 0;
    if (!init || !count || !energy || init(0) != 0 || count(&n) != 0) {
      why = "ROCm SMI found but not usable (no driver?)";
      return;
    }
    for (uint32_t i = 0; i < n; ++i) {
      uint64_t units = 0, stamp = 0;
      float resolution = 0;
      if (energy(i, &units, &resolution, &stamp) == 0) devices.push_back(i);
    }
    if (devices.empty()) why = "ROCm SMI reports no GPU whose energy it can read";
  }
  // µJ counted by device k, or nullopt.
  std::optional<double> read_uj(size_t k) const {
    uint64_t units = 0, stamp = 0;
    float resolution = 0;
    if (energy(devices[k], &units, &resolution, &stamp) != 0) return std::nullopt;
    return double(units) * double(resolution);
  }
  ~RocmSmi() {
    if (lib && shutdown) shutdown();
    if (lib) dlclose(lib);
  }
};

}  // namespace

struct EnergyMeter::Impl {
  struct Counter {
    std::string name, domain, path;
    enum Kind { kFile, kNvml, kRocm } kind = kFile;
    int gpu = -1;        // the library's device index
    double scale = 1.0;  // joules per raw unit
    double range = 0.0;  // raw value at which the counter wraps to 0 (0: never)
    double last = std::nan("");
    double joules = 0.0;
    bool lost = false;
  };
  std::vector<Counter> counters;
  Nvml nvml;
  RocmSmi rocm;
  std::string description, notice;
  std::vector<std::string> warnings;
  std::mutex mutex;
  std::thread thread;
  std::condition_variable wake;
  bool stopping = false;

  std::optional<double> raw(const Counter& c, int* error) {
    if (c.kind == Counter::kRocm) {
      const std::optional<double> uj = rocm.read_uj(size_t(c.gpu));
      if (!uj && error) *error = EIO;
      return uj;
    }
    if (c.kind == Counter::kNvml) {
      unsigned long long mj = 0;
      if (nvml.energy(nvml.devices[size_t(c.gpu)], &mj) != 0) {
        if (error) *error = EIO;
        return std::nullopt;
      }
      return double(mj);
    }
    return read_number(c.path, error);
  }

  void poll_locked() {
    for (Counter& c : counters) {
      if (c.lost) continue;
      int error = 0;
      const std::optional<double> v = raw(c, &error);
      if (!v) {
        c.lost = true;
        warnings.push_back("energy counter " + c.name + " (" + c.domain +
                           ") is no longer readable (" + std::strerror(error) + "): the " +
                           c.domain + " energy from here on leaves it out");
        continue;
      }
      if (!std::isnan(c.last)) {
        double delta = *v - c.last;
        if (delta < 0 && c.range > 0) delta += c.range;  // wrapped once
        if (delta < 0) {
          warnings.push_back("energy counter " + c.name + " went back from " +
                             std::to_string(c.last) + " to " + std::to_string(*v) +
                             ": that reading is left out");
          delta = 0;
        }
        c.joules += delta * c.scale;
      }
      c.last = *v;
    }
  }

  // Adds the counter at `path` if it can be read; `unreadable` collects the ones it cannot.
  bool add_file(const std::string& name, const std::string& domain, const std::string& path,
                double scale, double range, std::string& unreadable) {
    int error = 0;
    const std::optional<double> v = read_number(path, &error);
    if (!v) {
      if (unreadable.empty()) unreadable = path + ": " + std::strerror(error);
      return false;
    }
    Counter c;
    c.name = name;
    c.domain = domain;
    c.path = path;
    c.scale = scale;
    c.range = range;
    c.last = *v;
    counters.push_back(c);
    return true;
  }

  // HPE Cray EX: whole-node, CPU, memory and accelerator joules. "" or why not.
  std::string open_cray(const std::string& root) {
    const std::string dir = root + "/sys/cray/pm_counters";
    if (!fs::is_directory(dir)) return "no Cray pm_counters";
    std::string unreadable;
    int accels = 0;
    add_file("cray:energy", "node", dir + "/energy", 1.0, 0.0, unreadable);
    add_file("cray:cpu_energy", "cpu", dir + "/cpu_energy", 1.0, 0.0, unreadable);
    add_file("cray:memory_energy", "memory", dir + "/memory_energy", 1.0, 0.0, unreadable);
    for (int k = 0; k < 16; ++k) {
      const std::string f = dir + "/accel" + std::to_string(k) + "_energy";
      if (fs::exists(f))
        accels += add_file("cray:accel" + std::to_string(k), "gpu", f, 1.0, 0.0, unreadable);
    }
    if (counters.empty()) return "Cray pm_counters not readable (" + unreadable + ")";
    std::string what;
    for (const Counter& c : counters)
      if (c.domain != "gpu") what += (what.empty() ? "" : ", ") + c.domain;
    if (accels)
      what += (what.empty() ? "" : ", ") + std::to_string(accels) +
              (accels == 1 ? " accelerator" : " accelerators");
    description = "Cray pm_counters (" + what + ")";
    return "";
  }

  // Linux RAPL: each package (cpu) and its dram zone (memory). "" or why not.
  std::string open_rapl(const std::string& root) {
    const std::string dir = root + "/sys/class/powercap";
    if (!fs::is_directory(dir)) return "no RAPL (" + dir + ")";
    static const std::regex package(R"(intel-rapl:\d+)"), zone(R"(intel-rapl:\d+:\d+)");
    std::vector<std::string> zones;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) zones.push_back(e.path().filename());
    std::sort(zones.begin(), zones.end());
    std::string unreadable;
    int packages = 0, drams = 0;
    for (const std::string& z : zones) {
      const bool is_package = std::regex_match(z, package);
      if (!is_package && !std::regex_match(z, zone)) continue;
      const std::string base = dir + "/" + z;
      const std::string name = read_word(base + "/name");
      // Sub-zones other than dram (core, uncore) are parts of their package's count.
      if (!is_package && name != "dram") continue;
      const double range = read_number(base + "/max_energy_range_uj").value_or(0.0);
      if (add_file("rapl:" + z, is_package ? "cpu" : "memory", base + "/energy_uj", 1e-6, range,
                   unreadable))
        (is_package ? packages : drams) += 1;
    }
    if (packages + drams == 0)
      return unreadable.empty()
                 ? "no RAPL zone"
                 : "RAPL not readable (" + unreadable + "; its energy_uj needs root)";
    description += (description.empty() ? "" : ", ") + std::string("RAPL (") +
                   std::to_string(packages) + (packages == 1 ? " package" : " packages") +
                   (drams ? ", dram" : "") + ")";
    return "";
  }

  // One counter per GPU of a library: `prefix`:k, in `scale` joules a unit.
  void add_gpus(Counter::Kind kind, const std::string& prefix, size_t n, double scale,
                const std::string& library) {
    for (size_t k = 0; k < n; ++k) {
      Counter c;
      c.name = prefix + ":" + std::to_string(k);
      c.domain = "gpu";
      c.kind = kind;
      c.gpu = int(k);
      c.scale = scale;
      c.last = raw(c, nullptr).value_or(std::nan(""));
      counters.push_back(c);
    }
    description += (description.empty() ? "" : ", ") + library + " (" + gpus(n) + ")";
  }

  std::string open_nvml() {
    std::string why;
    nvml.open(why);
    if (!nvml.devices.empty()) add_gpus(Counter::kNvml, "nvml", nvml.devices.size(), 1e-3, "NVML");
    return nvml.devices.empty() ? why : "";
  }

  std::string open_rocm() {
    std::string why;
    rocm.open(why);
    if (!rocm.devices.empty())
      add_gpus(Counter::kRocm, "rocm_smi", rocm.devices.size(), 1e-6, "ROCm SMI");
    return rocm.devices.empty() ? why : "";
  }

  static std::string gpus(size_t n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }
};

EnergyMeter::EnergyMeter(EnergySource source, std::optional<std::string> given_root, double poll_s)
    : m_impl(std::make_unique<Impl>()) {
  Impl& m = *m_impl;
  const char* env = std::getenv("DDGNN_ENERGY_ROOT");
  const std::string root = given_root ? *given_root : env ? env : "";
  std::vector<std::string> why;
  const auto note = [&](const std::string& w) {
    if (!w.empty()) why.push_back(w);
  };
  switch (source) {
    case EnergySource::kNone:
      return;
    case EnergySource::kCray:
      note(m.open_cray(root));
      break;
    case EnergySource::kRapl:
      note(m.open_rapl(root));
      break;
    case EnergySource::kNvml:
      note(m.open_nvml());
      break;
    case EnergySource::kRocm:
      note(m.open_rocm());
      break;
    case EnergySource::kAuto: {
      const std::string cray = m.open_cray(root);
      if (!cray.empty()) {  // elsewhere: the CPUs and memory by RAPL, the GPUs by NVML
        note(cray);
        note(m.open_rapl(root));
        if (root.empty()) {  // GPU libraries only on the machine itself, not on a test's tree
          note(m.open_nvml());
          note(m.open_rocm());
        }
      }
      break;
    }
  }
  if (m.counters.empty())
    m.notice = "no energy counters readable here (" + [&] {
      std::string s;
      for (const auto& w : why) s += (s.empty() ? "" : "; ") + w;
      return s;
    }() + "): energy is not measured";
  else if (source != EnergySource::kAuto && !why.empty())
    m.notice = why.front();
  if (poll_s > 0 && !m.counters.empty())
    m.thread = std::thread([&m, poll_s] {
      std::unique_lock<std::mutex> lock(m.mutex);
      while (!m.wake.wait_for(lock, std::chrono::duration<double>(poll_s),
                              [&m] { return m.stopping; }))
        m.poll_locked();
    });
}

EnergyMeter::~EnergyMeter() {
  if (m_impl->thread.joinable()) {
    {
      std::lock_guard<std::mutex> lock(m_impl->mutex);
      m_impl->stopping = true;
    }
    m_impl->wake.notify_all();
    m_impl->thread.join();
  }
}

bool EnergyMeter::active() const {
  return !m_impl->counters.empty();
}

std::string EnergyMeter::description() const {
  return m_impl->description;
}

std::string EnergyMeter::notice() const {
  return m_impl->notice;
}

void EnergyMeter::poll() {
  std::lock_guard<std::mutex> lock(m_impl->mutex);
  m_impl->poll_locked();
}

std::map<std::string, double> EnergyMeter::total() {
  std::lock_guard<std::mutex> lock(m_impl->mutex);
  m_impl->poll_locked();
  std::map<std::string, double> out;
  for (const auto& c : m_impl->counters) out[c.domain] += c.joules;
  return out;
}

double energy_total(const std::map<std::string, double>& by_domain) {
  double parts = 0;
  for (const auto& [domain, j] : by_domain)
    if (domain != "node") parts += j;
  const auto node = by_domain.find("node");
  return node != by_domain.end() ? node->second : parts;
}

double EnergyMeter::joules() {
  return energy_total(total());
}

std::vector<std::string> EnergyMeter::take_warnings() {
  std::lock_guard<std::mutex> lock(m_impl->mutex);
  std::vector<std::string> out;
  out.swap(m_impl->warnings);
  return out;
}

}  // namespace ddgnn
