// OpenBLAS thread count through a weak symbol, so that core/ links without OpenBLAS.
#include "core/threads.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

extern "C" void openblas_set_num_threads(int n) __attribute__((weak));

namespace ddgnn {

bool set_blas_threads(int n) {
  if (!openblas_set_num_threads) return false;
  openblas_set_num_threads(std::max(1, n));
  return true;
}

int cores_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

int cap_threads(int64_t requested, int cores, const char* key) {
  const int limit = std::max(1, cores);
  if (requested <= limit) return int(std::max<int64_t>(1, requested));
  spdlog::warn("{} = {} is more than the {} core(s) this process may use: using {} thread(s)", key,
               requested, limit, limit);
  return limit;
}

int threads_per_rank(int cores, int node_ranks) {
  const int machine = int(std::max(1u, std::thread::hardware_concurrency()));
  // A mask smaller than the machine is this rank's own (a binding): no sharing to divide by.
  if (cores < machine) return std::max(1, cores);
  return std::max(1, cores / std::max(1, node_ranks));
}

}  // namespace ddgnn
