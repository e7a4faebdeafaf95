// The distributed sampler (rules in sampler.h).
#include "loader/sampler.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/error.h"

namespace ddgnn {

namespace {

void check(const SamplerOptions& o) {
  if (o.n_samples < 0 || o.batch_size < 1 || o.world < 1 || o.rank < 0 || o.rank >= o.world)
    throw Error("sampler: bad options (n_samples " + std::to_string(o.n_samples) + ", batch_size " +
                std::to_string(o.batch_size) + ", rank " + std::to_string(o.rank) + " of " +
                std::to_string(o.world) + ")");
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr int kFeistelRounds = 4;

}  // namespace

IndexPermutation::IndexPermutation(int64_t n, uint64_t seed) : m_n(n), m_seed(splitmix64(seed)) {
  if (n < 0) throw Error("IndexPermutation: n " + std::to_string(n));
  while (m_half_bits < 31 && (uint64_t(1) << (2 * m_half_bits)) < uint64_t(n)) ++m_half_bits;
  m_half_mask = (uint64_t(1) << m_half_bits) - 1;
}

uint64_t IndexPermutation::feistel(uint64_t x) const {
  uint64_t left = x >> m_half_bits, right = x & m_half_mask;
  for (int r = 0; r < kFeistelRounds; ++r) {
    const uint64_t f = splitmix64(m_seed ^ (uint64_t(r) << 56) ^ right) & m_half_mask;
    const uint64_t next = left ^ f;
    left = right;
    right = next;
  }
  return (left << m_half_bits) | right;
}

int64_t IndexPermutation::operator()(int64_t i) const {
  uint64_t x = uint64_t(i);
  do x = feistel(x);  // a bijection of [0, 4^half_bits): its cycle from i returns below n
  while (x >= uint64_t(m_n));
  return int64_t(x);
}

int64_t sampler_steps(const SamplerOptions& o) {
  check(o);
  const int64_t per_step = o.batch_size * o.world;
  return o.drop_remainder ? o.n_samples / per_step : (o.n_samples + per_step - 1) / per_step;
}

namespace {

// The sample at position k of the epoch's order.
struct EpochOrder {
  EpochOrder(const SamplerOptions& o, int64_t epoch)
      : shuffle(o.shuffle), perm(o.n_samples, o.seed * 1000003ULL + uint64_t(epoch)) {}
  int64_t operator()(int64_t k) const { return shuffle ? perm(k) : k; }
  bool shuffle;
  IndexPermutation perm;
};

}  // namespace

std::vector<int64_t> sampler_order(const SamplerOptions& o, int64_t epoch) {
  check(o);
  const EpochOrder order(o, epoch);
  std::vector<int64_t> out(size_t(o.n_samples));
  for (int64_t k = 0; k < o.n_samples; ++k) out[size_t(k)] = order(k);
  return out;
}

std::vector<std::vector<int64_t>> sampler_epoch(const SamplerOptions& o, int64_t epoch) {
  const int64_t steps = sampler_steps(o);
  const EpochOrder order(o, epoch);
  const int64_t b = o.batch_size, p = o.world, per_step = b * p;
  std::vector<std::vector<int64_t>> batches(static_cast<size_t>(steps));
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t start = s * per_step;
    const int64_t in_step = std::min(per_step, o.n_samples - start);
    int64_t first, count;
    if (in_step == per_step) {
      first = start + o.rank * b;
      count = b;
    } else {  // the remainder, dealt out evenly
      const int64_t base = in_step / p, extra = in_step % p;
      first = start + o.rank * base + std::min<int64_t>(o.rank, extra);
      count = base + (o.rank < extra ? 1 : 0);
    }
    std::vector<int64_t>& batch = batches[size_t(s)];
    batch.resize(size_t(count));
    for (int64_t k = 0; k < count; ++k) batch[size_t(k)] = order(first + k);
  }
  return batches;
}

std::vector<std::vector<int64_t>> sampler_epoch_balanced(const SamplerOptions& o,
                                                         const std::vector<uint16_t>& n_atoms,
                                                         int64_t atom_budget, int64_t epoch) {
  check(o);
  if (int64_t(n_atoms.size()) != o.n_samples)
    throw Error("sampler: " + std::to_string(n_atoms.size()) + " atom counts for " +
                std::to_string(o.n_samples) + " samples");
  const EpochOrder order(o, epoch);
  const int64_t max_samples = o.batch_size * o.world;
  const int64_t max_atoms = atom_budget > 0 ? atom_budget * o.world : 0;
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> step;  // the samples of the step being cut, in epoch order
  std::vector<size_t> by_size;
  std::vector<int64_t> load(size_t(o.world));
  std::vector<int> rank_of;
  // Each step dealt longest first to the least loaded rank; this rank's share in epoch order.
  const auto deal = [&] {
    by_size.resize(step.size());
    std::iota(by_size.begin(), by_size.end(), size_t(0));
    std::stable_sort(by_size.begin(), by_size.end(), [&](size_t x, size_t y) {
      return n_atoms[size_t(step[x])] > n_atoms[size_t(step[y])];
    });
    std::fill(load.begin(), load.end(), 0);
    rank_of.assign(step.size(), 0);
    for (size_t k : by_size) {
      const int r = int(std::min_element(load.begin(), load.end()) - load.begin());
      rank_of[k] = r;
      load[size_t(r)] += n_atoms[size_t(step[k])];
    }
    std::vector<int64_t>& mine = batches.emplace_back();
    for (size_t k = 0; k < step.size(); ++k)
      if (rank_of[k] == o.rank) mine.push_back(step[k]);
  };
  // Steps: cuts of the order, walked once.
  int64_t atoms = 0;
  for (int64_t k = 0; k < o.n_samples; ++k) {
    const int64_t id = order(k);
    const int64_t n = n_atoms[size_t(id)];
    const int64_t in_step = int64_t(step.size());
    if (in_step > 0 && (in_step == max_samples || (max_atoms > 0 && atoms + n > max_atoms))) {
      deal();
      step.clear();
      atoms = 0;
    }
    step.push_back(id);
    atoms += n;
  }
  // The last step, unless drop_remainder drops it (short, and not the only one).
  if (!step.empty() &&
      !(o.drop_remainder && !batches.empty() && int64_t(step.size()) < max_samples))
    deal();
  return batches;
}

}  // namespace ddgnn
