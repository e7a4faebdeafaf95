// The training loop of `ddgnn train` (one process). Overview in trainer.h; file formats of the run
// directory in DESIGN.md.
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
#include <cstdlib>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <regex>
#include <thread>

#include "app/checkpoint.h"
#include "app/model_setup.h"
#include "app/run_log.h"
#include "app/train_settings.h"
#include "comm/mpi.h"
#include "core/error.h"
#include "core/threads.h"
#include "core/version.h"
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

// One split: graphs `ids` of `block`.
struct Part {
  std::string name;  // train | validate | test
  const GraphBlock* block = nullptr;
  std::vector<int64_t> ids;
};

// Batches of an ordered list of graph ids: batch_size graphs, or fewer when atom_budget > 0
// caps the atoms (a graph larger than the budget goes alone). drop_remainder drops a last
// batch smaller than batch_size.
std::vector<std::vector<int64_t>> make_batches(const GraphBlock& block,
                                               const std::vector<int64_t>& order,
                                               int64_t batch_size, int64_t atom_budget,
                                               bool drop_remainder) {
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> cur;
  int64_t atoms = 0;
  for (int64_t id : order) {
    const int64_t n = block.n_atoms[size_t(id)];
    if (!cur.empty() &&
        (int64_t(cur.size()) == batch_size || (atom_budget > 0 && atoms + n > atom_budget))) {
      out.push_back(std::move(cur));
      cur.clear();
      atoms = 0;
    }
    cur.push_back(id);
    atoms += n;
  }
  if (!cur.empty() && !(drop_remainder && int64_t(cur.size()) < batch_size && !out.empty()))
    out.push_back(std::move(cur));
  return out;
}

// Builds batches on a background thread, `depth` ahead of the consumer (depth 0: on demand).
// Errors of the builder are rethrown by next().
class Prefetcher {
 public:
  Prefetcher(const GraphBlock& block, std::vector<std::vector<int64_t>> batches,
             const ModelSetup& setup, int64_t depth)
      : m_block(block), m_batches(std::move(batches)), m_setup(setup), m_depth(depth) {
    if (m_depth > 0) m_thread = std::thread([this] { produce(); });
  }
  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    if (m_thread.joinable()) m_thread.join();
  }
  size_t size() const { return m_batches.size(); }
  PreparedBatch next() {
    if (m_depth == 0) return prepare_batch(m_block, m_batches[m_taken++], m_setup);
    std::unique_lock<std::mutex> lock(m_mutex);
    m_cv.wait(lock, [&] { return !m_queue.empty() || m_error; });
    if (m_queue.empty() && m_error) std::rethrow_exception(m_error);
    PreparedBatch b = std::move(m_queue.front());
    m_queue.pop_front();
    ++m_taken;
    lock.unlock();
    m_cv.notify_all();
    return b;
  }

 private:
  void produce() {
    try {
      for (size_t i = 0; i < m_batches.size(); ++i) {
        {
          std::unique_lock<std::mutex> lock(m_mutex);
          m_cv.wait(lock, [&] { return m_stop || int64_t(m_queue.size()) < m_depth; });
          if (m_stop) return;
        }
        PreparedBatch b = prepare_batch(m_block, m_batches[i], m_setup);
        {
          std::lock_guard<std::mutex> lock(m_mutex);
          m_queue.push_back(std::move(b));
        }
        m_cv.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_error = std::current_exception();
      m_cv.notify_all();
    }
  }

  const GraphBlock& m_block;
  std::vector<std::vector<int64_t>> m_batches;
  const ModelSetup& m_setup;
  int64_t m_depth;
  size_t m_taken = 0;
  std::thread m_thread;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<PreparedBatch> m_queue;
  std::exception_ptr m_error;
  bool m_stop = false;
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

  void add(const Prediction& p, const PreparedBatch& b, const ModelSetup& setup, double loss) {
    const GraphBatch& batch = b.batch;
    loss_sum += loss * double(batch.n_graphs);
    loss_graphs += batch.n_graphs;
    const GraphBlock* none = nullptr;
    (void)none;
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
  for (const char* t : {"graphs_per_s", "steps", "grad_norm", "load_s", "graph_s", "forward_s",
                        "forces_s", "backward_s", "optimizer_s", "eval_s", "checkpoint_s",
                        "epoch_s", "elapsed_s", "peak_rss_mb"})
    c.push_back(t);
  return c;
}

// Trivial baseline of a split: the training set's mean energy per atom times n_atoms, zero
// forces.
ErrorMetrics baseline(const Part& part, double mean_epa, bool forces) {
  MetricsAccumulator acc;
  const GraphBlock& b = *part.block;
  for (int64_t id : part.ids) {
    const int64_t n = b.n_atoms[size_t(id)];
    const double pred = mean_epa * double(n);
    acc.add_energies(&pred, &b.energy[size_t(id)], &n, 1);
    if (forces && !b.forces.empty()) {
      const std::vector<double> zero(size_t(3 * n), 0.0);
      acc.add_forces(zero.data(), b.forces.data() + 3 * b.atom_start[size_t(id)], n);
    }
  }
  return acc.result();
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

// The PNA layers' in-degree histogram over (at most 2000 graphs of) the training split.
std::vector<int64_t> degree_histogram(const Part& train, const ModelSetup& setup) {
  std::vector<int64_t> hist;
  const size_t n = std::min<size_t>(train.ids.size(), 2000);
  for (size_t i = 0; i < n; i += 64) {
    std::vector<int64_t> ids(train.ids.begin() + long(i),
                             train.ids.begin() + long(std::min(n, i + 64)));
    const PreparedBatch b = prepare_batch(*train.block, ids, setup);
    const at::Tensor deg = at::bincount(b.batch.edge_index[1], {}, b.batch.n_atoms());
    const at::Tensor h = at::bincount(deg);
    const int64_t* hp = h.data_ptr<int64_t>();
    if (hist.size() < size_t(h.numel())) hist.resize(size_t(h.numel()), 0);
    for (int64_t k = 0; k < h.numel(); ++k) hist[size_t(k)] += hp[k];
  }
  return hist;
}

class Trainer {
 public:
  Trainer(const Config& config, const TrainOptions& options)
      : m_config(config), m_options(options), m_s(train_settings(config)) {}
  nlohmann::json run();

 private:
  nlohmann::json run_impl();
  void load_data();
  void prepare_run_dir();
  void build_model(const nlohmann::json* resume_record);
  void log_baseline();
  // One epoch of training; fills the train metrics and timing of `row`.
  void train_epoch(int64_t epoch, nlohmann::json& row, SplitMetrics& metrics);
  SplitMetrics evaluate_part(const Part& part, std::vector<PreparedBatch>* cache);
  void write_checkpoint(const std::string& path, int64_t epoch, bool with_optimizer);
  nlohmann::json record(int64_t epoch) const;
  void log_line(const std::string& line);

  const Config& m_config;
  TrainOptions m_options;
  TrainSettings m_s;
  ModelSetup m_setup;
  std::vector<std::unique_ptr<Dataset>> m_datasets;
  std::vector<GraphBlock> m_blocks;
  Part m_train, m_val, m_test;
  std::shared_ptr<Gnn> m_gnn;
  std::vector<at::Tensor> m_params;
  std::unique_ptr<torch::optim::Optimizer> m_opt;
  std::unique_ptr<ReduceLROnPlateau> m_plateau;
  std::unique_ptr<EarlyStopping> m_early;
  std::unique_ptr<MetricsCsv> m_csv;
  std::unique_ptr<EventLog> m_events;
  std::unique_ptr<ChromeTrace> m_trace;
  std::unique_ptr<ProgressLine> m_progress;
  std::vector<PreparedBatch> m_val_cache, m_test_cache;
  bool m_cache_eval = true;
  bool m_forces = false;  // the model predicts forces and the data has them
  int64_t m_start_epoch = 1, m_step = 0;
  double m_best_val = INFINITY;
  int64_t m_best_epoch = 0;
  nlohmann::json m_best_row;
  int64_t m_kill_at_step = -1;  // DDGNN_DEBUG_SIGKILL_AT_STEP: tests of resume after SIGKILL
  Clock::time_point m_t_start = Clock::now();
  double m_elapsed_before = 0.0;  // training seconds of the run before a resume
};

void Trainer::log_line(const std::string& line) {
  if (m_progress) m_progress->clear();
  spdlog::info("{}", line);
}

void Trainer::load_data() {
  auto open = [&](const std::string& path) -> const Dataset& {
    if (!fs::exists(path))
      throw ConfigError("Dataset.path: " + path + ": no such file",
                        "convert extxyz data with `ddgnn convert in.extxyz " + path +
                            "`, or correct the path (relative to the working directory)");
    m_datasets.push_back(std::make_unique<Dataset>(path));
    return *m_datasets.back();
  };
  if (!m_s.data.explicit_split()) {
    const Dataset& ds = open(m_s.data.single);
    m_blocks.reserve(1);
    m_blocks.push_back(ds.read(0, ds.n_graphs()));
    const Split split = split_graphs(ds.n_graphs(), m_s.perc_train, m_s.seed);
    m_train = {"train", &m_blocks[0], split.train};
    m_val = {"validate", &m_blocks[0], split.validate};
    m_test = {"test", &m_blocks[0], split.test};
  } else {
    m_blocks.reserve(3);
    Part* parts[3] = {&m_train, &m_val, &m_test};
    const std::string paths[3] = {m_s.data.train, m_s.data.validate, m_s.data.test};
    const char* names[3] = {"train", "validate", "test"};
    for (int i = 0; i < 3; ++i) {
      const Dataset& ds = open(paths[i]);
      if (ds.n_graphs() == 0)
        throw DataError(paths[i] + ": the " + names[i] + " file has no graphs");
      m_blocks.push_back(ds.read(0, ds.n_graphs()));
      std::vector<int64_t> ids(size_t(ds.n_graphs()));
      for (size_t k = 0; k < ids.size(); ++k) ids[k] = int64_t(k);
      *parts[i] = {names[i], &m_blocks.back(), ids};
    }
  }
  bind_targets(m_s, *m_datasets[0]);
  for (size_t i = 1; i < m_datasets.size(); ++i) {
    TrainSettings copy = m_s;
    bind_targets(copy, *m_datasets[i]);
  }
  // Periodicity of the data against periodic_boundary_conditions.
  int64_t periodic = 0;
  for (const auto& b : m_blocks)
    for (size_t g = 0; g < b.n_graphs(); ++g)
      periodic += (b.pbc[3 * g] | b.pbc[3 * g + 1] | b.pbc[3 * g + 2]) ? 1 : 0;
  if (periodic > 0 && !m_s.periodic)
    spdlog::warn(
        "{} graphs have periodic cells, but Architecture.periodic_boundary_conditions is "
        "false: their cells are ignored (no edges across the boundary)",
        periodic);
  // Isolated atoms: an atom with no neighbour within the radius gets no message; a whole graph
  // of such atoms has no interaction at all. Checked on the first graphs of each split.
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
    m_setup.norm = fit_normalizer(*m_train.block, m_train.ids, m_setup.targets, m_s.needs_forces());
    if (m_setup.spec.mpnn_type == "PNA")
      m_setup.spec.layer.pna_deg = degree_histogram(m_train, m_setup);
  }
  at::manual_seed(m_s.seed);
  m_gnn = std::make_shared<Gnn>(m_setup.spec);
  m_gnn->to(m_setup.dtype);
  m_params = m_gnn->parameters();
  m_opt = make_optimizer(m_s.optimizer, m_params, m_s.learning_rate, m_s.weight_decay);
  if (m_s.scheduler) m_plateau = std::make_unique<ReduceLROnPlateau>(*m_opt, m_s.plateau);
  if (m_s.early_stopping) m_early = std::make_unique<EarlyStopping>(m_s.patience);
  m_forces = (m_setup.conservative ||
              std::any_of(m_setup.targets.begin(), m_setup.targets.end(),
                          [](const HeadTarget& t) { return t.source == TargetSource::kForces; })) &&
             !m_train.block->forces.empty();
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
                {"n_graphs", m_blocks.empty() ? 0 : int64_t(m_blocks[0].n_graphs())}};
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
  save_checkpoint(path, *m_gnn, with_optimizer ? m_opt.get() : nullptr, record(epoch));
}

SplitMetrics Trainer::evaluate_part(const Part& part, std::vector<PreparedBatch>* cache) {
  SplitMetrics m(m_setup.targets.size());
  m_gnn->eval();
  EnergyForceWeights w = m_s.weights;
  auto run = [&](const PreparedBatch& b) {
    const Prediction p = predict(*m_gnn, m_setup, b.batch, /*create_graph=*/false);
    at::Tensor loss;
    {
      at::NoGradGuard no_grad;
      loss = total_loss(p, b, m_setup, w, m_s.loss);
    }
    m.add(p, b, m_setup, loss.item<double>());
  };
  if (cache && !cache->empty()) {
    for (const auto& b : *cache) run(b);
  } else {
    Prefetcher pf(*part.block, make_batches(*part.block, part.ids, m_s.eval_batch_size, 0, false),
                  m_setup, m_s.prefetch_depth);
    for (size_t i = 0; i < pf.size(); ++i) {
      PreparedBatch b = pf.next();
      run(b);
      if (cache && m_cache_eval) cache->push_back(std::move(b));
    }
  }
  m_gnn->train();
  return m;
}

void Trainer::train_epoch(int64_t epoch, nlohmann::json& row, SplitMetrics& metrics) {
  std::vector<int64_t> order = m_train.ids;
  if (m_s.shuffle) {
    const std::vector<int64_t> perm =
        permutation(int64_t(order.size()), m_s.seed * 1000003ULL + uint64_t(epoch));
    for (size_t i = 0; i < order.size(); ++i) order[i] = m_train.ids[size_t(perm[i])];
  }
  Prefetcher pf(
      *m_train.block,
      make_batches(*m_train.block, order, m_s.batch_size, m_s.atom_budget, m_s.drop_remainder),
      m_setup, m_s.prefetch_depth);
  double t_load = 0, t_graph = 0, t_fwd = 0, t_forces = 0, t_bwd = 0, t_opt = 0, gn_sum = 0;
  int64_t graphs = 0, steps = 0;
  const auto t_epoch = Clock::now();
  m_gnn->train();
  for (size_t i = 0; i < pf.size(); ++i) {
    const auto t0 = Clock::now();
    PreparedBatch b = pf.next();
    const auto t1 = Clock::now();
    // Forward and the energy; forces are timed separately (first backward, create_graph).
    Prediction p;
    at::Tensor pos = b.batch.pos;
    if (m_setup.conservative) pos = b.batch.pos.detach().clone().requires_grad_(true);
    p.outputs = m_gnn->forward(b.batch, pos);
    if (m_setup.energy_head >= 0) {
      const at::Tensor& out = p.outputs[size_t(m_setup.energy_head)];
      p.energy = m_setup.targets[size_t(m_setup.energy_head)].kind == HeadSpec::kNode
                     ? scatter_sum(out.select(1, 0), *b.batch.graphs)
                     : out.select(1, 0);
    }
    const auto t2 = Clock::now();
    if (m_setup.conservative) {
      auto g = torch::autograd::grad({p.energy.sum()}, {pos}, {}, true, true, true);
      p.forces = g[0].defined() ? -g[0] : at::zeros_like(pos);
    } else {
      for (size_t k = 0; k < m_setup.targets.size(); ++k)
        if (m_setup.targets[k].source == TargetSource::kForces) p.forces = p.outputs[k];
    }
    const auto t3 = Clock::now();
    at::Tensor loss = total_loss(p, b, m_setup, m_s.weights, m_s.loss);
    const double loss_value = loss.item<double>();
    if (!std::isfinite(loss_value)) {
      std::string ids;
      for (size_t k = 0; k < b.ids.size() && k < 64; ++k)
        ids += (k ? "," : "") + std::to_string(m_train.block->first + b.ids[k]);
      if (b.ids.size() > 64) ids += ",...";
      throw DataError("epoch " + std::to_string(epoch) + " step " + std::to_string(m_step + 1) +
                          ": the loss is " + fmt("%g", loss_value) + " on the batch of graphs [" +
                          ids + "] (indices in " + m_datasets[0]->path() + ")",
                      "lower Training.Optimizer.learning_rate or set Training.grad_clip; check "
                      "those graphs (overlapping atoms, huge forces) with `ddgnn info`");
    }
    m_opt->zero_grad();
    loss.backward();
    const auto t4 = Clock::now();
    const double gn = m_s.grad_clip > 0 ? clip_grad_norm(m_params, m_s.grad_clip) : 0.0;
    if (m_s.grad_clip > 0 && !std::isfinite(gn))
      throw DataError("epoch " + std::to_string(epoch) + " step " + std::to_string(m_step + 1) +
                          ": the gradient norm is " + fmt("%g", gn),
                      "lower Training.Optimizer.learning_rate; check the data with `ddgnn info`");
    m_opt->step();
    const auto t5 = Clock::now();
    ++m_step;
    ++steps;
    gn_sum += gn;
    graphs += b.batch.n_graphs;
    t_load += seconds(t0, t1);
    t_graph += b.seconds;
    t_fwd += seconds(t1, t2);
    t_forces += seconds(t2, t3);
    t_bwd += seconds(t3, t4);
    t_opt += seconds(t4, t5);
    {
      at::NoGradGuard no_grad;
      Prediction d;
      d.energy = p.energy.defined() ? p.energy.detach() : p.energy;
      d.forces = p.forces.defined() ? p.forces.detach() : p.forces;
      for (const auto& o : p.outputs) d.outputs.push_back(o.detach());
      metrics.add(d, b, m_setup, loss_value);
    }
    if (m_trace && m_trace->recording()) {
      m_trace->add("load", t0, t1, m_step);
      m_trace->add("forward", t1, t2, m_step);
      m_trace->add("forces", t2, t3, m_step);
      m_trace->add("backward", t3, t4, m_step);
      m_trace->add("optimizer", t4, t5, m_step);
      m_trace->end_step();
    }
    const double wall = seconds(t_epoch, Clock::now());
    const double rate = double(graphs) / std::max(wall, 1e-9);
    m_progress->update(epoch, m_s.num_epoch, graphs, int64_t(m_train.ids.size()), rate,
                       metrics.loss(), double(int64_t(m_train.ids.size()) - graphs) / rate);
    if (m_s.verbosity >= 4)
      spdlog::debug("epoch {} step {} graphs {} loss {:.6g}", epoch, m_step, b.batch.n_graphs,
                    loss_value);
    if (m_kill_at_step > 0 && m_step == m_kill_at_step) std::raise(SIGKILL);
  }
  const double wall = seconds(t_epoch, Clock::now());
  row["train_loss"] = metrics.loss();
  row["graphs_per_s"] = double(graphs) / std::max(wall, 1e-9);
  row["steps"] = steps;
  row["grad_norm"] =
      steps && m_s.grad_clip > 0 ? nlohmann::json(gn_sum / double(steps)) : nlohmann::json();
  row["load_s"] = t_load;
  row["graph_s"] = t_graph;
  row["forward_s"] = t_fwd;
  row["forces_s"] = t_forces;
  row["backward_s"] = t_bwd;
  row["optimizer_s"] = t_opt;
}

void Trainer::log_baseline() {
  double e_sum = 0, n_sum = 0;
  for (int64_t id : m_train.ids) {
    e_sum += m_train.block->energy[size_t(id)] / double(m_train.block->n_atoms[size_t(id)]);
    n_sum += 1;
  }
  const double mean_epa = e_sum / std::max(n_sum, 1.0);
  nlohmann::json ev;
  std::string line = "baseline (mean energy per atom, zero forces):";
  for (const Part* part : {&m_train, &m_val, &m_test}) {
    const ErrorMetrics m = baseline(*part, mean_epa, m_forces);
    ev[part->name] = {{"energy_mae_mev_atom", m.energy_mae_mev_per_atom},
                      {"energy_rmse_mev_atom", m.energy_rmse_mev_per_atom}};
    line += " " + part->name + " E " + fmt("%.3g", m.energy_mae_mev_per_atom) + " meV/atom";
    if (m_forces) {
      ev[part->name]["force_mae_mev_a"] = m.force_mae_mev_per_a;
      ev[part->name]["force_rmse_mev_a"] = m.force_rmse_mev_per_a;
      line += ", F " + fmt("%.3g", m.force_mae_mev_per_a) + " meV/Å";
    }
    line += ";";
  }
  line.pop_back();
  line += " (MAE)";
  m_events->write("baseline", ev);
  log_line(line);
}

nlohmann::json Trainer::run_impl() {
  if (world_size_or_one() > 1)
    throw ConfigError("ddgnn train runs on one process in this version (" +
                          std::to_string(world_size_or_one()) + " MPI ranks were started)",
                      "run it without mpiexec");
  if (m_s.device == "cuda")
    throw ConfigError(
        "Runtime.device: \"cuda\": training on a GPU is not available in this "
        "version",
        "set Runtime.device to \"cpu\" or \"auto\"");
  if (const char* k = std::getenv("DDGNN_DEBUG_SIGKILL_AT_STEP")) m_kill_at_step = std::atoll(k);
  if (m_config.sources.count("Output.log_level") &&
      m_config.sources.at("Output.log_level") != "default")
    spdlog::set_level(spdlog::level::from_str(m_config.get<std::string>("Output.log_level")));
  const int threads =
      m_s.threads > 0 ? int(m_s.threads) : int(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(threads);
  set_blas_threads(threads);
  if (m_s.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);

  load_data();
  prepare_run_dir();
  std::string resume_path;
  nlohmann::json resume_record;
  if (m_s.resume) {
    resume_path = resolve_startfrom(m_s);
    resume_record = read_checkpoint_record(resume_path);
  }
  build_model(m_s.resume ? &resume_record : nullptr);
  if (m_s.resume) {
    load_checkpoint_model(resume_path, *m_gnn);
    load_checkpoint_optimizer(resume_path, *m_opt);
    const auto& r = resume_record;
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
  write_resolved_config(m_config, m_s.run_dir + "/config.resolved.json");
  const std::vector<std::string> columns = metric_columns(m_setup, m_forces);
  m_csv = std::make_unique<MetricsCsv>(m_s.run_dir + "/metrics.csv", columns, !m_s.resume,
                                       m_start_epoch - 1);
  m_events = std::make_unique<EventLog>(m_s.run_dir + "/events.jsonl", !m_s.resume);
  if (m_s.trace_steps > 0)
    m_trace = std::make_unique<ChromeTrace>(m_s.run_dir + "/trace.json", m_s.trace_steps);
  m_progress = std::make_unique<ProgressLine>(m_s.verbosity >= 1);

  const int64_t n_params = [&] {
    int64_t n = 0;
    for (const auto& p : m_params) n += p.numel();
    return n;
  }();
  nlohmann::json start = {{"ddgnn_version", DDGNN_VERSION},
                          {"git", DDGNN_GIT_DESCRIBE},
                          {"config", m_config.source},
                          {"dataset", m_datasets[0]->path()},
                          {"graphs",
                           {{"train", m_train.ids.size()},
                            {"validate", m_val.ids.size()},
                            {"test", m_test.ids.size()}}},
                          {"parameters", n_params},
                          {"threads", threads},
                          {"scale", m_setup.norm.scale},
                          {"mean_residual_per_atom", m_setup.norm.mean_residual_per_atom},
                          {"model", to_json(m_setup)["spec"]}};
  if (m_s.resume) {
    start["resumed_from"] = resume_path;
    start["epoch"] = m_start_epoch - 1;
    m_events->write("resume", start);
    log_line("resuming " + resume_path + " after epoch " + std::to_string(m_start_epoch - 1));
  } else {
    m_events->write("run_start", start);
  }
  log_line(m_s.gnn.mpnn_type + ": " + std::to_string(n_params) + " parameters, " +
           (m_s.dtype == c10::kDouble ? "fp64" : "fp32") + ", " + std::to_string(threads) +
           " thread(s); " + std::to_string(m_train.ids.size()) + "/" +
           std::to_string(m_val.ids.size()) + "/" + std::to_string(m_test.ids.size()) +
           " graphs train/validate/test from " + m_datasets[0]->path() + "; run_dir " +
           m_s.run_dir);
  for (const auto& w : m_config.warnings) spdlog::warn("{}", w);
  if (!m_s.resume) log_baseline();

  // Validation and test batches are the same every epoch: built once, kept when small.
  int64_t eval_atoms = 0;
  for (const Part* part : {&m_val, &m_test})
    for (int64_t id : part->ids) eval_atoms += part->block->n_atoms[size_t(id)];
  m_cache_eval = eval_atoms * 64 * 48 < int64_t(1) << 31;  // ≈ edges × bytes under 2 GB

  nlohmann::json last_row;
  std::string stop_reason = "num_epoch";
  int64_t epoch = m_start_epoch;
  for (; epoch <= m_s.num_epoch; ++epoch) {
    const auto t_epoch = Clock::now();
    nlohmann::json row = {{"epoch", epoch}, {"lr", get_lr(*m_opt)}};
    SplitMetrics train_m(m_setup.targets.size());
    train_epoch(epoch, row, train_m);
    const auto t_eval = Clock::now();
    const SplitMetrics val_m = evaluate_part(m_val, &m_val_cache);
    const SplitMetrics test_m = evaluate_part(m_test, &m_test_cache);
    row["eval_s"] = seconds(t_eval, Clock::now());
    row["validate_loss"] = val_m.loss();
    row["test_loss"] = test_m.loss();
    train_m.put(row, "train", m_setup);
    val_m.put(row, "validate", m_setup);
    test_m.put(row, "test", m_setup);
    const double val_loss = val_m.loss();
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
    const double elapsed = m_elapsed_before + seconds(m_t_start, Clock::now());
    if (m_s.time_exponential)
      set_lr(*m_opt, time_exponential_lr(m_s.learning_rate, m_s.plateau.min_lr,
                                         elapsed / m_s.time_limit_s));
    const bool out_of_time = m_s.time_limit_s > 0 && elapsed >= m_s.time_limit_s;
    const bool last = epoch == m_s.num_epoch || stop_early || out_of_time;

    // Checkpoints: on schedule after the warm-up, and always after the last epoch.
    const auto t_ck = Clock::now();
    if (improved) m_best_row = row;
    if (m_s.checkpoint) {
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
        m_events->write("checkpoint",
                        {{"epoch", epoch}, {"path", dir + "/" + checkpoint_name(epoch)}});
      }
    }
    row["checkpoint_s"] = seconds(t_ck, Clock::now());
    row["epoch_s"] = seconds(t_epoch, Clock::now());
    row["elapsed_s"] = m_elapsed_before + seconds(m_t_start, Clock::now());
    row["peak_rss_mb"] = peak_rss_mb();
    m_csv->write(row);
    m_events->write("epoch", row);
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
      m_events->write("lr_reduced", {{"epoch", epoch}, {"lr", get_lr(*m_opt)}});
      log_line("learning rate reduced to " + fmt("%.3g", get_lr(*m_opt)));
    }
    last_row = row;
    if (stop_early) {
      stop_reason = "early_stopping";
      m_events->write("early_stop", {{"epoch", epoch}, {"patience", m_s.patience}});
      log_line("early stopping: no improvement of the validation loss for " +
               std::to_string(m_s.patience) + " epochs");
      break;
    }
    if (out_of_time) {
      stop_reason = "time_limit";
      m_events->write("time_limit", {{"epoch", epoch}, {"elapsed_s", elapsed}});
      log_line("time limit reached (" + fmt("%.0f", m_s.time_limit_s) + " s)");
      break;
    }
  }
  if (m_trace) m_trace->finish();
  m_progress->clear();
  nlohmann::json summary = {
      {"stop", stop_reason},
      {"epochs", last_row.is_null() ? m_start_epoch - 1 : last_row["epoch"].get<int64_t>()},
      {"best_epoch", m_best_epoch},
      {"best", m_best_row},
      {"last", last_row},
      {"run_dir", m_s.run_dir},
      {"elapsed_s", m_elapsed_before + seconds(m_t_start, Clock::now())},
      {"peak_rss_mb", peak_rss_mb()}};
  m_events->write("run_end", summary);
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
    throw;
  }
}

}  // namespace ddgnn
