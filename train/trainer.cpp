// The epoch loop of `ddgnn train` (train/trainer.h), read top to bottom: set-up, then for every
// epoch train_epoch (steps on ready batches), evaluate_split, end_epoch (decisions, checkpoints,
// metrics row, log line).
#include "train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>

#include "comm/communicator.h"
#include "comm/mpi.h"
#include "comm/watchdog.h"
#include "core/error.h"
#include "core/log.h"
#include "core/signals.h"
#include "core/threads.h"
#include "core/version.h"
#include "model/optim.h"
#include "model/precision.h"
#include "train/checkpoint.h"
#include "train/ddp.h"
#include "train/device.h"
#include "train/divergence.h"
#include "train/loader.h"
#include "train/model_setup.h"
#include "train/report.h"
#include "train/run_log.h"
#include "train/spikes.h"
#include "train/split_metrics.h"
#include "train/start_checks.h"
#include "train/static_shapes.h"
#include "train/step.h"
#include "train/step_graphs.h"
#include "train/upload.h"

namespace ddgnn {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kSkipLines = 5;          // skipped steps given a log line, per run
constexpr int64_t kMaxSkippedInARow = 25;  // then the run stops

double median(std::vector<double> v) {
  if (v.empty()) return kNan;
  const auto mid = v.begin() + long(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2) return *mid;
  return 0.5 * (*mid + *std::max_element(v.begin(), mid));
}

double peak_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;
}

}  // namespace

class Trainer {
 public:
  Trainer(const Config& config, const TrainOptions& options)
      : m_config(config),
        m_options(options),
        m_s(train_settings(config)),
        m_comm(Communicator::dup(MPI_COMM_WORLD)),
        m_rank(m_comm.rank()),
        m_world(m_comm.size()),
        m_root(m_rank == 0) {}
  nlohmann::json run();

 private:
  nlohmann::json run_impl();
  int set_up_threads();
  void build_model(const nlohmann::json* resume_record);
  void log_start(int threads, const std::string& resume_path);
  void begin_stage_two(int64_t epoch);
  void train_epoch(int64_t epoch, nlohmann::json& row, SplitMetrics& metrics);
  SplitMetrics evaluate_split(int split);
  // After a step where a rank was asked to stop: interrupted.pt on rank 0, then an Error on every
  // rank (the process exits non-zero).
  [[noreturn]] void stop_on_signal();
  // Decisions, checkpoints, the metrics row and the log line; true when the run stops here.
  bool end_epoch(int64_t epoch, nlohmann::json& row, const SplitMetrics& val_m,
                 Clock::time_point t0);
  // A step the spike guard skipped: its event, a log line for the run's first few, and the stop
  // after kMaxSkippedInARow in a row.
  void note_skipped_step(const PendingSteps::Read& s, int64_t epoch);
  // A spike the guard applied after skipping the steps before it: its event and, for the run's
  // first few, a log line.
  void note_applied_spike(const PendingSteps::Read& s, int64_t epoch);
  void write_checkpoint(const std::string& path, bool with_optimizer);
  TrainedObjects trained() {
    return {m_gnn.get(), &m_params, m_opt.get(), m_ema.get(), m_plateau.get(), m_early.get()};
  }
  double elapsed() const { return m_elapsed_before + seconds(m_t_start, Clock::now()); }

  const Config& m_config;
  TrainOptions m_options;
  TrainSettings m_s;
  Communicator m_comm;  // the main thread's collectives: gradients, metrics, decisions
  int m_rank = 0, m_world = 1;
  bool m_root = true;  // rank 0 writes the run directory and logs
  // DDGNN_DEBUG_SIGKILL_AT_STEP=S: every rank dies at step S (tests of resuming).
  const int64_t m_kill_step = std::getenv("DDGNN_DEBUG_SIGKILL_AT_STEP")
                                  ? std::atoll(std::getenv("DDGNN_DEBUG_SIGKILL_AT_STEP"))
                                  : -1;
  std::unique_ptr<Watchdog> m_watchdog;  // Comm.timeout_s
  Placement m_place;                     // this rank's device (Runtime.device)
  std::unique_ptr<Loader> m_loader;
  ModelSetup m_setup;
  std::shared_ptr<Gnn> m_gnn;
  std::vector<at::Tensor> m_params;
  std::unique_ptr<DataParallel> m_ddp;  // several ranks
  std::unique_ptr<torch::optim::Optimizer> m_opt;
  std::unique_ptr<WeightAverage> m_ema;  // Training.ema_decay > 0
  std::unique_ptr<ReduceLROnPlateau> m_plateau;
  std::unique_ptr<EarlyStopping> m_early;
  std::unique_ptr<TrainStep> m_step_fn;
  RunLog m_log{m_root, m_s.log_all_ranks};  // rank 0's run directory and log lines
  bool m_forces = false;                    // the model predicts forces and the data has them
  std::optional<std::pair<int64_t, int64_t>> m_interrupted_at;  // (epoch, steps done) on a signal
  bool m_cut_reported = false;  // max_neighbours cut some atom's neighbours (warned)
  RunState m_state;             // step, best epoch so far (epoch: set when a checkpoint is written)
  int64_t m_skipped = 0, m_skipped_in_a_row = 0;  // steps the spike guard skipped (this process)
  int64_t m_spikes_applied = 0;                   // and spikes it applied
  int64_t m_start_epoch = 1;
  nlohmann::json m_last_row;
  std::string m_stop_reason = "num_epoch";
  Clock::time_point m_t_start = Clock::now();
  double m_elapsed_before = 0.0;  // training seconds of the run before a resume
};

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
  if (m_loader->periodic_graphs() > 0 && !m_s.periodic && m_root)
    spdlog::warn(
        "{} graphs have periodic cells, but Architecture.periodic_boundary_conditions is "
        "false: their cells are ignored (no edges across the boundary)",
        m_loader->periodic_graphs());
  if (m_root) prepare_run_dir(m_s.run_dir, m_s.resume, m_options.overwrite);
  m_loader->start_switcher(m_root ? m_s.run_dir + "/tuner.csv" : "", m_s.resume);

  std::string resume_path;
  nlohmann::json resume_record;
  if (m_s.resume) {
    resume_path = resolve_startfrom(m_s.run_dir, m_s.startfrom);
    resume_record = read_checkpoint_record(resume_path);
  }
  build_model(m_s.resume ? &resume_record : nullptr);
  if (m_s.resume) {
    m_state = restore_run_checkpoint(resume_path, resume_record, trained());
    m_start_epoch = m_state.epoch + 1;
    m_elapsed_before = m_state.elapsed_s;
  }
  if (m_root) {  // the run directory is rank 0's
    write_resolved_config(m_config, m_s.run_dir + "/config.resolved.json");
    m_log.open(m_s.run_dir, metric_columns(m_setup, m_forces), m_s.resume, m_start_epoch - 1,
               m_state.last_row, m_s.trace_steps, progress_wanted(m_s.progress, m_s.verbosity));
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

  int64_t epoch = m_start_epoch;
  for (; epoch <= m_s.num_epoch; ++epoch) {
    if (m_s.stage_two_start > 0 && epoch == std::max(m_s.stage_two_start, m_start_epoch))
      begin_stage_two(epoch);  // its first epoch, or the first after a resume inside it
    const auto t_epoch = Clock::now();
    const double lr = get_lr(*m_opt) * warmup_factor(m_state.step + 1, m_s.warmup_steps);
    nlohmann::json row = {{"epoch", epoch}, {"lr", lr}};  // the rate of the epoch's first step
    row.update(baseline);
    SplitMetrics train_m(m_setup);
    train_epoch(epoch, row, train_m);
    if (m_interrupted_at) stop_on_signal();
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
      m_cut_reported = report_cut_neighbours(m_s.graph, epoch, {&train_m, &val_m, &test_m}, m_log);
    train_m.put(row, "train", m_setup);
    val_m.put(row, "validate", m_setup);
    test_m.put(row, "test", m_setup);
    if (end_epoch(epoch, row, val_m, t_epoch)) break;
  }
  m_log.finish();
  nlohmann::json summary = {
      {"stop", m_stop_reason},
      {"epochs", m_last_row.is_null() ? m_start_epoch - 1 : m_last_row["epoch"].get<int64_t>()},
      {"best_epoch", m_state.best_epoch},
      {"best", m_state.best_row},
      {"last", m_last_row},
      {"run_dir", m_s.run_dir},
      {"elapsed_s", elapsed()},
      {"peak_rss_mb", peak_rss_mb()}};
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
  m_gnn = std::make_shared<Gnn>(m_setup.spec);
  m_gnn->to(m_setup.device, to_dtype(m_setup.precision));
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
    m_log.event("resume", start);
    m_log.line("resuming " + resume_path + " after epoch " + std::to_string(m_start_epoch - 1));
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

void Trainer::train_epoch(int64_t epoch, nlohmann::json& row, SplitMetrics& metrics) {
  Batches batches = m_loader->train_epoch(epoch, m_setup);
  PhaseSeconds phases;
  PendingSteps pending(m_s.spike_factor);
  double gn_sum = 0;
  int64_t graphs_all = 0, graphs_read = 0, steps = 0, unpadded = 0, skipped = 0;
  std::vector<double> losses;  // this rank's finite step losses, for their median
  const StepGraphs* graphs = m_step_fn->graphs();
  const int64_t replayed_before = graphs ? graphs->replayed() : 0;
  const int64_t n_train = m_loader->data().size(kTrain);
  StepPlace place{epoch, 0, m_rank, m_world, m_loader->data().dataset(kTrain).path()};
  const auto t_epoch = Clock::now();
  // The host reads the steps' losses every read_every steps (each read waits for the device).
  const int64_t read_every =
      m_s.read_every_steps > 0 ? m_s.read_every_steps : (m_place.gpu >= 0 ? 25 : 1);
  const auto read_pending = [&] {
    bool any_skipped = false;
    for (const PendingSteps::Read& s : pending.read()) {
      if (s.has_loss && std::isfinite(s.loss)) losses.push_back(s.loss);
      if (s.skipped) {
        any_skipped = true;
        ++skipped;
        note_skipped_step(s, epoch);
      } else {
        m_skipped_in_a_row = 0;
        gn_sum += s.grad_norm;
        if (s.spike_applied) note_applied_spike(s, epoch);
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
    const double rate = double(graphs_read) / std::max(seconds(t_epoch, Clock::now()), 1e-9);
    if (ProgressLine* progress = m_log.progress())
      progress->update(epoch, m_s.num_epoch, graphs_read, n_train, rate, metrics.loss(),
                       double(n_train - graphs_read) / rate);
  };
  m_gnn->train();
  for (size_t i = 0; i < batches.size(); ++i) {
    m_watchdog->set_context("epoch " + std::to_string(epoch) + ", step " +
                            std::to_string(m_state.step + 1));
    const auto t0 = Clock::now();
    const StepBatch sb = batches.next();
    if (sb.stop) {  // every rank sees it at this step
      m_interrupted_at = {epoch, int64_t(i)};
      read_pending();
      break;
    }
    place.step = m_state.step + 1;
    const StepResult r = m_step_fn->run(sb, place);
    ++m_state.step;
    ++steps;
    graphs_all += sb.graphs_all;
    phases.add(t0, sb, r.times);
    if (!sb.empty) metrics.add(r.prediction, sb.prepared, m_setup, r.loss, sb.graphs_all);
    if (!sb.empty && sb.prepared.bucket < 0) ++unpadded;
    pending.add(r, sb, place);
    if (!sb.note.line.empty()) {
      m_log.line(sb.note.line);
      m_log.event("tuner", nlohmann::json::parse(sb.note.event));
    }
    if (ChromeTrace* trace = m_log.trace())
      trace_step(*trace, t0, sb, r.times, m_state.step, bool(m_ddp));
    if (int64_t(pending.size()) >= read_every || i + 1 == batches.size()) read_pending();
    if (m_ddp && m_s.check_parameters_every > 0 && m_state.step % m_s.check_parameters_every == 0) {
      Waiting waiting("parameter check");
      m_ddp->check_identical();
    }
    if (m_kill_step > 0 && m_state.step == m_kill_step) std::raise(SIGKILL);
  }
  const double wall = seconds(t_epoch, Clock::now());
  {
    Waiting waiting("training metrics all-reduce");
    metrics.reduce(m_comm.get());
  }
  row["train_loss"] = metrics.loss();
  // The median of this rank's batch losses (its share of each step's): what the divergence check
  // reads, which one batch cannot move.
  row["train_loss_median"] = median(losses);
  row["graphs_per_s"] = double(graphs_all) / std::max(wall, 1e-9);
  row["steps"] = steps;
  row["skipped_steps"] = skipped;
  // Steps whose batch fit none of the static shapes (ran unpadded).
  if (m_setup.static_shapes) row["unpadded_steps"] = unpadded;
  // Runtime.cuda_graphs: steps replayed as CUDA graphs (events.jsonl).
  if (graphs) row["replayed_steps"] = graphs->replayed() - replayed_before;
  row["grad_norm"] = steps > skipped && m_s.grad_clip > 0
                         ? nlohmann::json(gn_sum / double(steps - skipped))
                         : nlohmann::json();
  phases.put(row);
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
  throw_if_any_failed(m_comm.get(), nonfinite_loss_error(losses, ids, m_rank, split_name(split),
                                                         m_state.epoch + 1));
  Waiting waiting("evaluation metrics all-reduce");
  m.reduce(m_comm.get());
  return m;
}

bool Trainer::end_epoch(int64_t epoch, nlohmann::json& row, const SplitMetrics& val_m,
                        Clock::time_point t_epoch) {
  // Every decision below from rank 0's figures, so that all ranks take the same branch.
  const double median_in = row.value("train_loss_median", kNan);
  double decide[4] = {val_m.loss(), elapsed(), row.value("train_loss", 0.0), median_in};
  {
    Waiting waiting("broadcast of the epoch's decisions");
    MPI_CHECK(MPI_Bcast(decide, 4, MPI_DOUBLE, 0, m_comm.get()));
  }
  const double val_loss = decide[0], elapsed_s = decide[1], train_loss = decide[2];
  const double loss_median = decide[3];
  m_state.epoch = epoch;
  // A diverged model is not checkpointed; the run stops after this epoch's row.
  const Divergence divergence =
      check_divergence(m_state, loss_median, epoch, m_s.divergence_factor);
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
  const bool last = epoch == m_s.num_epoch || stop_early || out_of_time;

  // Checkpoints: on schedule after the warm-up, and always after the last epoch.
  const auto t_ck = Clock::now();
  if (improved) m_state.best_row = row;
  // The row goes into the checkpoint too: a kill between the checkpoint's rename and the row's
  // append below must not lose the epoch's row (resuming writes it from the checkpoint).
  m_state.last_row = row;
  if (m_s.checkpoint && m_root && !diverged) {
    const std::string dir = m_s.run_dir + "/checkpoints";
    if (improved && epoch > m_s.checkpoint_warmup) write_checkpoint(dir + "/best.pt", false);
    if (last || (epoch > m_s.checkpoint_warmup && epoch % m_s.checkpoint_every == 0)) {
      write_checkpoint(dir + "/" + checkpoint_name(epoch), true);
      keep_latest_checkpoints(dir, m_s.keep_checkpoints);
      m_log.event("checkpoint", {{"epoch", epoch}, {"path", dir + "/" + checkpoint_name(epoch)}});
    }
  }
  row["checkpoint_s"] = seconds(t_ck, Clock::now());
  row["epoch_s"] = seconds(t_epoch, Clock::now());
  row["elapsed_s"] = elapsed();
  row["peak_rss_mb"] = peak_rss_mb();
  m_log.metrics_row(row);
  m_log.event("epoch", row);
  m_log.line(epoch_line(row, m_s.num_epoch, m_setup.targets.energy_head >= 0, m_forces, improved,
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
    m_log.event("time_limit", {{"epoch", epoch}, {"elapsed_s", elapsed_s}});
    m_log.line("time limit reached (" + fmt("%.0f", m_s.time_limit_s) + " s)");
    return true;
  }
  return false;
}

void Trainer::note_skipped_step(const PendingSteps::Read& s, int64_t epoch) {
  ++m_skipped;
  ++m_skipped_in_a_row;
  m_log.event("skipped_step", {{"epoch", epoch},
                               {"step", s.step},
                               {"why", s.why},
                               {"loss", s.loss},
                               {"grad_norm", s.grad_norm},
                               {"graphs", s.graphs_text}});
  if (m_skipped <= kSkipLines)
    m_log.line(
        "skipped " + s.where + ": " + s.why + s.graphs_text +
        (m_skipped == kSkipLines ? "; further skipped steps only in events.jsonl" : std::string()));
  if (m_skipped_in_a_row < kMaxSkippedInARow) return;
  TrainingError e(
      std::to_string(kMaxSkippedInARow) + " steps in a row were skipped, the last at " + s.where +
          ": " + s.why + s.graphs_text,
      "the steps before these left weights that fail on every batch: lower "
      "Training.Optimizer.learning_rate (now " +
          fmt("%g", m_s.learning_rate) + ")" +
          (m_s.warmup_steps > 0 ? std::string()
                                : " or raise it gradually (Training.warmup_steps, e.g. a few "
                                  "hundred steps; none is set)") +
          (s.has_loss && !std::isfinite(s.loss)
               ? ", and check those graphs with `ddgnn info`"
               : "; if the losses rose for a reason (new loss weights, a higher rate), raise "
                 "Training.spike_factor (now " +
                     fmt("%g", m_s.spike_factor) + ") or set it to 0"));
  e.set_reported_by(0);
  throw e;
}

void Trainer::note_applied_spike(const PendingSteps::Read& s, int64_t epoch) {
  ++m_spikes_applied;
  m_log.event("spike_applied", {{"epoch", epoch},
                                {"step", s.step},
                                {"loss", s.loss},
                                {"grad_norm", s.grad_norm},
                                {"graphs", s.graphs_text}});
  if (m_spikes_applied <= kSkipLines)
    m_log.line("applied " + s.where + " although far above the median of the last steps (loss " +
               fmt("%.4g", s.loss) + ", gradient norm " + fmt("%.4g", s.grad_norm) + "): the " +
               std::to_string(SpikeGuard::kMaxSpikesInARow) +
               " steps before it were skipped, so the weights are the cause, not a batch, and "
               "their gradient is what corrects them" +
               (m_s.grad_clip > 0
                    ? " (clipped at Training.grad_clip " + fmt("%g", m_s.grad_clip) + ")"
                    : std::string()));
}

void Trainer::stop_on_signal() {
  const auto [epoch, done] = *m_interrupted_at;
  const int signal = stop_signal();
  const std::string by = signal ? signal_name(signal) : "a signal to another rank";
  const std::string ckdir = m_s.run_dir + "/checkpoints";
  if (m_root) {
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

void Trainer::write_checkpoint(const std::string& path, bool with_optimizer) {
  const TrainData& data = m_loader->data();
  nlohmann::json r;
  r["model"] = to_json(m_setup);
  r["ddgnn_version"] = DDGNN_VERSION;
  r["config"] = m_config.resolved;
  r["split"] = {{"perc_train", m_s.perc_train},
                {"seed", m_s.seed},
                {"single", m_s.data.single},
                {"train", m_s.data.train},
                {"validate", m_s.data.validate},
                {"test", m_s.data.test},
                {"n_graphs", data.dataset(kTrain).n_graphs()},
                {"split_by", to_string(m_s.split_by)},
                {"split_block", m_s.split_block}};
  RunState state = m_state;
  state.elapsed_s = elapsed();
  save_run_checkpoint(path, trained(), state, std::move(r), with_optimizer);
}

}  // namespace ddgnn
