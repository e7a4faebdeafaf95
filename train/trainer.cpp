// The epoch loop of `ddgnn train` (train/trainer.h), read top to bottom: set-up, then for every
// epoch train_epoch (steps on ready batches), evaluate_split, end_epoch (decisions, checkpoints,
// metrics row, log line: train/trainer_epoch.cpp).
#include "train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <spdlog/spdlog.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>

#include "comm/mpi.h"
#include "comm/watchdog.h"
#include "core/alloc.h"
#include "core/error.h"
#include "core/log.h"
#include "core/signals.h"
#include "core/threads.h"
#include "model/precision.h"
#include "train/device.h"
#include "train/divergence.h"
#include "train/report.h"
#include "train/start_checks.h"
#include "train/static_shapes.h"
#include "train/step_graphs.h"
#include "train/trainer_impl.h"
#include "train/upload.h"

namespace ddgnn {

using trainer_detail::Clock;
using trainer_detail::peak_rss_mb;
using trainer_detail::seconds;

nlohmann::json train(const Config& config, const TrainOptions& options) {
  Trainer t(config, options);
  return t.run();
}

nlohmann::json Trainer::run() {
  try {
    return run_impl();
  } catch (const std::exception& e) {
    m_log.error(e);
    if (m_world > 1) {
      // Stop the job here, before the store's windows and the communicators are freed: those
      // are collective, and the other ranks are waiting for this one somewhere else.
      report_and_stop_job(e);
    }
    throw;
  }
}

nlohmann::json Trainer::run_impl() {
  if (m_s.log_level || m_s.log_all_ranks)
    set_log_options(m_s.log_level.value_or(current_log_level()), m_s.log_all_ranks);
  install_stop_handlers();
  // DDGNN_DEBUG_FILE_SIZE_LIMIT=B: from here on no file this process writes may exceed B bytes
  // (RLIMIT_FSIZE, SIGXFSZ ignored: a write past it fails with EFBIG as on a full disk), set after
  // MPI started so that only the run's own files feel it (tests of a disk that fills).
  if (const char* limit = std::getenv("DDGNN_DEBUG_FILE_SIZE_LIMIT")) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit r{rlim_t(std::atoll(limit)), rlim_t(std::atoll(limit))};
    setrlimit(RLIMIT_FSIZE, &r);
  }
  m_watchdog = std::make_unique<Watchdog>(m_comm.get(), m_s.timeout_s);
  if (m_world > 1) check_ranks_run_one_config(m_comm.get(), m_config);
  const int threads = set_up_threads();
  m_place = place_rank(m_s, m_comm.get());

  m_loader = std::make_unique<Loader>(m_s, m_comm.get());
  release_free_memory();  // what loading and the split freed (the allocator would keep it)
  const TrainData& data = m_loader->data();
  check_outliers(data, m_s.allow_outliers, m_root);
  for (int k : {kTrain, kValidate, kTest}) bind_targets(m_s, data.dataset(k));
  const std::string one_volume = bind_stress(m_s, data);
  if (!one_volume.empty() && m_root) spdlog::warn("{}", one_volume);
  const BranchReport branches = check_branches(m_s, data);
  if (!branches.warning.empty() && m_root) spdlog::warn("{}", branches.warning);
  if (!branches.train_graphs.empty()) {
    std::string line = "branches of the heads (" + std::string(kBranchKey) + "), train graphs:";
    for (size_t b = 0; b < branches.train_graphs.size(); ++b)
      line += " " + std::to_string(b) + ": " + std::to_string(branches.train_graphs[b]);
    m_log.line(line);
  }
  m_log.line("loader: " + m_loader->description());
  m_energy = std::make_unique<JobEnergy>(m_s.energy_meter, m_comm.get());
  if (!m_energy->start_line().empty()) m_log.line(m_energy->start_line());
  if (m_loader->periodic_graphs() > 0 && !m_s.periodic && m_root)
    spdlog::warn(
        "{} graphs have periodic cells, but Architecture.periodic_boundary_conditions is "
        "false: their cells are ignored (no edges across the boundary)",
        m_loader->periodic_graphs());
  if (m_root) m_run_lock = prepare_run_dir(m_s.run_dir, m_s.resume, m_options.overwrite);
  m_loader->start_switcher(m_root ? m_s.run_dir + "/tuner.csv" : "", m_s.resume);

  std::string resume_path;
  nlohmann::json resume_record;
  if (m_s.resume) {
    resume_path = resolve_startfrom(m_s.run_dir, m_s.startfrom);
    resume_record = read_checkpoint_record(resume_path);
    check_same_split(resume_record.value("split", nlohmann::json::object()), split_record(),
                     resume_path);
  }
  build_model(m_s.resume ? &resume_record : nullptr);
  release_free_memory();  // the statistics' blocks
  if (m_s.resume) {
    m_state = restore_run_checkpoint(resume_path, resume_record, trained());
    m_start_epoch = m_state.epoch + 1;
    m_elapsed_before = m_state.elapsed_s;
  }
  if (m_root) {  // the run directory is rank 0's
    write_resolved_config(m_config, m_s.run_dir + "/config.resolved.json");
    m_log.open(m_s.run_dir, metric_columns(m_setup, m_forces), m_s.resume, m_start_epoch - 1,
               m_state.step, m_state.last_row, resume_path, m_s.trace_steps,
               progress_wanted(m_s.progress, m_s.verbosity));
  }
  log_start(threads, resume_path);
  if (m_s.stage_two_start > m_s.num_epoch)
    m_log.warn("Training.stage_two.start_epoch " + std::to_string(m_s.stage_two_start) +
               " is past Training.num_epoch " + std::to_string(m_s.num_epoch) +
               ": stage two never starts");
  const nlohmann::json baseline =
      report_baseline(m_loader->data(), m_setup, m_forces, m_log, !m_s.resume);
  m_log.line(std::string("each epoch: learning rate, loss, energy and force MAE of ") +
             (m_s.print_test_every_epoch ? "train/validate/test" : "train/validate") +
             (m_s.print_test_every_epoch ? "" : " (the test split at the end)") +
             "; metrics.csv has every split");

  release_free_memory();     // what start-up's passes over the data freed
  if (m_s.time_limit_s > 0)  // the run's time includes that before a resume
    m_loader->set_deadline(
        m_t_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                        std::max(0.0, m_s.time_limit_s - m_elapsed_before))));
  // Ranges of steps end at evaluations (Training.eval_every_steps, else each epoch's end) and at
  // checkpoints inside epochs (Output.checkpoint_every_steps); no batch is being built between
  // two ranges, so that evaluation's fetches run alone.
  const int64_t eval_every = m_s.eval_every_steps;
  const int64_t ck_every = m_s.checkpoint && m_root ? m_s.checkpoint_every_steps : 0;
  const auto next_multiple = [](int64_t step, int64_t every) {
    return every > 0 ? (step / every + 1) * every : std::numeric_limits<int64_t>::max();
  };
  std::unique_ptr<trainer_detail::Period> period;
  bool stop = false;
  for (int64_t epoch = m_start_epoch; epoch <= m_s.num_epoch && !stop; ++epoch) {
    if (m_s.stage_two_start > 0 && epoch == std::max(m_s.stage_two_start, m_start_epoch))
      begin_stage_two(epoch);  // its first epoch, or the first after a resume inside it
    m_epoch = epoch;
    const int64_t n_steps = m_loader->begin_epoch(epoch);
    int64_t done = epoch == m_start_epoch ? m_state.epoch_steps : 0;
    if (done > n_steps)
      throw ConfigError("the checkpoint was written after " + std::to_string(done) +
                            " steps of epoch " + std::to_string(epoch) + ", which has " +
                            std::to_string(n_steps) + " steps with this config",
                        "resume with the batch settings (batch_size, atom_budget, "
                        "drop_remainder) of the run that wrote it");
    do {
      if (!period) {
        const double lr = get_lr(*m_opt) * warmup_factor(m_state.step + 1, m_s.warmup_steps);
        const StepGraphs* graphs = m_step_fn->graphs();
        period = std::make_unique<trainer_detail::Period>(m_setup, epoch, lr,
                                                          graphs ? graphs->replayed() : 0);
        period->row.update(baseline);
      }
      // To the next evaluation, checkpoint inside the epoch, or the epoch's end.
      const int64_t to =
          std::min({n_steps, done + (next_multiple(m_state.step, eval_every) - m_state.step),
                    done + (next_multiple(m_state.step, ck_every) - m_state.step)});
      done = train_steps(epoch, done, to, n_steps, *period);
      const bool epoch_end = done == n_steps;
      m_state.epoch = epoch_end ? epoch : epoch - 1;
      m_state.epoch_steps = epoch_end ? 0 : done;
      if (m_interrupted_at) stop_on_signal();
      if (m_out_of_time_at) {
        stop_for_time();
        stop = true;
        break;
      }
      const bool evaluate =
          eval_every == 0 ? epoch_end
                          : m_state.step % eval_every == 0 || (epoch_end && epoch == m_s.num_epoch);
      // A checkpoint on schedule comes after the evaluation of its step; at an epoch's end the
      // evaluation writes it (end_period).
      const bool checkpoint_due = m_s.checkpoint && m_root && epoch > m_s.checkpoint_warmup &&
                                  (epoch_end ? !evaluate && epoch % m_s.checkpoint_every == 0
                                             : ck_every > 0 && m_state.step % ck_every == 0);
      if (evaluate) {
        stop = evaluate_period(epoch, epoch_end, *period);
        period.reset();
      }
      if (!stop && checkpoint_due) write_rolling_checkpoint();
    } while (done < n_steps && !stop);
  }
  m_log.finish();
  nlohmann::json summary = {{"stop", m_stop_reason},
                            {"epochs", m_state.epoch},
                            {"steps", m_state.step},
                            {"best_epoch", m_state.best_epoch},
                            {"best", m_state.best_row},
                            {"last", m_last_row},
                            {"run_dir", m_s.run_dir},
                            {"elapsed_s", elapsed()},
                            {"first_step_s", m_first_step_s},
                            {"peak_rss_mb", peak_rss_mb()},
                            {"rss_mb", trainer_detail::rss_mb()},
                            {"pss_mb", trainer_detail::pss_mb()},
                            {"first_step_rss_mb", m_first_step_rss_mb},
                            {"first_step_pss_mb", m_first_step_pss_mb}};
  m_log.event("run_end", summary);
  if (!m_state.best_row.is_null()) {
    m_log.line(best_line(m_state.best_row, m_state.best_epoch, m_s.run_dir));
    const std::string unlearned = unlearned_warning(m_state.best_row);
    if (!unlearned.empty()) m_log.warn(unlearned);
  }
  return summary;
}

int Trainer::set_up_threads() {
  // The cores this rank may use (its affinity mask), shared with its node's ranks (one each when
  // ranks >= cores). Waiting OpenMP threads must sleep when ranks share cores; OMP_WAIT_POLICY is
  // read when the runtime loads, so the launcher's environment has to set it.
  const int node_ranks = ranks_on_node(m_comm.get());
  const int threads = m_s.threads > 0
                          ? cap_threads(m_s.threads, cores_available(), "Runtime.intra_op_threads")
                          : threads_per_rank(cores_available(), node_ranks);
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  if (m_root && node_ranks > 1 && threads > 1 && !(policy && std::string(policy) == "PASSIVE"))
    spdlog::warn(
        "{} ranks share this node with {} threads each and OMP_WAIT_POLICY is not PASSIVE: "
        "spinning OpenMP threads can slow training many times over; export "
        "OMP_WAIT_POLICY=PASSIVE (jobs/train.sh does)",
        node_ranks, threads);
  const std::string blas = set_up_cpu_compute(threads);
  if (m_root && !blas.empty()) spdlog::info("{}", blas);
  if (m_s.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);
  return threads;
}

void Trainer::build_model(const nlohmann::json* resume_record) {
  m_setup = make_model_setup(m_s, m_loader->data(), resume_record);
  if (m_place.gpu >= 0) {
    m_setup.device = c10::Device(c10::kCUDA, int8_t(m_place.gpu));
    at::globalContext().setFloat32MatmulPrecision("high");  // fp32: TF32 matmuls allowed
  }
  if (!m_setup.device.is_cpu())
    m_setup.uploader = std::make_shared<const BatchUploader>(m_setup.device);
  if (m_s.static_shapes)
    m_setup.static_shapes =
        std::make_shared<const StaticShapes>(choose_static_shapes(m_s, m_loader->data(), m_setup));
  if (m_root && !m_setup.untrained_elements.empty())
    spdlog::warn(
        "the training split holds no atom of {} (only the validation or test split "
        "does): the model's weights for them stay untrained and their reference energy "
        "is 0, so their predictions mean nothing; split the data so that the training "
        "split holds every element",
        element_list(m_setup.untrained_elements));
  at::manual_seed(m_s.seed);
  try {
    m_gnn = std::make_shared<Gnn>(m_setup.spec);
    m_gnn->to(m_setup.device, to_dtype(m_setup.precision));
  } catch (const std::bad_alloc&) {
    throw ConfigError("the model does not fit in memory: hidden_dim " +
                          std::to_string(m_s.gnn.layer.hidden_dim) + ", " +
                          std::to_string(m_s.gnn.num_conv_layers) + " layers",
                      "give Architecture.hidden_dim and num_conv_layers sizes that fit the "
                      "machine (the weights of one layer grow as hidden_dim squared)");
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    throw ConfigError(
        "the model cannot be built with these sizes (" + what.substr(0, what.find('\n')) + ")",
        "check Architecture.hidden_dim, num_conv_layers and the head sizes");
  }
  m_gnn->set_bf16_autocast(m_setup.precision == Precision::kBFloat16);
  if (m_setup.precision == Precision::kBFloat16 && m_place.gpu < 0 && m_root)
    spdlog::warn(
        "Training.precision bf16 on the CPU: the fused CPU kernels step aside and bfloat16 matrix "
        "products are slow there (about 2x slower than fp32 in bench_train); bf16 is meant for "
        "GPUs: use fp32 on the CPU");
  m_params = m_gnn->parameters();
  if (m_world > 1) {
    // Rank 0's initial weights everywhere, then gradients summed in buckets during backward.
    m_ddp = std::make_unique<DataParallel>(m_params, m_comm.get(),
                                           int64_t(m_s.bucket_mb * double(1 << 20)), m_s.grad_sync);
    m_ddp->broadcast_parameters();
  }
  m_opt = make_optimizer(m_s.optimizer, m_params, m_s.learning_rate, m_s.weight_decay);
  if (m_s.ema_decay > 0) m_ema = std::make_unique<WeightAverage>(m_params, m_s.ema_decay);
  if (m_s.schedule == Schedule::kPlateau)
    m_plateau = std::make_unique<ReduceLROnPlateau>(*m_opt, m_s.plateau);
  if (m_s.early_stopping) m_early = std::make_unique<EarlyStopping>(m_s.patience);
  m_forces = m_setup.targets.predicts_forces() && m_loader->data().dataset(kTrain).has_forces();
  m_step_fn =
      std::make_unique<TrainStep>(*m_gnn, m_params, *m_opt, m_ddp.get(), m_ema.get(), m_setup, m_s);
}

void Trainer::log_start(int threads, const std::string& resume_path) {
  int64_t n_params = 0;
  for (const auto& p : m_params) n_params += p.numel();
  nlohmann::json start = start_event(m_config, m_s, *m_loader, m_setup, n_params, threads);
  start["device"] = m_place.description;
  start["grad_sync"] = m_s.grad_sync == GradSync::kNccl ? "nccl" : "mpi";
  if (m_s.resume) {
    start["resumed_from"] = resume_path;
    start["epoch"] = m_start_epoch - 1;
    start["epoch_steps"] = m_state.epoch_steps;
    start["step"] = m_state.step;
    m_log.event("resume", start);
    m_log.line("resuming " + resume_path + " after epoch " + std::to_string(m_start_epoch - 1) +
               (m_state.epoch_steps > 0 ? " and " + std::to_string(m_state.epoch_steps) +
                                              " steps of epoch " + std::to_string(m_start_epoch)
                                        : std::string()) +
               " (step " + std::to_string(m_state.step) + " of the run)");
  } else {
    m_log.event("run_start", start);
  }
  m_log.line(start_line(m_s, *m_loader, n_params, threads, m_world));
  if (m_setup.static_shapes) m_log.line("static shapes: " + describe(*m_setup.static_shapes));
  m_log.line("device: " + m_place.description +
             (m_world > 1 ? std::string("; gradients summed by ") +
                                (m_s.grad_sync == GradSync::kNccl ? "NCCL" : "MPI")
                          : std::string()));
  if (m_root)
    for (const auto& w : m_config.warnings) spdlog::warn("{}", w);
}

// Training.stage_two: its loss weights from this epoch on. Started now (not resumed inside it),
// the validation loss is another, so the best checkpoint, early stopping and the plateau
// schedule count afresh; resumed, their state is the checkpoint's.
void Trainer::begin_stage_two(int64_t epoch) {
  m_s.weights = m_s.stage_two_weights;
  if (epoch != m_s.stage_two_start) return;
  m_state.best_validate_loss = std::numeric_limits<double>::infinity();
  m_state.lowest_train_loss = std::numeric_limits<double>::infinity();
  if (m_plateau) m_plateau->forget_best();
  if (m_early) m_early->forget_best();
  m_step_fn->forget_spike_history();  // the losses of other weights are no reference
  const EnergyForceWeights& w = m_s.weights;
  m_log.event("stage_two", {{"epoch", epoch},
                            {"energy_weight", w.energy_weight},
                            {"energy_peratom_weight", w.energy_peratom_weight},
                            {"force_weight", w.force_weight},
                            {"stress_weight", w.stress_weight}});
  m_log.line("stage two from epoch " + std::to_string(epoch) + ": loss weights energy " +
             fmt("%g", w.energy_weight) + ", energy per atom " +
             fmt("%g", w.energy_peratom_weight) + ", forces " + fmt("%g", w.force_weight) +
             ", stress " + fmt("%g", w.stress_weight) +
             "; the best checkpoint is chosen from here on");
}

int64_t Trainer::train_steps(int64_t epoch, int64_t first, int64_t last, int64_t n_steps,
                             trainer_detail::Period& period) {
  if (first == last) return last;
  Batches batches = m_loader->train_steps(first, last, m_setup);
  PendingSteps pending(m_s.spike_factor);
  int64_t graphs_read = 0;
  SplitMetrics& metrics = period.metrics;
  StepPlace place{epoch, 0, m_rank, m_world, m_loader->data().dataset(kTrain).path()};
  const auto t_range = Clock::now();
  // The host reads the steps' losses every read_every steps (each read waits for the device).
  const int64_t read_every =
      m_s.read_every_steps > 0 ? m_s.read_every_steps : (m_place.gpu >= 0 ? 25 : 1);
  const auto read_pending = [&](int64_t position) {
    bool any_skipped = false;
    for (const PendingSteps::Read& s : pending.read()) {
      if (s.has_loss && std::isfinite(s.loss)) period.losses.push_back(s.loss);
      m_spikes.note(s, epoch);
      if (s.skipped) {
        any_skipped = true;
        ++period.skipped;
      } else {
        period.gn_sum += s.grad_norm;
      }
      graphs_read += s.graphs;
      if (m_s.verbosity >= 4)
        spdlog::debug("epoch {} step {} graphs {} loss {:.6g}", epoch, s.step, s.graphs, s.loss);
    }
    // Skipped steps left the device's step counts behind the host's: the host's follow them.
    if (any_skipped) {
      sync_step_counts(*m_opt);
      if (m_ema) m_ema->sync_count();
    }
    const double wall = std::max(seconds(t_range, Clock::now()), 1e-9);
    m_log.position(
        epoch, m_s.num_epoch, position, n_steps, double(graphs_read) / wall, metrics.loss(),
        wall / double(std::max<int64_t>(position - first, 1)) * double(n_steps - position));
  };
  m_gnn->train();
  int64_t position = first;
  for (; position < last; ++position) {
    m_watchdog->set_context("epoch " + std::to_string(epoch) + ", step " +
                            std::to_string(m_state.step + 1));
    const auto t0 = Clock::now();
    const StepBatch sb = batches.next();
    if (sb.stop || sb.out_of_time) {  // every rank sees it at this step
      (sb.stop ? m_interrupted_at : m_out_of_time_at) = {epoch, position};
      read_pending(position);
      break;
    }
    place.step = m_state.step + 1;
    const StepResult r = m_step_fn->run(sb, place);
    if (m_first_step_s < 0) {  // the time to the first step (start-up at scale: load, split)
      m_first_step_s = seconds(m_t_start, Clock::now());
      m_first_step_rss_mb = trainer_detail::rss_mb();
      m_first_step_pss_mb = trainer_detail::pss_mb();
      m_log.line("first step done " + fmt("%.1f", m_first_step_s) + " s after start (" +
                 fmt("%.0f", m_first_step_rss_mb) + " MiB resident)");
    }
    ++m_state.step;
    ++period.steps;
    period.graphs_all += sb.graphs_all;
    period.phases.add(t0, sb, r.times);
    if (!sb.empty) metrics.add(r.prediction, sb.prepared, m_setup, r.loss, sb.graphs_all);
    if (!sb.empty && sb.prepared.bucket < 0) ++period.unpadded;
    pending.add(r, sb, place);
    if (!sb.note.line.empty()) {
      m_log.line(sb.note.line);
      m_log.event("tuner", nlohmann::json::parse(sb.note.event));
    }
    if (ChromeTrace* trace = m_log.trace())
      trace_step(*trace, t0, sb, r.times, m_state.step, bool(m_ddp));
    if (int64_t(pending.size()) >= read_every || position + 1 == last) read_pending(position + 1);
    if (m_ddp && m_s.check_parameters_every > 0 && m_state.step % m_s.check_parameters_every == 0) {
      Waiting waiting("parameter check");
      m_ddp->check_identical();
    }
    if (m_kill_step > 0 && m_state.step == m_kill_step) std::raise(SIGKILL);
  }
  period.train_s += seconds(t_range, Clock::now());
  return position;
}

void Trainer::close_period(trainer_detail::Period& p) {
  {
    Waiting waiting("training metrics all-reduce");
    p.metrics.reduce(m_comm.get());
  }
  nlohmann::json& row = p.row;
  row["step"] = m_state.step;
  row["train_loss"] = p.metrics.loss();
  // The median of this rank's batch losses (its share of each step's): what the divergence check
  // reads, which one batch cannot move.
  row["train_loss_median"] = median_of(std::move(p.losses));
  row["graphs_per_s"] = double(p.graphs_all) / std::max(p.train_s, 1e-9);
  row["graphs"] = p.graphs_all;
  row["steps"] = p.steps;
  row["skipped_steps"] = p.skipped;
  // Steps whose batch fit none of the static shapes (ran unpadded).
  if (m_setup.static_shapes) row["unpadded_steps"] = p.unpadded;
  // Runtime.cuda_graphs: steps replayed as CUDA graphs (events.jsonl).
  if (const StepGraphs* graphs = m_step_fn->graphs())
    row["replayed_steps"] = graphs->replayed() - p.replayed_before;
  row["grad_norm"] = p.steps > p.skipped && m_s.grad_clip > 0
                         ? nlohmann::json(p.gn_sum / double(p.steps - p.skipped))
                         : nlohmann::json();
  p.phases.put(row);
}

bool Trainer::evaluate_period(int64_t epoch, bool epoch_end, trainer_detail::Period& p) {
  close_period(p);
  nlohmann::json& row = p.row;
  row["epoch"] = epoch;  // where the evaluation is (the period may have begun in the last)
  const auto t_eval = Clock::now();
  SplitMetrics val_m, test_m;
  if (m_ddp) {  // batch norms (GPS): every rank evaluates, and saves, the same statistics
    std::vector<at::Tensor> buffers;
    for (const auto& b : m_gnn->named_buffers()) {
      const std::string& name = b.key();
      if (name.size() > 12 && (name.compare(name.size() - 12, 12, "running_mean") == 0 ||
                               name.compare(name.size() - 11, 11, "running_var") == 0))
        buffers.push_back(b.value());
    }
    if (!buffers.empty()) m_ddp->average_buffers(buffers);
  }
  {
    AverageSwapped average(m_ema.get());
    val_m = evaluate_split(kValidate);
    test_m = evaluate_split(kTest);
  }
  row["eval_s"] = seconds(t_eval, Clock::now());
  row["validate_loss"] = val_m.loss();
  row["test_loss"] = test_m.loss();
  if (!m_cut_reported)
    m_cut_reported = report_cut_neighbours(m_s.graph, epoch, {&p.metrics, &val_m, &test_m}, m_log);
  p.metrics.put(row, "train", m_setup);
  val_m.put(row, "validate", m_setup);
  test_m.put(row, "test", m_setup);
  return end_period(epoch, epoch_end, row, val_m, p.t_start);
}

SplitMetrics Trainer::evaluate_split(int split) {
  m_watchdog->set_context(std::string("evaluating the ") + split_name(split) + " split");
  SplitMetrics m(m_setup);
  m_gnn->eval();
  // The loss of the whole split: each batch's terms weighted by its share of the split's graphs
  // and atoms, so that it depends neither on the batching nor on the number of ranks.
  const int64_t split_graphs = m_loader->data().size(split);
  const double split_atoms = double(m_loader->split_atoms(split));
  std::vector<at::Tensor> losses;  // per batch, read once at the end: a non-finite one is named
  std::vector<std::vector<int64_t>> ids;
  m_loader->for_each_eval_batch(split, m_setup, [&](const PreparedBatch& b) {
    wait_for_upload(b);
    const Prediction p = predict(*m_gnn, m_setup.targets, b.batch, /*create_graph=*/false);
    StepShare share;
    share.graphs = double(b.batch.n_graphs) / double(split_graphs);
    share.atoms = double(b.batch.n_atoms()) / split_atoms;
    c10::NoGradGuard no_grad;
    const at::Tensor loss =
        total_loss(p, b.batch, b.columns, m_setup.targets, m_s.weights, m_s.loss, share);
    m.add(p, b, m_setup, loss, split_graphs);
    losses.push_back(loss.detach());
    ids.push_back(b.ids);
  });
  m_gnn->train();
  throw_if_any_failed(m_comm.get(),
                      nonfinite_loss_error(losses, ids, m_rank, split_name(split), m_epoch));
  Waiting waiting("evaluation metrics all-reduce");
  m.reduce(m_comm.get());
  return m;
}

}  // namespace ddgnn
