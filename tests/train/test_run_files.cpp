// The files of a run: the run directory (refused when empty, the file system's root or not
// writable; temporaries of killed writers removed, those of a live process kept), checkpoints that
// say when their bytes were damaged or could not be written, metrics.csv that gets back an epoch's
// row a kill took, appends that fail loudly on a full disk, and data written again under a run's
// path named on resume and by evaluate.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "../common/lj_dataset.h"
#include "../common/small_spec.h"
#include "../common/temp_dir.h"
#include "../common/train_run.h"
#include "core/error.h"
#include "train/checkpoint.h"
#include "train/run_log.h"

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

std::string write_small_checkpoint(const TempDir& dir) {
  Gnn gnn(testing::small_spec("SchNet", 4.0));
  const std::string path = dir.file("ck.pt");
  save_checkpoint(path, gnn, nullptr, {{"model", {{"note", "test"}}}});
  return path;
}

TEST(Checkpoint, AFlippedByteIsCaughtNotLoaded) {
  TempDir dir;
  const std::string path = write_small_checkpoint(dir);
  Gnn fresh(testing::small_spec("SchNet", 4.0));
  ASSERT_NO_THROW(load_checkpoint_model(path, fresh));
  std::string bytes = testing::read_text(path);
  // Flip bits at several places in the middle of the file (the tensors' bytes are most of it).
  for (size_t at : {bytes.size() / 3, bytes.size() / 2, 2 * bytes.size() / 3}) {
    std::string damaged = bytes;
    damaged[at] = char(damaged[at] ^ 0x10);
    std::ofstream(dir.file("bad.pt"), std::ios::binary) << damaged;
    try {
      load_checkpoint_model(dir.file("bad.pt"), fresh);
      ADD_FAILURE() << "a checkpoint with a flipped bit at byte " << at << " loaded";
    } catch (const DataError& e) {
      EXPECT_THAT(e.what(), HasSubstr(dir.file("bad.pt")));
      EXPECT_THAT(e.hint(), HasSubstr("checkpoint"));
    }
  }
}

TEST(Checkpoint, AnEditedRecordIsCaughtByItsChecksum) {
  TempDir dir;
  const std::string path = write_small_checkpoint(dir);
  torch::serialize::InputArchive in;
  in.load_from(path);
  c10::IValue record, crc, payload;
  ASSERT_TRUE(in.try_read("record", record) && in.try_read("record_crc32", crc) &&
              in.try_read("payload", payload));
  // One character of the record changed ("test" -> "tesT"), the record's checksum kept.
  std::string text = record.toStringRef();
  const auto at = text.find("\"test\"");
  ASSERT_NE(at, std::string::npos) << text;
  text[at + 4] = 'T';
  torch::serialize::OutputArchive out;
  out.write("record", c10::IValue(text));
  out.write("record_crc32", crc);
  out.write("payload", payload);
  out.save_to(dir.file("edited.pt"));
  try {
    read_checkpoint_record(dir.file("edited.pt"));
    ADD_FAILURE() << "an edited record was read";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("checksum mismatch in the checkpoint's record"));
  }
  EXPECT_NO_THROW(read_checkpoint_record(path));
}

TEST(Checkpoint, AResumeOnOtherDataOrAnotherSplitIsRefused) {
  TempDir dir;
  std::ofstream(dir.file("a.h5")) << "a";
  const nlohmann::json then = {{"single", dir.file("a.h5")},
                               {"n_graphs", 600},
                               {"perc_train", 0.8},
                               {"seed", 0},
                               {"split_by", "group"}};
  nlohmann::json now = then;
  now["train_fraction"] = 0.5;  // a key the older record lacks: not judged
  EXPECT_NO_THROW(check_same_split(then, now, "ck.pt"));
  // The same file by another path is the same file.
  now["single"] = dir.path().string() + "/./a.h5";
  EXPECT_NO_THROW(check_same_split(then, now, "ck.pt"));
  // Appended to (more graphs), and split by frame: both named.
  now["n_graphs"] = 1200;
  now["split_by"] = "frame";
  try {
    check_same_split(then, now, "ck.pt");
    ADD_FAILURE() << "a changed split was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("n_graphs 600 in the checkpoint, 1200 now"));
    EXPECT_THAT(e.what(), HasSubstr("split_by \"group\" in the checkpoint, \"frame\" now"));
  }
  // The same path and count, other content (converted again).
  nlohmann::json with_crc = then;
  with_crc["content_crc32"] = {1, 1, 1};
  now = with_crc;
  now["content_crc32"] = {2, 2, 2};
  try {
    check_same_split(with_crc, now, "ck.pt");
    ADD_FAILURE() << "other content was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("content_crc32 [1,1,1] in the checkpoint, [2,2,2] now (a "
                                    "data file was written again since)"));
  }
}

TEST(Checkpoint, AFailedWriteIsAnErrorAndLeavesThePreviousFile) {
  TempDir dir;
  const std::string path = write_small_checkpoint(dir);
  const auto before = testing::read_text(path);
  std::ofstream(dir.file("file")) << "x";
  Gnn gnn(testing::small_spec("SchNet", 4.0));
  try {
    save_checkpoint(dir.file("file") + "/ck.pt", gnn, nullptr, {{"model", {}}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot"));
  }
  EXPECT_EQ(testing::read_text(path), before);
}

TEST(MetricsCsv, TheCheckpointsRowComesBackWhenAKillTookIt) {
  TempDir dir;
  const std::string path = dir.file("metrics.csv");
  const std::vector<std::string> columns = {"epoch", "loss"};
  {
    MetricsCsv csv(path, columns, /*truncate=*/true, 0);
    csv.write({{"epoch", 1}, {"loss", 0.5}});
    csv.write({{"epoch", 2}, {"loss", 0.25}});
  }
  // Killed after epoch 3's checkpoint, before its row: resuming from epoch 3 writes it.
  { MetricsCsv csv(path, columns, false, 3, {{"epoch", 3}, {"loss", 0.125}}); }
  EXPECT_EQ(testing::read_text(path), "epoch,loss\n1,0.5\n2,0.25\n3,0.125\n");
  // Resuming from epoch 2, whose row is there: nothing doubled; rows after it dropped.
  { MetricsCsv csv(path, columns, false, 2, {{"epoch", 2}, {"loss", 0.25}}); }
  EXPECT_EQ(testing::read_text(path), "epoch,loss\n1,0.5\n2,0.25\n");
}

TEST(MetricsCsv, ARowCutShortIsDroppedAndAnOlderFilesRowsMoveToTheNewColumns) {
  TempDir dir;
  const std::string path = dir.file("metrics.csv");
  // Written by a version without the "skipped" column, then cut in the middle of epoch 3's row.
  std::ofstream(path) << "epoch,loss\n1,0.5\n2,0.25\n3,0.1";
  const std::vector<std::string> columns = {"epoch", "loss", "skipped"};
  { MetricsCsv csv(path, columns, false, 3, {{"epoch", 3}, {"loss", 0.125}, {"skipped", 0}}); }
  EXPECT_EQ(testing::read_text(path), "epoch,loss,skipped\n1,0.5,\n2,0.25,\n3,0.125,0\n");
  // A file with a column this run does not have belongs to another run.
  std::ofstream(path) << "epoch,loss,charges_mae\n1,0.5,3\n";
  EXPECT_THROW(MetricsCsv(path, columns, false, 1), Error);
}

// Rows of evaluations inside epochs carry the run's step: a resume keeps them up to its
// checkpoint's row by step, also inside one epoch, and writes that row again if a kill took it.
TEST(MetricsCsv, RowsInsideEpochsAreKeptUpToTheCheckpointsStep) {
  TempDir dir;
  const std::string path = dir.file("metrics.csv");
  const std::vector<std::string> columns = {"epoch", "step", "loss"};
  {
    MetricsCsv csv(path, columns, /*truncate=*/true, 0);
    csv.write({{"epoch", 1}, {"step", 4}, {"loss", 0.5}});
    csv.write({{"epoch", 1}, {"step", 6}, {"loss", 0.4}});
    csv.write({{"epoch", 2}, {"step", 8}, {"loss", 0.3}});
    csv.write({{"epoch", 2}, {"step", 12}, {"loss", 0.2}});
  }
  // A checkpoint inside epoch 2 whose latest row is that of step 8.
  { MetricsCsv csv(path, columns, false, 1, {{"epoch", 2}, {"step", 8}, {"loss", 0.3}}); }
  EXPECT_EQ(testing::read_text(path), "epoch,step,loss\n1,4,0.5\n1,6,0.4\n2,8,0.3\n");
  // The row of step 6 lost with everything after it: it comes back, once.
  std::ofstream(path) << "epoch,step,loss\n1,4,0.5\n";
  { MetricsCsv csv(path, columns, false, 1, {{"epoch", 1}, {"step", 6}, {"loss", 0.4}}); }
  EXPECT_EQ(testing::read_text(path), "epoch,step,loss\n1,4,0.5\n1,6,0.4\n");
  // A file of a version without steps: its rows move over, kept by epoch.
  std::ofstream(path) << "epoch,loss\n1,0.5\n2,0.25\n";
  { MetricsCsv csv(path, columns, false, 1, {{"epoch", 1}, {"loss", 0.5}}); }
  EXPECT_EQ(testing::read_text(path), "epoch,step,loss\n1,,0.5\n");
}

// Checkpoints inside an epoch sort between those of whole epochs; the latest is what
// Training.continue resumes and what rotation keeps.
TEST(Checkpoint, CheckpointsInsideEpochsSortBetweenWholeEpochs) {
  TempDir dir;
  const std::string ck = dir.file("checkpoints");
  fs::create_directories(ck);
  EXPECT_EQ(checkpoint_name(12), "epoch_00012.pt");
  EXPECT_EQ(checkpoint_name(13, 345), "epoch_00013_step_0000345.pt");
  for (const std::string name :
       {"epoch_00012.pt", "epoch_00013_step_0000345.pt", "epoch_00013_step_0000040.pt",
        "epoch_00013.pt", "epoch_00009.pt", "best.pt", "interrupted.pt"})
    std::ofstream(ck + "/" + name) << "x";
  std::vector<std::string> names;
  for (const auto& p : epoch_checkpoints(ck)) names.push_back(fs::path(p).filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"epoch_00009.pt", "epoch_00012.pt",
                                             "epoch_00013_step_0000040.pt",
                                             "epoch_00013_step_0000345.pt", "epoch_00013.pt"}));
  fs::remove(ck + "/epoch_00013.pt");
  EXPECT_EQ(fs::path(resolve_startfrom(dir.path().string(), "existing_model")).filename(),
            "epoch_00013_step_0000345.pt");
  keep_latest_checkpoints(ck, 2);
  EXPECT_TRUE(fs::exists(ck + "/epoch_00013_step_0000040.pt"));
  EXPECT_TRUE(fs::exists(ck + "/epoch_00013_step_0000345.pt"));
  EXPECT_FALSE(fs::exists(ck + "/epoch_00012.pt"));
  EXPECT_TRUE(fs::exists(ck + "/best.pt"));
}

TEST(EventLog, ALineCutShortIsDroppedOnReopening) {
  TempDir dir;
  const std::string path = dir.file("events.jsonl");
  std::ofstream(path) << "{\"event\":\"epoch\",\"epoch\":1}\n{\"event\":\"epo";
  EventLog log(path, /*truncate=*/false);
  log.write("epoch", {{"epoch", 2}});
  const std::vector<std::string> lines = testing::lines(testing::read_text(path));
  ASSERT_EQ(lines.size(), 2u) << testing::read_text(path);
  for (const auto& l : lines) EXPECT_TRUE(nlohmann::json::accept(l)) << l;
  EXPECT_TRUE(log.has_epoch_event("epoch", 2));
  EXPECT_FALSE(log.has_epoch_event("checkpoint", 2));
}

TEST(RunDir, OwnedByOneRunTheOtherIsRefusedNamingIt) {
  TempDir dir;
  const std::string run = dir.file("run");
  const auto lock = prepare_run_dir(run, false, false);
  ASSERT_TRUE(lock);
  // A second run into the folder (another process: a lock is per open folder, so a second open
  // in this process conflicts as another process's would).
  try {
    prepare_run_dir(run, /*resume=*/true, /*overwrite=*/true);
    ADD_FAILURE() << "a second run was let in";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("Output.run_dir: folder " + run + " is locked by pid " +
                                    std::to_string(getpid())));
  }
}

TEST(RunDir, ASymbolicLinkInPlaceOfARunFileIsRefused) {
  TempDir dir;
  const std::string run = dir.file("run");
  fs::create_directories(run);
  std::ofstream(dir.file("precious")) << "keep me";
  fs::create_symlink(dir.file("precious"), run + "/events.jsonl");
  EXPECT_THAT(config_error(run), HasSubstr("events.jsonl is a symbolic link"));
  EXPECT_EQ(testing::read_text(dir.file("precious")), "keep me");
}

// SIGKILL at moments spread over a run that checkpoints every epoch (so some kills land inside a
// checkpoint write): whatever the moment, every checkpoint left under its real name loads, and a
// temporary is all a kill can leave beside them (the next start removes it).
TEST(Checkpoint, SigkillAtAnyMomentLeavesOnlyCheckpointsThatLoad) {
  TempDir dir;
  testing::write_lj_dataset(dir.file("lj.h5"), testing::LjOptions{});
  nlohmann::json c = testing::small_config(dir.file("lj.h5"), dir.file("r"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 100000;
  const std::string cfg = testing::write_config(dir, "c.json", c);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> delay_ms(0, 3000);
  int checked = 0;
  for (int trial = 0; trial < 8; ++trial) {
    // Start (or resume), wait for a first checkpoint, then SIGKILL at a random moment.
    const std::string ckdir = dir.file("r") + "/checkpoints";
    const std::string cmd = std::string(DDGNN_BINARY) + " train -c " + cfg +
                            (trial == 0 ? "" : " --set Training.continue=1") +
                            " >/dev/null 2>&1 & pid=$!; for i in $(seq 600); do ls " + ckdir +
                            "/epoch_*.pt >/dev/null 2>&1 && break; sleep 0.1; done; sleep " +
                            std::to_string(delay_ms(rng) / 1000.0) + "; kill -KILL $pid; wait $pid";
    std::system(("sh -c '" + cmd + "'").c_str());
    for (const auto& e : fs::directory_iterator(dir.file("r") + "/checkpoints")) {
      const std::string name = e.path().filename().string();
      if (name.find(".tmp.") != std::string::npos) continue;  // a killed write's temporary
      EXPECT_NO_THROW(testing::checkpoint_parameters(e.path().string())) << name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << "no checkpoint was written in any trial";
}

// A disk that fills during a checkpoint, with real processes: the run resumes from epoch 1 with a
// file-size limit (DDGNN_DEBUG_FILE_SIZE_LIMIT: writes past it fail with EFBIG as on a full disk)
// that the logs fit in and a checkpoint does not. It stops with a clear error, leaves no temporary,
// and epoch 1's checkpoint still loads.
TEST(Checkpoint, ADiskThatFillsDuringACheckpointStopsTheRunCleanly) {
  TempDir dir;
  testing::write_lj_dataset(dir.file("lj.h5"), testing::LjOptions{});
  nlohmann::json c = testing::small_config(dir.file("lj.h5"), dir.file("r"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 1;
  const std::string cfg = testing::write_config(dir, "c.json", c);
  ASSERT_EQ(testing::run("train -c " + cfg).code, 0);
  const std::string first = dir.file("r") + "/checkpoints/epoch_00001.pt";
  ASSERT_GT(fs::file_size(first), 16u * 1024)
      << "the limit below must be smaller than a checkpoint";
  const testing::Result r =
      testing::run("train -c " + cfg + " --set Training.continue=1 --set Training.num_epoch=3",
                   "DDGNN_DEBUG_FILE_SIZE_LIMIT=16384");
  const std::string& out = r.out;
  EXPECT_EQ(r.code, 1) << out;
  EXPECT_NE(out.find("cannot write the checkpoint (File too large)"), std::string::npos) << out;
  EXPECT_NE(out.find("the previous checkpoint is intact"), std::string::npos) << out;
  for (const auto& e : fs::directory_iterator(dir.file("r") + "/checkpoints"))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  EXPECT_NO_THROW(testing::checkpoint_parameters(first));
}

TEST(EventLog, AFullDiskIsAnError) {
  EventLog log("/dev/full", /*truncate=*/false);
  try {
    log.write("epoch", {{"epoch", 1}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/dev/full: cannot append the event 'epoch'"));
    EXPECT_THAT(e.hint(), HasSubstr("disk may be full"));
  }
}

// The data under the run's path written again (other frames, the same graph count, so the same
// split sizes): a resume refuses it, evaluate refuses a split of it and warns for --split all;
// an --out that cannot be created is an error before any prediction.
TEST(RunFiles, DataWrittenAgainUnderTheRunsPathIsNamedOnResumeAndByEvaluate) {
  TempDir dir;
  testing::write_lj_dataset(dir.file("lj.h5"), testing::LjOptions{});
  const std::string run_dir = dir.file("r");
  nlohmann::json config = testing::small_config(dir.file("lj.h5"), run_dir);
  config["NeuralNetwork"]["Training"]["num_epoch"] = 2;
  const std::string path = testing::write_config(dir, "c.json", config);
  ASSERT_EQ(testing::run("train -c " + path).code, 0);

  std::ofstream(dir.file("file")) << "x";
  const testing::Result no_place =
      testing::run("evaluate --run " + run_dir + " --out " + dir.file("file") + "/eval");
  EXPECT_EQ(no_place.code, 1) << no_place.out;
  EXPECT_THAT(no_place.out,
              HasSubstr("evaluate --out: cannot create the folder " + dir.file("file") + "/eval"));
  EXPECT_THAT(no_place.out, ::testing::Not(HasSubstr("internal error")));
  EXPECT_THAT(no_place.out, ::testing::Not(HasSubstr("split:")));  // nothing predicted

  testing::LjOptions other;
  other.seed = 2;
  testing::write_lj_dataset(dir.file("lj.h5"), other);
  const testing::Result test_split = testing::run("evaluate --run " + run_dir);
  EXPECT_EQ(test_split.code, 1) << test_split.out;
  EXPECT_THAT(test_split.out, HasSubstr("was written again since the run trained on it"));
  EXPECT_THAT(test_split.out, HasSubstr("--split all"));
  const testing::Result all = testing::run("evaluate --run " + run_dir + " --split all");
  ASSERT_EQ(all.code, 0) << all.out;
  EXPECT_THAT(all.out, HasSubstr("no graph is labelled train, validate or test"));
  for (const auto& line : testing::lines(testing::read_text(run_dir + "/eval_all/energies.csv")))
    if (line.rfind("graph,", 0) != 0) {
      EXPECT_THAT(line, HasSubstr(",other,"));
    }

  config["NeuralNetwork"]["Training"]["num_epoch"] = 3;
  config["NeuralNetwork"]["Training"]["continue"] = 1;
  const testing::Result resumed =
      testing::run("train -c " + testing::write_config(dir, "c2.json", config));
  EXPECT_EQ(resumed.code, 1) << resumed.out;
  EXPECT_THAT(resumed.out, HasSubstr("content_crc32"));
  EXPECT_THAT(resumed.out, HasSubstr("(a data file was written again since)"));
}

}  // namespace
}  // namespace ddgnn
