// `ddgnn config` in-process: validating a config prints every value with its source and writes
// the resolved JSON; --allow-unimplemented turns refused HydraGNN keys into warnings; --list-keys
// prints the key reference (--markdown: the text of docs/config.md).
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/temp_dir.h"
#include "app/commands.h"
#include "config/config.h"
#include "config/config_schema.h"
#include "core/error.h"

namespace ddgnn {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

const std::string kShipped = std::string(DDGNN_SOURCE_DIR) + "/configs/cu_eam_schnet.json";

// Runs `ddgnn config ARGS...` in-process; returns the exit code, stdout in `out`.
int run_config_command(std::vector<std::string> args, std::string& out) {
  CLI::App app{"ddgnn"};
  const Command command = add_config_command(app);
  args.insert(args.begin(), "config");
  std::vector<const char*> argv = {"ddgnn"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  ::testing::internal::CaptureStdout();
  int rc = -1;
  try {
    rc = command.run();
  } catch (...) {
    out = ::testing::internal::GetCapturedStdout();
    throw;
  }
  out = ::testing::internal::GetCapturedStdout();
  return rc;
}

TEST(ConfigCommand, ValidatesPrintsAndWrites) {
  testing::TempDir dir;
  const std::string written = dir.file("resolved.json");
  std::string out;
  EXPECT_EQ(run_config_command({"--config", kShipped, "--set", "Training.batch_size=6", "--set",
                                "Loader.backend=rma", "--write", written},
                               out),
            0);
  EXPECT_HAS(out, "NeuralNetwork.Training.batch_size");
  EXPECT_HAS(out, "--set");
  EXPECT_HAS(out, "wrote " + written);
  EXPECT_EQ(load_config(written, {}, {}).get<int>("Training.batch_size"), 6);  // file: 2
}

TEST(ConfigCommand, AllowUnimplementedPrintsWarnings) {
  testing::TempDir dir;
  nlohmann::json raw = nlohmann::json::parse(std::ifstream(kShipped));
  raw["NeuralNetwork"]["Training"]["conv_checkpointing"] = true;
  const std::string path = dir.file("c.json");
  std::ofstream(path) << raw.dump();
  std::string out;
  EXPECT_THROW(run_config_command({"--config", path}, out), ConfigError);
  EXPECT_EQ(run_config_command({"--config", path, "--allow-unimplemented"}, out), 0);
  EXPECT_HAS(out, "warning: NeuralNetwork.Training.conv_checkpointing");
}

TEST(ConfigCommand, ListKeys) {
  std::string out;
  EXPECT_EQ(run_config_command({"--list-keys"}, out), 0);
  EXPECT_HAS(out, "NeuralNetwork.Training.batch_size");
  EXPECT_EQ(run_config_command({"--list-keys", "--markdown"}, out), 0);
  EXPECT_EQ(out, schema_reference(true));
  EXPECT_THROW(run_config_command({}, out), ConfigError);
}

}  // namespace
}  // namespace ddgnn
