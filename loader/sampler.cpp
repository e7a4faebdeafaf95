// The distributed sampler (rules in sampler.h).
#include "loader/sampler.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/error.h"
#include "loader/split.h"

namespace ddgnn {

namespace {

void check(const SamplerOptions& o) {
  if (o.n_samples < 0 || o.batch_size < 1 || o.world < 1 || o.rank < 0 || o.rank >= o.world)
    throw Error("sampler: bad options (n_samples " + std::to_string(o.n_samples) + ", batch_size " +
                std::to_string(o.batch_size) + ", rank " + std::to_string(o.rank) + " of " +
                std::to_string(o.world) + ")");
}

}  // namespace

int64_t sampler_steps(const SamplerOptions& o) {
  check(o);
  const int64_t per_step = o.batch_size * o.world;
  return o.drop_remainder ? o.n_samples / per_step : (o.n_samples + per_step - 1) / per_step;
}

std::vector<int64_t> sampler_order(const SamplerOptions& o, int64_t epoch) {
  check(o);
  std::vector<int64_t> order;
  if (o.shuffle) {
    order = permutation(o.n_samples, o.seed * 1000003ULL + uint64_t(epoch));
  } else {
    order.resize(size_t(o.n_samples));
    std::iota(order.begin(), order.end(), int64_t(0));
  }
  return order;
}

std::vector<std::vector<int64_t>> sampler_epoch(const SamplerOptions& o, int64_t epoch) {
  const int64_t steps = sampler_steps(o);
  const std::vector<int64_t> order = sampler_order(o, epoch);
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
    batches[size_t(s)].assign(order.begin() + first, order.begin() + first + count);
  }
  return batches;
}

std::vector<std::vector<int64_t>> sampler_epoch_balanced(const SamplerOptions& o,
                                                         const std::vector<int32_t>& n_atoms,
                                                         int64_t atom_budget, int64_t epoch) {
  if (int64_t(n_atoms.size()) != o.n_samples)
    throw Error("sampler: " + std::to_string(n_atoms.size()) + " atom counts for " +
                std::to_string(o.n_samples) + " samples");
  const std::vector<int64_t> order = sampler_order(o, epoch);
  const int64_t max_samples = o.batch_size * o.world;
  const int64_t max_atoms = atom_budget > 0 ? atom_budget * o.world : 0;
  // Steps: cuts of the order.
  std::vector<size_t> cuts = {0};
  int64_t atoms = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const int64_t n = n_atoms[size_t(order[k])];
    const int64_t in_step = int64_t(k - cuts.back());
    if (in_step > 0 && (in_step == max_samples || (max_atoms > 0 && atoms + n > max_atoms))) {
      cuts.push_back(k);
      atoms = 0;
    }
    atoms += n;
  }
  if (!order.empty()) cuts.push_back(order.size());
  if (o.drop_remainder && cuts.size() > 2 &&
      int64_t(cuts[cuts.size() - 1] - cuts[cuts.size() - 2]) < max_samples)
    cuts.pop_back();
  // Each step dealt longest first to the least loaded rank; this rank's share in epoch order.
  std::vector<std::vector<int64_t>> batches(cuts.size() - 1);
  std::vector<size_t> by_size;
  std::vector<int64_t> load(size_t(o.world));
  std::vector<int> rank_of;
  for (size_t s = 0; s + 1 < cuts.size(); ++s) {
    const size_t a = cuts[s], b = cuts[s + 1];
    by_size.resize(b - a);
    std::iota(by_size.begin(), by_size.end(), a);
    std::stable_sort(by_size.begin(), by_size.end(), [&](size_t x, size_t y) {
      return n_atoms[size_t(order[x])] > n_atoms[size_t(order[y])];
    });
    std::fill(load.begin(), load.end(), 0);
    rank_of.assign(b - a, 0);
    for (size_t k : by_size) {
      const int r = int(std::min_element(load.begin(), load.end()) - load.begin());
      rank_of[k - a] = r;
      load[size_t(r)] += n_atoms[size_t(order[k])];
    }
    for (size_t k = a; k < b; ++k)
      if (rank_of[k - a] == o.rank) batches[s].push_back(order[k]);
  }
  return batches;
}

}  // namespace ddgnn
