// The run directory a training run starts in: refused when it is empty or the file system's root,
// when it cannot be written (said at start, not at the first checkpoint); temporaries that killed
// writes left are removed; those of a live process are kept.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "../common/temp_dir.h"
#include "core/error.h"
#include "train/checkpoint.h"

namespace ddgnn {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::TempDir;

std::string config_error(const std::string& run_dir) {
  try {
    prepare_run_dir(run_dir, false, false);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(RunDir, EmptyOrRootIsRefused) {
  EXPECT_THAT(config_error(""), HasSubstr("Output.run_dir is empty"));
  EXPECT_THAT(config_error("/"), HasSubstr("Output.run_dir is the root of the file system"));
  EXPECT_THAT(config_error("/tmp/.."), HasSubstr("root of the file system"));
}

TEST(RunDir, UnwritableIsRefusedAtStart) {
  if (geteuid() == 0) {
    // root writes anywhere: a folder under a regular file cannot be created by anyone.
    TempDir dir;
    std::ofstream(dir.file("file")) << "x";
    EXPECT_THAT(config_error(dir.file("file") + "/run"), HasSubstr("cannot create"));
    return;
  }
  TempDir dir;
  fs::create_directories(dir.file("ro"));
  chmod(dir.file("ro").c_str(), 0555);
  EXPECT_THAT(config_error(dir.file("ro") + "/run"), HasSubstr("cannot create"));
  chmod(dir.file("ro").c_str(), 0755);
}

TEST(RunDir, TemporariesOfDeadWritersAreRemoved) {
  TempDir dir;
  const std::string run = dir.file("run");
  fs::create_directories(run + "/checkpoints");
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const std::string stale1 = run + "/checkpoints/epoch_00003.pt.tmp." + std::to_string(dead);
  const std::string stale2 = run + "/metrics.csv.tmp." + std::to_string(dead);
  const std::string live = run + "/checkpoints/best.pt.tmp." + std::to_string(getpid());
  for (const auto& p : {stale1, stale2, live}) std::ofstream(p) << "partial";
  prepare_run_dir(run, /*resume=*/true, false);
  EXPECT_FALSE(fs::exists(stale1));
  EXPECT_FALSE(fs::exists(stale2));
  EXPECT_TRUE(fs::exists(live));
}

}  // namespace
}  // namespace ddgnn
