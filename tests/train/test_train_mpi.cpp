// `mpiexec -n P ddgnn train` end to end, on real Open MPI ranks (oversubscribed on this machine):
// P ranks with B/P graphs each train exactly like one rank with B (every backend, replica
// groups, graphs of different sizes, atom-budget steps balanced over the ranks); a rank that throws
// stops every rank with its message, no hang, and so does a model that diverges; a corrupted
// partition is reported by its owner; the loader's bad settings are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../common/h5_edit.h"
#include "../common/lj_dataset.h"
#include "../common/temp_dir.h"
#include "../common/train_run.h"

namespace ddgnn {
namespace {

using testing::LjOptions;
using testing::Result;
using testing::TempDir;

using testing::mpirun;

// A job that must fail: it ends with a non-zero status, by itself (not at the `timeout`, which
// would mean a rank hung), within 60 s.
// Occurrences of `needle` in `text`.
int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

Result failing_mpirun(int np, const std::string& args, const std::string& env = "") {
  const auto t0 = std::chrono::steady_clock::now();
  Result r = mpirun(np, args, env);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "timed out: a rank hung\n" << r.out;
  EXPECT_LT(s, 60.0) << r.out;
  return r;
}

// 20 steps of B = 8 graphs (160 training graphs of 5, 6 or 7 atoms), float64, one epoch.
nlohmann::json step_config(const std::string& data, const std::string& run_dir, int batch) {
  nlohmann::json c = testing::small_config(data, run_dir);
  auto& t = c["NeuralNetwork"]["Training"];
  t["num_epoch"] = 1;
  t["batch_size"] = batch;
  t["perc_train"] = 0.8;
  t["Optimizer"] = {{"type", "Adam"}, {"learning_rate", 0.01}};
  t["precision"] = "fp64";
  c["Loader"] = {{"shuffle", true}};
  return c;
}

LjOptions step_data() {
  LjOptions o;
  o.n_frames = 200;
  o.n_atoms = 5;
  o.vary_atoms = 2;
  return o;
}

struct Trained {
  std::vector<at::Tensor> params;
  double train_loss = NAN, validate_loss = NAN;
  int steps = -1;
};

Trained trained(const std::string& run_dir) {
  Trained t;
  t.params = testing::checkpoint_parameters(run_dir + "/checkpoints/epoch_00001.pt");
  const auto rows = testing::lines(testing::read_text(run_dir + "/metrics.csv"));
  std::stringstream hs(rows.at(0)), vs(rows.at(1));
  for (std::string h, v; std::getline(hs, h, ',') && std::getline(vs, v, ',');) {
    if (h == "train_loss") t.train_loss = std::stod(v);
    if (h == "validate_loss") t.validate_loss = std::stod(v);
    if (h == "steps") t.steps = std::stoi(v);
  }
  return t;
}

void expect_same_training(const Trained& one, const Trained& many, const std::string& what) {
  EXPECT_EQ(many.steps, one.steps) << what;
  EXPECT_NEAR(many.train_loss, one.train_loss, 1e-9 * std::abs(one.train_loss)) << what;
  EXPECT_NEAR(many.validate_loss, one.validate_loss, 1e-9 * std::abs(one.validate_loss)) << what;
  ASSERT_EQ(many.params.size(), one.params.size()) << what;
  double worst = 0.0;
  for (size_t k = 0; k < one.params.size(); ++k)
    worst = std::max(worst, (many.params[k] - one.params[k]).abs().max().item<double>());
  EXPECT_LT(worst, 1e-9) << what << ": parameters differ by " << worst;
}

TEST(TrainMpi, PRanksWithBOverPGraphsEqualOneRankWithB) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), step_data());
  auto train = [&](int np, int batch, const std::string& name, const std::string& sets) {
    const std::string run_dir = dir.file(name);
    const std::string cfg =
        testing::write_config(dir, name + ".json", step_config(dir.file("lj.h5"), run_dir, batch));
    const std::string args = "train -c " + cfg + " " + sets;
    const Result r = np == 1 ? testing::run(args) : mpirun(np, args);
    EXPECT_EQ(r.code, 0) << name << ": " << r.out;
    return trained(run_dir);
  };
  const Trained one = train(1, 8, "one", "");
  EXPECT_EQ(one.steps, 20);
  for (const char* backend : {"rma", "collective", "shm", "replicated", "file"})
    expect_same_training(
        one,
        train(2, 4, std::string("two_") + backend, std::string("--set Loader.backend=") + backend),
        std::string("2 ranks, ") + backend);
  expect_same_training(one, train(4, 2, "four_auto", ""), "4 ranks, auto");
  expect_same_training(one,
                       train(4, 2, "four_width2", "--set Loader.width=2 --set Loader.backend=rma"),
                       "4 ranks, 2 replica groups, rma");
  // Batches padded into fixed shapes, their shares of the step read from the device.
  expect_same_training(one, train(2, 4, "two_static", "--set Loader.static_shapes=true"),
                       "2 ranks, static shapes");
  // Atom-budget steps (at most 40 atoms, 8 graphs) dealt to 2 ranks balanced by atoms.
  const Trained budget = train(1, 8, "one_budget", "--set Loader.atom_budget=40");
  EXPECT_GT(budget.steps, 20);
  expect_same_training(budget, train(2, 4, "two_budget", "--set Loader.atom_budget=20"),
                       "2 ranks, atom budget");
}

// A list of three files as one dataset: batches that mix the files' graphs, fetched file by file
// and put back in order, train on 2 ranks as on one (the collective backend's ranks make the same
// calls whichever files their graphs are in).
TEST(TrainMpi, AListOfFilesTrainsOnPRanksAsOnOne) {
  TempDir dir;
  nlohmann::json list = nlohmann::json::array();
  for (int f = 0; f < 3; ++f) {
    LjOptions o = step_data();
    o.n_frames = 60 + 10 * f;
    o.seed = unsigned(20 + f);
    o.energy_shift = 0.1 * f;
    const std::string path = dir.file("part" + std::to_string(f) + ".h5");
    write_lj_dataset(path, o);
    list.push_back(path);
  }
  auto train = [&](int np, int batch, const std::string& name, const std::string& sets) {
    nlohmann::json c = step_config(dir.file("part0.h5"), dir.file(name), batch);
    c["Dataset"]["path"] = list;
    const std::string args =
        "train -c " + testing::write_config(dir, name + ".json", c) + " " + sets;
    const Result r = np == 1 ? testing::run(args) : mpirun(np, args);
    EXPECT_EQ(r.code, 0) << name << ": " << r.out;
    return trained(dir.file(name));
  };
  const Trained one = train(1, 8, "one", "");
  EXPECT_EQ(one.steps, 21);  // 48 + 56 + 64 training graphs in steps of 8
  for (const char* backend : {"collective", "rma"})
    expect_same_training(
        one,
        train(2, 4, std::string("two_") + backend, std::string("--set Loader.backend=") + backend),
        std::string("2 ranks, ") + backend);
}

// GPS's batch norms: each rank updates their running statistics from its own batches; before each
// evaluation the ranks take their mean, so the run's test errors (every rank's share) are those
// of the checkpoint it saves, which `evaluate` reproduces on one process.
TEST(TrainMpi, GpsBatchNormStatisticsAreTheRanksMean) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), step_data());
  nlohmann::json c = step_config(dir.file("lj.h5"), dir.file("run"), 8);
  auto& a = c["NeuralNetwork"]["Architecture"];
  a["global_attn_engine"] = "GPS";
  a["global_attn_type"] = "multihead";
  a["global_attn_heads"] = 2;
  a["pe_dim"] = 2;
  c["NeuralNetwork"]["Training"]["num_epoch"] = 2;
  const Result r = mpirun(2, "train -c " + testing::write_config(dir, "gps.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string ck = testing::last_event(dir.file("run"), "checkpoint").at("path");
  const Result ev = testing::run("evaluate --checkpoint " + ck + " --out " + dir.file("eval"));
  ASSERT_EQ(ev.code, 0) << ev.out;
  const double eval_f = nlohmann::json::parse(testing::read_text(dir.file("eval") + "/errors.json"))
                            .at("forces")
                            .at("mae_mev_a")
                            .get<double>();
  const double run_f =
      testing::last_metric(dir.file("run") + "/metrics.csv", "test_force_mae_mev_a");
  // metrics.csv keeps 9 digits; without the mean the two differ by 1e-5 of themselves.
  EXPECT_NEAR(eval_f, run_f, 1e-7 * run_f) << "evaluate " << eval_f << ", the run " << run_f;
}

// The sampler is a function of (seed, epoch): a run checkpointed on 2 ranks and resumed on 1
// (or the other way) ends with the weights of an uninterrupted run.
TEST(TrainMpi, ResumeOnAnotherNumberOfRanks) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), step_data());
  auto config = [&](const std::string& run_dir, int epochs, int batch) {
    nlohmann::json c = step_config(dir.file("lj.h5"), run_dir, batch);
    c["NeuralNetwork"]["Training"]["num_epoch"] = epochs;
    c["NeuralNetwork"]["Training"]["Scheduler"] = {{"type", "ReduceLROnPlateau"}, {"patience", 0}};
    return testing::write_config(dir,
                                 "c" + std::to_string(epochs) + std::to_string(batch) +
                                     run_dir.substr(run_dir.size() - 1) + ".json",
                                 c);
  };
  Result r = testing::run("train -c " + config(dir.file("whole"), 3, 8));
  ASSERT_EQ(r.code, 0) << r.out;
  r = mpirun(2, "train -c " + config(dir.file("split"), 2, 4));  // epochs 1-2 on 2 ranks
  ASSERT_EQ(r.code, 0) << r.out;
  r = testing::run("train -c " + config(dir.file("split"), 3, 8) +
                   " --set Training.continue=1");  // epoch 3 on 1 rank
  ASSERT_EQ(r.code, 0) << r.out;
  const auto a = testing::checkpoint_parameters(dir.file("whole") + "/checkpoints/epoch_00003.pt");
  const auto b = testing::checkpoint_parameters(dir.file("split") + "/checkpoints/epoch_00003.pt");
  ASSERT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (size_t k = 0; k < a.size(); ++k)
    worst = std::max(worst, (a[k] - b[k]).abs().max().item<double>());
  EXPECT_LT(worst, 1e-9);
}

// On 2 ranks (batch 4 each: 20 steps an epoch, 2 epochs, an evaluation every 6 steps): a time
// limit already passed stops both ranks after the run's first step, exit 0, with a checkpoint
// of that step; the resumed run ends with the weights and validation rows of an uninterrupted
// one, bit for bit.
TEST(TrainMpi, ATimeLimitStopsEveryRankAtOneStepAndTheResumeIsExact) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), step_data());
  auto config = [&](const std::string& name) {
    nlohmann::json c = step_config(dir.file("lj.h5"), dir.file(name), 4);
    c["NeuralNetwork"]["Training"]["num_epoch"] = 2;
    c["NeuralNetwork"]["Training"]["eval_every_steps"] = 6;
    return testing::write_config(dir, name + ".json", c);
  };
  const Result whole = mpirun(2, "train -c " + config("whole"));
  ASSERT_EQ(whole.code, 0) << whole.out;
  const Result timed =
      mpirun(2, "train -c " + config("timed") + " --set Training.time_limit_s=1e-6");
  ASSERT_EQ(timed.code, 0) << timed.out;
  EXPECT_EQ(count(timed.out, "time limit reached"), 1) << timed.out;
  ASSERT_TRUE(
      std::filesystem::exists(dir.file("timed") + "/checkpoints/epoch_00001_step_0000001.pt"))
      << timed.out;
  const Result resumed = mpirun(2, "train -c " + config("timed") + " --set Training.continue=1");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  const auto a = testing::checkpoint_parameters(dir.file("whole") + "/checkpoints/epoch_00002.pt");
  const auto b = testing::checkpoint_parameters(dir.file("timed") + "/checkpoints/epoch_00002.pt");
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(at::equal(a[k], b[k])) << "parameter " << k;
  EXPECT_EQ(testing::metric_column(dir.file("whole") + "/metrics.csv", "validate_loss"),
            testing::metric_column(dir.file("timed") + "/metrics.csv", "validate_loss"));
  EXPECT_EQ(testing::metric_column(dir.file("timed") + "/metrics.csv", "step"),
            (std::vector<std::string>{"6", "12", "18", "24", "30", "36", "40"}));
}

TEST(TrainMpi, RemainderStepsAndWhatRankZeroWrites) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), step_data());
  // 160 graphs, 3 ranks of 7: 7 full steps (147) and a last step of 13, dealt 5/4/4.
  const std::string run_dir = dir.file("r");
  nlohmann::json c = step_config(dir.file("lj.h5"), run_dir, 7);
  c["Output"]["trace_steps"] = 3;
  const Result r = mpirun(3, std::string("train -c ") + testing::write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(trained(run_dir).steps, 8);
  // One log, from rank 0: the loader line and one epoch line.
  size_t n_epoch_lines = 0;
  for (const auto& l : testing::lines(r.out)) n_epoch_lines += l.find("epoch 1/1") != l.npos;
  EXPECT_EQ(n_epoch_lines, 1u) << r.out;
  EXPECT_NE(r.out.find("loader: backend auto (the tuner chooses among shm rma collective file), 3 "
                       "rank(s)"),
            std::string::npos)
      << r.out;
  const auto trace = nlohmann::json::parse(testing::read_text(run_dir + "/trace.json"));
  int fetches = 0, syncs = 0;
  for (const auto& e : trace["traceEvents"]) {
    fetches += e.value("name", "") == "fetch";
    syncs += e.value("name", "") == "grad_sync";
  }
  EXPECT_EQ(fetches, 3);
  EXPECT_EQ(syncs, 3);
}

// Output.log_all_ranks: every rank logs its lines, each prefixed with its rank.
TEST(TrainMpi, LogAllRanksPrefixesEveryRanksLines) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), step_data());
  nlohmann::json c = step_config(dir.file("lj.h5"), dir.file("r"), 8);
  c["Output"]["log_all_ranks"] = true;
  const Result r = mpirun(2, std::string("train -c ") + testing::write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* rank : {"[rank 0]", "[rank 1]"}) {
    size_t epoch_lines = 0;
    for (const auto& l : testing::lines(r.out))
      epoch_lines += l.find(rank) != l.npos && l.find("epoch 1/1") != l.npos;
    EXPECT_EQ(epoch_lines, 1u) << rank << "\n" << r.out;
  }
}

// Loader.backend auto: each exploration times every candidate on the same batches, rank 0
// decides, all ranks switch together; a backend that slows down while serving is noticed
// (drift) and replaced; a new epoch re-explores. Delays are injected per backend and step
// (DDGNN_DEBUG_SLOW_FETCH) so that the right decisions are known.
TEST(TrainMpi, AutoBackendExploresDecidesAndSwitchesOnDrift) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), step_data());
  const std::string run_dir = dir.file("auto");
  nlohmann::json c = step_config(dir.file("lj.h5"), run_dir, 2);  // 27 steps on 3 ranks
  c["NeuralNetwork"]["Training"]["num_epoch"] = 2;
  c["Output"]["trace_steps"] = 4;
  c["Tuner"] = {{"candidates", {"rma", "collective"}},
                {"explore_batches", 3},
                {"check_every_steps", 4},
                // 7x: above the noise of 3 ranks sharing 2 cores with another test (3.2x seen)
                {"drift_threshold", 6.0},
                {"recheck_every_epochs", 1}};
  // Steps 1-9: collective 100 ms slower (rma wins, and collective is pruned after two rounds
  // unless rma's median exceeds 25 ms: a margin for a loaded machine); from step 9 rma 100 ms
  // slower (drift: 20-50x its prediction).
  const Result r = mpirun(3, "train -c " + testing::write_config(dir, "c.json", c),
                          "DDGNN_DEBUG_SLOW_FETCH=collective:0.1:1:9,rma:0.1:9:1000000");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("loader: backend auto (the tuner chooses among rma collective)"),
            std::string::npos)
      << r.out;
  const auto rows = testing::lines(testing::read_text(run_dir + "/tuner.csv"));
  ASSERT_GT(rows.size(), 1u);
  EXPECT_EQ(rows[0],
            "time_s,epoch,step,event,backend,seconds,predicted_s,batch,bytes_mean,remote,ranks,"
            "chosen,reason,overhead_s");
  struct Row {
    std::string event, backend, chosen, reason;
    int64_t epoch, step;
    double seconds;
  };
  std::vector<Row> parsed;
  for (size_t i = 1; i < rows.size(); ++i) {
    std::vector<std::string> f;
    std::stringstream ss(rows[i]);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    ASSERT_GE(f.size(), 13u) << rows[i];
    parsed.push_back(
        {f[3], f[4], f[11], f[12], std::stoll(f[1]), std::stoll(f[2]), std::stod(f[5])});
  }
  std::vector<const Row*> decides;
  for (const auto& row : parsed)
    if (row.event == "decide") decides.push_back(&row);
  ASSERT_GE(decides.size(), 3u) << testing::read_text(run_dir + "/tuner.csv");
  // 1. The start: both candidates explored in steps 1-3, rma chosen.
  EXPECT_EQ(parsed[0].event, "explore");
  EXPECT_EQ(parsed[1].event, "explore");
  EXPECT_EQ(decides[0]->reason, "start");
  EXPECT_EQ(decides[0]->step, 3);
  EXPECT_EQ(decides[0]->backend, "rma");
  for (const auto& row : parsed) {
    if (row.event == "explore" && row.reason == "start" && row.backend == "collective") {
      EXPECT_GT(row.seconds, 0.1);
    }
  }
  // 2. rma slows from step 9: a check says drift, the exploration that follows picks collective.
  auto drift = std::find_if(parsed.begin(), parsed.end(),
                            [](const Row& x) { return x.event == "check" && x.reason == "drift"; });
  ASSERT_NE(drift, parsed.end()) << testing::read_text(run_dir + "/tuner.csv");
  EXPECT_GE(drift->step, 9);
  EXPECT_EQ(decides[1]->reason, "drift");
  EXPECT_EQ(decides[1]->backend, "collective");
  EXPECT_EQ(decides[1]->step, drift->step + 3);
  // 3. Epoch 2 starts with an exploration, which keeps collective (rma is still slow).
  auto epoch2 = std::find_if(decides.begin(), decides.end(),
                             [](const Row* x) { return x->reason == "epoch 2"; });
  ASSERT_NE(epoch2, decides.end()) << testing::read_text(run_dir + "/tuner.csv");
  EXPECT_EQ((*epoch2)->epoch, 2);
  EXPECT_EQ((*epoch2)->backend, "collective");
  // The decisions are in the log (rank 0 only) and in events.jsonl; explorations in the trace.
  EXPECT_NE(r.out.find("tuner (drift): chooses collective"), std::string::npos) << r.out;
  int tuner_events = 0;
  for (const auto& l : testing::lines(testing::read_text(run_dir + "/events.jsonl")))
    tuner_events += nlohmann::json::parse(l).at("event") == "tuner";
  EXPECT_GE(tuner_events, 4);  // three decisions and the drift
  const auto trace = nlohmann::json::parse(testing::read_text(run_dir + "/trace.json"));
  int explore_spans = 0;
  for (const auto& e : trace["traceEvents"])
    explore_spans += e.value("name", "").rfind("tuner.explore:", 0) == 0;
  // Steps 1-3: both candidates in steps 1 and 2; collective, 100 ms against rma's ~1 ms, is
  // dropped for step 3.
  EXPECT_EQ(explore_spans, 5);
  EXPECT_NE(r.out.find("(dropped after 2)"), std::string::npos) << r.out;
}

TEST(TrainMpi, ARankThatThrowsStopsEveryRankWithItsMessage) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), step_data());
  const std::string cfg =
      testing::write_config(dir, "c.json", step_config(dir.file("lj.h5"), dir.file("r"), 2));
  const Result r = failing_mpirun(4, "train -c " + cfg, "DDGNN_DEBUG_FAIL_AT_STEP=2:3");
  EXPECT_NE(r.out.find("[rank 2]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 2 fails at step 3"), std::string::npos) << r.out;
  // Once, by the rank that failed: the others leave the report to it.
  EXPECT_EQ(count(r.out, "fails at step 3"), 1) << r.out;
}

// A model that diverges (resumed with a learning rate far too high: the schedule sets it after
// the first epoch of the resumed run) stops every rank after the epoch in which the median of its
// batch losses passes divergence_factor times the lowest of the run, resumed from the checkpoint,
// with that epoch's row written and no checkpoint of it; the message names what the run has set.
TEST(TrainMpi, ADivergedModelStopsEveryRankWithoutCheckpointingIt) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), step_data());
  const std::string run_dir = dir.file("run");
  nlohmann::json c = step_config(dir.file("lj.h5"), run_dir, 4);
  auto& t = c["NeuralNetwork"]["Training"];
  t["num_epoch"] = 2;
  t["Scheduler"] = {{"type", "TimeExponential"}, {"min_lr", 1e-4}};
  t["time_limit_s"] = 1e6;
  t["divergence_factor"] = 100.0;
  const std::string cfg = testing::write_config(dir, "c.json", c);
  const Result first = mpirun(2, "train -c " + cfg);
  ASSERT_EQ(first.code, 0) << first.out;
  const Result r = failing_mpirun(2, "train -c " + cfg +
                                         " --set Training.continue=1 --set Training.num_epoch=30"
                                         " --set Training.Optimizer.learning_rate=5");
  EXPECT_EQ(r.code, 1) << r.out;
  // One line for the job, by rank 0, without a rank: every rank stopped with it.
  EXPECT_NE(r.out.find("ddgnn: training error: the model diverged in epoch"), std::string::npos)
      << r.out;
  EXPECT_EQ(count(r.out, "the model diverged"), 1) << r.out;
  EXPECT_NE(r.out.find("hint: train again with a lower Optimizer.learning_rate"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Training.Optimizer.learning_rate is 5, no warm-up"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Training.spike_factor 20"), std::string::npos) << r.out;
  const nlohmann::json event = testing::last_event(run_dir, "diverged");
  ASSERT_FALSE(event.is_null()) << r.out;
  const int64_t epoch = event.at("epoch");
  const double loss = event.at("train_loss_median"), lowest = event.at("lowest_train_loss_median");
  EXPECT_GT(epoch, 3);
  EXPECT_LT(epoch, 30);
  EXPECT_LE(event.at("lowest_epoch").get<int64_t>(), 3);
  EXPECT_TRUE(std::isfinite(loss));
  // Judged on the median of the batch losses, or on the validation loss against its best.
  if (event.at("by_validation").get<bool>()) {
    EXPECT_LE(event.at("best_epoch").get<int64_t>(), 3);
    const nlohmann::json& v = event.at("validate_loss");
    if (!v.is_null()) {
      EXPECT_GT(v.get<double>(), 100.0 * event.at("best_validate_loss").get<double>());
    }
  } else {
    EXPECT_GT(loss, 100.0 * lowest);
  }
  // Every epoch's row up to the diverged one; each earlier epoch checkpointed, that one not.
  const auto rows = testing::lines(testing::read_text(run_dir + "/metrics.csv"));
  EXPECT_EQ(int64_t(rows.size()), epoch + 1);
  int64_t latest = 0;
  for (const auto& f : std::filesystem::directory_iterator(run_dir + "/checkpoints")) {
    const std::string name = f.path().filename().string();
    if (name.rfind("epoch_", 0) == 0)
      latest = std::max(latest, int64_t(std::stoll(name.substr(6))));
  }
  EXPECT_EQ(latest, epoch - 1);
  EXPECT_NE(r.out.find("the last checkpoint: " + run_dir + "/checkpoints/epoch_"),
            std::string::npos)
      << r.out;
}

// A rank that stops answering (SIGSTOP at its step 2) while the others wait in the gradient
// all-reduce: the watchdog of a waiting rank names the operation and the silent rank, and the
// whole job ends in seconds with no process left behind.
TEST(TrainMpi, ARankThatStopsIsNamedByTheWatchdogAndTheJobEnds) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), step_data());
  const std::string cfg =
      testing::write_config(dir, "c.json", step_config(dir.file("lj.h5"), dir.file("r"), 2));
  const Result r = failing_mpirun(3, "train -c " + cfg + " --set Comm.timeout_s=3",
                                  "DDGNN_DEBUG_STOP_AT_STEP=1:2");
  // The report names what the reporting rank waits in (its prefetch thread may be in a fetch
  // of the next batch when its main thread is in the all-reduce), and the silent rank.
  EXPECT_NE(r.out.find("comm error [rank "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("waiting in gradient all-reduce"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("did not answer: rank 1 (stopped, hung or dead)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("at epoch 1, step 2"), std::string::npos) << r.out;
  // No rank of the job is left, the stopped one included ("[t]rain": the pattern must not match
  // the shell that runs pgrep).
  EXPECT_NE(std::system(("pgrep -f '[t]rain -c " + cfg + "' > /dev/null").c_str()), 0)
      << "a rank is left";
}

// Ranks started with different configs (here a batch size; the same for a dataset or a seed)
// would wait for each other forever or train on mixed data: the start refuses, naming the rank
// and the key, on every rank, before any data moves.
TEST(TrainMpi, ARankWithAnotherConfigIsRefusedAtStart) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), step_data());
  const std::string cfg =
      testing::write_config(dir, "c.json", step_config(dir.file("lj.h5"), dir.file("r"), 2));
  // MPMD: rank 0 and rank 1 from one command line, rank 1 with another batch size.
  const Result r = failing_mpirun(1, "train -c " + cfg + " : -n 1 " + DDGNN_BINARY + " train -c " +
                                         cfg + " --set Training.batch_size=3");
  EXPECT_NE(r.out.find("rank(s) 1 run another config than rank 0; rank 1: "
                       "NeuralNetwork.Training.batch_size = 3 there, 2 on rank 0"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("same config file"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("r") + "/checkpoints")) << "the run started";
}

// Ranks started in different working directories, one relative Dataset.path naming a different
// file in each: refused at start on every rank, naming the ranks and the files' sizes, instead of
// training on a mixture of the two.
TEST(TrainMpi, RanksThatReadAnotherFileUnderOnePathAreRefused) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("a"));
  std::filesystem::create_directories(dir.file("b"));
  write_lj_dataset(dir.file("a/lj.h5"), step_data());
  testing::LjOptions other = step_data();
  other.n_frames += 20;
  write_lj_dataset(dir.file("b/lj.h5"), other);
  const std::string cfg =
      testing::write_config(dir, "c.json", step_config("lj.h5", dir.file("r"), 2));
  const auto t0 = std::chrono::steady_clock::now();
  const Result r = testing::run(
      "train -c " + cfg, std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                                     "timeout 120 ") +
                             DDGNN_MPIEXEC + " --oversubscribe -n 1 -wdir " + dir.file("a") + " " +
                             DDGNN_BINARY + " train -c " + cfg + " : -n 1 -wdir " + dir.file("b"));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "a rank hung\n" << r.out;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
  EXPECT_NE(r.out.find("Dataset.path lj.h5 is another file on rank(s) 1 ("), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("start every rank in the same working directory"), std::string::npos)
      << r.out;
}

// A stop request once the first epoch is checkpointed, delivered as the job gets it: SIGTERM to
// every rank (a batch system at its time limit signals each task), or SIGUSR1 to a bare mpiexec
// (Open MPI passes it on; SIGTERM to mpiexec makes it SIGKILL the ranks one second later). Every
// rank stops at the same step, rank 0 writes interrupted.pt (it loads), the job exits non-zero
// saying how to resume, and no rank is left.
TEST(TrainMpi, AStopSignalStopsEveryRankWithACheckpoint) {
  for (const auto& [name, send] : std::vector<std::pair<std::string, std::string>>{
           {"SIGTERM", "pkill -TERM -P $pid"}, {"SIGUSR1", "kill -USR1 $pid"}}) {
    SCOPED_TRACE(name);
    TempDir dir;
    write_lj_dataset(dir.file("lj.h5"), step_data());
    nlohmann::json c = step_config(dir.file("lj.h5"), dir.file("r"), 2);
    c["NeuralNetwork"]["Training"]["num_epoch"] = 1000;
    const std::string cfg = testing::write_config(dir, "c.json", c);
    // jobs/train.sh exec's mpiexec: $pid is mpiexec's, its children are the ranks.
    const std::string script =
        "DDGNN=" + std::string(DDGNN_BINARY) + " bash " + std::string(DDGNN_SOURCE_DIR) +
        "/jobs/train.sh -n 2 -c " + cfg + " > " + dir.file("out") +
        " 2>&1 & pid=$!; for i in $(seq 600); do [ -f " + dir.file("r") +
        "/checkpoints/epoch_00001.pt ] && break; sleep 0.1; done; " + send + "; wait $pid";
    const auto t0 = std::chrono::steady_clock::now();
    const int status = std::system(("timeout 120 sh -c '" + script + "'").c_str());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string out = testing::read_text(dir.file("out"));
    EXPECT_NE(status, 0) << out;
    EXPECT_NE(WEXITSTATUS(status), 124) << "timed out\n" << out;
    EXPECT_LT(s, 100.0) << out;
    EXPECT_NE(out.find("stopped by " + name + " in epoch"), std::string::npos) << out;
    EXPECT_NE(out.find("Training.continue=1"), std::string::npos) << out;
    EXPECT_EQ(count(out, "stopped by"), 1) << "once for the job, not once a rank\n" << out;
    const std::string ck = dir.file("r") + "/checkpoints/interrupted.pt";
    ASSERT_TRUE(std::filesystem::exists(ck)) << out;
    EXPECT_FALSE(testing::checkpoint_parameters(ck).empty());
    EXPECT_NE(std::system(("pgrep -f '[t]rain -c " + cfg + "' > /dev/null").c_str()), 0)
        << "a rank is left";
  }
}

TEST(TrainMpi, CorruptedPartitionIsReportedByItsOwner) {
  TempDir dir;
  LjOptions o;
  o.n_frames = 1400;
  o.n_atoms = 100;  // about 6.7 MB of records: rank 1 alone reads their last block
  write_lj_dataset(dir.file("d.h5"), o);
  const int64_t bytes = Dataset(dir.file("d.h5")).record_bytes();  // closed before the edit
  testing::flip_record_byte(dir.file("d.h5"), hsize_t(bytes - 1));
  nlohmann::json c = step_config(dir.file("d.h5"), dir.file("r"), 2);
  const Result r = failing_mpirun(2, "train -c " + testing::write_config(dir, "c.json", c));
  EXPECT_NE(r.out.find("data error [rank 1]: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checksum mismatch in array 'records'"), std::string::npos) << r.out;
  // Once, by rank 1: rank 0, which stopped with it, leaves the report to it.
  EXPECT_EQ(count(r.out, "checksum mismatch"), 1) << r.out;
}

// A config error that every rank meets (here a misspelt key) reads once for the job, from rank 0
// and without a rank, not once a rank.
TEST(TrainMpiBadInput, AConfigErrorOfEveryRankIsReportedOnce) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), step_data());
  const std::string cfg =
      testing::write_config(dir, "c.json", step_config(dir.file("lj.h5"), dir.file("r"), 2));
  const Result r = failing_mpirun(3, "train -c " + cfg + " --set Training.num_epochz=3");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("ddgnn: config error: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("num_epochz"), std::string::npos) << r.out;
  EXPECT_EQ(count(r.out, "ddgnn: config error"), 1) << r.out;
  EXPECT_EQ(r.out.find("[rank "), std::string::npos) << r.out;
}

TEST(TrainMpiBadInput, LoaderSettingsAreRefusedClearly) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), step_data());
  const std::string cfg =
      testing::write_config(dir, "c.json", step_config(dir.file("lj.h5"), dir.file("r"), 2));
  const std::string train = "train -c " + cfg;
  auto expect_error = [](const Result& r, const std::string& needle) {
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_NE(r.code, 124) << "timed out\n" << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("hint:"), std::string::npos) << r.out;
  };
  expect_error(mpirun(2, train + " --set Loader.memory_budget_gb=0.00001"), "over the budget of");
  expect_error(mpirun(3, train + " --set Loader.width=2"), "does not divide the 3 ranks");
  expect_error(mpirun(2, train + " --set Loader.backend=nccl"), "Loader.backend: \"nccl\"");
}

}  // namespace
}  // namespace ddgnn
