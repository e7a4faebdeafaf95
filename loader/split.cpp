// Seeded permutation and the train / validation / test split.
#include "loader/split.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>

#include "core/error.h"
#include "loader/dataset.h"

namespace ddgnn {

namespace {

// Uniform integer in [0, bound) from a 64-bit engine, by rejection (no modulo bias).
uint64_t bounded(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % bound;
}

// A part left empty is a DataError naming the counts; else the parts sorted.
Split finish(Split s, int64_t n_graphs, const SplitOptions& o, int64_t n_compositions = 0) {
  if (s.train.empty() || s.validate.empty() || s.test.empty()) {
    const std::string unit = o.by == SplitBy::kFrame   ? "graphs"
                             : o.by == SplitBy::kBlock ? "blocks of " + std::to_string(o.block)
                             : o.by == SplitBy::kComposition ? "compositions"
                                                             : "groups";
    const std::string units =
        std::to_string(o.by == SplitBy::kComposition ? n_compositions : s.n_units);
    throw DataError(
        "a dataset of " + std::to_string(n_graphs) + " graphs (" + units + " " + unit +
            ") split with perc_train " + std::to_string(o.perc_train) +
            " leaves an empty part (train " + std::to_string(s.train.size()) + ", validate " +
            std::to_string(s.validate.size()) + ", test " + std::to_string(s.test.size()) +
            " graphs)" +
            (o.train_fraction < 1.0 ? " with train_fraction " + std::to_string(o.train_fraction)
                                    : std::string()),
        o.train_fraction < 1.0 && s.train.empty() && s.train_dropped > 0
            ? "raise Dataset.train_fraction: it keeps too few training units"
        : o.by == SplitBy::kFrame ? "use more graphs, another perc_train, or explicit split files "
                                    "(Dataset.path {train, validate, test})"
        : o.by == SplitBy::kComposition
            ? "each composition is split on its own: give more graphs of each "
              "composition, another perc_train, or split by frame"
            : "use more, smaller units (Dataset.split_block, or finer groups), another "
              "perc_train, or explicit split files (Dataset.path {train, validate, "
              "test})");
  }
  // In id order: marked, then read back in one pass (a sort of ten million ids took seconds).
  std::vector<int8_t> part_of(size_t(n_graphs), -1);
  std::vector<int64_t>* parts[3] = {&s.train, &s.validate, &s.test};
  for (int p = 0; p < 3; ++p)
    for (int64_t g : *parts[p]) part_of[size_t(g)] = int8_t(p);
  for (auto* part : parts) part->clear();
  for (int64_t g = 0; g < n_graphs; ++g)
    if (part_of[size_t(g)] >= 0) parts[part_of[size_t(g)]]->push_back(g);
  return s;
}

}  // namespace

namespace {

// Graphs of `part` among a word's 32.
uint64_t matches(uint64_t word, int part) {
  const uint64_t x = word ^ (uint64_t(part) * 0x5555555555555555ULL);
  return ~(x | (x >> 1)) & 0x5555555555555555ULL;
}

}  // namespace

SplitMap::SplitMap(const Split& split, int64_t n_graphs) : m_n(n_graphs) {
  const size_t words = size_t((n_graphs + 31) / 32);
  m_words.assign(words, ~uint64_t(0));  // kNone everywhere
  const std::vector<int64_t>* lists[3] = {&split.train, &split.validate, &split.test};
  for (int part = 0; part < 3; ++part)
    for (const int64_t id : *lists[part]) {
      if (id < 0 || id >= n_graphs || part_of(id) != kNone)
        throw Error("SplitMap: graph " + std::to_string(id) + " of " + std::to_string(n_graphs) +
                    " is out of range or in two parts");
      uint64_t& w = m_words[size_t(id >> 5)];
      const int shift = int(2 * (id & 31));
      w = (w & ~(uint64_t(3) << shift)) | (uint64_t(part) << shift);
    }
  std::array<int64_t, 3> count{};
  m_before.reserve(words / kBlockWords + 1);
  for (size_t w = 0; w < words; ++w) {
    if (w % kBlockWords == 0) m_before.push_back(count);
    for (int part = 0; part < 3; ++part)
      count[size_t(part)] += __builtin_popcountll(matches(m_words[w], part));
  }
  m_size = count;
}

int64_t SplitMap::id(int part, int64_t position) const {
  if (part < 0 || part > 2 || position < 0 || position >= m_size[size_t(part)])
    throw Error("SplitMap: position " + std::to_string(position) + " of part " +
                std::to_string(part) + " (of " +
                std::to_string(part >= 0 && part <= 2 ? m_size[size_t(part)] : 0) + ")");
  // The last block that starts at or before the position, then word by word.
  const auto it = std::upper_bound(
      m_before.begin(), m_before.end(), position,
      [part](int64_t pos, const std::array<int64_t, 3>& b) { return pos < b[size_t(part)]; });
  const size_t block = size_t(it - m_before.begin()) - 1;
  int64_t left = position - m_before[block][size_t(part)];
  for (size_t w = block * kBlockWords; w < m_words.size(); ++w) {
    uint64_t m = matches(m_words[w], part);
    const int64_t here = __builtin_popcountll(m);
    if (left >= here) {
      left -= here;
      continue;
    }
    for (; left > 0; --left) m &= m - 1;  // drop the lowest matches
    return int64_t(w) * 32 + __builtin_ctzll(m) / 2;
  }
  throw Error("SplitMap: internal: position not found");
}

int64_t SplitMap::bytes() const {
  return int64_t(m_words.size() * sizeof(uint64_t) +
                 m_before.size() * sizeof(std::array<int64_t, 3>));
}

std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = i;
  std::mt19937_64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[size_t(i)], p[bounded(rng, uint64_t(i) + 1)]);
  return p;
}

namespace {

// By composition: every graph a unit; the quotas of training and validation hold within each
// composition, dealt in the order of one seeded permutation of all graphs.
Split split_stratified(int64_t n_graphs, const SplitOptions& o,
                       const std::vector<int32_t>& compositions) {
  std::vector<int64_t> n_of;  // graphs of each composition
  for (int64_t g = 0; g < n_graphs; ++g) {
    const int32_t id = compositions[size_t(g)];
    if (id < 0)
      throw DataError("split by composition: graph " + std::to_string(g) + " has id " +
                      std::to_string(id));
    if (size_t(id) >= n_of.size()) n_of.resize(size_t(id) + 1, 0);
    ++n_of[size_t(id)];
  }
  std::vector<std::array<int64_t, 3>> dealt(n_of.size(), {0, 0, 0});
  Split s;
  s.n_units = n_graphs;
  for (int64_t g : permutation(n_graphs, o.seed)) {
    const size_t c = size_t(compositions[size_t(g)]);
    const int64_t n_train = std::llround(o.perc_train * double(n_of[c]));
    const int64_t n_val = (n_of[c] - n_train) / 2;
    const int part = dealt[c][0] < n_train ? 0 : dealt[c][1] < n_val ? 1 : 2;
    const bool kept = part != 0 || dealt[c][0] < std::llround(o.train_fraction * double(n_train));
    ++dealt[c][size_t(part)];
    if (!kept) {
      ++s.train_dropped;
      continue;
    }
    (part == 0 ? s.train : part == 1 ? s.validate : s.test).push_back(g);
    ++s.units[size_t(part)];
  }
  int64_t n_compositions = 0;
  for (int64_t n : n_of) n_compositions += n > 0;
  return finish(std::move(s), n_graphs, o, n_compositions);
}

}  // namespace

Split split_graphs(int64_t n_graphs, const SplitOptions& o, const std::vector<int32_t>& groups) {
  if (!(o.perc_train > 0.0 && o.perc_train < 1.0))
    throw ConfigError(
        "NeuralNetwork.Training.perc_train must be in (0, 1), got " + std::to_string(o.perc_train),
        "e.g. 0.8 keeps 80% for training and splits the rest between validation "
        "and test");
  if (!(o.train_fraction > 0.0 && o.train_fraction <= 1.0))
    throw ConfigError(
        "Dataset.train_fraction must be in (0, 1], got " + std::to_string(o.train_fraction),
        "e.g. 0.25 trains on a quarter of the training split");
  if (o.by == SplitBy::kBlock && o.block < 1)
    throw ConfigError("Dataset.split_block must be >= 1, got " + std::to_string(o.block),
                      "give the frames per block, longer than the trajectory's correlation time");
  const bool by_group = o.by == SplitBy::kGroup || o.by == SplitBy::kComposition;
  const char* what = o.by == SplitBy::kGroup ? "group" : "composition";
  if (by_group && int64_t(groups.size()) != n_graphs)
    throw DataError(std::string("split by ") + what + ": " + std::to_string(groups.size()) +
                    " ids for " + std::to_string(n_graphs) + " graphs");
  if (o.by == SplitBy::kComposition) return split_stratified(n_graphs, o, groups);
  // The units: their graphs, in file order. Frames and blocks are ranges of ids, never listed
  // one by one (ten million frames would be ten million lists); groups are listed.
  std::vector<std::vector<int64_t>> units;
  const int64_t range = o.by == SplitBy::kBlock ? o.block : 1;  // graphs a unit, as a range
  if (o.by == SplitBy::kGroup) {
    std::vector<int64_t> unit_of_group;
    for (int64_t g = 0; g < n_graphs; ++g) {
      const int32_t id = groups[size_t(g)];
      if (id < 0)
        throw DataError("split by group: graph " + std::to_string(g) + " has group " +
                        std::to_string(id));
      if (size_t(id) >= unit_of_group.size()) unit_of_group.resize(size_t(id) + 1, -1);
      if (unit_of_group[size_t(id)] < 0) {
        unit_of_group[size_t(id)] = int64_t(units.size());
        units.emplace_back();
      }
      units[size_t(unit_of_group[size_t(id)])].push_back(g);
    }
  }
  const bool listed = o.by == SplitBy::kGroup;
  const auto unit_size = [&](int64_t u) {
    return listed ? int64_t(units[size_t(u)].size())
                  : std::min(n_graphs, (u + 1) * range) - u * range;
  };
  const auto append_unit = [&](std::vector<int64_t>& to, int64_t u) {
    if (listed) {
      to.insert(to.end(), units[size_t(u)].begin(), units[size_t(u)].end());
      return;
    }
    for (int64_t g = u * range; g < std::min(n_graphs, (u + 1) * range); ++g) to.push_back(g);
  };
  const int64_t n_train = std::llround(o.perc_train * double(n_graphs));
  const int64_t n_val = (n_graphs - n_train) / 2;
  Split s;
  s.n_units = listed ? int64_t(units.size()) : (n_graphs + range - 1) / range;
  std::vector<int64_t> train_units;  // in the dealt order
  int64_t dealt_train = 0;
  for (int64_t u : permutation(s.n_units, o.seed)) {
    const int part = dealt_train < n_train ? 0 : int64_t(s.validate.size()) < n_val ? 1 : 2;
    if (part == 0) {
      train_units.push_back(u);
      dealt_train += unit_size(u);
      continue;
    }
    append_unit(part == 1 ? s.validate : s.test, u);
    ++s.units[size_t(part)];
  }
  const auto keep = size_t(std::llround(o.train_fraction * double(train_units.size())));
  s.train.reserve(size_t(dealt_train));
  for (size_t i = 0; i < train_units.size(); ++i) {
    if (i >= keep) {
      s.train_dropped += unit_size(train_units[i]);
      continue;
    }
    append_unit(s.train, train_units[i]);
    ++s.units[0];
  }
  return finish(std::move(s), n_graphs, o);
}

Split split_dataset(const Dataset& dataset, const SplitOptions& options) {
  return split_graphs(dataset.n_graphs(), options,
                      options.by == SplitBy::kGroup         ? dataset.graph_config_types()
                      : options.by == SplitBy::kComposition ? composition_ids(dataset)
                                                            : std::vector<int32_t>{});
}

std::vector<int32_t> composition_ids(const Dataset& dataset) {
  std::map<std::vector<std::pair<uint8_t, int32_t>>, int32_t> id_of;  // (Z, count) -> id
  std::vector<int32_t> ids;
  ids.reserve(size_t(dataset.n_graphs()));
  const int64_t chunk = 4096;
  for (int64_t first = 0; first < dataset.n_graphs(); first += chunk) {
    const GraphBlock block = dataset.read(first, std::min(chunk, dataset.n_graphs() - first));
    for (size_t i = 0; i < block.n_graphs(); ++i) {
      std::map<uint8_t, int32_t> count;
      const auto start = size_t(block.atom_start[i]);
      for (size_t a = start; a < start + size_t(block.n_atoms[i]); ++a) ++count[block.z[a]];
      const auto found =
          id_of.emplace(std::vector<std::pair<uint8_t, int32_t>>(count.begin(), count.end()),
                        int32_t(id_of.size()));
      ids.push_back(found.first->second);
    }
  }
  return ids;
}

Split split_graphs(int64_t n_graphs, double perc_train, uint64_t seed) {
  return split_graphs(n_graphs, SplitOptions{perc_train, seed, SplitBy::kFrame, 1});
}

}  // namespace ddgnn
