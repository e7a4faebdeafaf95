// The run's datasets in the ranks' stores, split positions to file ids, fetches through the
// configured backend, and this rank's share of each split for statistics.
#include "train/train_data.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

#include "comm/fetch.h"
#include "comm/mpi.h"
#include "comm/store.h"
#include "core/error.h"
#include "loader/packed.h"
#include "loader/split.h"
#include "loader/store.h"

namespace ddgnn {

namespace fs = std::filesystem;

const char* split_name(int split) {
  static const char* names[3] = {"train", "validate", "test"};
  return names[split];
}

Backend resolve_backend(const std::optional<Backend>& backend, int world_size) {
  if (backend) return *backend;
  return world_size > 1 ? Backend::kShm : Backend::kReplicated;
}

struct TrainData::File {
  std::unique_ptr<Dataset> dataset;
  std::unique_ptr<ByteStore> store;  // none for `file`
  std::map<Backend, std::unique_ptr<Fetcher>> fetchers;
  // Graphs [stat_first, stat_first + stat_count) of the file are this rank's statistics share;
  // they are in `store` (at index - store->first()) unless the backend is `file`.
  int64_t stat_first = 0, stat_count = 0;
  std::vector<int8_t> split_of;  // [stat_count] which split each of those graphs is in (-1: none)
  // A file split by perc_train (one, or each of a list): each graph's split. Its graphs take
  // positions [start[k], start[k] + map.size(k)) of split k, and ids from id_offset on (a list's
  // graphs are numbered across its files, in order).
  SplitMap map;
  std::array<int64_t, 3> start{};
  int64_t id_offset = 0;
};

namespace {

// Every rank must read the same file under a path (ranks started in other working directories
// would read a mixture of two files): its counts, content checksum and size against rank 0's,
// collective, so that every rank throws alike.
void check_same_file_on_every_rank(const Dataset& ds, const std::string& path, MPI_Comm world) {
  std::error_code ec;
  const auto bytes = fs::file_size(path, ec);
  const int64_t mine[4] = {ds.n_graphs(), ds.n_atoms(), ds.content_crc32(),
                           ec ? int64_t(-1) : int64_t(bytes)};
  const int size = comm_size(world);
  std::vector<int64_t> all(size_t(4 * size));
  MPI_CHECK(MPI_Allgather(mine, 4, MPI_INT64_T, all.data(), 4, MPI_INT64_T, world));
  std::string others;
  for (int r = 1; r < size; ++r)
    if (!std::equal(all.begin() + 4 * r, all.begin() + 4 * r + 4, all.begin()))
      others += (others.empty() ? "" : ", ") + std::to_string(r) + " (" +
                std::to_string(all[size_t(4 * r)]) + " graphs, " +
                std::to_string(all[size_t(4 * r + 3)]) + " bytes)";
  if (!others.empty())
    throw ConfigError("Dataset.path " + path + " is another file on rank(s) " + others +
                          " than on rank 0 (" + std::to_string(all[0]) + " graphs, " +
                          std::to_string(all[3]) + " bytes)",
                      "give an absolute path, or start every rank in the same working directory");
}

// The files of a list train one model: the same forces, per-atom and per-structure columns as
// the first (names and widths, in order).
void check_same_columns(const Dataset& first, const Dataset& ds, size_t index) {
  const auto text = [](const std::vector<ColumnInfo>& columns) {
    std::string out;
    for (const auto& c : columns)
      out += (out.empty() ? "" : ", ") + c.name +
             (c.n_cols > 1 ? "[" + std::to_string(c.n_cols) + "]" : "");
    return out.empty() ? std::string("none") : out;
  };
  const auto same = [](const std::vector<ColumnInfo>& a, const std::vector<ColumnInfo>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const ColumnInfo& x, const ColumnInfo& y) {
                        return x.name == y.name && x.n_cols == y.n_cols;
                      });
  };
  std::string what;
  if (ds.has_forces() != first.has_forces())
    what = ds.has_forces() ? "has forces, " + first.path() + " none"
                           : "has no forces, " + first.path() + " has";
  else if (!same(ds.extra_columns(), first.extra_columns()))
    what = "has the per-atom columns " + text(ds.extra_columns()) + ", " + first.path() + " " +
           text(first.extra_columns());
  else if (!same(ds.graph_columns(), first.graph_columns()))
    what = "has the per-structure columns " + text(ds.graph_columns()) + ", " + first.path() + " " +
           text(first.graph_columns());
  if (!what.empty())
    throw ConfigError("Dataset.path[" + std::to_string(index) + "] " + ds.path() + " " + what +
                          ": the files of a list train one model and must hold the same data",
                      "convert them with the same --extra-columns and --info-keys, all with "
                      "forces or all without");
}

}  // namespace

TrainData::TrainData(const TrainSettings& s, MPI_Comm world) {
  const auto t0 = std::chrono::steady_clock::now();
  m_world = Communicator::dup(world);
  m_explicit = s.data.explicit_split();
  m_list = s.data.many();
  const int world_size = m_world.size();
  m_backend = resolve_backend(s.backend, world_size);

  // The files: one split by perc_train, a list of them, or three.
  std::vector<std::string> paths;
  if (s.data.many())
    for (const auto& f : s.data.files) paths.push_back(f.path);
  else if (s.data.explicit_split())
    paths = {s.data.train, s.data.validate, s.data.test};
  else
    paths = {s.data.single};
  for (const auto& path : paths)
    if (!fs::exists(path))
      throw ConfigError("Dataset.path: " + path + ": no such file",
                        "convert extxyz data with `ddgnn convert in.extxyz " + path +
                            "`, or correct the path (relative to the working directory)");
  for (size_t i = 0; i < paths.size(); ++i)
    for (size_t j = i + 1; j < paths.size(); ++j) {
      std::error_code ec;
      if (!fs::equivalent(paths[i], paths[j], ec) || ec) continue;
      if (s.data.many())  // every rank alike: the same files on each (checked below)
        throw ConfigError("Dataset.path[" + std::to_string(i) + "] and [" + std::to_string(j) +
                              "] are one file (" + paths[i] + ")",
                          "name each file of the list once");
      if (comm_rank(world) == 0)
        spdlog::warn(
            "Dataset.path: {} and {} are one file: the {} split measures the graphs the {} "
            "split trains on (or holds), not held-out ones",
            split_name(int(i)), split_name(int(j)), split_name(int(j)), split_name(int(i)));
    }

  // "auto" on several ranks with the tuner: one store that every candidate can read.
  const bool switching = !s.backend && world_size > 1 && s.tuner.enabled;
  if (switching) {
    m_candidates = s.tuner.candidates;
    if (m_candidates.empty())
      m_candidates = {Backend::kShm, Backend::kRma, Backend::kCollective, Backend::kFile};
    if (std::find(m_candidates.begin(), m_candidates.end(), m_backend) == m_candidates.end())
      m_backend = m_candidates.front();
  } else {
    m_candidates = {m_backend};
  }
  const bool replicated = m_backend == Backend::kReplicated;
  const bool from_file = m_backend == Backend::kFile && !switching;
  const bool grouped = !replicated && !from_file;
  if (grouped) m_group = std::make_unique<LoaderGroup>(m_world.get(), int(s.width));
  // Statistics: the group's ranks together hold the data once; with the whole file on every
  // rank (replicated) or none (file), the world's ranks split it arithmetically.
  m_stat_comm = Communicator::dup(grouped ? m_group->comm() : m_world.get());
  const int stat_rank = m_stat_comm.rank(), stat_size = m_stat_comm.size();

  StoreOptions so;
  so.budget_bytes =
      int64_t(s.memory_budget_gb * double(int64_t(1) << 30) / double(ranks_on_node(m_world.get())));
  so.shared = m_backend == Backend::kShm || switching;
  so.one_sided = switching;
  so.world = m_world.get();  // windows of disjoint groups (or MPI_COMM_SELF) are created in turns

  for (size_t f = 0; f < paths.size(); ++f) {
    auto file = std::make_unique<File>();
    file->dataset = std::make_unique<Dataset>(paths[f]);
    if (s.data.many()) file->dataset->add_constant_column(kBranchKey, double(f));
    const Dataset& ds = *file->dataset;
    check_same_file_on_every_rank(ds, paths[f], m_world.get());
    if (f > 0 && s.data.many()) check_same_columns(*m_files[0]->dataset, ds, f);
    if (s.data.explicit_split() && ds.n_graphs() == 0)
      throw DataError(paths[f] + ": the " + split_name(int(f)) + " file has no graphs");
    if (!from_file) {
      StoreLoad load =
          load_store(ds, grouped ? m_group->comm() : MPI_COMM_SELF, so, s.compact_records);
      m_report.bytes += load.store->n_bytes();
      file->store = std::move(load.store);
    }
    for (const Backend b : m_candidates)
      file->fetchers[b] = make_fetcher(b, ds, file->store.get(), {}, s.compact_records);
    const Partition part{ds.n_graphs(), stat_size};
    file->stat_first = grouped ? file->store->first() : part.first(stat_rank);
    file->stat_count = grouped ? file->store->count() : part.count(stat_rank);
    m_files.push_back(std::move(file));
  }

  // Split positions -> file ids, and which split each graph of this rank's share is in.
  if (!s.data.explicit_split()) {  // each file split on its own, positions file after file
    int64_t ids = 0;
    for (size_t f = 0; f < m_files.size(); ++f) {
      File& file = *m_files[f];
      const SplitOptions so{s.perc_train, s.split_seed, s.split_by, s.split_block,
                            s.train_fraction};
      Split split;
      try {
        split = split_dataset(*file.dataset, so);
      } catch (const DataError& e) {
        if (!s.data.many()) throw;
        throw DataError("Dataset.path[" + std::to_string(f) + "] " + paths[f] + ": " + e.what(),
                        e.hint());
      }
      m_split.by = s.split_by;
      m_split.block = s.split_block;
      for (int k = 0; k < 3; ++k) m_split.units[size_t(k)] += split.units[size_t(k)];
      m_split.n_units += split.n_units;
      m_split.train_dropped += split.train_dropped;
      file.map = SplitMap(split, file.dataset->n_graphs());
      split = Split();  // the lists go (their memory is handed back after the loader's start-up)
      for (int k = 0; k < 3; ++k) {
        file.start[size_t(k)] = m_sizes[size_t(k)];
        m_sizes[size_t(k)] += file.map.size(k);
      }
      file.id_offset = ids;
      ids += file.dataset->n_graphs();
      file.split_of.assign(size_t(file.stat_count), int8_t(-1));
      for (int64_t i = 0; i < file.stat_count; ++i) {
        const int part = file.map.part_of(file.stat_first + i);
        if (part != SplitMap::kNone) file.split_of[size_t(i)] = int8_t(part);
      }
    }
  } else {
    for (int k = 0; k < 3; ++k) {  // position = file id
      const File& file = *m_files[size_t(k)];
      m_sizes[size_t(k)] = file.dataset->n_graphs();
      m_files[size_t(k)]->split_of.assign(size_t(file.stat_count), int8_t(k));
    }
  }

  m_report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m_report.groups = grouped ? m_group->count() : (replicated ? world_size : 1);
  m_report.group_size = grouped ? m_group->size() : 1;
  const MPI_Comm w = m_world.get();
  MPI_CHECK(MPI_Allreduce(&m_report.seconds, &m_report.max_seconds, 1, MPI_DOUBLE, MPI_MAX, w));
  MPI_CHECK(MPI_Allreduce(&m_report.bytes, &m_report.max_bytes, 1, MPI_INT64_T, MPI_MAX, w));
  MPI_CHECK(MPI_Allreduce(&m_report.bytes, &m_report.total_bytes, 1, MPI_INT64_T, MPI_SUM, w));
}

TrainData::~TrainData() = default;

const TrainData::File& TrainData::file_of(int split) const {
  return *m_files[m_explicit ? size_t(split) : 0];
}

const Dataset& TrainData::dataset(int split) const {
  return *file_of(split).dataset;
}

std::string TrainData::describe() const {
  if (m_explicit || m_files.size() == 1) return m_files[0]->dataset->path();
  std::string out = std::to_string(m_files.size()) + " files (";
  for (size_t f = 0; f < m_files.size(); ++f)
    out += (f > 0 ? ", " : "") + m_files[f]->dataset->path();
  return out + ")";
}

const Dataset& TrainData::list_file(size_t f) const {
  return *m_files.at(f)->dataset;
}

int64_t TrainData::split_map_bytes() const {
  int64_t bytes = 0;
  for (const auto& file : m_files) bytes += file->map.bytes();
  return bytes;
}

void TrainData::set_backend(Backend backend) {
  if (std::find(m_candidates.begin(), m_candidates.end(), backend) == m_candidates.end())
    throw Error("loader: cannot switch to backend '" + to_string(backend) +
                "' (not loaded for it)");
  m_backend = backend;
}

int TrainData::group_size() const {
  return m_group ? m_group->size() : 1;
}

GraphBlock TrainData::fetch(int split, const std::vector<int64_t>& positions, FetchInfo* info,
                            const Backend* backend) {
  // Which file holds each position, and its id there.
  std::vector<int64_t> ids(positions.size());
  std::vector<uint32_t> file_index(positions.size(), 0);
  for (size_t k = 0; k < ids.size(); ++k) {
    const int64_t p = positions[k];
    if (p < 0 || p >= m_sizes[size_t(split)])
      throw Error("TrainData: position " + std::to_string(p) + " of the " + split_name(split) +
                  " split, which has " + std::to_string(m_sizes[size_t(split)]) + " graphs");
    if (m_explicit) {
      ids[k] = p;
      continue;
    }
    size_t f = 0;
    while (f + 1 < m_files.size() && p >= m_files[f + 1]->start[size_t(split)]) ++f;
    file_index[k] = uint32_t(f);
    ids[k] = m_files[f]->map.id(split, p - m_files[f]->start[size_t(split)]);
  }
  const Backend name = backend ? *backend : m_backend;
  const auto fetcher_of = [&](const File& file) -> Fetcher& {
    const auto it = file.fetchers.find(name);
    if (it == file.fetchers.end())
      throw Error("loader: backend '" + to_string(name) + "' is not loaded for this run");
    return *it->second;
  };
  const auto remote = [&](const File& file, const std::vector<int64_t>& of_file) {
    int64_t n = 0;
    if (file.store && m_group && name != Backend::kFile) {
      const Partition& part = file.store->partition();
      const int me = m_group->rank();
      for (int64_t id : of_file) n += part.owner(id) != me ? 1 : 0;
    }
    return n;
  };
  if (info) *info = FetchInfo{0, 0, int64_t(ids.size()), 0};
  if (m_explicit || m_files.size() == 1) {
    const File& file = file_of(split);
    GraphBlock block = fetch_graphs(fetcher_of(file), ids, *file.dataset,
                                    info ? &info->seconds : nullptr, info ? &info->bytes : nullptr);
    if (info) info->remote = remote(file, ids);
    return block;
  }
  // A list of files: each file's records fetched (every file, in order, when the backend is
  // collective: each rank of the group makes the same calls), then put in the positions' order
  // and unpacked as one block (the files hold the same columns).
  std::vector<Fetched> got(m_files.size());
  std::vector<std::vector<int64_t>> of_file(m_files.size());
  std::vector<size_t> index_in_file(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    index_in_file[k] = of_file[file_index[k]].size();
    of_file[file_index[k]].push_back(ids[k]);
  }
  for (size_t f = 0; f < m_files.size(); ++f) {
    Fetcher& fetcher = fetcher_of(*m_files[f]);
    if (of_file[f].empty() && !fetcher.collective()) continue;
    const auto t0 = std::chrono::steady_clock::now();
    fetcher.fetch(of_file[f].data(), int64_t(of_file[f].size()), got[f]);
    if (info) {
      info->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      info->bytes += int64_t(got[f].bytes.size());
      info->remote += remote(*m_files[f], of_file[f]);
    }
  }
  std::vector<uint8_t> bytes;
  std::vector<int64_t> offsets(ids.size() + 1, 0);
  for (size_t k = 0; k < ids.size(); ++k) {
    const Fetched& from = got[file_index[k]];
    const size_t j = index_in_file[k];
    bytes.insert(bytes.end(), from.bytes.begin() + from.offsets[j],
                 from.bytes.begin() + from.offsets[j + 1]);
    offsets[k + 1] = int64_t(bytes.size());
  }
  const Dataset& first = *m_files[0]->dataset;
  GraphBlock block = unpack_records(bytes.data(), offsets.data(), int64_t(ids.size()),
                                    first.extra_columns(), first.graph_columns());
  block.graph_ids.resize(ids.size());
  for (size_t k = 0; k < ids.size(); ++k)
    block.graph_ids[k] = m_files[file_index[k]]->id_offset + ids[k];
  return block;
}

void TrainData::visit_local(
    int split, const std::function<void(const GraphBlock&, const std::vector<int64_t>&)>& f,
    int64_t chunk) const {
  visit(split, f, chunk, /*atom_arrays=*/true);
}

void TrainData::visit_local_light(
    int split, const std::function<void(const GraphBlock&, const std::vector<int64_t>&)>& f) const {
  visit(split, f, 4096, /*atom_arrays=*/false);
}

void TrainData::visit(int split,
                      const std::function<void(const GraphBlock&, const std::vector<int64_t>&)>& f,
                      int64_t chunk, bool atom_arrays) const {
  if (m_explicit) return visit_file(file_of(split), split, f, chunk, atom_arrays);
  for (const auto& file : m_files) visit_file(*file, split, f, chunk, atom_arrays);
}

void TrainData::visit_file(
    const File& file, int split,
    const std::function<void(const GraphBlock&, const std::vector<int64_t>&)>& f, int64_t chunk,
    bool atom_arrays) const {
  std::vector<int64_t> ids;
  std::vector<uint8_t> in_split;  // the per-atom arrays are decoded for these graphs alone
  for (int64_t c0 = 0; c0 < file.stat_count; c0 += chunk) {
    const int64_t n = std::min(chunk, file.stat_count - c0);
    ids.clear();
    in_split.assign(size_t(n), 0);
    for (int64_t i = 0; i < n; ++i)
      if (file.split_of[size_t(c0 + i)] == split) {
        ids.push_back(i);
        in_split[size_t(i)] = 1;
      }
    if (ids.empty()) continue;
    GraphBlock block;
    if (file.store) {
      const int64_t li = file.stat_first + c0 - file.store->first();
      block = unpack_records(file.store->data(), file.store->offsets() + li, n,
                             file.dataset->extra_columns(), file.dataset->graph_columns(),
                             atom_arrays, nullptr, in_split.data());
    } else {
      block = file.dataset->read(file.stat_first + c0, n);
    }
    block.first = file.id_offset + file.stat_first + c0;
    f(block, ids);
  }
}

std::vector<uint16_t> TrainData::split_atoms(int split) const {
  // The shares of a file are contiguous ranges of its ids in rank order, and positions follow
  // file ids, file after file: each file's shares one after the other, the files in turn, are
  // the split in position order.
  std::vector<uint16_t> all;
  const auto gather = [&](const File& file) {
    std::vector<uint16_t> mine;
    visit_file(
        file, split,
        [&](const GraphBlock& b, const std::vector<int64_t>& ids) {
          for (int64_t id : ids)
            mine.push_back(uint16_t(std::min<int32_t>(b.n_atoms[size_t(id)], 65535)));
        },
        4096, /*atom_arrays=*/false);
    const int size = m_stat_comm.size();
    std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size), 0);
    int n = int(mine.size());
    MPI_CHECK(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, m_stat_comm.get()));
    for (int r = 1; r < size; ++r)
      displs[size_t(r)] = displs[size_t(r - 1)] + counts[size_t(r - 1)];
    const size_t at = all.size();
    all.resize(at + size_t(displs.back() + counts.back()));
    MPI_CHECK(MPI_Allgatherv(mine.data(), n, MPI_UINT16_T, all.data() + at, counts.data(),
                             displs.data(), MPI_UINT16_T, m_stat_comm.get()));
  };
  if (m_explicit)
    gather(file_of(split));
  else
    for (const auto& file : m_files) gather(*file);
  if (int64_t(all.size()) != this->size(split))
    throw Error("TrainData: " + std::to_string(all.size()) + " atom counts for the " +
                std::to_string(this->size(split)) + " graphs of the " + split_name(split) +
                " split");
  return all;
}

void TrainData::sum_stats(long double* values, int64_t n) const {
  if (m_stat_comm.size() > 1)
    MPI_CHECK(
        MPI_Allreduce(MPI_IN_PLACE, values, int(n), MPI_LONG_DOUBLE, MPI_SUM, m_stat_comm.get()));
}

void TrainData::max_stats(int64_t* values, int64_t n) const {
  if (m_stat_comm.size() > 1)
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, int(n), MPI_INT64_T, MPI_MAX, m_stat_comm.get()));
}

}  // namespace ddgnn
