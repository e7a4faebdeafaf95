// End to end through the `ddgnn` binary: convert then info on a small extxyz file, and the bad
// inputs a user meets first — each one line on stderr, a non-zero exit, no file left behind.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../common/temp_dir.h"
#include "../common/train_run.h"

namespace ddgnn {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

using testing::Result;
using testing::run;

// Two Cu4 fcc cells and one non-periodic H2O, as ASE writes them.
void write_small_extxyz(const std::string& path) {
  std::ofstream f(path);
  for (int k = 0; k < 2; ++k) {
    f << "4\nLattice=\"3.615 0.0 0.0 0.0 3.615 0.0 0.0 0.0 3.615\" "
         "Properties=species:S:1:pos:R:3:forces:R:3 energy="
      << -14.0 - 0.01 * k
      << " stress=\"0.001 0 0 0 0.001 0 0 0 0.001\" pbc=\"T T T\" config_type=bulk\n"
         "Cu 0.0 0.0 0.0 0.01 0.0 0.0\n"
         "Cu 1.8075 1.8075 0.0 -0.01 0.0 0.0\n"
         "Cu 1.8075 0.0 1.8075 0.0 0.02 0.0\n"
         "Cu 0.0 1.8075 1.8075 0.0 -0.02 0.0\n";
  }
  f << "3\nProperties=species:S:1:pos:R:3:forces:R:3 energy=-14.2 pbc=\"F F F\"\n"
       "O 0.0 0.0 0.0 0.1 0.0 0.0\n"
       "H 0.757 0.586 0.0 -0.05 0.0 0.0\n"
       "H -0.757 0.586 0.0 -0.05 0.0 0.0\n";
}

TEST(Cli, ConvertThenInfo) {
  TempDir dir;
  write_small_extxyz(dir.file("in.xyz"));
  Result c = run("convert " + dir.file("in.xyz") + " " + dir.file("d.h5"));
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("3 graphs"), std::string::npos) << c.out;
  Result i = run("info --json " + dir.file("d.h5"));
  ASSERT_EQ(i.code, 0) << i.out;
  const auto j = nlohmann::json::parse(i.out);
  EXPECT_EQ(j["graphs"], 3);
  EXPECT_EQ(j["atoms"]["total"], 11);
  EXPECT_EQ(j["atoms"]["max"], 4);
  EXPECT_EQ(j["species"]["Cu"]["atoms"], 8);
  EXPECT_EQ(j["species"]["H"]["atoms"], 2);
  EXPECT_EQ(j["periodic_graphs"], 2);
  // fcc Cu at 5 Å has 42 neighbours; the molecule's atoms have 2; sampled: all 3 graphs.
  EXPECT_NEAR(j["neighbours"]["mean"].get<double>(), (8 * 42 + 3 * 2) / 11.0, 1e-9);
  // The records of the store: the text-born arrays decimal, the molecule's zero cell absent (a
  // header flag); the file holds the records and an 8-byte offset a graph.
  const auto& rec = j["records"];
  EXPECT_EQ(rec["graphs_measured"], 3);
  EXPECT_LT(rec["bytes_per_graph_encoded"].get<double>(),
            0.6 * rec["bytes_per_graph_raw"].get<double>());
  ASSERT_EQ(rec["arrays"].size(), 5u);
  EXPECT_EQ(rec["arrays"][3]["name"], "pos");
  EXPECT_EQ(rec["arrays"][3]["encodings"]["decimal"], 3);
  EXPECT_EQ(rec["arrays"][1]["name"], "cell");
  EXPECT_EQ(rec["arrays"][1]["encodings"]["absent"].get<int>(), 1);
  int cells = 0;  // and the two crystals' cells encoded
  for (const auto& [encoding, count] : rec["arrays"][1]["encodings"].items()) cells += int(count);
  EXPECT_EQ(cells, 3);
  EXPECT_NEAR(rec["file_bytes_per_graph"].get<double>(),
              rec["bytes_per_graph_encoded"].get<double>() + 8, 1e-9);
  Result report = run("info " + dir.file("d.h5"));
  EXPECT_EQ(report.code, 0);
  EXPECT_NE(report.out.find("reference energy"), std::string::npos);
  EXPECT_NE(report.out.find("B a graph in the store"), std::string::npos) << report.out;
}

TEST(Cli, AppendAndRefuseToOverwrite) {
  TempDir dir;
  write_small_extxyz(dir.file("in.xyz"));
  ASSERT_EQ(run("convert " + dir.file("in.xyz") + " " + dir.file("d.h5")).code, 0);
  Result again = run("convert " + dir.file("in.xyz") + " " + dir.file("d.h5"));
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.out.find("already exists"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("--append"), std::string::npos);
  ASSERT_EQ(run("convert --append " + dir.file("in.xyz") + " " + dir.file("in.xyz") + " " +
                dir.file("d.h5"))
                .code,
            0);
  Result i = run("info --json " + dir.file("d.h5"));
  EXPECT_EQ(nlohmann::json::parse(i.out)["graphs"], 9);
}

TEST(Cli, TruncatedInputFailsInOneLineAndLeavesNoFile) {
  TempDir dir;
  write_small_extxyz(dir.file("in.xyz"));
  std::ofstream(dir.file("in.xyz"), std::ios::app) << "5\nProperties=species:S:1:pos:R:3 energy=1\n"
                                                   << "H 0 0 0\n";
  Result c = run("convert " + dir.file("in.xyz") + " " + dir.file("d.h5"));
  EXPECT_EQ(c.code, 1);
  EXPECT_EQ(std::count(c.out.begin(), c.out.end(), '\n'), 1) << c.out;
  EXPECT_NE(c.out.find("ddgnn: data error"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("in.xyz:"), std::string::npos) << c.out;
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename(), "in.xyz") << "left behind: " << e.path();
}

TEST(Cli, OutputNamedLikeAnInputIsRefused) {
  TempDir dir;
  write_small_extxyz(dir.file("in.xyz"));
  Result c = run("convert " + dir.file("in.xyz") + " " + dir.file("other.xyz"));
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.out.find("looks like an input file"), std::string::npos) << c.out;
}

TEST(Cli, InfoOnAFileNotWrittenByDdgnn) {
  TempDir dir;
  write_small_extxyz(dir.file("in.xyz"));
  Result i = run("info " + dir.file("in.xyz"));
  EXPECT_EQ(i.code, 1);
  EXPECT_NE(i.out.find("not an HDF5 file"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("ddgnn convert"), std::string::npos) << i.out;
  Result missing = run("info " + dir.file("nope.h5"));
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("no such file"), std::string::npos) << missing.out;
}

TEST(Cli, VersionAndUnknownSubcommand) {
  Result v = run("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.out.find("ddgnn 0."), std::string::npos);
  Result u = run("trian");
  EXPECT_NE(u.code, 0);
}

}  // namespace
}  // namespace ddgnn
