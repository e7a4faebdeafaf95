// The energy meter on counter trees the tests write (the layout of /sys/class/powercap and
// /sys/cray/pm_counters): sums per domain, RAPL's wraparound, a counter that goes missing while a
// run reads it, counters that cannot be read, and a machine with none.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/energy_meter.h"

namespace ddgnn {
namespace {

namespace fs = std::filesystem;

class Tree {
 public:
  Tree() {
    char name[] = "/tmp/ddgnn_energy_XXXXXX";
    m_root = mkdtemp(name);
  }
  ~Tree() { fs::remove_all(m_root); }
  const std::string& root() const { return m_root; }
  void write(const std::string& path, const std::string& text) const {
    fs::create_directories(fs::path(m_root + path).parent_path());
    std::ofstream(m_root + path) << text << "\n";
  }
  // A RAPL zone: name, energy in µJ and the counter's range.
  void zone(const std::string& z, const std::string& name, double uj, double range = 0) const {
    const std::string base = "/sys/class/powercap/" + z;
    write(base + "/name", name);
    write(base + "/energy_uj", std::to_string((unsigned long long)uj));
    if (range > 0) write(base + "/max_energy_range_uj", std::to_string((unsigned long long)range));
  }

 private:
  std::string m_root;
};

TEST(EnergyMeter, RaplPackagesAndDramAreSummedAndOtherZonesLeftOut) {
  Tree t;
  t.zone("intel-rapl:0", "package-0", 1e6, 1e12);
  t.zone("intel-rapl:0:0", "core", 5e5, 1e12);  // a part of package 0: not counted again
  t.zone("intel-rapl:0:1", "dram", 2e5, 1e12);
  t.zone("intel-rapl:1", "package-1", 3e6, 1e12);
  EnergyMeter m(EnergySource::kRapl, t.root(), /*poll_s=*/0);
  ASSERT_TRUE(m.active());
  EXPECT_EQ(m.notice(), "");
  EXPECT_EQ(m.description(), "RAPL (2 packages, dram)");
  t.zone("intel-rapl:0", "package-0", 1e6 + 40e6, 1e12);  // +40 J
  t.zone("intel-rapl:0:0", "core", 5e5 + 30e6, 1e12);
  t.zone("intel-rapl:0:1", "dram", 2e5 + 5e6, 1e12);     // +5 J
  t.zone("intel-rapl:1", "package-1", 3e6 + 2e6, 1e12);  // +2 J
  const auto e = m.total();
  EXPECT_DOUBLE_EQ(e.at("cpu"), 42.0);
  EXPECT_DOUBLE_EQ(e.at("memory"), 5.0);
  EXPECT_EQ(e.count("node"), 0u);
  EXPECT_EQ(e.count("gpu"), 0u);
  EXPECT_DOUBLE_EQ(m.joules(), 47.0);  // no node counter: the parts' sum
}

TEST(EnergyMeter, AWrappedCounterAddsWhatItCountedBeforeAndAfterTheWrap) {
  Tree t;
  const double range = 262143328850.0;  // µJ, a real package's range
  t.zone("intel-rapl:0", "package-0", range - 3e6, range);
  EnergyMeter m(EnergySource::kRapl, t.root(), 0);
  t.zone("intel-rapl:0", "package-0", range - 1e6, range);
  m.poll();
  t.zone("intel-rapl:0", "package-0", 4e6, range);  // wrapped: 1 J before, 4 J after
  EXPECT_DOUBLE_EQ(m.total().at("cpu"), 2.0 + 5.0);
  EXPECT_TRUE(m.take_warnings().empty());
}

TEST(EnergyMeter, ACounterThatGoesMissingKeepsWhatItCountedAndIsNamedOnce) {
  Tree t;
  t.zone("intel-rapl:0", "package-0", 0, 1e12);
  t.zone("intel-rapl:0:0", "dram", 0, 1e12);
  EnergyMeter m(EnergySource::kRapl, t.root(), 0);
  t.zone("intel-rapl:0", "package-0", 10e6, 1e12);
  t.zone("intel-rapl:0:0", "dram", 3e6, 1e12);
  EXPECT_DOUBLE_EQ(m.total().at("memory"), 3.0);
  fs::remove(t.root() + "/sys/class/powercap/intel-rapl:0:0/energy_uj");
  t.zone("intel-rapl:0", "package-0", 15e6, 1e12);
  const auto e = m.total();
  EXPECT_DOUBLE_EQ(e.at("cpu"), 15.0);
  EXPECT_DOUBLE_EQ(e.at("memory"), 3.0);
  const auto warnings = m.take_warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("rapl:intel-rapl:0:0 (memory) is no longer readable"),
            std::string::npos)
      << warnings[0];
  m.total();
  EXPECT_TRUE(m.take_warnings().empty());
}

TEST(EnergyMeter, CountersThatCannotBeReadAreOneNoticeNotAnError) {
  Tree t;
  t.zone("intel-rapl:0", "package-0", 1e6, 1e12);
  const std::string file = t.root() + "/sys/class/powercap/intel-rapl:0/energy_uj";
  if (geteuid() == 0) {  // root reads a file of mode 000: a folder in its place cannot be read
    fs::remove(file);
    fs::create_directories(file);
  } else {
    fs::permissions(file, fs::perms::none);
  }
  EnergyMeter m(EnergySource::kRapl, t.root(), 0);
  EXPECT_FALSE(m.active());
  EXPECT_NE(m.notice().find("no energy counters readable here (RAPL not readable ("),
            std::string::npos)
      << m.notice();
  EXPECT_NE(m.notice().find("needs root"), std::string::npos) << m.notice();
  EXPECT_TRUE(m.total().empty());

  Tree empty;  // a machine with no counter at all
  EnergyMeter none(EnergySource::kAuto, empty.root(), 0);
  EXPECT_FALSE(none.active());
  EXPECT_NE(none.notice().find("no Cray pm_counters"), std::string::npos) << none.notice();
  EXPECT_NE(none.notice().find("no RAPL"), std::string::npos) << none.notice();
  EnergyMeter off(EnergySource::kNone, t.root(), 0);
  EXPECT_FALSE(off.active());
  EXPECT_EQ(off.notice(), "");
}

TEST(EnergyMeter, CrayCountersGiveTheNodeAndItsPartsAndAutoPrefersThem) {
  Tree t;
  const std::string dir = "/sys/cray/pm_counters/";
  for (const char* f : {"energy", "cpu_energy", "memory_energy", "accel0_energy", "accel1_energy"})
    t.write(dir + f, "1000 J");
  t.zone("intel-rapl:0", "package-0", 0, 1e12);  // present too: auto takes Cray's
  EnergyMeter m(EnergySource::kAuto, t.root(), 0);
  ASSERT_TRUE(m.active());
  EXPECT_EQ(m.description(), "Cray pm_counters (node, cpu, memory, 2 accelerators)");
  t.write(dir + "energy", "1900 J");
  t.write(dir + "cpu_energy", "1300 J");
  t.write(dir + "memory_energy", "1050 J");
  t.write(dir + "accel0_energy", "1200 J");
  t.write(dir + "accel1_energy", "1250 J");
  t.zone("intel-rapl:0", "package-0", 99e6, 1e12);
  const auto e = m.total();
  EXPECT_DOUBLE_EQ(e.at("node"), 900.0);
  EXPECT_DOUBLE_EQ(e.at("cpu"), 300.0);
  EXPECT_DOUBLE_EQ(e.at("memory"), 50.0);
  EXPECT_DOUBLE_EQ(e.at("gpu"), 450.0);
  EXPECT_DOUBLE_EQ(m.joules(), 900.0);  // the node's counter holds its parts
}

TEST(EnergyMeter, NamesOfTheSources) {
  for (const char* name : {"auto", "none", "nvml", "cray", "rapl", "rocm"})
    EXPECT_STREQ(to_string(*parse_energy_source(name)), name);
  EXPECT_FALSE(parse_energy_source("ipmi").has_value());
}

}  // namespace
}  // namespace ddgnn
