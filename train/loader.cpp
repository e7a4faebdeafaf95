// Ready batches for the trainer (train/loader.h): sampler, backend (or switcher), collate,
// prefetch.
#include "train/loader.h"

#include <stdexcept>

#include "comm/mpi.h"
#include "comm/watchdog.h"
#include "core/error.h"
#include "core/log.h"
#include "core/signals.h"
#include "loader/sampler.h"

namespace ddgnn {

Loader::Loader(const TrainSettings& s, MPI_Comm world)
    : m_s(s), m_rank(comm_rank(world)), m_world(comm_size(world)) {
  m_data = std::make_unique<TrainData>(s, world);
  m_count_comm = Communicator::dup(world);
  // Periodic graphs and the atoms of each split; with an atom budget the atoms of every training
  // graph, on every rank.
  long double counts[4] = {0, 0, 0, 0};  // periodic graphs, atoms of train / validate / test
  for (int k : {kTrain, kValidate, kTest})
    m_data->visit_local_light(k, [&](const GraphBlock& b, const std::vector<int64_t>& ids) {
      for (int64_t g : ids) {
        counts[0] +=
            (b.pbc[size_t(3 * g)] | b.pbc[size_t(3 * g + 1)] | b.pbc[size_t(3 * g + 2)]) ? 1 : 0;
        counts[1 + k] += b.n_atoms[size_t(g)];
      }
    });
  m_data->sum_stats(counts, 4);
  if (s.atom_budget > 0) m_train_atoms = m_data->split_atoms(kTrain);
  for (int k : {kTrain, kValidate, kTest}) m_split_atoms[k] = int64_t(counts[1 + k]);
  m_periodic_graphs = int64_t(counts[0]);
  // Validation and test batches are kept when this rank's share is small: ≈ edges × B bytes.
  const long double eval_atoms = counts[1 + kValidate] + counts[1 + kTest];
  m_cache_eval = eval_atoms / m_world * 64 * 48 < (long double)(int64_t(1) << 31);
}

Loader::~Loader() = default;

void Loader::start_switcher(const std::string& csv_path, bool append) {
  if (!m_data->switchable()) return;
  m_switcher =
      std::make_unique<BackendSwitcher>(*m_data, m_s, m_count_comm.get(), csv_path, append);
}

std::string Loader::description() const {
  const auto& r = m_data->load_report();
  const double mib = double(1 << 20);
  std::string backend = to_string(m_data->backend());
  if (m_data->switchable()) {
    backend = "auto (the tuner chooses among";
    for (const Backend b : m_data->candidates()) backend += " " + to_string(b);
    backend += ")";
  }
  return "backend " + backend + ", " + std::to_string(m_world) + " rank(s), " +
         std::to_string(r.groups) + " replica group(s) of " + std::to_string(r.group_size) +
         "; store " + fmt("%.1f", double(r.bytes) / mib) + " MiB on rank 0 (max " +
         fmt("%.1f", double(r.max_bytes) / mib) + ", all ranks " +
         fmt("%.1f", double(r.total_bytes) / mib) + " MiB), loaded in " +
         fmt("%.2f", r.max_seconds) + " s";
}

nlohmann::json Loader::figures() const {
  const auto& load = m_data->load_report();
  return {{"backend", to_string(m_data->backend())},
          {"ranks", m_world},
          {"groups", load.groups},
          {"group_size", load.group_size},
          {"bytes_rank0", load.bytes},
          {"bytes_max", load.max_bytes},
          {"bytes_total", load.total_bytes},
          {"seconds_max", load.max_seconds}};
}

StepBatch Loader::build(int split, const std::vector<int64_t>& positions, const ModelSetup& setup,
                        bool training) {
  StepBatch b;
  b.t_fetch = std::chrono::steady_clock::now();
  GraphBlock block;
  {
    Waiting waiting("fetch");
    block = training && m_switcher ? m_switcher->fetch(positions, nullptr, &b.note)
                                   : m_data->fetch(split, positions);
  }
  b.t_fetched = std::chrono::steady_clock::now();
  b.fetch_s = std::chrono::duration<double>(b.t_fetched - b.t_fetch).count();
  // The step's graphs and atoms over the ranks, and whether any rank was asked to stop (a signal
  // reaches the ranks at different moments; this sum makes them stop at the same step).
  // So does the deadline of Training.time_limit_s, read on each rank's clock.
  const bool late = training && m_deadline && m_steps_built > 0 &&
                    std::chrono::steady_clock::now() >= *m_deadline;
  int64_t counts[4] = {int64_t(block.n_graphs()), 0, stop_signal() != 0 ? 1 : 0, late ? 1 : 0};
  for (int32_t n : block.n_atoms) counts[1] += n;
  if (training) {
    Waiting waiting("sum of the step's graphs and atoms");
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, counts, 4, MPI_INT64_T, MPI_SUM, m_count_comm.get()));
    ++m_steps_built;
  }
  b.graphs_all = counts[0];
  b.atoms_all = counts[1];
  b.stop = counts[2] > 0;
  b.out_of_time = counts[3] > 0;
  b.empty = block.n_graphs() == 0;
  if (!b.empty) {
    std::vector<int64_t> ids(block.n_graphs());
    for (size_t k = 0; k < ids.size(); ++k) ids[k] = int64_t(k);
    // This rank's part of the step (what a padded batch's loss reads from the device).
    int64_t atoms = 0;
    for (int32_t n : block.n_atoms) atoms += n;
    StepShare share;
    share.graphs = double(block.n_graphs()) / double(std::max<int64_t>(b.graphs_all, 1));
    share.atoms = double(atoms) / double(std::max<int64_t>(b.atoms_all, 1));
    b.prepared = prepare_batch(block, ids, setup, training ? &share : nullptr);
    b.prepared.ids = block.graph_ids;  // file ids, for messages and predictions
  }
  b.t_built = std::chrono::steady_clock::now();
  return b;
}

int64_t Loader::begin_epoch(int64_t epoch) {
  SamplerOptions so;
  so.n_samples = m_data->size(kTrain);
  so.batch_size = m_s.batch_size;
  so.rank = m_rank;
  so.world = m_world;
  so.seed = m_s.seed;
  so.shuffle = m_s.shuffle;
  so.drop_remainder = m_s.drop_remainder;
  // batch_size graphs per rank, or atom-budget steps balanced over the ranks by atoms.
  m_epoch_batches = m_s.atom_budget > 0
                        ? sampler_epoch_balanced(so, m_train_atoms, m_s.atom_budget, epoch)
                        : sampler_epoch(so, epoch);
  if (m_switcher) m_switcher->start_epoch(epoch);
  return int64_t(m_epoch_batches.size());
}

Batches Loader::train_steps(int64_t first, int64_t last, const ModelSetup& setup) {
  if (first < 0 || last < first || last > int64_t(m_epoch_batches.size()))
    throw std::logic_error("Loader::train_steps: steps outside the epoch");
  return Batches(
      size_t(last - first), m_s.prefetch_depth,
      [this, first, &setup](size_t i) {
        return build(kTrain, m_epoch_batches[size_t(first) + i], setup, /*training=*/true);
      },
      /*detach_on_unwind=*/m_world > 1,
      // A stop request or the deadline ends the run at that step on every rank: nothing is built
      // after it.
      [](const StepBatch& b) { return b.stop || b.out_of_time; });
}

void Loader::for_each_eval_batch(int split, const ModelSetup& setup,
                                 const std::function<void(const PreparedBatch&)>& f) {
  std::vector<PreparedBatch>& cache = m_eval_cache[split];
  if (m_eval_cached[split]) {
    for (const auto& b : cache) f(b);
    return;
  }
  // Each rank its share of the split, in order; the same number of batches on every rank.
  SamplerOptions so;
  so.n_samples = m_data->size(split);
  so.batch_size = m_s.eval_batch_size;
  so.rank = m_rank;
  so.world = m_world;
  so.shuffle = false;
  std::vector<std::vector<int64_t>> batches = sampler_epoch(so, 1);
  const size_t n = batches.size();
  Batches pf(
      n, m_s.prefetch_depth,
      [this, split, batches = std::move(batches), &setup](size_t i) {
        return build(split, batches[i], setup, /*training=*/false);
      },
      /*detach_on_unwind=*/m_world > 1);
  for (size_t i = 0; i < pf.size(); ++i) {
    StepBatch b = pf.next();
    if (b.empty) continue;
    f(b.prepared);
    if (m_cache_eval) cache.push_back(std::move(b.prepared));
  }
  m_eval_cached[split] = m_cache_eval;
}

}  // namespace ddgnn
