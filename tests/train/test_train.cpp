// End to end through the `ddgnn` binary: train and evaluate on small Lennard-Jones datasets, the
// run directory's files, resume after SIGKILL ending with bit-identical weights, same seed ->
// identical metrics, and each kind of bad input (data, config, checkpoint) as one clear error line.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "../common/lj_dataset.h"
#include "../common/temp_dir.h"
#include "../common/train_run.h"
#include "core/error.h"
#include "train/checkpoint.h"
#include "train/model_setup.h"

namespace ddgnn {
namespace {

namespace fs = std::filesystem;
using testing::checkpoint_parameters;
using testing::expect_error;
using testing::last_event;
using testing::lines;
using testing::LjOptions;
using testing::metric_column;
using testing::metric_numbers;
using testing::metric_values;
using testing::read_text;
using testing::Result;
using testing::run;
using testing::small_config;
using testing::TempDir;
using testing::write_config;
using testing::write_lj_dataset;

TEST(Train, RunDirectoryThenEvaluate) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  const std::string run_dir = dir.file("run");
  const std::string cfg = write_config(dir, "c.json", small_config(dir.file("lj.h5"), run_dir));
  const Result r = run("train -c " + cfg);
  ASSERT_EQ(r.code, 0) << r.out;
  // The plain log: baseline once, one line per epoch with train/validate/test errors.
  EXPECT_NE(r.out.find("baseline (per-element reference energies fitted on the train split, zero "
                       "forces)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("epoch 4/4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("meV/Å"), std::string::npos);

  const auto csv = lines(read_text(run_dir + "/metrics.csv"));
  ASSERT_EQ(csv.size(), 5u);  // header + 4 epochs
  for (const char* col : {"epoch,lr,train_loss,validate_loss,test_loss", "test_force_mae_mev_a",
                          "load_s", "graph_s", "forward_s", "backward_s", "optimizer_s"})
    EXPECT_NE(csv[0].find(col), std::string::npos) << col;
  EXPECT_EQ(csv[4].rfind("4,", 0), 0u);

  // The loss went down: last train loss below the first.
  auto loss_at = [&](size_t row) { return std::stod(csv[row].substr(csv[row].find(',', 2) + 1)); };
  EXPECT_LT(loss_at(4), loss_at(1));

  // events.jsonl: every line parses; the run's story is there.
  std::vector<std::string> events;
  for (const auto& l : lines(read_text(run_dir + "/events.jsonl")))
    events.push_back(nlohmann::json::parse(l).at("event"));
  EXPECT_EQ(events.front(), "run_start");
  EXPECT_EQ(events.back(), "run_end");
  EXPECT_NE(std::find(events.begin(), events.end(), "baseline"), events.end());
  EXPECT_EQ(std::count(events.begin(), events.end(), "epoch"), 4);

  // trace.json: Chrome trace events of 5 steps with the phases.
  const auto trace = nlohmann::json::parse(read_text(run_dir + "/trace.json"));
  int forward = 0;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") {
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
      forward += e.at("name") == "forward";
    }
  EXPECT_EQ(forward, 5);
  // Resolved config and checkpoints.
  EXPECT_EQ(nlohmann::json::parse(read_text(run_dir + "/config.resolved.json"))
                .at("NeuralNetwork")
                .at("Training")
                .at("batch_size"),
            4);
  EXPECT_TRUE(fs::exists(run_dir + "/checkpoints/best.pt"));
  EXPECT_TRUE(fs::exists(run_dir + "/checkpoints/epoch_00004.pt"));
  for (const auto& e : fs::directory_iterator(run_dir + "/checkpoints"))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();

  // evaluate: the test split (20% of 40 = 8 graphs), files and the error table.
  const Result ev = run("evaluate --run " + run_dir);
  ASSERT_EQ(ev.code, 0) << ev.out;
  EXPECT_NE(ev.out.find("energy"), std::string::npos);
  const std::string out = run_dir + "/eval_test";
  const auto errors = nlohmann::json::parse(read_text(out + "/errors.json"));
  EXPECT_EQ(errors.at("graphs"), 8);
  EXPECT_GT(errors.at("forces").at("mae_mev_a").get<double>(), 0.0);
  EXPECT_EQ(lines(read_text(out + "/energies.csv")).size(), 9u);
  EXPECT_EQ(lines(read_text(out + "/forces.csv")).size(), 1u + 8u * 6u);
  EXPECT_NE(ev.out.find("; 1 thread(s)"), std::string::npos) << ev.out;  // Runtime.intra_op_threads
  // Force errors per element (6 atoms a frame: 2 Ne, 4 Ar) and as vectors: |dF| >= each
  // component's |dF_c|, so the vector MAE is at least the component MAE.
  const auto& fe = errors.at("forces");
  EXPECT_GE(fe.at("vector_mae_mev_a").get<double>(), fe.at("mae_mev_a").get<double>());
  const auto& by_z = errors.at("forces_by_element");
  ASSERT_EQ(by_z.size(), 2u);
  EXPECT_EQ(by_z[0].at("element"), "Ne");
  EXPECT_EQ(by_z[0].at("atoms"), 16);
  EXPECT_EQ(by_z[1].at("element"), "Ar");
  EXPECT_EQ(by_z[1].at("atoms"), 32);
  const double weighted =
      (16 * by_z[0].at("mae_mev_a").get<double>() + 32 * by_z[1].at("mae_mev_a").get<double>()) /
      48;
  EXPECT_NEAR(weighted, fe.at("mae_mev_a").get<double>(), 1e-9 * weighted);
  // --split all keeps each graph's split: 24 train, 8 validate, 8 test rows; --threads wins.
  const Result all = run("evaluate --run " + run_dir + " --split all --threads 2");
  ASSERT_EQ(all.code, 0) << all.out;
  EXPECT_NE(all.out.find("; 2 thread(s)"), std::string::npos) << all.out;
  std::map<std::string, int> rows;
  for (const auto& l : lines(read_text(run_dir + "/eval_all/energies.csv")))
    ++rows[l.substr(l.find(',') + 1, l.find(',', l.find(',') + 1) - l.find(',') - 1)];
  EXPECT_EQ(rows["train"], 24);
  EXPECT_EQ(rows["validate"], 8);
  EXPECT_EQ(rows["test"], 8);
  const std::string xyz = read_text(run_dir + "/eval_all/predictions.extxyz");
  EXPECT_NE(xyz.find(" split=validate "), std::string::npos);
  // The predictions file is valid extxyz: ddgnn converts it, with pred_forces as a column.
  const Result conv = run("convert " + out + "/predictions.extxyz " + dir.file("pred.h5") +
                          " --extra-columns pred_forces");
  ASSERT_EQ(conv.code, 0) << conv.out;
  Dataset pred(dir.file("pred.h5"));
  EXPECT_EQ(pred.n_graphs(), 8);
  EXPECT_TRUE(pred.has_forces());
  // Re-evaluating gives the same figures.
  EXPECT_EQ(run("evaluate --run " + run_dir + " --out " + dir.file("again")).code, 0);
  EXPECT_EQ(nlohmann::json::parse(read_text(dir.file("again") + "/errors.json")).at("forces"),
            errors.at("forces"));
}

TEST(Train, ResumeAfterSigkillEndsWithTheSameWeights) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  const std::string a = dir.file("a"), b = dir.file("b");
  ASSERT_EQ(run("train -c " + write_config(dir, "a.json", small_config(dir.file("lj.h5"), a))).code,
            0);
  // 24 training graphs, batch 4: 6 steps per epoch. Killed in the middle of epoch 3.
  const std::string cb = write_config(dir, "b.json", small_config(dir.file("lj.h5"), b));
  const Result killed = run("train -c " + cb, "DDGNN_DEBUG_SIGKILL_AT_STEP=15");
  ASSERT_TRUE(killed.killed) << killed.code << killed.out;
  EXPECT_FALSE(fs::exists(b + "/checkpoints/epoch_00003.pt"));
  ASSERT_TRUE(fs::exists(b + "/checkpoints/epoch_00002.pt"));
  const Result resumed = run("train -c " + cb + " --set Training.continue=1");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("resuming"), std::string::npos);
  const auto pa = checkpoint_parameters(a + "/checkpoints/epoch_00004.pt");
  const auto pb = checkpoint_parameters(b + "/checkpoints/epoch_00004.pt");
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(at::equal(pa[i], pb[i])) << "parameter " << i;
  // metrics.csv reads as one continuous run, equal to the uninterrupted one.
  EXPECT_EQ(metric_values(a + "/metrics.csv"), metric_values(b + "/metrics.csv"));
}

// Training.eval_every_steps and Output.checkpoint_every_steps: 24 training graphs, batch 4, 6
// steps an epoch, 4 epochs; an evaluation (a metrics row) every 4 steps and at the run's end, a
// checkpoint every 4 steps inside epochs and at each epoch's end. A run killed inside an epoch
// resumes from its checkpoint there and ends as the uninterrupted one: the same weights and rows.
// A time limit stops at the next step with a checkpoint that resumes as exactly.
TEST(Train, StepsControlEvaluationCheckpointsAndAResumeInsideAnEpoch) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  auto config = [&](const std::string& run_dir) {
    nlohmann::json c = small_config(dir.file("lj.h5"), run_dir);
    c["NeuralNetwork"]["Training"]["eval_every_steps"] = 4;
    c["Output"]["checkpoint_every_steps"] = 4;
    return write_config(dir, fs::path(run_dir).filename().string() + ".json", c);
  };
  const std::string a = dir.file("a");
  const Result whole = run("train -c " + config(a));
  ASSERT_EQ(whole.code, 0) << whole.out;
  EXPECT_EQ(metric_column(a + "/metrics.csv", "step"),
            (std::vector<std::string>{"4", "8", "12", "16", "20", "24"}));
  EXPECT_EQ(metric_column(a + "/metrics.csv", "epoch"),
            (std::vector<std::string>{"1", "2", "2", "3", "4", "4"}));
  EXPECT_NE(whole.out.find("epoch 2/4 step 2 (run 8)"), std::string::npos) << whole.out;
  std::vector<std::string> kept;
  for (const auto& p : epoch_checkpoints(a + "/checkpoints"))
    kept.push_back(fs::path(p).filename().string());
  EXPECT_EQ(kept, (std::vector<std::string>{"epoch_00001_step_0000004.pt", "epoch_00001.pt",
                                            "epoch_00002_step_0000002.pt", "epoch_00002.pt",
                                            "epoch_00003_step_0000004.pt", "epoch_00003.pt",
                                            "epoch_00004_step_0000002.pt", "epoch_00004.pt"}));
  const auto final_a = checkpoint_parameters(a + "/checkpoints/epoch_00004.pt");
  auto same_weights = [&](const std::string& run_dir) {
    const auto p = checkpoint_parameters(run_dir + "/checkpoints/epoch_00004.pt");
    ASSERT_EQ(p.size(), final_a.size());
    for (size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(at::equal(p[i], final_a[i])) << i;
  };

  // Killed at step 11: the latest checkpoint is that of step 8, 2 steps into epoch 2.
  const std::string b = dir.file("b");
  const Result killed = run("train -c " + config(b), "DDGNN_DEBUG_SIGKILL_AT_STEP=11");
  ASSERT_TRUE(killed.killed) << killed.code << killed.out;
  const Result resumed = run("train -c " + config(b) + " --set Training.continue=1");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("epoch_00002_step_0000002.pt after epoch 1 and 2 steps of epoch 2"),
            std::string::npos)
      << resumed.out;
  same_weights(b);
  EXPECT_EQ(metric_values(a + "/metrics.csv"), metric_values(b + "/metrics.csv"));

  // A time limit already passed: step 1 runs, then the run stops with a checkpoint of it.
  const std::string t = dir.file("t");
  const Result timed = run("train -c " + config(t) + " --set Training.time_limit_s=1e-6");
  ASSERT_EQ(timed.code, 0) << timed.out;
  EXPECT_NE(timed.out.find("time limit reached (0 s) in epoch 1 after 1 of its steps"),
            std::string::npos)
      << timed.out;
  EXPECT_EQ(fs::path(resolve_startfrom(t, "existing_model")).filename(),
            "epoch_00001_step_0000001.pt");
  const Result goes_on = run("train -c " + config(t) + " --set Training.continue=1");
  ASSERT_EQ(goes_on.code, 0) << goes_on.out;
  same_weights(t);
  // The validation figures of every evaluation are the uninterrupted run's (the training
  // columns of the period cut by the stop cover its steps after the resume).
  EXPECT_EQ(metric_column(a + "/metrics.csv", "validate_loss"),
            metric_column(t + "/metrics.csv", "validate_loss"));
}

// Loader.compact_records false keeps float64 arrays in the store: the same run, bit for bit, on
// records about twice the bytes (what the encodings save, and what decoding them costs).
TEST(Train, CompactRecordsTrainAsFloat64RecordsDo) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  std::vector<at::Tensor> weights[2];
  int64_t bytes[2] = {0, 0};
  for (int compact = 0; compact < 2; ++compact) {
    const std::string run_dir = dir.file("r" + std::to_string(compact));
    nlohmann::json c = small_config(dir.file("lj.h5"), run_dir);
    c["NeuralNetwork"]["Training"]["num_epoch"] = 2;
    c["Loader"]["compact_records"] = compact == 1;
    const Result r = run("train -c " + write_config(dir, "c.json", c));
    ASSERT_EQ(r.code, 0) << r.out;
    weights[compact] = checkpoint_parameters(run_dir + "/checkpoints/epoch_00002.pt");
    bytes[compact] = last_event(run_dir, "run_start").at("loader").at("bytes_total");
  }
  ASSERT_EQ(weights[0].size(), weights[1].size());
  for (size_t i = 0; i < weights[0].size(); ++i)
    EXPECT_TRUE(at::equal(weights[0][i], weights[1][i])) << i;
  EXPECT_GT(double(bytes[0]) / double(bytes[1]), 1.3) << bytes[0] << " " << bytes[1];
}

// The trained weights a checkpoint with a weight average holds beside the average.
std::vector<at::Tensor> checkpoint_train_weights(const std::string& path) {
  const ModelSetup setup = model_setup_from_json(read_checkpoint_record(path).at("model"));
  Gnn gnn(setup.spec);
  gnn.to(to_dtype(setup.precision));
  std::vector<at::Tensor> params = gnn.parameters();
  if (!load_checkpoint_train_weights(path, params)) return {};
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone());
  return out;
}

TEST(Train, WeightAverageIsEvaluatedAndSavedAndResumesExactly) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  auto config = [&](const std::string& run_dir, double ema) {
    nlohmann::json c = small_config(dir.file("lj.h5"), run_dir);
    c["NeuralNetwork"]["Training"]["Scheduler"] = {{"type", "ExponentialLR"}, {"gamma", 0.9}};
    c["NeuralNetwork"]["Training"]["ema_decay"] = ema;
    return c;
  };
  const std::string plain = dir.file("plain"), avg = dir.file("avg"), killed = dir.file("killed");
  ASSERT_EQ(run("train -c " + write_config(dir, "plain.json", config(plain, 0.0))).code, 0);
  const Result a = run("train -c " + write_config(dir, "avg.json", config(avg, 0.9)));
  ASSERT_EQ(a.code, 0) << a.out;
  const std::string last = "/checkpoints/epoch_00004.pt";
  // The average does not change what is trained: the trained weights equal the plain run's...
  const auto trained = checkpoint_train_weights(avg + last);
  const auto plain_w = checkpoint_parameters(plain + last);
  ASSERT_EQ(trained.size(), plain_w.size());
  for (size_t i = 0; i < trained.size(); ++i) EXPECT_TRUE(at::equal(trained[i], plain_w[i])) << i;
  EXPECT_TRUE(checkpoint_train_weights(plain + last).empty());
  // ...while the saved model, and so validation and test, is the average: other weights, other
  // validation loss, the same training loss (measured on the trained weights during the epoch).
  const auto model = checkpoint_parameters(avg + last);
  double moved = 0;
  for (size_t i = 0; i < model.size(); ++i)
    moved = std::max(moved, (model[i] - trained[i]).abs().max().item<double>());
  EXPECT_GT(moved, 1e-4);
  EXPECT_EQ(metric_column(avg + "/metrics.csv", "train_loss"),
            metric_column(plain + "/metrics.csv", "train_loss"));
  EXPECT_NE(metric_column(avg + "/metrics.csv", "validate_loss"),
            metric_column(plain + "/metrics.csv", "validate_loss"));
  // Killed in epoch 3 and resumed: the average and the trained weights both continue exactly.
  const std::string ck = write_config(dir, "killed.json", config(killed, 0.9));
  ASSERT_TRUE(run("train -c " + ck, "DDGNN_DEBUG_SIGKILL_AT_STEP=15").killed);
  ASSERT_EQ(run("train -c " + ck + " --set Training.continue=1").code, 0);
  const auto model_k = checkpoint_parameters(killed + last);
  const auto trained_k = checkpoint_train_weights(killed + last);
  ASSERT_EQ(model_k.size(), model.size());
  ASSERT_EQ(trained_k.size(), trained.size());
  for (size_t i = 0; i < model.size(); ++i) {
    EXPECT_TRUE(at::equal(model_k[i], model[i])) << "average " << i;
    EXPECT_TRUE(at::equal(trained_k[i], trained[i])) << "trained " << i;
  }
  EXPECT_EQ(metric_values(killed + "/metrics.csv"), metric_values(avg + "/metrics.csv"));
  // A decay outside (0, 1) is a clear error.
  const Result bad = run("train -c " + ck +
                         " --set Training.ema_decay=1.5 --set Output.run_dir=" + dir.file("bad"));
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("ema_decay"), std::string::npos) << bad.out;
}

// Frames of 6 to 8 atoms, a third of them Ne and the rest Ar: the energy is mostly the species'
// offsets, so the per-element baseline is far below (here ~8x) the mean energy per atom, which
// does not know the composition. metrics.csv carries the baseline reported at the start; the epoch
// line shows train/validate only unless asked for the test split.
TEST(Train, BaselineKnowsTheCompositionAndTheEpochLineKeepsTheTestSplitForTheEnd) {
  TempDir dir;
  LjOptions o;
  o.vary_atoms = 2;
  write_lj_dataset(dir.file("lj.h5"), o);
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("r"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 1;
  const std::string cfg = write_config(dir, "c.json", c);
  const Result r = run("train -c " + cfg);
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json baseline = testing::last_event(dir.file("r"), "baseline");
  ASSERT_FALSE(baseline.is_null());
  for (const char* split : {"train", "validate", "test"}) {
    const auto& b = baseline.at(split);
    EXPECT_LT(b.at("energy_mae_mev_atom").get<double>(),
              0.25 * b.at("mean_energy_per_atom_mae_mev_atom").get<double>())
        << split;
    EXPECT_GT(b.at("force_mae_mev_a").get<double>(), 0.0) << split;
  }
  const auto csv = lines(read_text(dir.file("r") + "/metrics.csv"));
  ASSERT_EQ(csv.size(), 2u);
  const std::vector<std::string> head = split_csv_line(csv[0]), row = split_csv_line(csv[1]);
  ASSERT_EQ(head.size(), row.size());
  const auto column = [&](const std::string& name) {
    const auto it = std::find(head.begin(), head.end(), name);
    EXPECT_NE(it, head.end()) << name;
    return it == head.end() ? NAN : std::stod(row[size_t(it - head.begin())]);
  };
  EXPECT_NEAR(column("baseline_validate_energy_mae_mev_atom"),
              baseline["validate"]["energy_mae_mev_atom"].get<double>(), 1e-6);
  EXPECT_NEAR(column("baseline_test_force_mae_mev_a"),
              baseline["test"]["force_mae_mev_a"].get<double>(), 1e-6);
  EXPECT_GT(column("test_energy_mae_mev_atom"), 0.0);  // measured every epoch, printed at the end
  // "E a/b meV/atom": two figures, then three with Output.print_test_every_epoch.
  const auto energy_field = [](const std::string& out) {
    const size_t at = out.find("epoch 1/1");
    const size_t e = out.find("  E ", at), end = out.find(" meV/atom", e);
    return out.substr(e + 4, end - e - 4);
  };
  const std::string two = energy_field(r.out);
  EXPECT_EQ(std::count(two.begin(), two.end(), '/'), 1) << r.out;
  EXPECT_NE(r.out.find("MAE of train/validate (the test split at the end)"), std::string::npos);
  EXPECT_NE(r.out.find("best epoch 1 (step 6): test energy MAE"), std::string::npos) << r.out;
  // The closing line has the test split's force MAE per element, as the epoch event has them.
  EXPECT_NE(r.out.find(" meV/Å (per element: Ar "), std::string::npos) << r.out;
  const nlohmann::json epoch = testing::last_event(dir.file("r"), "epoch");
  ASSERT_TRUE(epoch.contains("test_force_by_element")) << epoch.dump();
  const auto& by_z = epoch["test_force_by_element"];
  const double ar = by_z.at("Ar").at("mae_mev_a"), ne = by_z.at("Ne").at("mae_mev_a");
  const double n_ar = by_z.at("Ar").at("atoms"), n_ne = by_z.at("Ne").at("atoms");
  EXPECT_NEAR((n_ar * ar + n_ne * ne) / (n_ar + n_ne),
              epoch.at("test_force_mae_mev_a").get<double>(), 1e-9 * ar);
  const Result all =
      run("train -c " + cfg + " --overwrite --set Output.print_test_every_epoch=true");
  ASSERT_EQ(all.code, 0) << all.out;
  const std::string three = energy_field(all.out);
  EXPECT_EQ(std::count(three.begin(), three.end(), '/'), 2) << all.out;
}

// max_neighbours below the neighbours within the radius: one warning with the counts (every atom
// of the 40 frames of 6 seen once in the first epoch), and an event; none when nothing is cut.
TEST(Train, MaxNeighboursThatCutsNeighbourListsIsReportedOnceWithCounts) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("r"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 2;
  c["NeuralNetwork"]["Architecture"]["max_neighbours"] = 2;
  const std::string cfg = write_config(dir, "c.json", c);
  const Result r = run("train -c " + cfg);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string warning = "max_neighbours = 2 cut the neighbour lists of ";
  const size_t at = r.out.find(warning);
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(warning, at + 1), std::string::npos) << "warned twice\n" << r.out;
  EXPECT_NE(r.out.find(" of 240 atoms in epoch 1"), std::string::npos) << r.out;
  const nlohmann::json cut = testing::last_event(dir.file("r"), "max_neighbours_cut");
  ASSERT_FALSE(cut.is_null());
  EXPECT_EQ(cut.at("atoms"), 240);
  EXPECT_GT(cut.at("atoms_cut").get<int>(), 0);
  EXPECT_LE(cut.at("atoms_cut").get<int>(), 240);
  EXPECT_GT(cut.at("most_neighbours").get<int>(), 2);
  EXPECT_LE(cut.at("most_neighbours").get<int>(), 5);  // 6 atoms a frame, no periodic images
  const Result none =
      run("train -c " + cfg + " --overwrite --set NeuralNetwork.Architecture.max_neighbours=5");
  ASSERT_EQ(none.code, 0) << none.out;
  EXPECT_EQ(none.out.find("cut the neighbour lists"), std::string::npos) << none.out;
}

// Dataset.split_by block: 40 frames in blocks of 5 (8 blocks: 5 train, 2 validate, 1 test), each
// block in one split, in the log and in evaluate's labels, which come from the checkpoint.
TEST(Train, SplitByBlockKeepsBlocksWholeInTrainingAndEvaluation) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("r"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 1;
  c["Dataset"]["split_by"] = "block";
  c["Dataset"]["split_block"] = 5;
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("25/10/5 graphs train/validate/test"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("split by blocks of 5 frames: 5/2/1 blocks"), std::string::npos) << r.out;
  const Result ev = run("evaluate --run " + dir.file("r") + " --split all");
  ASSERT_EQ(ev.code, 0) << ev.out;
  std::vector<std::string> label(40);
  for (const auto& l : lines(read_text(dir.file("r") + "/eval_all/energies.csv"))) {
    if (l.rfind("graph,", 0) == 0) continue;
    const size_t a = l.find(','), b = l.find(',', a + 1);
    label[size_t(std::stoi(l.substr(0, a)))] = l.substr(a + 1, b - a - 1);
  }
  std::map<std::string, int> count;
  for (size_t g = 0; g < label.size(); ++g) {
    EXPECT_EQ(label[g], label[g / 5 * 5]) << "graph " << g;
    ++count[label[g]];
  }
  EXPECT_EQ(count["train"], 25);
  EXPECT_EQ(count["validate"], 10);
  EXPECT_EQ(count["test"], 5);
}

TEST(Train, SameSeedGivesBitIdenticalMetricsAndProgressFollowsTheConfig) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("a"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 2;
  // Output.progress: the progress line always with "bar", on a terminal only with "auto" (the
  // default; here stderr is a pipe), never with "lines".
  c["Output"]["progress"] = "bar";
  const Result a = run("train -c " + write_config(dir, "a.json", c));
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find(" ETA "), std::string::npos) << a.out;
  c["Output"].erase("progress");
  c["Output"]["run_dir"] = dir.file("b");
  // The losses read by the host every third step instead of every step: the same numbers.
  c["Output"]["read_every_steps"] = 3;
  const Result b = run("train -c " + write_config(dir, "b.json", c));
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_EQ(b.out.find(" ETA "), std::string::npos) << b.out;
  const auto ma = metric_values(dir.file("a") + "/metrics.csv");
  EXPECT_EQ(ma.size(), 2u);
  EXPECT_EQ(ma, metric_values(dir.file("b") + "/metrics.csv"));
  // Another seed: other numbers.
  c["NeuralNetwork"]["Training"]["seed"] = 4;
  c["Output"]["run_dir"] = dir.file("c");
  c["Output"]["progress"] = "lines";
  const Result other = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(other.code, 0) << other.out;
  EXPECT_EQ(other.out.find(" ETA "), std::string::npos) << other.out;
  EXPECT_NE(ma, metric_values(dir.file("c") + "/metrics.csv"));
}

TEST(Train, Bf16TrainsNearFloat32WithFloat32Weights) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("fp32"));
  ASSERT_EQ(run("train -c " + write_config(dir, "a.json", c)).code, 0);
  c["NeuralNetwork"]["Training"]["precision"] = "bf16";
  c["Output"]["run_dir"] = dir.file("bf16");
  const Result r = run("train -c " + write_config(dir, "b.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("bf16"), std::string::npos) << r.out;  // the start line names it
  const nlohmann::json a = last_event(dir.file("fp32"), "run_end");
  const nlohmann::json b = last_event(dir.file("bf16"), "run_end");
  const double fp32_loss = a.at("last").at("validate_loss").get<double>();
  const double bf16_loss = b.at("last").at("validate_loss").get<double>();
  EXPECT_NE(bf16_loss, fp32_loss);  // other numbers: the products were in bfloat16
  EXPECT_LT(bf16_loss, 1.5 * fp32_loss);
  EXPECT_LT(b.at("last").at("validate_force_mae_mev_a").get<double>(),
            1.5 * a.at("last").at("validate_force_mae_mev_a").get<double>());
  // The master weights are float32 (a bfloat16 tensor would not load into the float32 model).
  for (const at::Tensor& p :
       checkpoint_parameters(dir.file("bf16") + "/checkpoints/epoch_00004.pt"))
    EXPECT_EQ(p.scalar_type(), at::kFloat);
  // evaluate predicts as the run trained, in bf16.
  const Result e = run("evaluate --run " + dir.file("bf16"));
  ASSERT_EQ(e.code, 0) << e.out;
}

TEST(Train, MultiHeadWithAnExtraColumnAndDirectForces) {
  TempDir dir;
  LjOptions o;
  o.charges = true;
  write_lj_dataset(dir.file("lj.h5"), o);
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("run"));
  auto& arch = c["NeuralNetwork"]["Architecture"];
  arch["enable_interatomic_potential"] = false;
  arch["task_weights"] = {1.0, 1.0, 0.5};
  c["NeuralNetwork"]["Variables_of_interest"] = {{"output_names", {"energy", "forces", "charges"}},
                                                 {"output_index", {0, 0, 1}},
                                                 {"type", {"graph", "node", "node"}},
                                                 {"output_dim", {1, 3, 1}}};
  c["NeuralNetwork"]["Training"]["num_epoch"] = 2;
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string header = lines(read_text(dir.file("run") + "/metrics.csv")).at(0);
  EXPECT_NE(header.find("test_charges_mae"), std::string::npos) << header;
  EXPECT_NE(header.find("test_force_mae_mev_a"), std::string::npos) << header;
}

TEST(Train, ExplicitSplitFilesKeepCheckpointsAndTimeLimit) {
  TempDir dir;
  LjOptions o;
  o.n_frames = 12;
  write_lj_dataset(dir.file("train.h5"), o);
  o.seed = 2;
  o.n_frames = 5;
  write_lj_dataset(dir.file("val.h5"), o);
  o.seed = 3;
  o.n_frames = 7;
  write_lj_dataset(dir.file("test.h5"), o);
  nlohmann::json c = small_config("", dir.file("run"));
  c["Dataset"]["path"] = {{"train", dir.file("train.h5")},
                          {"validate", dir.file("val.h5")},
                          {"test", dir.file("test.h5")}};
  c["Output"]["keep_checkpoints"] = 2;
  c["NeuralNetwork"]["Training"]["num_epoch"] = 5;
  c["Dataset"]["name"] = "lj-three-files";
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("12/5/7 graphs train/validate/test of lj-three-files ("), std::string::npos)
      << r.out;
  EXPECT_NE(
      read_text(dir.file("run") + "/events.jsonl").find("\"dataset_name\":\"lj-three-files\""),
      std::string::npos);
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(dir.file("run") + "/checkpoints"))
    kept.push_back(e.path().filename().string());
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<std::string>{"best.pt", "epoch_00004.pt", "epoch_00005.pt"}));
  // evaluate --split test reads the run's test file.
  const Result ev = run("evaluate --run " + dir.file("run"));
  ASSERT_EQ(ev.code, 0) << ev.out;
  EXPECT_EQ(
      nlohmann::json::parse(read_text(dir.file("run") + "/eval_test/errors.json")).at("graphs"), 7);
  // A time limit stops at the step after it passed (the run's first step always runs), with a
  // checkpoint of that step and an event; nothing after the last evaluation is evaluated.
  c["Output"]["run_dir"] = dir.file("timed");
  c["NeuralNetwork"]["Training"]["time_limit_s"] = 1e-6;
  const Result timed = run("train -c " + write_config(dir, "t.json", c));
  ASSERT_EQ(timed.code, 0) << timed.out;
  EXPECT_NE(timed.out.find("time limit reached"), std::string::npos) << timed.out;
  EXPECT_EQ(lines(read_text(dir.file("timed") + "/metrics.csv")).size(), 1u);
  EXPECT_TRUE(fs::exists(dir.file("timed") + "/checkpoints/epoch_00001_step_0000001.pt"));
  const nlohmann::json limit = testing::last_event(dir.file("timed"), "time_limit");
  ASSERT_FALSE(limit.is_null());
  EXPECT_EQ(limit.at("step"), 1);
  EXPECT_EQ(limit.at("epoch_steps"), 1);
  // Early stopping: a learning rate far too large stops improving the validation loss (its
  // losses soon a thousand times the first epoch's: the divergence check is off here).
  c["Output"]["run_dir"] = dir.file("early");
  c["NeuralNetwork"]["Training"]["divergence_factor"] = 0;
  c["NeuralNetwork"]["Training"]["time_limit_s"] = 0;
  c["NeuralNetwork"]["Training"]["num_epoch"] = 50;
  c["NeuralNetwork"]["Training"]["EarlyStopping"] = true;
  c["NeuralNetwork"]["Training"]["patience"] = 2;
  c["NeuralNetwork"]["Training"]["Optimizer"] = {{"type", "Adam"}, {"learning_rate", 0.5}};
  const Result early = run("train -c " + write_config(dir, "e.json", c));
  ASSERT_EQ(early.code, 0) << early.out;
  EXPECT_NE(early.out.find("early stopping"), std::string::npos) << early.out;
  EXPECT_LT(lines(read_text(dir.file("early") + "/metrics.csv")).size(), 10u);
}

// TimeExponential sets the lr after every epoch from the elapsed share of time_limit_s: a long
// budget and three short epochs give three learning rates just below the start, decreasing.
// Without a time limit it is a configuration error.
TEST(Train, TimeExponentialScheduleFollowsTheClock) {
  TempDir dir;
  LjOptions o;
  o.n_frames = 10;
  write_lj_dataset(dir.file("d.h5"), o);
  nlohmann::json c = small_config(dir.file("d.h5"), dir.file("run"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 3;
  c["NeuralNetwork"]["Training"]["time_limit_s"] = 3600;
  c["NeuralNetwork"]["Training"]["Scheduler"] = {{"type", "TimeExponential"}, {"min_lr", 1e-5}};
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<double> lr = metric_numbers(dir.file("run") + "/metrics.csv", "lr");
  ASSERT_EQ(lr.size(), 3u);
  EXPECT_DOUBLE_EQ(lr[0], 0.003);
  EXPECT_LT(lr[1], lr[0]);
  EXPECT_LT(lr[2], lr[1]);
  EXPECT_GT(lr[2], 0.0029);  // a few seconds of an hour
  c["NeuralNetwork"]["Training"]["time_limit_s"] = 0;
  c["Output"]["run_dir"] = dir.file("no_limit");
  const Result bad = run("train -c " + write_config(dir, "bad.json", c));
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("TimeExponential anneals over time_limit_s"), std::string::npos)
      << bad.out;
  EXPECT_FALSE(fs::exists(dir.file("no_limit")));
}

// Training.warmup_steps: step k of the run takes k/N of the scheduled rate. 24 training graphs,
// batch 4: 6 steps an epoch, so with N = 15 and no schedule the epochs start at 1/15, 7/15 and
// 13/15 of the rate, then the full rate (metrics.csv's lr is the rate of an epoch's first step).
// A run killed in its second epoch and resumed counts on from its checkpoint: the same rows and
// weights. With N far beyond the run the model barely moves, so two epochs over the same graphs
// read the same training loss (without the warm-up they differ).
TEST(Train, WarmupRaisesTheRateStepByStepAndResumesWhereItWas) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("a"));
  c["NeuralNetwork"]["Training"]["Scheduler"] = {{"type", "none"}};
  c["NeuralNetwork"]["Training"]["warmup_steps"] = 15;
  const std::string ca = write_config(dir, "a.json", c);
  ASSERT_EQ(run("train -c " + ca).code, 0);
  const std::vector<double> lr = metric_numbers(dir.file("a") + "/metrics.csv", "lr");
  ASSERT_EQ(lr.size(), 4u);
  const double want[4] = {0.003 / 15, 0.003 * 7 / 15, 0.003 * 13 / 15, 0.003};
  for (size_t e = 0; e < 4; ++e) EXPECT_NEAR(lr[e], want[e], 1e-12) << "epoch " << e + 1;

  c["Output"]["run_dir"] = dir.file("b");
  const std::string cb = write_config(dir, "b.json", c);
  const Result killed = run("train -c " + cb, "DDGNN_DEBUG_SIGKILL_AT_STEP=9");
  ASSERT_TRUE(killed.killed) << killed.code << killed.out;
  ASSERT_EQ(run("train -c " + cb + " --set Training.continue=1").code, 0);
  EXPECT_EQ(metric_values(dir.file("a") + "/metrics.csv"),
            metric_values(dir.file("b") + "/metrics.csv"));
  const auto pa = checkpoint_parameters(dir.file("a") + "/checkpoints/epoch_00004.pt");
  const auto pb = checkpoint_parameters(dir.file("b") + "/checkpoints/epoch_00004.pt");
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(at::equal(pa[i], pb[i])) << "parameter " << i;

  const auto train_losses = [&](const std::string& name, int64_t warmup) {
    nlohmann::json w = c;
    w["Output"]["run_dir"] = dir.file(name);
    w["NeuralNetwork"]["Training"]["num_epoch"] = 2;
    w["NeuralNetwork"]["Training"]["warmup_steps"] = warmup;
    EXPECT_EQ(run("train -c " + write_config(dir, name + ".json", w)).code, 0);
    const std::vector<double> loss = metric_numbers(dir.file(name) + "/metrics.csv", "train_loss");
    return std::make_pair(loss.at(0), loss.at(1));
  };
  const auto frozen = train_losses("frozen", 1000000000);
  EXPECT_NEAR(frozen.second, frozen.first, 1e-6 * frozen.first);
  const auto moving = train_losses("moving", 0);
  EXPECT_GT(std::abs(moving.second - moving.first), 1e-3 * moving.first);
}

// Loader.atom_budget caps atoms per batch; drop_remainder drops the last short batch: the
// "steps" column of metrics.csv counts optimizer steps per epoch (24 training graphs of 6 atoms).
TEST(Train, AtomBudgetAndDropRemainder) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  auto steps = [&](const std::string& name, const std::string& sets) {
    nlohmann::json c = small_config(dir.file("lj.h5"), dir.file(name));
    c["NeuralNetwork"]["Training"]["num_epoch"] = 1;
    const Result r = run("train -c " + write_config(dir, name + ".json", c) + " " + sets);
    EXPECT_EQ(r.code, 0) << r.out;
    const std::vector<double> steps = metric_numbers(dir.file(name) + "/metrics.csv", "steps");
    return steps.empty() ? -1 : int(steps[0]);
  };
  EXPECT_EQ(steps("plain", ""), 6);
  EXPECT_EQ(steps("budget", "--set Loader.atom_budget=12"), 12);
  EXPECT_EQ(steps("keep", "--set Training.batch_size=5"), 5);
  EXPECT_EQ(steps("drop", "--set Training.batch_size=5 --set Loader.drop_remainder=true"), 4);
}

// Loader.static_shapes: batches of frames of several sizes padded into a few fixed shapes train
// as the same batches unpadded do (float64: the losses and errors of every epoch agree to
// rounding), and the log names the shapes.
TEST(Train, StaticShapesTrainAsUnpaddedBatches) {
  TempDir dir;
  LjOptions o;
  o.vary_atoms = 2;
  write_lj_dataset(dir.file("lj.h5"), o);
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("plain"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 3;
  c["NeuralNetwork"]["Training"]["precision"] = "fp64";
  const Result plain = run("train -c " + write_config(dir, "plain.json", c));
  ASSERT_EQ(plain.code, 0) << plain.out;
  c["Output"]["run_dir"] = dir.file("static");
  c["Loader"]["static_shapes"] = true;
  c["Loader"]["static_buckets"] = 2;
  const Result padded = run("train -c " + write_config(dir, "static.json", c));
  ASSERT_EQ(padded.code, 0) << padded.out;
  EXPECT_NE(padded.out.find("static shapes: "), std::string::npos) << padded.out;
  const std::string a = dir.file("plain") + "/metrics.csv", b = dir.file("static") + "/metrics.csv";
  const std::vector<double> steps = metric_numbers(b, "steps"),
                            unpadded = metric_numbers(b, "unpadded_steps");
  ASSERT_EQ(unpadded.size(), 3u);
  for (size_t e = 0; e < unpadded.size(); ++e) EXPECT_LT(unpadded[e], steps[e]) << "some padded";
  for (const char* name : {"train_loss", "validate_loss", "test_loss", "train_energy_mae_mev_atom",
                           "validate_force_mae_mev_a", "test_force_mae_mev_a"}) {
    const std::vector<double> x = metric_numbers(a, name), y = metric_numbers(b, name);
    ASSERT_EQ(x.size(), y.size()) << name;
    for (size_t e = 0; e < x.size(); ++e)
      EXPECT_NEAR(y[e], x[e], 1e-8 * std::max(1.0, std::abs(x[e]))) << name << " epoch " << e + 1;
  }
}

// ---- bad input: one line, exit 1 ----

TEST(TrainBadInput, HeadTheDataLacks) {
  TempDir dir;
  LjOptions o;
  o.forces = false;
  write_lj_dataset(dir.file("noforces.h5"), o);
  const nlohmann::json c = small_config(dir.file("noforces.h5"), dir.file("run"));
  expect_error(run("train -c " + write_config(dir, "c.json", c)), "has no forces");
  nlohmann::json d = c;
  d["NeuralNetwork"]["Architecture"]["enable_interatomic_potential"] = false;
  d["NeuralNetwork"]["Variables_of_interest"]["output_names"] = {"charges"};
  expect_error(run("train -c " + write_config(dir, "d.json", d)), "'charges' is not in the data");
  // Energies only is fine once the force term is off.
  nlohmann::json e = c;
  e["NeuralNetwork"]["Architecture"]["force_weight"] = 0.0;
  e["NeuralNetwork"]["Training"]["num_epoch"] = 1;
  EXPECT_EQ(run("train -c " + write_config(dir, "e.json", e)).code, 0);
}

TEST(TrainBadInput, SplitByThatCannotSplit) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});  // 40 frames, all of config_type ""
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("run"));
  const std::string cfg = write_config(dir, "c.json", c);
  // One group: no split keeps it whole and fills three parts.
  expect_error(run("train -c " + cfg + " --set Dataset.split_by=group"), "(1 groups)");
  expect_error(
      run("train -c " + cfg + " --set Dataset.split_by=block --set Dataset.split_block=20"),
      "(2 blocks of 20)");
  expect_error(run("train -c " + cfg + " --set Dataset.split_by=blocks"), "Dataset.split_by");
  // Three files are split already.
  c["Dataset"]["path"] = {
      {"train", dir.file("lj.h5")}, {"validate", dir.file("lj.h5")}, {"test", dir.file("lj.h5")}};
  c["Dataset"]["split_by"] = "block";
  expect_error(run("train -c " + write_config(dir, "d.json", c)),
               "Dataset.split_by block splits one file");
  c["Dataset"].erase("split_by");
  c["Dataset"]["train_fraction"] = 0.5;
  expect_error(run("train -c " + write_config(dir, "f.json", c)),
               "Dataset.train_fraction thins the split of one file");
}

TEST(TrainBadInput, RadiusNotPositive) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  const std::string cfg =
      write_config(dir, "c.json", small_config(dir.file("lj.h5"), dir.file("r")));
  expect_error(run("train -c " + cfg + " --set Architecture.radius=0"), "radius");
  expect_error(run("train -c " + cfg + " --set Architecture.radius=-2"), "radius");
  EXPECT_FALSE(fs::exists(dir.file("r") + "/checkpoints"));
}

TEST(TrainBadInput, GraphWithOneAtomAndNoNeighbour) {
  TempDir dir;
  LjOptions o;
  o.single_atom_frame = 0;  // lands in some split; every split is checked
  o.n_frames = 10;
  write_lj_dataset(dir.file("lj.h5"), o);
  expect_error(run("train -c " +
                   write_config(dir, "c.json", small_config(dir.file("lj.h5"), dir.file("r")))),
               "graph 0: atom 0 (Z=10) is the graph's only atom and has no neighbour");
}

// A lone atom in a periodic cell smaller than the cutoff is not isolated: its periodic images
// are its neighbours (a one-atom bulk crystal). It trains, and its predicted force is zero by
// symmetry; the same atom in a cell larger than the cutoff has no neighbour: an error.
TEST(TrainBadInput, LoneAtomInPeriodicCells) {
  TempDir dir;
  auto write = [&](const std::string& path, double a) {
    DatasetWriter w(path, WriterOptions{});
    for (int k = 0; k < 10; ++k) {
      Frame f;
      f.z = {18};
      f.pos = {0.1 * k, 0.2, 0.3};
      f.has_cell = true;
      const double s = a * (1.0 + 0.01 * k);
      f.cell = {s, 0, 0, 0, s, 0, 0, 0, s};
      f.pbc = {true, true, true};
      f.has_energy = true;
      f.energy = -1.5 + 0.01 * k;
      f.forces = {0, 0, 0};
      w.add(f, "frame");
    }
    w.commit();
  };
  write(dir.file("small.h5"), 3.5);
  nlohmann::json c = small_config(dir.file("small.h5"), dir.file("r"));
  c["NeuralNetwork"]["Architecture"]["periodic_boundary_conditions"] = true;
  c["NeuralNetwork"]["Training"]["num_epoch"] = 2;
  const Result ok = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(ok.code, 0) << ok.out;
  const Result ev = run("evaluate --run " + dir.file("r") + " --split all");
  ASSERT_EQ(ev.code, 0) << ev.out;
  const auto f = lines(read_text(dir.file("r") + "/eval_all/forces.csv"));
  ASSERT_EQ(f.size(), 11u);
  for (size_t i = 1; i < f.size(); ++i) {
    std::stringstream ss(f[i]);
    std::vector<double> v;
    for (std::string cell; std::getline(ss, cell, ',');) v.push_back(std::stod(cell));
    for (int k = 6; k < 9; ++k) EXPECT_NEAR(v[size_t(k)], 0.0, 1e-5) << f[i];
  }
  write(dir.file("large.h5"), 6.0);
  c["Dataset"]["path"] = dir.file("large.h5");
  c["Output"]["run_dir"] = dir.file("r2");
  expect_error(run("train -c " + write_config(dir, "d.json", c)), "no neighbour within the radius");
}

// The model has weights for the elements of its data only (the embedding's rows, MACE's element
// weights): they travel in the checkpoint; a file with another element is refused by `evaluate`
// with the elements named, and an element that only the held-out splits hold is a warning.
TEST(TrainBadInput, AModelKnowsTheElementsOfItsData) {
  TempDir dir;
  LjOptions o;
  o.n_frames = 12;
  write_lj_dataset(dir.file("train.h5"), o);  // argon- and neon-like atoms (Z = 18, 10)
  const auto write_with_krypton = [&](const std::string& path) {
    DatasetWriter w(path, WriterOptions{});
    for (int k = 0; k < 5; ++k) {
      Frame f;
      f.z = {18, 36, 10, 18};
      f.pos = {0, 0, 0, 3.6 + 0.05 * k, 0, 0, 0, 3.5, 0, 3.4, 3.4, 0.2 * k};
      f.has_energy = true;
      testing::lj_label(f, false, 0.0);
      w.add(f, "frame");
    }
    w.commit();
  };
  write_with_krypton(dir.file("kr.h5"));
  nlohmann::json c = small_config(dir.file("train.h5"), dir.file("r"));
  c["NeuralNetwork"]["Architecture"]["mpnn_type"] = "MACE";
  c["NeuralNetwork"]["Architecture"]["max_ell"] = 1;
  c["NeuralNetwork"]["Architecture"]["correlation"] = 2;
  c["NeuralNetwork"]["Training"]["num_epoch"] = 2;
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json record = read_checkpoint_record(dir.file("r") + "/checkpoints/best.pt");
  EXPECT_EQ(record.at("model").at("spec").at("elements"), (std::vector<int64_t>{10, 18}));
  const ModelSetup setup = model_setup_from_json(record.at("model"));
  Gnn gnn(setup.spec);
  gnn.to(to_dtype(setup.precision));
  load_checkpoint_model(dir.file("r") + "/checkpoints/best.pt", gnn);  // the shapes match
  const auto named = gnn.named_parameters();
  EXPECT_EQ(named["embedding.weight"].size(0), 2);  // one row per element
  EXPECT_EQ(named["conv0.element0"].size(0), 2);
  ASSERT_EQ(run("evaluate --run " + dir.file("r") + " --split all").code, 0);
  expect_error(
      run("evaluate --run " + dir.file("r") + " --data " + dir.file("kr.h5") + " --split all"),
      "kr.h5 holds Kr, which the model has no weights for (it was trained on Ne, Ar)");
  // Periodic frames under a model trained without periodic boundaries: evaluated, with the
  // warning train gives.
  LjOptions periodic = o;
  periodic.periodic = true;
  write_lj_dataset(dir.file("periodic.h5"), periodic);
  const Result ev_periodic = run("evaluate --run " + dir.file("r") + " --data " +
                                 dir.file("periodic.h5") + " --split all");
  EXPECT_EQ(ev_periodic.code, 0) << ev_periodic.out;
  EXPECT_NE(ev_periodic.out.find("12 graphs of " + dir.file("periodic.h5") +
                                 " have periodic cells, but the model was trained without"),
            std::string::npos)
      << ev_periodic.out;
  // Krypton in the test file only: the run trains, with a warning that names it.
  c["Dataset"]["path"] = {{"train", dir.file("train.h5")},
                          {"validate", dir.file("train.h5")},
                          {"test", dir.file("kr.h5")}};
  c["Output"]["run_dir"] = dir.file("r2");
  const Result held_out = run("train -c " + write_config(dir, "d.json", c));
  ASSERT_EQ(held_out.code, 0) << held_out.out;
  EXPECT_NE(held_out.out.find("the training split holds no atom of Kr (only the validation or test "
                              "split does)"),
            std::string::npos)
      << held_out.out;
  EXPECT_NE(held_out.out.find("Dataset.path: train and validate are one file"), std::string::npos)
      << held_out.out;
  EXPECT_EQ(read_checkpoint_record(dir.file("r2") + "/checkpoints/best.pt")
                .at("model")
                .at("spec")
                .at("elements"),
            (std::vector<int64_t>{10, 18, 36}));
}

TEST(TrainBadInput, CheckpointOfAnotherShapeOrDtype) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("r"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 1;
  const std::string cfg = write_config(dir, "c.json", c);
  ASSERT_EQ(run("train -c " + cfg).code, 0);
  expect_error(run("train -c " + cfg +
                   " --set Training.continue=1 --set Training.num_epoch=2 "
                   "--set Architecture.hidden_dim=16"),
               "hidden_dim: 8 vs 16");
  expect_error(run("train -c " + cfg +
                   " --set Training.continue=1 --set Training.num_epoch=2 "
                   "--set Training.precision=fp64"),
               "precision: \"fp32\" vs \"fp64\"");
  // Another split (or other data) under the resumed weights: refused, naming the difference.
  expect_error(run("train -c " + cfg +
                   " --set Training.continue=1 --set Training.num_epoch=2 "
                   "--set Training.perc_train=0.5"),
               "perc_train 0.6 in the checkpoint, 0.5 now");
  // Below the record: a float64 model never takes float32 tensors (LibTorch would, silently).
  const std::string ck = dir.file("r") + "/checkpoints/epoch_00001.pt";
  ModelSetup setup = model_setup_from_json(read_checkpoint_record(ck).at("model"));
  Gnn f64(setup.spec);
  f64.to(at::kDouble);
  try {
    load_checkpoint_model(ck, f64);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("float32 in the checkpoint but float64 in the model"),
              std::string::npos)
        << e.what();
  }
  GnnSpec wider = setup.spec;
  wider.layer.hidden_dim = 9;
  Gnn other(wider);
  try {
    load_checkpoint_model(ck, other);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("has shape"), std::string::npos) << e.what();
  }
  // Not a checkpoint at all.
  std::ofstream(dir.file("junk.pt")) << "junk";
  expect_error(run("evaluate --checkpoint " + dir.file("junk.pt")), "not a checkpoint");
}

// Without the spike guard a non-finite loss stops the run at once, naming the step and its batch.
TEST(TrainBadInput, NanLossNamesStepAndGraphs) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("r"));
  c["NeuralNetwork"]["Training"]["Optimizer"] = {{"type", "SGD"}, {"learning_rate", 1e12}};
  c["NeuralNetwork"]["Training"]["spike_factor"] = 0;
  // Read by the host every fourth step: still the first step whose loss is not finite.
  c["Output"]["read_every_steps"] = 4;
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  expect_error(r, "the loss is ");
  EXPECT_NE(r.out.find("ddgnn: training error: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("on the batch of graphs ["), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" step "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("learning_rate"), std::string::npos) << r.out;
}

// With the spike guard (the default) the non-finite steps are skipped; when every step is, 25 in
// a row stop the run, naming the last, its batch and why, with what to do.
TEST(TrainBadInput, StepsSkippedInARowStopTheRunNamingTheLast) {
  TempDir dir;
  LjOptions o;
  o.n_frames = 200;  // 30 steps an epoch
  write_lj_dataset(dir.file("lj.h5"), o);
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("r"));
  c["NeuralNetwork"]["Training"]["Optimizer"] = {{"type", "SGD"}, {"learning_rate", 1e12}};
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  expect_error(r, "25 steps in a row were skipped, the last at epoch 1 step ");
  EXPECT_NE(r.out.find(": the loss is nan on the batch of graphs ["), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lower Training.Optimizer.learning_rate (now 1e+12) or raise it gradually "
                       "(Training.warmup_steps"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("the validate loss"), std::string::npos) << r.out;  // stopped before it
  EXPECT_GE(testing::lines(testing::read_text(dir.file("r/events.jsonl"))).size(), 25u);
}

// A learning rate that overflows the gradient (with its norm computed, Training.grad_clip) while
// the loss is still finite, without the spike guard: the error names the step and the batch and
// suggests a warm-up.
TEST(TrainBadInput, OverflowingGradientNamesTheBatchAndSuggestsAWarmup) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("r"));
  // Adam's first step moves every weight by about the rate (3, a thousand times the config's).
  c["NeuralNetwork"]["Training"]["Optimizer"] = {{"type", "Adam"}, {"learning_rate", 3.0}};
  c["NeuralNetwork"]["Training"]["grad_clip"] = 1e30;
  c["NeuralNetwork"]["Training"]["spike_factor"] = 0;
  const Result r = run("train -c " + write_config(dir, "c.json", c));
  expect_error(r, "the gradient norm is inf (the loss ");
  EXPECT_NE(r.out.find("ddgnn: training error: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" step "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("on the batch of graphs ["), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Training.warmup_steps"), std::string::npos) << r.out;
}

TEST(TrainBadInput, RunDirectoryAndResumeMistakes) {
  TempDir dir;
  write_lj_dataset(dir.file("lj.h5"), LjOptions{});
  nlohmann::json c = small_config(dir.file("lj.h5"), dir.file("r"));
  c["NeuralNetwork"]["Training"]["num_epoch"] = 1;
  const std::string cfg = write_config(dir, "c.json", c);
  expect_error(run("train -c " + cfg + " --set Training.continue=1"), "no checkpoint to resume");
  ASSERT_EQ(run("train -c " + cfg).code, 0);
  expect_error(run("train -c " + cfg), "already holds a run");
  EXPECT_EQ(run("train -c " + cfg + " --overwrite").code, 0);
  expect_error(
      run("train -c " + cfg + " --set Dataset.path=" + dir.file("none.h5") + " --overwrite"),
      "no such file");
}

}  // namespace
}  // namespace ddgnn
