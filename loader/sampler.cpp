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

std::vector<std::vector<int64_t>> sampler_epoch(const SamplerOptions& o, int64_t epoch) {
  const int64_t steps = sampler_steps(o);
  std::vector<int64_t> order;
  if (o.shuffle) {
    order = permutation(o.n_samples, o.seed * 1000003ULL + uint64_t(epoch));
  } else {
    order.resize(size_t(o.n_samples));
    std::iota(order.begin(), order.end(), int64_t(0));
  }
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

}  // namespace ddgnn
