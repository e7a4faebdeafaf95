// The training loop of `ddgnn train` on the ranks of MPI_COMM_WORLD (one without mpiexec).
// Overview in trainer.h; file formats of the run directory in DESIGN.md.
#include "app/trainer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <regex>
#include <thread>

#include "app/backend_switcher.h"
#include "app/checkpoint.h"
#include "app/ddp.h"
#include "app/model_setup.h"
#include "app/run_log.h"
#include "app/train_data.h"
#include "app/train_settings.h"
#include "comm/mpi.h"
#include "core/error.h"
#include "core/threads.h"
#include "core/version.h"
#include "loader/sampler.h"
#include "loader/split.h"
#include "model/metrics.h"
#include "model/optim.h"
#include "model/segment.h"

namespace ddgnn {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double peak_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;
}

// One step's batch on this rank: the prepared graphs (none when this rank has no sample in the
// step), and for training the graphs and atoms of the step on all ranks (the loss shares).
struct StepBatch {
  PreparedBatch prepared;
  bool empty = true;
  int64_t graphs_all = 0, atoms_all = 0;
  double fetch_s = 0.0;  // moving the records (the backend's part of loading)
  Clock::time_point t_fetch, t_fetched, t_built;  // the builder's phases, for the trace
  SwitchNote note;  // the backend switcher's explorations and decisions (training, auto)
};

// Fetches and prepares batches on a background thread, `depth` ahead of the consumer (depth 0:
// on demand). The thread is the only one that uses the loader's communicators while it runs
// (fetches, and the per-step count sums over `count_comm` when given). Errors of the builder are
// rethrown by next().
class Prefetcher {
 public:
  Prefetcher(TrainData& data, int split, std::vector<std::vector<int64_t>> batches,
             const ModelSetup& setup, int64_t depth, MPI_Comm count_comm = MPI_COMM_NULL,
             BackendSwitcher* switcher = nullptr)
      : m_data(data),
        m_switcher(switcher),
        m_split(split),
        m_batches(std::move(batches)),
        m_setup(setup),
        m_depth(depth),
        m_count_comm(count_comm) {
    if (m_depth > 0) m_thread = std::thread([this] { produce(); });
  }
  ~Prefetcher() {
    std::unique_lock<std::mutex> lock(m_mutex);
    m_stop = true;
    m_cv.notify_all();
    if (!m_thread.joinable()) return;
    // Unwinding after an error on one of several ranks: the builder may sit in a collective
    // fetch that the other ranks, waiting for this one elsewhere, never join. It is left there;
    // the error path stops the whole job (MPI_Abort) right after.
    if (std::uncaught_exceptions() > 0 && world_size_or_one() > 1 &&
        !m_cv.wait_for(lock, std::chrono::seconds(2), [&] { return m_finished; })) {
      lock.unlock();
      m_thread.detach();
      return;
    }
    lock.unlock();
    m_thread.join();
  }
  size_t size() const { return m_batches.size(); }
  StepBatch next() {
    if (m_depth == 0) return build(m_batches[m_taken++]);
    std::unique_lock<std::mutex> lock(m_mutex);
    m_cv.wait(lock, [&] { return !m_queue.empty() || m_error; });
    if (m_queue.empty() && m_error) std::rethrow_exception(m_error);
    StepBatch b = std::move(m_queue.front());
    m_queue.pop_front();
    ++m_taken;
    lock.unlock();
    m_cv.notify_all();
    return b;
  }

 private:
  StepBatch build(const std::vector<int64_t>& positions) {
    StepBatch b;
    b.t_fetch = Clock::now();
    const GraphBlock block = m_switcher ? m_switcher->fetch(positions, nullptr, &b.note)
                                        : m_data.fetch(m_split, positions);
    b.t_fetched = Clock::now();
    b.fetch_s = seconds(b.t_fetch, b.t_fetched);
    int64_t counts[2] = {int64_t(block.n_graphs()), 0};
    for (int32_t n : block.n_atoms) counts[1] += n;
    if (m_count_comm != MPI_COMM_NULL)
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT64_T, MPI_SUM, m_count_comm));
    b.graphs_all = counts[0];
    b.atoms_all = counts[1];
    b.empty = block.n_graphs() == 0;
    if (!b.empty) {
      std::vector<int64_t> ids(block.n_graphs());
      for (size_t k = 0; k < ids.size(); ++k) ids[k] = int64_t(k);
      b.prepared = prepare_batch(block, ids, m_setup);
      b.prepared.ids = block.graph_ids;  // file ids, for messages and predictions
    }
    b.t_built = Clock::now();
    return b;
  }
  void produce() {
    try {
      for (size_t i = 0; i < m_batches.size(); ++i) {
        {
          std::unique_lock<std::mutex> lock(m_mutex);
          m_cv.wait(lock, [&] { return m_stop || int64_t(m_queue.size()) < m_depth; });
          if (m_stop) break;
        }
        StepBatch b = build(m_batches[i]);
        {
          std::lock_guard<std::mutex> lock(m_mutex);
          m_queue.push_back(std::move(b));
        }
        m_cv.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(m_mutex);
    m_finished = true;
    m_cv.notify_all();
  }

  TrainData& m_data;
  BackendSwitcher* m_switcher;  // training batches under Loader.backend auto
  int m_split;
  std::vector<std::vector<int64_t>> m_batches;
  const ModelSetup& m_setup;
  int64_t m_depth;
  MPI_Comm m_count_comm;
  size_t m_taken = 0;
  std::thread m_thread;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<StepBatch> m_queue;
  std::exception_ptr m_error;
  bool m_stop = false, m_finished = false;
};

// Errors of one split in physical units: energy and forces (MetricsAccumulator) and each column
// head's MAE / RMSE.
struct SplitMetrics {
  MetricsAccumulator ef;
  std::vector<long double> col_abs, col_sq;
  std::vector<int64_t> col_n;
  double loss_sum = 0.0;
  int64_t loss_graphs = 0;

  explicit SplitMetrics(size_t n_heads = 0)
      : col_abs(n_heads, 0), col_sq(n_heads, 0), col_n(n_heads, 0) {}
  double loss() const { return loss_graphs ? loss_sum / double(loss_graphs) : NAN; }

  // loss: the batch's loss; it counts for `loss_graphs_all` graphs (default: the batch's; in a
  // step shared by ranks, this rank's share of the step's loss counts for the step's graphs).
  void add(const Prediction& p, const PreparedBatch& b, const ModelSetup& setup, double loss,
           int64_t loss_graphs_all = -1) {
    const GraphBatch& batch = b.batch;
    loss_sum += loss * double(loss_graphs_all >= 0 ? loss_graphs_all : batch.n_graphs);
    loss_graphs += batch.n_graphs;
    if (p.energy.defined()) {
      const std::vector<double> pred = energies_ev(p.energy, b, setup.norm);
      const std::vector<double> ref = energies_ev(batch.energy, b, setup.norm);
      const at::Tensor n = batch.atoms_per_graph.contiguous();
      ef.add_energies(pred.data(), ref.data(), n.data_ptr<int64_t>(), batch.n_graphs);
    }
    if (p.forces.defined() && batch.forces.defined()) {
      const std::vector<double> pred = to_doubles(p.forces, setup.norm.scale);
      const std::vector<double> ref = to_doubles(batch.forces, setup.norm.scale);
      ef.add_forces(pred.data(), ref.data(), batch.n_atoms());
    }
    for (size_t k = 0; k < setup.targets.size(); ++k) {
      if (setup.targets[k].source != TargetSource::kColumn) continue;
      const at::Tensor std_t = at::tensor(setup.norm.column_std[k], at::kDouble).view({1, -1});
      const at::Tensor d =
          (p.outputs[k].detach().to(at::kDouble) - b.columns[k].to(at::kDouble)) * std_t;
      col_abs[k] += d.abs().sum().item<double>();
      col_sq[k] += (d * d).sum().item<double>();
      col_n[k] += d.numel();
    }
  }
  // Adds up every rank's sums (collective over `comm`).
  void reduce(MPI_Comm comm) {
    int size = 1;
    MPI_CHECK(MPI_Comm_size(comm, &size));
    if (size == 1) return;
    std::vector<long double> v;
    const auto ef_sums = ef.sums();
    v.insert(v.end(), ef_sums.begin(), ef_sums.end());
    v.push_back(loss_sum);
    v.push_back((long double)loss_graphs);
    v.insert(v.end(), col_abs.begin(), col_abs.end());
    v.insert(v.end(), col_sq.begin(), col_sq.end());
    for (int64_t n : col_n) v.push_back((long double)n);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v.data(), int(v.size()), MPI_LONG_DOUBLE, MPI_SUM, comm));
    std::array<long double, MetricsAccumulator::kSums> e;
    std::copy(v.begin(), v.begin() + e.size(), e.begin());
    ef.set_sums(e);
    size_t k = e.size();
    loss_sum = double(v[k++]);
    loss_graphs = int64_t(v[k++]);
    for (auto& x : col_abs) x = v[k++];
    for (auto& x : col_sq) x = v[k++];
    for (auto& x : col_n) x = int64_t(v[k++]);
  }
  void put(nlohmann::json& row, const std::string& split, const ModelSetup& setup) const {
    const ErrorMetrics m = ef.result();
    if (m.n_graphs > 0) {
      row[split + "_energy_mae_mev_atom"] = m.energy_mae_mev_per_atom;
      row[split + "_energy_rmse_mev_atom"] = m.energy_rmse_mev_per_atom;
    }
    if (m.n_force_components > 0) {
      row[split + "_force_mae_mev_a"] = m.force_mae_mev_per_a;
      row[split + "_force_rmse_mev_a"] = m.force_rmse_mev_per_a;
    }
    for (size_t k = 0; k < setup.targets.size(); ++k)
      if (col_n[k] > 0) {
        row[split + "_" + setup.targets[k].name + "_mae"] = double(col_abs[k] / col_n[k]);
        row[split + "_" + setup.targets[k].name + "_rmse"] =
            double(std::sqrt(col_sq[k] / col_n[k]));
      }
  }
};

std::vector<std::string> metric_columns(const ModelSetup& setup, bool forces) {
  std::vector<std::string> c = {"epoch", "lr", "train_loss", "validate_loss", "test_loss"};
  for (const char* split : {"train", "validate", "test"}) {
    const std::string s = split;
    if (setup.energy_head >= 0) {
      c.push_back(s + "_energy_mae_mev_atom");
      c.push_back(s + "_energy_rmse_mev_atom");
    }
    if (forces) {
      c.push_back(s + "_force_mae_mev_a");
      c.push_back(s + "_force_rmse_mev_a");
    }
    for (const auto& t : setup.targets)
      if (t.source == TargetSource::kColumn) {
        c.push_back(s + "_" + t.name + "_mae");
        c.push_back(s + "_" + t.name + "_rmse");
      }
  }
  for (const char* t : {"graphs_per_s", "steps", "grad_norm", "load_s", "fetch_s", "graph_s",
                        "forward_s", "forces_s", "backward_s", "sync_s", "optimizer_s", "eval_s",
                        "checkpoint_s", "epoch_s", "elapsed_s", "peak_rss_mb"})
    c.push_back(t);
  return c;
}

// Trivial baseline of a split: the training set's mean energy per atom times n_atoms, zero
// forces; this rank's share of the split (TrainData::visit_local), its sums still to be reduced.
MetricsAccumulator baseline(const TrainData& data, int split, double mean_epa, bool forces) {
  MetricsAccumulator acc;
  data.visit_local(split, [&](const GraphBlock& b, const std::vector<int64_t>& ids) {
    for (int64_t id : ids) {
      const int64_t n = b.n_atoms[size_t(id)];
      const double pred = mean_epa * double(n);
      acc.add_energies(&pred, &b.energy[size_t(id)], &n, 1);
      if (forces && !b.forces.empty()) {
        const std::vector<double> zero(size_t(3 * n), 0.0);
        acc.add_forces(zero.data(), b.forces.data() + 3 * b.atom_start[size_t(id)], n);
      }
    }
  });
  return acc;
}

nlohmann::json generator_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  const at::Tensor st = gen.get_state().contiguous();
  const uint8_t* p = st.data_ptr<uint8_t>();
  return std::vector<int>(p, p + st.numel());
}

void set_generator_state(const nlohmann::json& j) {
  const std::vector<int> v = j.get<std::vector<int>>();
  at::Tensor st = at::empty({int64_t(v.size())}, at::kByte);
  for (size_t i = 0; i < v.size(); ++i) st.data_ptr<uint8_t>()[i] = uint8_t(v[i]);
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(st);
}

// Checkpoints of a run directory, oldest first.
std::vector<std::string> epoch_checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  if (!fs::is_directory(dir)) return out;
  static const std::regex pattern(R"(epoch_\d{5}\.pt)");
  for (const auto& e : fs::directory_iterator(dir))
    if (std::regex_match(e.path().filename().string(), pattern)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string checkpoint_name(int64_t epoch) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "epoch_%05lld.pt", (long long)epoch);
  return buf;
}

// The checkpoint `startfrom` names: "existing_model" (or empty) = the latest of the run; else a
// path as given, or a name in <run_dir>/checkpoints (".pt" optional).
std::string resolve_startfrom(const TrainSettings& s) {
  const std::string dir = s.run_dir + "/checkpoints";
  if (s.startfrom.empty() || s.startfrom == "existing_model") {
    const auto all = epoch_checkpoints(dir);
    if (all.empty())
      throw ConfigError("Training.continue: no checkpoint to resume from in " + dir,
                        "train once without continue, or set Training.startfrom to a checkpoint "
                        "file");
    return all.back();
  }
  for (const std::string& p :
       {s.startfrom, dir + "/" + s.startfrom, dir + "/" + s.startfrom + ".pt"})
    if (fs::is_regular_file(p)) return p;
  throw ConfigError(
      "Training.startfrom: checkpoint '" + s.startfrom + "' not found (looked in " + dir + " too)",
      "give a checkpoint file, or \"existing_model\" for the latest of the run");
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string metric_triplet(const nlohmann::json& row, const std::string& key) {
  std::string out;
  for (const char* split : {"train", "validate", "test"}) {
    const std::string k = std::string(split) + "_" + key;
    out += (out.empty() ? "" : "/") +
           (row.contains(k) ? fmt("%.3g", row[k].get<double>()) : std::string("-"));
  }
  return out;
}

// The PNA layers' in-degree histogram over (at most 2000 graphs of) the training split, this
// rank's share of them; summed over the ranks by the caller.
std::vector<int64_t> degree_histogram(const TrainData& data, const ModelSetup& setup,
                                      int64_t max_graphs) {
  std::vector<int64_t> hist;
  int64_t seen = 0;
  data.visit_local(kTrain, [&](const GraphBlock& block, const std::vector<int64_t>& all) {
    for (size_t i = 0; i < all.size() && seen < max_graphs; i += 64) {
      const size_t end = std::min(all.size(), i + size_t(std::min<int64_t>(64, max_graphs - seen)));
      const std::vector<int64_t> ids(all.begin() + long(i), all.begin() + long(end));
      seen += int64_t(ids.size());
      const PreparedBatch b = prepare_batch(block, ids, setup);
      const at::Tensor deg = at::bincount(b.batch.edge_index[1], {}, b.batch.n_atoms());
      const at::Tensor h = at::bincount(deg);
      const int64_t* hp = h.data_ptr<int64_t>();
      if (hist.size() < size_t(h.numel())) hist.resize(size_t(h.numel()), 0);
      for (int64_t k = 0; k < h.numel(); ++k) hist[size_t(k)] += hp[k];
    }
  });
  return hist;
}

// A communicator of its own (MPI_Comm_dup of the world), freed with the object.
class OwnComm {
 public:
  explicit OwnComm(MPI_Comm of) {
    MPI_CHECK(MPI_Comm_dup(of, &m_comm));
    MPI_CHECK(MPI_Comm_set_errhandler(m_comm, MPI_ERRORS_RETURN));
  }
  ~OwnComm() {
    if (mpi_active()) MPI_Comm_free(&m_comm);
  }
  OwnComm(const OwnComm&) = delete;
  OwnComm& operator=(const OwnComm&) = delete;
  MPI_Comm get() const { return m_comm; }

 private:
  MPI_Comm m_comm = MPI_COMM_NULL;
};

class Trainer {
 public:
  // MPI must be up: the ranks of MPI_COMM_WORLD train together (one rank without mpiexec).
  Trainer(const Config& config, const TrainOptions& options)
      : m_config(config),
        m_options(options),
        m_s(train_settings(config)),
        m_comm(MPI_COMM_WORLD),
        m_count_comm(MPI_COMM_WORLD),
        m_rank(comm_rank(MPI_COMM_WORLD)),
        m_world(comm_size(MPI_COMM_WORLD)),
        m_root(m_rank == 0) {}
  nlohmann::json run();

 private:
  nlohmann::json run_impl();
  void load_data();
  void prepare_run_dir();
  void build_model(const nlohmann::json* resume_record);
  void log_baseline();
  // One epoch of training; fills the train metrics and timing of `row`.
  void train_epoch(int64_t epoch, nlohmann::json& row, SplitMetrics& metrics);
  // Errors of a validation or test split over all ranks (each evaluates its share).
  SplitMetrics evaluate_split(int split);
  void write_checkpoint(const std::string& path, int64_t epoch, bool with_optimizer);
  nlohmann::json record(int64_t epoch) const;
  void log_line(const std::string& line);
  void event(const std::string& name, const nlohmann::json& data);
  // Sums over the ranks whose shares of the data cover it once (TrainData::sum_stats).
  void sum_stats(long double* v, int64_t n) const { m_data->sum_stats(v, n); }

  const Config& m_config;
  TrainOptions m_options;
  TrainSettings m_s;
  OwnComm m_comm;        // the main thread's collectives: gradients, metrics, decisions
  OwnComm m_count_comm;  // the prefetch thread's per-step sums of graphs and atoms
  int m_rank = 0, m_world = 1;
  bool m_root = true;  // rank 0 writes the run directory and logs
  ModelSetup m_setup;
  std::unique_ptr<TrainData> m_data;
  std::unique_ptr<BackendSwitcher> m_switcher;  // Loader.backend auto on several ranks
  std::vector<int32_t> m_train_atoms;           // atoms of each training position (atom budget)
  int64_t m_split_atoms[3] = {0, 0, 0};         // atoms of each split, all ranks
  std::shared_ptr<Gnn> m_gnn;
  std::vector<at::Tensor> m_params;
  std::unique_ptr<DataParallel> m_ddp;  // several ranks
  std::unique_ptr<torch::optim::Optimizer> m_opt;
  std::unique_ptr<WeightAverage> m_ema;  // Training.ema_decay > 0
  std::unique_ptr<ReduceLROnPlateau> m_plateau;
  std::unique_ptr<EarlyStopping> m_early;
  std::unique_ptr<MetricsCsv> m_csv;
  std::unique_ptr<EventLog> m_events;
  std::unique_ptr<ChromeTrace> m_trace;
  std::unique_ptr<ProgressLine> m_progress;
  std::vector<PreparedBatch> m_eval_cache[3];  // this rank's validation / test batches
  bool m_eval_cached[3] = {false, false, false};
  bool m_cache_eval = true;
  bool m_forces = false;  // the model predicts forces and the data has them
  int64_t m_start_epoch = 1, m_step = 0;
  double m_best_val = INFINITY;
  int64_t m_best_epoch = 0;
  nlohmann::json m_best_row;
  int64_t m_kill_at_step = -1;  // DDGNN_DEBUG_SIGKILL_AT_STEP: tests of resume after SIGKILL
  // DDGNN_DEBUG_FAIL_AT_STEP=R:S: rank R throws at step S (tests that no rank hangs)
  int64_t m_fail_rank = -1, m_fail_step = -1;
  Clock::time_point m_t_start = Clock::now();
  double m_elapsed_before = 0.0;  // training seconds of the run before a resume
};

void Trainer::log_line(const std::string& line) {
  if (!m_root) return;
  if (m_progress) m_progress->clear();
  spdlog::info("{}", line);
}

void Trainer::event(const std::string& name, const nlohmann::json& data) {
  if (m_events) m_events->write(name, data);
}

void Trainer::load_data() {
  if (m_s.grad_sync == "nccl")
    throw ConfigError("Comm.grad_sync: \"nccl\" needs CUDA training, which this build lacks",
                      "set Comm.grad_sync to \"mpi\" or \"auto\"");
  m_data = std::make_unique<TrainData>(m_s, m_comm.get());
  bind_targets(m_s, m_data->dataset(kTrain));
  for (int k : {kValidate, kTest})
    if (&m_data->dataset(k) != &m_data->dataset(kTrain)) {
      TrainSettings copy = m_s;
      bind_targets(copy, m_data->dataset(k));
    }
  const auto& r = m_data->load_report();
  const double mib = double(1 << 20);
  std::string backend = m_data->backend();
  if (m_data->switchable()) {
    backend = "auto (the tuner chooses among";
    for (const auto& b : m_data->candidates()) backend += " " + b;
    backend += ")";
  }
  log_line("loader: backend " + backend + ", " + std::to_string(m_world) + " rank(s), " +
           std::to_string(r.groups) + " replica group(s) of " + std::to_string(r.group_size) +
           "; store " + fmt("%.1f", double(r.bytes) / mib) + " MiB on rank 0 (max " +
           fmt("%.1f", double(r.max_bytes) / mib) + ", all ranks " +
           fmt("%.1f", double(r.total_bytes) / mib) + " MiB), loaded in " +
           fmt("%.2f", r.max_seconds) + " s");
  // Periodicity of the data against periodic_boundary_conditions, the atoms of each split
  // (evaluation losses are means over a whole split), and with an atom budget the atoms of
  // every training graph.
  long double counts[4] = {0, 0, 0, 0};  // periodic graphs, atoms of train / validate / test
  for (int k : {kTrain, kValidate, kTest})
    m_data->visit_local(k, [&](const GraphBlock& b, const std::vector<int64_t>& ids) {
      for (int64_t g : ids) {
        counts[0] +=
            (b.pbc[size_t(3 * g)] | b.pbc[size_t(3 * g + 1)] | b.pbc[size_t(3 * g + 2)]) ? 1 : 0;
        counts[1 + k] += b.n_atoms[size_t(g)];
      }
    });
  sum_stats(counts, 4);
  if (m_s.atom_budget > 0) m_train_atoms = m_data->split_atoms(kTrain);
  for (int k : {kTrain, kValidate, kTest}) m_split_atoms[k] = int64_t(counts[1 + k]);
  const int64_t periodic = int64_t(counts[0]);
  if (periodic > 0 && !m_s.periodic && m_root)
    spdlog::warn(
        "{} graphs have periodic cells, but Architecture.periodic_boundary_conditions is "
        "false: their cells are ignored (no edges across the boundary)",
        periodic);
}

void Trainer::prepare_run_dir() {
  const std::string ckdir = m_s.run_dir + "/checkpoints";
  if (!m_s.resume && !epoch_checkpoints(ckdir).empty()) {
    if (!m_options.overwrite)
      throw ConfigError("Output.run_dir: " + m_s.run_dir + " already holds a run (" +
                            epoch_checkpoints(ckdir).back() + ")",
                        "resume it with --set Training.continue=1, choose another Output.run_dir, "
                        "or pass --overwrite to start afresh there");
    for (const auto& f : epoch_checkpoints(ckdir)) fs::remove(f);
    fs::remove(ckdir + "/best.pt");
    for (const char* f : {"metrics.csv", "events.jsonl", "trace.json"})
      fs::remove(m_s.run_dir + "/" + f);
  }
  fs::create_directories(ckdir);
}

void Trainer::build_model(const nlohmann::json* resume) {
  m_setup.spec = m_s.gnn;
  m_setup.targets = m_s.targets;
  m_setup.energy_head = m_s.energy_head;
  m_setup.conservative = m_s.conservative;
  m_setup.graph = m_s.graph;
  m_setup.periodic = m_s.periodic;
  m_setup.dtype = m_s.dtype;
  if (resume) {
    const ModelSetup saved = model_setup_from_json(resume->at("model"));
    nlohmann::json mine = spec_to_json(m_setup.spec), theirs = spec_to_json(saved.spec);
    mine.erase("pna_deg");
    theirs.erase("pna_deg");
    mine["precision"] = m_setup.dtype == c10::kDouble ? "fp64" : "fp32";
    theirs["precision"] = saved.dtype == c10::kDouble ? "fp64" : "fp32";
    const auto diff = spec_differences(theirs, mine);
    if (!diff.empty()) {
      std::string what;
      for (const auto& d : diff) what += (what.empty() ? "" : "; ") + d;
      throw DataError("the checkpoint holds another model (checkpoint vs config): " + what,
                      "resume with the config that wrote it, or start a new Output.run_dir");
    }
    m_setup.spec.layer.pna_deg = saved.spec.layer.pna_deg;
    m_setup.norm = saved.norm;
  } else {
    m_setup.norm = fit_normalizer([&](const auto& f) { m_data->visit_local(kTrain, f); },
                                  [&](long double* v, int64_t n) { sum_stats(v, n); },
                                  m_setup.targets, m_s.needs_forces());
    if (m_setup.spec.mpnn_type == "PNA") {
      const std::vector<int64_t> local = degree_histogram(*m_data, m_setup, 2000);
      long double n = (long double)local.size();
      sum_stats(&n, 1);
      std::vector<long double> h(size_t(n), 0.0L);
      for (size_t k = 0; k < local.size(); ++k) h[k] = (long double)local[k];
      sum_stats(h.data(), int64_t(h.size()));  // histograms are padded to the longest first
      m_setup.spec.layer.pna_deg.assign(h.size(), 0);
      for (size_t k = 0; k < h.size(); ++k) m_setup.spec.layer.pna_deg[k] = int64_t(h[k]);
      while (m_setup.spec.layer.pna_deg.size() > 1 && m_setup.spec.layer.pna_deg.back() == 0)
        m_setup.spec.layer.pna_deg.pop_back();
    }
  }
  at::manual_seed(m_s.seed);
  m_gnn = std::make_shared<Gnn>(m_setup.spec);
  m_gnn->to(m_setup.dtype);
  m_params = m_gnn->parameters();
  if (m_world > 1) {
    // Rank 0's initial weights everywhere, then gradients summed in buckets during backward.
    m_ddp = std::make_unique<DataParallel>(m_params, m_comm.get(),
                                           int64_t(m_s.bucket_mb * double(1 << 20)));
    m_ddp->broadcast_parameters();
  }
  m_opt = make_optimizer(m_s.optimizer, m_params, m_s.learning_rate, m_s.weight_decay);
  if (m_s.ema_decay > 0) m_ema = std::make_unique<WeightAverage>(m_params, m_s.ema_decay);
  if (m_s.scheduler) m_plateau = std::make_unique<ReduceLROnPlateau>(*m_opt, m_s.plateau);
  if (m_s.early_stopping) m_early = std::make_unique<EarlyStopping>(m_s.patience);
  m_forces = (m_setup.conservative ||
              std::any_of(m_setup.targets.begin(), m_setup.targets.end(),
                          [](const HeadTarget& t) { return t.source == TargetSource::kForces; })) &&
             m_data->dataset(kTrain).has_forces();
}

nlohmann::json Trainer::record(int64_t epoch) const {
  nlohmann::json r;
  r["epoch"] = epoch;
  r["step"] = m_step;
  r["model"] = to_json(m_setup);
  r["ddgnn_version"] = DDGNN_VERSION;
  r["config"] = m_config.resolved;
  r["split"] = {{"perc_train", m_s.perc_train},
                {"seed", m_s.seed},
                {"single", m_s.data.single},
                {"train", m_s.data.train},
                {"validate", m_s.data.validate},
                {"test", m_s.data.test},
                {"n_graphs", m_data ? m_data->dataset(kTrain).n_graphs() : 0}};
  if (m_plateau) r["scheduler"] = m_plateau->state();
  if (m_early) r["early_stopping"] = m_early->state();
  r["best_validate_loss"] =
      std::isfinite(m_best_val) ? nlohmann::json(m_best_val) : nlohmann::json();
  r["best_epoch"] = m_best_epoch;
  r["best_row"] = m_best_row;
  r["elapsed_s"] = m_elapsed_before + seconds(m_t_start, Clock::now());
  r["rng"] = generator_state();
  return r;
}

void Trainer::write_checkpoint(const std::string& path, int64_t epoch, bool with_optimizer) {
  // With a weight average the model saved is the average (what evaluate uses), and the trained
  // weights ride along for resuming.
  nlohmann::json r = record(epoch);
  if (m_ema) r["ema_updates"] = m_ema->updates();
  AverageSwapped average(m_ema.get());
  save_checkpoint(path, *m_gnn, with_optimizer ? m_opt.get() : nullptr, std::move(r),
                  m_ema ? &m_ema->shadows() : nullptr);
}

SplitMetrics Trainer::evaluate_split(int split) {
  SplitMetrics m(m_setup.targets.size());
  m_gnn->eval();
  // The loss of the whole split: each batch's terms weighted by its share of the split's graphs
  // and atoms, so that it depends neither on the batching nor on the number of ranks.
  const int64_t split_graphs = m_data->size(split);
  auto run = [&](const PreparedBatch& b) {
    const Prediction p = predict(*m_gnn, m_setup, b.batch, /*create_graph=*/false);
    const StepShare share{double(b.batch.n_graphs) / double(split_graphs),
                          double(b.batch.n_atoms()) / double(m_split_atoms[split])};
    at::Tensor loss;
    {
      at::NoGradGuard no_grad;
      loss = total_loss(p, b, m_setup, m_s.weights, m_s.loss, share);
    }
    m.add(p, b, m_setup, loss.item<double>(), split_graphs);
  };
  std::vector<PreparedBatch>& cache = m_eval_cache[split];
  if (m_eval_cached[split]) {  // the same decision on every rank: no collective fetch is skipped
    for (const auto& b : cache) run(b);
  } else {
    // Each rank its share of the split, in order; the same number of batches on every rank.
    SamplerOptions so;
    so.n_samples = m_data->size(split);
    so.batch_size = m_s.eval_batch_size;
    so.rank = m_rank;
    so.world = m_world;
    so.shuffle = false;
    Prefetcher pf(*m_data, split, sampler_epoch(so, 1), m_setup, m_s.prefetch_depth);
    for (size_t i = 0; i < pf.size(); ++i) {
      StepBatch b = pf.next();
      if (b.empty) continue;
      run(b.prepared);
      if (m_cache_eval) cache.push_back(std::move(b.prepared));
    }
    m_eval_cached[split] = m_cache_eval;
  }
  m_gnn->train();
  m.reduce(m_comm.get());
  return m;
}

void Trainer::train_epoch(int64_t epoch, nlohmann::json& row, SplitMetrics& metrics) {
  SamplerOptions so;
  so.n_samples = m_data->size(kTrain);
  so.batch_size = m_s.batch_size;
  so.rank = m_rank;
  so.world = m_world;
  so.seed = m_s.seed;
  so.shuffle = m_s.shuffle;
  so.drop_remainder = m_s.drop_remainder;
  // batch_size graphs per rank, or atom-budget steps balanced over the ranks by atoms.
  std::vector<std::vector<int64_t>> batches =
      m_s.atom_budget > 0 ? sampler_epoch_balanced(so, m_train_atoms, m_s.atom_budget, epoch)
                          : sampler_epoch(so, epoch);
  if (m_switcher) m_switcher->start_epoch(epoch);
  Prefetcher pf(*m_data, kTrain, std::move(batches), m_setup, m_s.prefetch_depth,
                m_count_comm.get(), m_switcher.get());
  double t_load = 0, t_fetch = 0, t_graph = 0, t_fwd = 0, t_forces = 0, t_bwd = 0, t_sync = 0,
         t_opt = 0, gn_sum = 0;
  int64_t graphs = 0, graphs_all = 0, steps = 0;
  const auto t_epoch = Clock::now();
  m_gnn->train();
  for (size_t i = 0; i < pf.size(); ++i) {
    const auto t0 = Clock::now();
    StepBatch sb = pf.next();
    const auto t1 = Clock::now();
    if (m_fail_step > 0 && m_step + 1 == m_fail_step && m_rank == m_fail_rank)
      throw Error("DDGNN_DEBUG_FAIL_AT_STEP: rank " + std::to_string(m_rank) + " fails at step " +
                  std::to_string(m_fail_step) + " as asked");
    m_opt->zero_grad();
    if (m_ddp) m_ddp->begin_step(1.0);  // the loss carries each rank's share: gradients add up
    Prediction p;
    double loss_value = 0.0;
    auto t2 = t1, t3 = t1, t4 = t1;
    if (!sb.empty) {
      const PreparedBatch& b = sb.prepared;
      // Forward and the energy; forces are timed separately (first backward, create_graph).
      at::Tensor pos = b.batch.pos;
      if (m_setup.conservative) pos = b.batch.pos.detach().clone().requires_grad_(true);
      p.outputs = m_gnn->forward(b.batch, pos);
      if (m_setup.energy_head >= 0) {
        const at::Tensor& out = p.outputs[size_t(m_setup.energy_head)];
        p.energy = m_setup.targets[size_t(m_setup.energy_head)].kind == HeadSpec::kNode
                       ? scatter_sum(out.select(1, 0), *b.batch.graphs)
                       : out.select(1, 0);
      }
      t2 = Clock::now();
      if (m_setup.conservative) {
        auto g = torch::autograd::grad({p.energy.sum()}, {pos}, {}, true, true, true);
        p.forces = g[0].defined() ? -g[0] : at::zeros_like(pos);
      } else {
        for (size_t k = 0; k < m_setup.targets.size(); ++k)
          if (m_setup.targets[k].source == TargetSource::kForces) p.forces = p.outputs[k];
      }
      t3 = Clock::now();
      StepShare share;
      if (m_ddp) {
        share.graphs = double(b.batch.n_graphs) / double(sb.graphs_all);
        share.atoms = double(b.batch.n_atoms()) / double(sb.atoms_all);
      }
      at::Tensor loss = total_loss(p, b, m_setup, m_s.weights, m_s.loss, share);
      loss_value = loss.item<double>();
      if (!std::isfinite(loss_value)) {
        std::string ids;
        for (size_t k = 0; k < b.ids.size() && k < 64; ++k)
          ids += (k ? "," : "") + std::to_string(b.ids[k]);
        if (b.ids.size() > 64) ids += ",...";
        throw DataError("epoch " + std::to_string(epoch) + " step " + std::to_string(m_step + 1) +
                            (m_world > 1 ? " (rank " + std::to_string(m_rank) + ")" : "") +
                            ": the loss is " + fmt("%g", loss_value) + " on the batch of graphs [" +
                            ids + "] (indices in " + m_data->dataset(kTrain).path() + ")",
                        "lower Training.Optimizer.learning_rate or set Training.grad_clip; check "
                        "those graphs (overlapping atoms, huge forces) with `ddgnn info`");
      }
      loss.backward();
      t4 = Clock::now();
    }
    if (m_ddp) m_ddp->finish_step();
    const auto t_synced = Clock::now();
    const double gn = m_s.grad_clip > 0 ? clip_grad_norm(m_params, m_s.grad_clip) : 0.0;
    if (m_s.grad_clip > 0 && !std::isfinite(gn))
      throw DataError("epoch " + std::to_string(epoch) + " step " + std::to_string(m_step + 1) +
                          ": the gradient norm is " + fmt("%g", gn),
                      "lower Training.Optimizer.learning_rate; check the data with `ddgnn info`");
    m_opt->step();
    if (m_ema) m_ema->update();
    const auto t5 = Clock::now();
    ++m_step;
    ++steps;
    if (m_ddp && m_s.check_parameters_every > 0 && m_step % m_s.check_parameters_every == 0)
      m_ddp->check_identical();
    gn_sum += gn;
    graphs_all += sb.graphs_all;
    t_load += seconds(t0, t1);
    t_fetch += sb.fetch_s;
    t_fwd += seconds(t1, t2);
    t_forces += seconds(t2, t3);
    t_bwd += seconds(t3, t4);
    t_sync += seconds(t4, t_synced);
    t_opt += seconds(t_synced, t5);
    if (!sb.empty) {
      const PreparedBatch& b = sb.prepared;
      graphs += b.batch.n_graphs;
      t_graph += b.seconds;
      at::NoGradGuard no_grad;
      Prediction d;
      d.energy = p.energy.defined() ? p.energy.detach() : p.energy;
      d.forces = p.forces.defined() ? p.forces.detach() : p.forces;
      for (const auto& o : p.outputs) d.outputs.push_back(o.detach());
      metrics.add(d, b, m_setup, loss_value, sb.graphs_all);
    }
    if (!sb.note.line.empty()) {
      log_line(sb.note.line);
      event("tuner", nlohmann::json::parse(sb.note.event));
    }
    if (m_trace && m_trace->recording()) {
      for (const auto& span : sb.note.spans)
        m_trace->add(span.name.c_str(), span.begin, span.end, m_step, 2);
      m_trace->add("fetch", sb.t_fetch, sb.t_fetched, m_step, 1);
      m_trace->add("collate", sb.t_fetched, sb.t_built, m_step, 1);
      m_trace->add("load", t0, t1, m_step);
      m_trace->add("forward", t1, t2, m_step);
      m_trace->add("forces", t2, t3, m_step);
      m_trace->add("backward", t3, t4, m_step);
      if (m_ddp) m_trace->add("grad_sync", t4, t_synced, m_step);
      m_trace->add("optimizer", t_synced, t5, m_step);
      m_trace->end_step();
    }
    const double wall = seconds(t_epoch, Clock::now());
    const double rate = double(graphs_all) / std::max(wall, 1e-9);
    if (m_progress)
      m_progress->update(epoch, m_s.num_epoch, graphs_all, m_data->size(kTrain), rate,
                         metrics.loss(), double(m_data->size(kTrain) - graphs_all) / rate);
    if (m_s.verbosity >= 4)
      spdlog::debug("epoch {} step {} graphs {} loss {:.6g}", epoch, m_step, sb.graphs_all,
                    loss_value);
    if (m_kill_at_step > 0 && m_step == m_kill_at_step) std::raise(SIGKILL);
  }
  const double wall = seconds(t_epoch, Clock::now());
  metrics.reduce(m_comm.get());
  row["train_loss"] = metrics.loss();
  row["graphs_per_s"] = double(graphs_all) / std::max(wall, 1e-9);
  row["steps"] = steps;
  row["grad_norm"] =
      steps && m_s.grad_clip > 0 ? nlohmann::json(gn_sum / double(steps)) : nlohmann::json();
  row["load_s"] = t_load;
  row["fetch_s"] = t_fetch;
  row["graph_s"] = t_graph;
  row["forward_s"] = t_fwd;
  row["forces_s"] = t_forces;
  row["backward_s"] = t_bwd;
  row["sync_s"] = t_sync;
  row["optimizer_s"] = t_opt;
}

void Trainer::log_baseline() {
  long double epa[2] = {0, 0};  // sum of energy per atom, graphs
  m_data->visit_local(kTrain, [&](const GraphBlock& b, const std::vector<int64_t>& ids) {
    for (int64_t id : ids) {
      epa[0] += b.energy[size_t(id)] / double(b.n_atoms[size_t(id)]);
      epa[1] += 1;
    }
  });
  sum_stats(epa, 2);
  const double mean_epa = double(epa[0] / std::max(epa[1], 1.0L));
  nlohmann::json ev;
  std::string line = "baseline (mean energy per atom, zero forces):";
  for (int split : {kTrain, kValidate, kTest}) {
    MetricsAccumulator acc = baseline(*m_data, split, mean_epa, m_forces);
    auto sums = acc.sums();
    sum_stats(sums.data(), int64_t(sums.size()));
    acc.set_sums(sums);
    const ErrorMetrics m = acc.result();
    const std::string name = split_name(split);
    ev[name] = {{"energy_mae_mev_atom", m.energy_mae_mev_per_atom},
                {"energy_rmse_mev_atom", m.energy_rmse_mev_per_atom}};
    line += " " + name + " E " + fmt("%.3g", m.energy_mae_mev_per_atom) + " meV/atom";
    if (m_forces) {
      ev[name]["force_mae_mev_a"] = m.force_mae_mev_per_a;
      ev[name]["force_rmse_mev_a"] = m.force_rmse_mev_per_a;
      line += ", F " + fmt("%.3g", m.force_mae_mev_per_a) + " meV/Å";
    }
    line += ";";
  }
  line.pop_back();
  line += " (MAE)";
  event("baseline", ev);
  log_line(line);
}

nlohmann::json Trainer::run_impl() {
  if (m_s.device == "cuda")
    throw ConfigError(
        "Runtime.device: \"cuda\": training on a GPU is not available in this "
        "version",
        "set Runtime.device to \"cpu\" or \"auto\"");
  if (const char* k = std::getenv("DDGNN_DEBUG_SIGKILL_AT_STEP")) m_kill_at_step = std::atoll(k);
  if (const char* k = std::getenv("DDGNN_DEBUG_FAIL_AT_STEP")) {
    const std::string v = k;
    const size_t colon = v.find(':');
    if (colon != std::string::npos) {
      m_fail_rank = std::atoll(v.substr(0, colon).c_str());
      m_fail_step = std::atoll(v.substr(colon + 1).c_str());
    }
  }
  if (m_root && m_config.sources.count("Output.log_level") &&
      m_config.sources.at("Output.log_level") != "default")
    spdlog::set_level(spdlog::level::from_str(m_config.get<std::string>("Output.log_level")));
  // Threads: the cores this rank may use (its affinity mask), shared with its node's ranks
  // (one each when ranks >= cores).
  const int node_ranks = ranks_on_node(m_comm.get());
  const int threads =
      m_s.threads > 0 ? int(m_s.threads) : threads_per_rank(cores_available(), node_ranks);
  // Waiting OpenMP threads must sleep when ranks share cores; OMP_WAIT_POLICY is read when the
  // runtime loads, so the launcher's environment has to set it.
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  if (m_root && node_ranks > 1 && threads > 1 && !(policy && std::string(policy) == "PASSIVE"))
    spdlog::warn(
        "{} ranks share this node with {} threads each and OMP_WAIT_POLICY is not PASSIVE: "
        "spinning OpenMP threads can slow training many times over; export "
        "OMP_WAIT_POLICY=PASSIVE (jobs/train.sh does)",
        node_ranks, threads);
  at::set_num_threads(threads);
  set_blas_threads(threads);
  if (m_s.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);

  load_data();
  if (m_root) prepare_run_dir();
  if (m_data->switchable())
    m_switcher = std::make_unique<BackendSwitcher>(
        *m_data, m_s, m_comm.get(), m_root ? m_s.run_dir + "/tuner.csv" : "", m_s.resume);
  std::string resume_path;
  nlohmann::json resume_record;
  if (m_s.resume) {
    resume_path = resolve_startfrom(m_s);
    resume_record = read_checkpoint_record(resume_path);
  }
  build_model(m_s.resume ? &resume_record : nullptr);
  if (m_s.resume) {
    load_checkpoint_model(resume_path, *m_gnn);  // the average, when the run kept one
    const auto& r = resume_record;
    std::vector<at::Tensor> saved_model;
    for (const auto& p : m_params) saved_model.push_back(p.detach().clone());
    const bool averaged = load_checkpoint_train_weights(resume_path, m_params);
    if (m_ema) m_ema->load(saved_model, averaged ? r.value("ema_updates", int64_t(0)) : 0);
    load_checkpoint_optimizer(resume_path, *m_opt);
    if (m_plateau && r.contains("scheduler"))
      m_plateau->load_state(r["scheduler"].get<PlateauState>());
    if (m_early && r.contains("early_stopping"))
      m_early->load_state(r["early_stopping"].get<EarlyStoppingState>());
    if (!r["best_validate_loss"].is_null()) m_best_val = r["best_validate_loss"];
    m_best_epoch = r.value("best_epoch", int64_t(0));
    m_best_row = r.value("best_row", nlohmann::json());
    m_step = r.value("step", int64_t(0));
    m_elapsed_before = r.value("elapsed_s", 0.0);
    m_start_epoch = r.at("epoch").get<int64_t>() + 1;
    set_generator_state(r.at("rng"));
  }
  if (m_root) {  // the run directory is rank 0's
    write_resolved_config(m_config, m_s.run_dir + "/config.resolved.json");
    const std::vector<std::string> columns = metric_columns(m_setup, m_forces);
    m_csv = std::make_unique<MetricsCsv>(m_s.run_dir + "/metrics.csv", columns, !m_s.resume,
                                         m_start_epoch - 1);
    m_events = std::make_unique<EventLog>(m_s.run_dir + "/events.jsonl", !m_s.resume);
    if (m_s.trace_steps > 0)
      m_trace = std::make_unique<ChromeTrace>(m_s.run_dir + "/trace.json", m_s.trace_steps);
    m_progress = std::make_unique<ProgressLine>(m_s.verbosity >= 1);
  }

  const int64_t n_params = [&] {
    int64_t n = 0;
    for (const auto& p : m_params) n += p.numel();
    return n;
  }();
  const auto& load = m_data->load_report();
  const nlohmann::json loader = {
      {"backend", m_data->backend()},    {"ranks", m_world},
      {"groups", load.groups},           {"group_size", load.group_size},
      {"bytes_rank0", load.bytes},       {"bytes_max", load.max_bytes},
      {"bytes_total", load.total_bytes}, {"seconds_max", load.max_seconds}};
  nlohmann::json start = {{"ddgnn_version", DDGNN_VERSION},
                          {"git", DDGNN_GIT_DESCRIBE},
                          {"config", m_config.source},
                          {"dataset", m_data->dataset(kTrain).path()},
                          {"graphs",
                           {{"train", m_data->size(kTrain)},
                            {"validate", m_data->size(kValidate)},
                            {"test", m_data->size(kTest)}}},
                          {"parameters", n_params},
                          {"threads", threads},
                          {"loader", loader},
                          {"scale", m_setup.norm.scale},
                          {"mean_residual_per_atom", m_setup.norm.mean_residual_per_atom},
                          {"model", to_json(m_setup)["spec"]}};
  if (m_s.resume) {
    start["resumed_from"] = resume_path;
    start["epoch"] = m_start_epoch - 1;
    event("resume", start);
    log_line("resuming " + resume_path + " after epoch " + std::to_string(m_start_epoch - 1));
  } else {
    event("run_start", start);
  }
  log_line(m_s.gnn.mpnn_type + ": " + std::to_string(n_params) + " parameters, " +
           (m_s.dtype == c10::kDouble ? "fp64" : "fp32") + ", " + std::to_string(threads) +
           " thread(s)" + (m_world > 1 ? " x " + std::to_string(m_world) + " ranks" : "") + "; " +
           std::to_string(m_data->size(kTrain)) + "/" + std::to_string(m_data->size(kValidate)) +
           "/" + std::to_string(m_data->size(kTest)) + " graphs train/validate/test from " +
           m_data->dataset(kTrain).path() + "; run_dir " + m_s.run_dir);
  if (m_root)
    for (const auto& w : m_config.warnings) spdlog::warn("{}", w);
  if (!m_s.resume) log_baseline();

  // Validation and test batches are the same every epoch: built once, kept when this rank's
  // share is small (the same decision on every rank).
  long double eval_atoms = 0;
  for (int split : {kValidate, kTest})
    m_data->visit_local(split, [&](const GraphBlock& b, const std::vector<int64_t>& ids) {
      for (int64_t id : ids) eval_atoms += b.n_atoms[size_t(id)];
    });
  sum_stats(&eval_atoms, 1);
  m_cache_eval = eval_atoms / m_world * 64 * 48 < (long double)(int64_t(1) << 31);  // ≈ edges × B

  nlohmann::json last_row;
  std::string stop_reason = "num_epoch";
  int64_t epoch = m_start_epoch;
  for (; epoch <= m_s.num_epoch; ++epoch) {
    const auto t_epoch = Clock::now();
    nlohmann::json row = {{"epoch", epoch}, {"lr", get_lr(*m_opt)}};
    SplitMetrics train_m(m_setup.targets.size());
    train_epoch(epoch, row, train_m);
    const auto t_eval = Clock::now();
    SplitMetrics val_m, test_m;
    {
      AverageSwapped average(m_ema.get());
      val_m = evaluate_split(kValidate);
      test_m = evaluate_split(kTest);
    }
    row["eval_s"] = seconds(t_eval, Clock::now());
    row["validate_loss"] = val_m.loss();
    row["test_loss"] = test_m.loss();
    train_m.put(row, "train", m_setup);
    val_m.put(row, "validate", m_setup);
    test_m.put(row, "test", m_setup);
    // Every decision below from rank 0's figures, so that all ranks take the same branch.
    double decide[2] = {val_m.loss(), m_elapsed_before + seconds(m_t_start, Clock::now())};
    MPI_CHECK(MPI_Bcast(decide, 2, MPI_DOUBLE, 0, m_comm.get()));
    const double val_loss = decide[0];
    const bool improved = val_loss < m_best_val;
    if (improved) {
      m_best_val = val_loss;
      m_best_epoch = epoch;
    }
    bool reduced = false;
    if (m_plateau) reduced = m_plateau->step(val_loss);
    if (m_s.exponential_gamma > 0.0)  // the lr lives in the optimizer state: resumes exactly
      set_lr(*m_opt, std::max(m_s.plateau.min_lr, get_lr(*m_opt) * m_s.exponential_gamma));
    const bool stop_early = m_early && m_early->step(val_loss);
    const double elapsed = decide[1];
    if (m_s.time_exponential)
      set_lr(*m_opt, time_exponential_lr(m_s.learning_rate, m_s.plateau.min_lr,
                                         elapsed / m_s.time_limit_s));
    const bool out_of_time = m_s.time_limit_s > 0 && elapsed >= m_s.time_limit_s;
    const bool last = epoch == m_s.num_epoch || stop_early || out_of_time;

    // Checkpoints: on schedule after the warm-up, and always after the last epoch.
    const auto t_ck = Clock::now();
    if (improved) m_best_row = row;
    if (m_s.checkpoint && m_root) {
      const std::string dir = m_s.run_dir + "/checkpoints";
      if (improved && epoch > m_s.checkpoint_warmup)
        write_checkpoint(dir + "/best.pt", epoch, false);
      if (last || (epoch > m_s.checkpoint_warmup && epoch % m_s.checkpoint_every == 0)) {
        write_checkpoint(dir + "/" + checkpoint_name(epoch), epoch, true);
        auto all = epoch_checkpoints(dir);
        while (int64_t(all.size()) > m_s.keep_checkpoints) {
          fs::remove(all.front());
          all.erase(all.begin());
        }
        event("checkpoint", {{"epoch", epoch}, {"path", dir + "/" + checkpoint_name(epoch)}});
      }
    }
    row["checkpoint_s"] = seconds(t_ck, Clock::now());
    row["epoch_s"] = seconds(t_epoch, Clock::now());
    row["elapsed_s"] = m_elapsed_before + seconds(m_t_start, Clock::now());
    row["peak_rss_mb"] = peak_rss_mb();
    if (m_csv) m_csv->write(row);
    event("epoch", row);
    std::string line = "epoch " + std::to_string(epoch) + "/" + std::to_string(m_s.num_epoch) +
                       "  lr " + fmt("%.2e", row["lr"].get<double>()) + "  loss " +
                       metric_triplet(row, "loss");
    if (m_setup.energy_head >= 0)
      line += "  E " + metric_triplet(row, "energy_mae_mev_atom") + " meV/atom";
    if (m_forces) line += "  F " + metric_triplet(row, "force_mae_mev_a") + " meV/Å";
    line += "  " + fmt("%.0f", row["graphs_per_s"].get<double>()) + " graphs/s  " +
            fmt("%.1f", row["epoch_s"].get<double>()) + " s" + (improved ? "  *" : "");
    log_line(line);
    if (reduced) {
      event("lr_reduced", {{"epoch", epoch}, {"lr", get_lr(*m_opt)}});
      log_line("learning rate reduced to " + fmt("%.3g", get_lr(*m_opt)));
    }
    last_row = row;
    if (stop_early) {
      stop_reason = "early_stopping";
      event("early_stop", {{"epoch", epoch}, {"patience", m_s.patience}});
      log_line("early stopping: no improvement of the validation loss for " +
               std::to_string(m_s.patience) + " epochs");
      break;
    }
    if (out_of_time) {
      stop_reason = "time_limit";
      event("time_limit", {{"epoch", epoch}, {"elapsed_s", elapsed}});
      log_line("time limit reached (" + fmt("%.0f", m_s.time_limit_s) + " s)");
      break;
    }
  }
  if (m_trace) m_trace->finish();
  if (m_progress) m_progress->clear();
  nlohmann::json summary = {
      {"stop", stop_reason},
      {"epochs", last_row.is_null() ? m_start_epoch - 1 : last_row["epoch"].get<int64_t>()},
      {"best_epoch", m_best_epoch},
      {"best", m_best_row},
      {"last", last_row},
      {"run_dir", m_s.run_dir},
      {"elapsed_s", m_elapsed_before + seconds(m_t_start, Clock::now())},
      {"peak_rss_mb", peak_rss_mb()}};
  event("run_end", summary);
  if (!m_best_row.is_null()) {
    std::string line = "best epoch " + std::to_string(m_best_epoch) + ": test";
    if (m_best_row.contains("test_energy_mae_mev_atom"))
      line += " energy MAE " + fmt("%.3g", m_best_row["test_energy_mae_mev_atom"].get<double>()) +
              " meV/atom";
    if (m_best_row.contains("test_force_mae_mev_a"))
      line +=
          ", force MAE " + fmt("%.3g", m_best_row["test_force_mae_mev_a"].get<double>()) + " meV/Å";
    log_line(line + " (" + m_s.run_dir + "/metrics.csv)");
  }
  return summary;
}

}  // namespace

nlohmann::json train(const Config& config, const TrainOptions& options) {
  Trainer t(config, options);
  return t.run();
}

nlohmann::json Trainer::run() {
  try {
    return run_impl();
  } catch (const std::exception& e) {
    if (m_progress) m_progress->clear();
    if (m_events) {
      const auto* err = dynamic_cast<const Error*>(&e);
      m_events->write("error", {{"what", e.what()}, {"hint", err ? err->hint() : ""}});
    }
    if (m_trace) m_trace->finish();
    if (m_world > 1) {
      // Stop the job here, before the store's windows and the communicators are freed: those
      // are collective, and the other ranks are waiting for this one somewhere else.
      std::fprintf(stderr, "%s\n", error_line(e, m_rank).c_str());
      std::fflush(stderr);
      abort_job(1);
    }
    throw;
  }
}

}  // namespace ddgnn
