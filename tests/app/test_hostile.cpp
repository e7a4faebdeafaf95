// The binary against hostile input and concurrent use: datasets whose checksums are valid but
// whose content is wrong, two conversions of one output at once, temporaries of killed writes,
// numbers no config can mean. Each a one-line error (or a clean success), never a crash.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../common/h5_edit.h"
#include "../common/temp_dir.h"
#include "../common/train_run.h"
#include "loader/dataset.h"
#include "loader/packed.h"

namespace ddgnn {
namespace {

namespace fs = std::filesystem;
using testing::Result;
using testing::run;
using testing::TempDir;

// n periodic Cu4 cells; frame `bad_force` (if any) has a force of 1e30 eV/Å on atom 2.
void write_cu(const std::string& path, int n, int bad_force = -1) {
  std::ofstream f(path);
  for (int k = 0; k < n; ++k)
    f << "4\nLattice=\"3.615 0.0 0.0 0.0 3.615 0.0 0.0 0.0 3.615\" "
         "Properties=species:S:1:pos:R:3:forces:R:3 energy="
      << -14.0 - 0.001 * (k % 7)
      << " pbc=\"T T T\"\n"
         "Cu 0.0 0.0 0.0 0.01 0.0 0.0\nCu 1.8075 1.8075 0.0 -0.01 0.0 0.0\n"
         "Cu 1.8075 0.0 1.8075 0.0 "
      << (k == bad_force ? "1e30" : "0.02") << " 0.0\nCu 0.0 1.8075 1.8075 0.0 -0.02 0.0\n";
}

// Runs `commands` (full shell lines) at the same time; returns their exit codes.
std::vector<int> run_together(const std::vector<std::string>& commands) {
  std::vector<pid_t> pids;
  for (const auto& c : commands) {
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", c.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return codes;
}

int64_t graphs_in(const std::string& h5) {
  const Result i = run("info --json " + h5);
  EXPECT_EQ(i.code, 0) << i.out;
  return nlohmann::json::parse(i.out).at("graphs").get<int64_t>();
}

TEST(Hostile, InfoOnAnAtomicNumberOutsideTheSpeciesTable) {
  TempDir dir;
  write_cu(dir.file("in.xyz"), 6);
  ASSERT_EQ(run("convert " + dir.file("in.xyz") + " " + dir.file("d.h5")).code, 0);
  // Graph 2's record: its header, then its atomic numbers as a palette of one element
  // (a count, then copper's 29), which becomes zinc's 30.
  const auto at = hsize_t(testing::record_start(dir.file("d.h5"), 2) + kRecordHeaderBytes + 1);
  ASSERT_EQ(testing::read_value<uint8_t>(dir.file("d.h5"), "records", at, H5T_NATIVE_UINT8), 29);
  testing::overwrite_checksummed(dir.file("d.h5"), "records", at, 0, H5T_NATIVE_UINT8, uint8_t(30));
  const Result i = run("info " + dir.file("d.h5"));
  EXPECT_EQ(i.code, 1) << i.out;
  EXPECT_NE(i.out.find("ddgnn: data error: " + dir.file("d.h5") +
                       ": array 'records', graph 2: atomic number 30 of atom 0"),
            std::string::npos)
      << i.out;
  EXPECT_EQ(i.out.find("internal error"), std::string::npos) << i.out;
}

TEST(Hostile, TwoAppendsAtOnceKeepBoth) {
  TempDir dir;
  write_cu(dir.file("in.xyz"), 3000);  // long enough for the two to overlap
  ASSERT_EQ(run("convert " + dir.file("in.xyz") + " " + dir.file("d.h5")).code, 0);
  const std::string cmd = std::string(DDGNN_BINARY) + " convert --append " + dir.file("in.xyz") +
                          " " + dir.file("d.h5") + " >/dev/null 2>&1";
  const auto codes = run_together({cmd, cmd});
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
  EXPECT_EQ(graphs_in(dir.file("d.h5")), 9000) << "an append was lost";
}

TEST(Hostile, TwoConversionsToOneNewOutputLeaveOneAndRefuseTheOther) {
  TempDir dir;
  write_cu(dir.file("in.xyz"), 3000);
  const std::string cmd = std::string(DDGNN_BINARY) + " convert " + dir.file("in.xyz") + " " +
                          dir.file("d.h5") + " >>" + dir.file("log") + " 2>&1";
  auto codes = run_together({cmd, cmd});
  std::sort(codes.begin(), codes.end());
  EXPECT_EQ(codes, (std::vector<int>{0, 1}));
  EXPECT_NE(testing::read_text(dir.file("log")).find("already exists"), std::string::npos);
  EXPECT_EQ(graphs_in(dir.file("d.h5")), 3000);
}

// A conversion whose output another process holds (a stopped convert, say) names the holder, and
// gives up after DDGNN_LOCK_WAIT_S seconds instead of waiting forever. The lock is the output's
// own: a conversion to another file of the folder goes on meanwhile.
TEST(Hostile, AnOutputLockHeldByAnotherProcessIsWaitedForBoundedlyNamingIt) {
  TempDir dir;
  write_cu(dir.file("in.xyz"), 4);
  const int fd = ::open(dir.file(".d.h5.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  const Result other =
      run("convert " + dir.file("in.xyz") + " " + dir.file("e.h5"), "DDGNN_LOCK_WAIT_S=0");
  EXPECT_EQ(other.code, 0) << other.out;
  const auto t0 = std::chrono::steady_clock::now();
  const Result c =
      run("convert " + dir.file("in.xyz") + " " + dir.file("d.h5"), "DDGNN_LOCK_WAIT_S=1");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(fd);
  EXPECT_EQ(c.code, 1) << c.out;
  EXPECT_NE(c.out.find("is locked by pid " + std::to_string(getpid())), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("gave up after 1 s"), std::string::npos) << c.out;
  EXPECT_LT(s, 30.0);
  EXPECT_FALSE(fs::exists(dir.file("d.h5")));
  // Free again: the same conversion goes through.
  EXPECT_EQ(run("convert " + dir.file("in.xyz") + " " + dir.file("d.h5")).code, 0);
}

TEST(Hostile, TemporaryOfAKilledConversionIsRemovedByTheNext) {
  TempDir dir;
  write_cu(dir.file("in.xyz"), 4);
  const pid_t dead = fork();  // a pid that surely belongs to no running process
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const std::string stale = dir.file("d.h5.tmp." + std::to_string(dead));
  std::ofstream(stale) << "half a file";
  const std::string alive = dir.file("d.h5.tmp." + std::to_string(getpid()));  // still running
  std::ofstream(alive) << "another writer's";
  const Result c = run("convert " + dir.file("in.xyz") + " " + dir.file("d.h5"));
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("removed 1 temporary file"), std::string::npos) << c.out;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(alive));
}

// Past the file size limit (ulimit -f, 512-byte blocks in sh: 32 KiB) the write fails with EFBIG:
// one error line and exit status 1, not death by SIGXFSZ, and no output or temporary left.
TEST(Hostile, AFileSizeLimitIsAnErrorThatLeavesNoFileBehind) {
  TempDir dir;
  write_cu(dir.file("in.xyz"), 3000);
  const Result c = run("convert " + dir.file("in.xyz") + " " + dir.file("d.h5"), "ulimit -f 64;");
  EXPECT_EQ(c.code, 1) << c.out;
  EXPECT_NE(c.out.find("error"), std::string::npos) << c.out;
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().rfind("d.h5", 0), std::string::npos)
        << "left behind: " << e.path();
  // An append whose copy of the file runs past the limit: an error that says the disk may be
  // full, no temporary left, the file as it was.
  write_cu(dir.file("small.xyz"), 200);
  ASSERT_EQ(run("convert " + dir.file("small.xyz") + " " + dir.file("e.h5")).code, 0);
  const std::string before = testing::read_text(dir.file("e.h5"));
  const Result a = run("convert --append " + dir.file("small.xyz") + " " + dir.file("e.h5"),
                       "ulimit -f " + std::to_string(before.size() / 512 - 1) + ";");
  EXPECT_EQ(a.code, 1) << a.out;
  EXPECT_NE(a.out.find("cannot copy"), std::string::npos) << a.out;
  EXPECT_EQ(a.out.find("internal error"), std::string::npos) << a.out;
  EXPECT_EQ(testing::read_text(dir.file("e.h5")), before);
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos)
        << "left behind: " << e.path();
}

// An input named as the output (an extended XYZ file called .dat, under the same or another
// name for the same file) is refused before anything is written: the input survives.
TEST(Hostile, TheOutputUnderAnInputsNameIsRefusedAndTheInputKept) {
  TempDir dir;
  write_cu(dir.file("in.dat"), 4);
  const std::string before = testing::read_text(dir.file("in.dat"));
  for (const std::string& out : {dir.file("in.dat"), dir.path().string() + "/./in.dat"}) {
    const Result c = run("convert --overwrite " + dir.file("in.dat") + " " + out);
    EXPECT_EQ(c.code, 1) << c.out;
    EXPECT_NE(c.out.find("is the input"), std::string::npos) << c.out;
    const Result a = run("convert --append " + dir.file("in.dat") + " " + out);
    EXPECT_EQ(a.code, 1) << a.out;
    EXPECT_EQ(testing::read_text(dir.file("in.dat")), before);
  }
}

// Data that would silently count twice or read one of two values: warned, converted.
TEST(Hostile, TheSameInputTwiceAndAKeyGivenTwiceAreWarned) {
  TempDir dir;
  write_cu(dir.file("in.xyz"), 4);
  const Result twice =
      run("convert " + dir.file("in.xyz") + " " + dir.file("in.xyz") + " " + dir.file("d.h5"));
  EXPECT_EQ(twice.code, 0) << twice.out;
  EXPECT_NE(twice.out.find("are one file: its frames go into the dataset twice"), std::string::npos)
      << twice.out;
  EXPECT_EQ(graphs_in(dir.file("d.h5")), 8);
  std::string text = testing::read_text(dir.file("in.xyz"));
  for (size_t at = text.find("energy="); at != std::string::npos;
       at = text.find("energy=", at + 30))
    text.insert(at, "energy=-1.5 ");
  std::ofstream(dir.file("keys.xyz")) << text;
  const Result keys = run("convert " + dir.file("keys.xyz") + " " + dir.file("k.h5"));
  EXPECT_EQ(keys.code, 0) << keys.out;
  EXPECT_NE(keys.out.find("key 'energy' appears twice in the comment line ('-1.5', then"),
            std::string::npos)
      << keys.out;
  EXPECT_EQ(keys.out.find("appears twice"), keys.out.rfind("appears twice"))
      << "once a file: " << keys.out;
}

TEST(Hostile, NumbersNoConfigCanMean) {
  TempDir dir;
  const std::string base = std::string(DDGNN_SOURCE_DIR) + "/configs/ethanol_schnet.json";
  Result r = run("config --config " + base + " --set Training.batch_size=9223372036854775808");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("9223372036854775808 is too large for an int"), std::string::npos) << r.out;
  r = run("config --config " + base + " --set Training.Optimizer.learning_rate=1e400");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("1e400 is beyond the range of a double"), std::string::npos) << r.out;
  std::string text = testing::read_text(base);
  const auto at = text.find("\"batch_size\"");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "\"epoch_seconds\": 1e400, ");
  std::ofstream(dir.file("c.json")) << text;
  r = run("config --config " + dir.file("c.json"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("config error"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("number overflow parsing '1e400'"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
  // Sizes no machine can hold are refused by the schema, before any allocation (LibTorch's
  // stack trace or bad_alloc before).
  for (const std::string& set : {std::string("Architecture.hidden_dim=3000000000"),
                                 std::string("Architecture.num_conv_layers=1000000")}) {
    r = run("config --config " + base + " --set " + set);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find(set.substr(13, set.find('=') - 13)), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
  }
}

// A config nested 100,000 levels deep, or a --set value 50,000, is refused while it is parsed, in
// one line, by config and by train (it overflowed the stack of the recursive walks before); 60
// levels (deeper than any real config) still parse to the usual key errors.
TEST(Hostile, JsonNestedTooDeepIsRefusedWhileParsed) {
  TempDir dir;
  const std::string base = std::string(DDGNN_SOURCE_DIR) + "/configs/ethanol_schnet.json";
  const auto nested = [](int levels) {
    return std::string(size_t(levels), '[') + "1" + std::string(size_t(levels), ']');
  };
  std::string text = testing::read_text(base);
  const auto at = text.find("\"batch_size\"");
  ASSERT_NE(at, std::string::npos);
  std::ofstream(dir.file("deep.json"))
      << std::string(text).insert(at, "\"deep\": " + nested(100000) + ", ");
  for (const char* command : {"config --config ", "train --config "}) {
    const Result r = run(command + dir.file("deep.json"));
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("deep.json: JSON nested more than 64 levels deep"), std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
  }
  // 50,000 levels: one argument of a command line holds at most 128 KiB.
  const Result set = run("config --config " + base + " --set Dataset.name=" + nested(50000));
  EXPECT_EQ(set.code, 1) << set.out.substr(0, 2000);
  EXPECT_NE(set.out.find("--set 'Dataset.name': JSON nested more than 64 levels deep"),
            std::string::npos)
      << set.out.substr(0, 2000);
  std::ofstream(dir.file("sixty.json"))
      << std::string(text).insert(at, "\"deep\": " + nested(60) + ", ");
  const Result sixty = run("config --config " + dir.file("sixty.json"));
  EXPECT_EQ(sixty.code, 1) << sixty.out;
  EXPECT_EQ(sixty.out.find("nested more than"), std::string::npos) << sixty.out;
  EXPECT_NE(sixty.out.find("deep"), std::string::npos) << sixty.out;  // the unknown key, named
}

// `ddgnn config` makes the checks of the keys together that `ddgnn train` makes at its start
// (what a campaign relies on before it runs anything).
TEST(Hostile, ConfigRefusesWhatTrainRefusesAtStart) {
  const std::string base = std::string(DDGNN_SOURCE_DIR) + "/configs/cu_eam_schnet.json";
  // TimeExponential needs a time limit; the data is never opened.
  const std::string set = " --set Training.time_limit_s=0 --set Dataset.path=/nonexistent.h5";
  const Result c = run("config --config " + base + set);
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.out.find("TimeExponential anneals over time_limit_s"), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find("valid"), std::string::npos) << c.out;
  const Result t = run("train --config " + base + set);
  EXPECT_EQ(t.code, 1);
  EXPECT_NE(t.out.find("TimeExponential anneals over time_limit_s"), std::string::npos) << t.out;
  EXPECT_EQ(run("config --config " + base).code, 0);
  // A divergence factor of 1 or less would stop any run whose loss rises in some epoch.
  const Result d = run("config --config " + base + " --set Training.divergence_factor=0.5");
  EXPECT_EQ(d.code, 1);
  EXPECT_NE(d.out.find("Training.divergence_factor: 0.5"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("write a factor above 1"), std::string::npos) << d.out;
}

TEST(Hostile, OutliersAreReportedStoredRefusedAndAllowed) {
  TempDir dir;
  write_cu(dir.file("in.xyz"), 24, /*bad_force=*/9);  // frame 9 starts at line 9 * 6 + 1
  // --strict: refused, with the input line, and no output left.
  Result c = run("convert --strict " + dir.file("in.xyz") + " " + dir.file("d.h5"));
  EXPECT_EQ(c.code, 1) << c.out;
  EXPECT_NE(c.out.find("1 outlier frame(s)"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("graph 9: " + dir.file("in.xyz") + ":55: largest force 1e+30 eV/Å (atom 2)"),
            std::string::npos)
      << c.out;
  EXPECT_FALSE(fs::exists(dir.file("d.h5")));
  // Without: stored with a warning; info lists it.
  c = run("convert " + dir.file("in.xyz") + " " + dir.file("d.h5"));
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("warning"), std::string::npos) << c.out;
  const Result i = run("info " + dir.file("d.h5"));
  EXPECT_NE(i.out.find("outliers       1"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("graph 9: largest force 1e+30"), std::string::npos) << i.out;
  // train refuses it, unless told to take it.
  const std::string cfg = testing::write_config(
      dir, "c.json", testing::small_config(dir.file("d.h5"), dir.file("run")));
  Result t = run("train -c " + cfg);
  EXPECT_EQ(t.code, 1) << t.out;
  EXPECT_NE(t.out.find("1 outlier frame(s), flagged by convert"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("Dataset.allow_outliers"), std::string::npos) << t.out;
  t = run("train -c " + cfg + " --set Dataset.allow_outliers=true --set Training.num_epoch=1 " +
          "--set Training.Checkpoint=false");
  EXPECT_NE(t.out.find("trained on: Dataset.allow_outliers is true"), std::string::npos) << t.out;
}

TEST(Hostile, ANonFiniteValidationLossIsAnErrorNamingItsGraphs) {
  TempDir dir;
  write_cu(dir.file("clean.xyz"), 16);
  write_cu(dir.file("val.xyz"), 16, /*bad_force=*/9);  // 1e30 eV/Å: its squared error is inf
  ASSERT_EQ(run("convert " + dir.file("clean.xyz") + " " + dir.file("clean.h5")).code, 0);
  ASSERT_EQ(run("convert " + dir.file("val.xyz") + " " + dir.file("val.h5")).code, 0);
  nlohmann::json c = testing::small_config("", dir.file("run"));
  c["Dataset"]["path"] = {{"train", dir.file("clean.h5")},
                          {"validate", dir.file("val.h5")},
                          {"test", dir.file("clean.h5")}};
  c["Dataset"]["allow_outliers"] = true;
  c["NeuralNetwork"]["Training"]["num_epoch"] = 2;
  const Result t = run("train -c " + testing::write_config(dir, "c.json", c));
  EXPECT_EQ(t.code, 1) << t.out;
  EXPECT_NE(t.out.find("the validate loss is not finite after epoch 1, in batches of graphs"),
            std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find(" 9"), std::string::npos) << t.out;
  EXPECT_FALSE(fs::exists(dir.file("run") + "/checkpoints/best.pt"));
}

// Names that are not UTF-8. A file name in another encoding is kept, its odd bytes written as
// "\xFF" in the dataset's JSON and in `info --json` (whose JSON the library would refuse to write
// otherwise); a config type in another encoding is refused by convert, naming file and line.
TEST(Hostile, NamesThatAreNotUtf8AreKeptReadableOrRefused) {
  TempDir dir;
  const std::string input = dir.file("in\xff.xyz"), output = dir.file("d\xfe.h5");
  write_cu(input, 12);
  const Result c = run("convert '" + input + "' '" + output + "'");
  ASSERT_EQ(c.code, 0) << c.out;
  const Result i = run("info --json '" + output + "'");
  ASSERT_EQ(i.code, 0) << i.out;
  EXPECT_EQ(nlohmann::json::parse(i.out).at("path"), dir.file("d\\xFE.h5"));
  const auto sources = nlohmann::json::parse(Dataset(output).sources());
  EXPECT_EQ(sources.at(0).at("file"), dir.file("in\\xFF.xyz"));

  std::ofstream(dir.file("latin1.xyz"))
      << "1\nenergy=-1.0 config_type=caf\xe9 pbc=\"F F F\" Properties=species:S:1:pos:R:3\n"
         "H 0 0 0\n";
  const Result bad = run("convert " + dir.file("latin1.xyz") + " " + dir.file("l.h5"));
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find(dir.file("latin1.xyz") +
                         ":1: config_type is not UTF-8 text (byte 0xE9 at position 3)"),
            std::string::npos)
      << bad.out;
  EXPECT_EQ(bad.out.find("internal error"), std::string::npos) << bad.out;
  EXPECT_FALSE(fs::exists(dir.file("l.h5")));
}

// 100,000 flagged frames (each with a force of 500 eV/Å): their list is metadata that grows with
// the data, kept in an array of the file (an HDF5 attribute holds 64 KiB: "object header message
// is too large" after reading everything, before).
TEST(Hostile, AHundredThousandOutlierFramesAreStored) {
  TempDir dir;
  {
    std::ofstream f(dir.file("hot.xyz"));
    for (int k = 0; k < 100000; ++k)
      f << "2\nenergy=" << -1.0 - 1e-4 * (k % 97)
        << " pbc=\"F F F\" Properties=species:S:1:pos:R:3:forces:R:3\n"
           "H 0 0 0 500 0 0\nH 0 0 0.75 -500 0 0\n";
  }
  const Result c = run("convert " + dir.file("hot.xyz") + " " + dir.file("hot.h5"));
  ASSERT_EQ(c.code, 0) << c.out.substr(0, 2000);
  EXPECT_NE(c.out.find("100000 outlier frame(s)"), std::string::npos) << c.out.substr(0, 2000);
  const Dataset ds(dir.file("hot.h5"));
  ASSERT_TRUE(ds.outliers().has_value());
  EXPECT_EQ(ds.outliers()->size(), 100000u);
  EXPECT_EQ(ds.outliers()->back().graph, 99999);
  EXPECT_NE(ds.outliers()->back().what.find("largest force 500"), std::string::npos)
      << ds.outliers()->back().what;
  // Appending keeps them and adds the new ones.
  write_cu(dir.file("cu.xyz"), 3, /*bad_force=*/1);
  const Result a = run("convert --append " + dir.file("cu.xyz") + " " + dir.file("hot.h5"));
  ASSERT_EQ(a.code, 0) << a.out.substr(0, 2000);
  EXPECT_EQ(Dataset(dir.file("hot.h5")).outliers()->size(), 100001u);
}

}  // namespace
}  // namespace ddgnn
