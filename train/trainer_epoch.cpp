// The end of each epoch of `ddgnn train` (train/trainer_impl.h): the decisions every rank takes
// from rank 0's figures (divergence, best epoch, schedules, early stopping, time limit), the
// checkpoints, the metrics row and log line; the stop on a signal and the checkpoint's record.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "comm/mpi.h"
#include "core/error.h"
#include "core/log.h"
#include "core/signals.h"
#include "core/version.h"
#include "train/divergence.h"
#include "train/report.h"
#include "train/trainer_impl.h"

namespace ddgnn {

using trainer_detail::Clock;
using trainer_detail::peak_rss_mb;
using trainer_detail::seconds;

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

}  // namespace

bool Trainer::end_period(int64_t epoch, bool epoch_end, nlohmann::json& row,
                         const SplitMetrics& val_m, Clock::time_point t_period) {
  // Every decision below from rank 0's figures, so that all ranks take the same branch.
  const double median_in = row.value("train_loss_median", kNan);
  double decide[4] = {val_m.loss(), elapsed(), row.value("train_loss", 0.0), median_in};
  {
    Waiting waiting("broadcast of the epoch's decisions");
    MPI_CHECK(MPI_Bcast(decide, 4, MPI_DOUBLE, 0, m_comm.get()));
  }
  const double val_loss = decide[0], elapsed_s = decide[1], train_loss = decide[2];
  const double loss_median = decide[3];
  // A diverged model is not checkpointed; the run stops after this epoch's row.
  const Divergence divergence =
      check_divergence(m_state, loss_median, val_loss, epoch, m_s.divergence_factor);
  const bool diverged = divergence.diverged;
  const bool improved = !diverged && val_loss < m_state.best_validate_loss;
  if (improved) {
    m_state.best_validate_loss = val_loss;
    m_state.best_epoch = epoch;
  }
  const bool reduced = m_plateau && m_plateau->step(val_loss);
  if (m_s.schedule == Schedule::kExponential)  // the lr lives in the optimizer: resumes exactly
    set_lr(*m_opt, std::max(m_s.plateau.min_lr, get_lr(*m_opt) * m_s.exponential_gamma));
  const bool stop_early = m_early && m_early->step(val_loss);
  if (m_s.schedule == Schedule::kTimeExponential)
    set_lr(*m_opt, time_exponential_lr(m_s.learning_rate, m_s.plateau.min_lr,
                                       elapsed_s / m_s.time_limit_s));
  const bool out_of_time = m_s.time_limit_s > 0 && elapsed_s >= m_s.time_limit_s;
  const bool last = (epoch_end && epoch == m_s.num_epoch) || stop_early || out_of_time;

  // The period's joules before the row is checkpointed (collective: every rank calls it).
  if (m_energy) {
    m_energy->add_epoch(row, row.value("graphs", int64_t(0)));
    for (const std::string& w : m_energy->take_warnings()) m_log.warn(w);
  }

  // Checkpoints: on schedule after the warm-up, and always after the last evaluation.
  const auto t_ck = Clock::now();
  if (improved) m_state.best_row = row;
  // The row goes into the checkpoint too: a kill between the checkpoint's rename and the row's
  // append below must not lose the epoch's row (resuming writes it from the checkpoint).
  m_state.last_row = row;
  if (m_s.checkpoint && m_root && !diverged) {
    const std::string dir = m_s.run_dir + "/checkpoints";
    if (improved && epoch > m_s.checkpoint_warmup) write_checkpoint(dir + "/best.pt", false);
    if (last || (epoch_end && epoch > m_s.checkpoint_warmup && epoch % m_s.checkpoint_every == 0))
      write_rolling_checkpoint();
  }
  row["checkpoint_s"] = seconds(t_ck, Clock::now());
  row["epoch_s"] = seconds(t_period, Clock::now());
  row["elapsed_s"] = elapsed();
  row["peak_rss_mb"] = peak_rss_mb();
  m_log.metrics_row(row);
  m_log.event("epoch", row);
  m_log.line(epoch_line(row, m_s.num_epoch, epoch_end ? -1 : m_state.epoch_steps,
                        m_setup.targets.energy_head >= 0, m_forces, improved,
                        m_s.print_test_every_epoch));
  if (reduced) {
    m_log.event("lr_reduced", {{"epoch", epoch}, {"lr", get_lr(*m_opt)}});
    m_log.line("learning rate reduced to " + fmt("%.3g", get_lr(*m_opt)));
  }
  m_last_row = row;
  if (diverged) {
    nlohmann::json event = diverged_event(epoch, loss_median, divergence, m_s);
    event["train_loss"] = train_loss;
    event["validate_loss"] = val_loss;
    m_log.event("diverged", event);
    m_log.finish();
    const auto last = epoch_checkpoints(m_s.run_dir + "/checkpoints");
    throw diverged_error(epoch, loss_median, divergence, m_s,
                         last.empty() ? std::string() : last.back());
  }
  if (stop_early) {
    m_stop_reason = "early_stopping";
    m_log.event("early_stop", {{"epoch", epoch}, {"patience", m_s.patience}});
    m_log.line("early stopping: no improvement of the validation loss for " +
               std::to_string(m_s.patience) + " epochs");
    return true;
  }
  if (out_of_time) {
    m_stop_reason = "time_limit";
    m_log.event("time_limit", {{"epoch", epoch}, {"step", m_state.step}, {"elapsed_s", elapsed_s}});
    m_log.line("time limit reached (" + fmt("%.0f", m_s.time_limit_s) + " s)");
    return true;
  }
  return false;
}

void Trainer::stop_for_time() {
  const auto [epoch, done] = *m_out_of_time_at;
  m_stop_reason = "time_limit";
  std::string where = "no checkpoint (Training.Checkpoint is off)";
  if (m_s.checkpoint && m_root) where = "checkpoint " + write_rolling_checkpoint();
  m_log.event(
      "time_limit",
      {{"epoch", epoch}, {"epoch_steps", done}, {"step", m_state.step}, {"elapsed_s", elapsed()}});
  m_log.line("time limit reached (" + fmt("%.0f", m_s.time_limit_s) + " s) in epoch " +
             std::to_string(epoch) + " after " + std::to_string(done) + " of its steps (step " +
             std::to_string(m_state.step) + " of the run); " + where +
             (m_s.checkpoint ? "; --set Training.continue=1 resumes at this step" : ""));
}

std::string Trainer::write_rolling_checkpoint() {
  const std::string dir = m_s.run_dir + "/checkpoints";
  const bool inside = m_state.epoch_steps > 0;  // inside the epoch after the last finished
  const int64_t epoch = inside ? m_state.epoch + 1 : m_state.epoch;
  const std::string path = dir + "/" + checkpoint_name(epoch, m_state.epoch_steps);
  write_checkpoint(path, true);
  keep_latest_checkpoints(dir, m_s.keep_checkpoints);
  nlohmann::json event = {{"epoch", epoch}, {"step", m_state.step}, {"path", path}};
  if (inside) event["epoch_steps"] = m_state.epoch_steps;
  m_log.event("checkpoint", event);
  return path;
}

void Trainer::stop_on_signal() {
  const auto [epoch, done] = *m_interrupted_at;
  const int signal = stop_signal();
  const std::string by = signal ? signal_name(signal) : "a signal to another rank";
  const std::string ckdir = m_s.run_dir + "/checkpoints";
  if (m_root) {  // m_state: the step where every rank stopped
    write_checkpoint(ckdir + "/interrupted.pt", true);
    m_log.event("interrupted",
                {{"signal", by}, {"epoch", epoch}, {"steps_done", done}, {"step", m_state.step}});
  }
  {
    Waiting waiting("the checkpoint of the interrupted step");
    MPI_CHECK(MPI_Barrier(m_comm.get()));  // no rank leaves (and aborts) before it is written
  }
  throw interrupted_error(by, epoch, done, ckdir);
}

nlohmann::json Trainer::split_record() const {
  const TrainData& data = m_loader->data();
  nlohmann::json r = {
      {"perc_train", m_s.perc_train},
      {"seed", m_s.split_seed},
      {"single", m_s.data.single},
      {"train", m_s.data.train},
      {"validate", m_s.data.validate},
      {"test", m_s.data.test},
      {"n_graphs", data.dataset(kTrain).n_graphs()},
      {"split_by", to_string(m_s.split_by)},
      {"split_block", m_s.split_block},
      {"train_fraction", m_s.train_fraction},
      // The content identity of the files (written anew by every convert), compared on
      // resume and by evaluate: the same path may hold other data by then.
      {"content_crc32",
       {data.dataset(kTrain).content_crc32(), data.dataset(kValidate).content_crc32(),
        data.dataset(kTest).content_crc32()}}};
  // A list of files, each split on its own: each file with its name, graphs and identity (the
  // fields above describe the first).
  if (data.list_files() > 0) {
    nlohmann::json files = nlohmann::json::array();
    for (size_t f = 0; f < data.list_files(); ++f) {
      const Dataset& ds = data.list_file(f);
      files.push_back({{"path", ds.path()},
                       {"name", m_s.data.files[f].name},
                       {"n_graphs", ds.n_graphs()},
                       {"content_crc32", ds.content_crc32()}});
    }
    r["files"] = files;
  }
  return r;
}

void Trainer::write_checkpoint(const std::string& path, bool with_optimizer) {
  nlohmann::json r;
  r["model"] = to_json(m_setup);
  r["ddgnn_version"] = DDGNN_VERSION;
  r["config"] = m_config.resolved;
  r["split"] = split_record();
  RunState state = m_state;
  state.elapsed_s = elapsed();
  save_run_checkpoint(path, trained(), state, std::move(r), with_optimizer);
}

}  // namespace ddgnn
