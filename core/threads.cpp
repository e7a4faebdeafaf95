// OpenBLAS thread count through a weak symbol, so that core/ links without OpenBLAS.
#include "core/threads.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <thread>

#include <spdlog/spdlog.h>

extern "C" void openblas_set_num_threads(int n) __attribute__((weak));
extern "C" char* openblas_get_corename() __attribute__((weak));
// OpenBLAS's DYNAMIC_ARCH start-up and its reset (exported, used by its own constructor and
// destructor): the init reads OPENBLAS_CORETYPE when the kernels are unset.
extern "C" void gotoblas_dynamic_init() __attribute__((weak));
extern "C" void gotoblas_dynamic_quit() __attribute__((weak));

namespace ddgnn {

bool set_blas_threads(int n) {
  if (!openblas_set_num_threads) return false;
  openblas_set_num_threads(std::max(1, n));
  return true;
}

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The instruction-set level of OpenBLAS's x86-64 kernel families: 0 SSE only, 1 AVX, 2 AVX2 + FMA,
// 3 AVX-512; -1 for a name not listed here (a newer family: left alone).
int kernel_level(const std::string& core) {
  static const char* const sse[] = {"prescott", "core2",      "penryn",    "dunnington", "nehalem",
                                    "atom",     "nano",       "opteron",   "barcelona",  "bobcat",
                                    "katmai",   "coppermine", "northwood", "banias",     "athlon"};
  static const char* const avx[] = {"sandybridge", "bulldozer", "piledriver", "steamroller",
                                    "excavator"};
  static const char* const avx2[] = {"haswell", "zen"};
  static const char* const avx512[] = {"skylakex", "cooperlake", "sapphirerapids"};
  const std::string c = lower(core);
  auto in = [&](const auto& names) {
    for (const char* n : names)
      if (c.rfind(n, 0) == 0) return true;
    return false;
  };
  if (in(avx512)) return 3;
  if (in(avx2)) return 2;
  if (in(avx)) return 1;
  if (in(sse)) return 0;
  return -1;
}

}  // namespace

std::string blas_kernels() {
  if (!openblas_get_corename) return "";
  const char* name = openblas_get_corename();
  return name ? name : "";
}

std::string match_blas_kernels() {
  if (!openblas_get_corename || !gotoblas_dynamic_init || !gotoblas_dynamic_quit) return "";
  if (std::getenv("OPENBLAS_CORETYPE")) return "";  // the user's choice
  const std::string picked = blas_kernels();
  const int level = kernel_level(picked);
  if (level < 0) return "";
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  const char* want = nullptr;
  const char* features = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl")) {
    if (level < 3) want = "SkylakeX", features = "AVX-512";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    if (level < 2) want = "Haswell", features = "AVX2";
  } else if (__builtin_cpu_supports("avx")) {
    if (level < 1) want = "SandyBridge", features = "AVX";
  }
  if (!want) return "";
  setenv("OPENBLAS_CORETYPE", want, 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
  const std::string now = blas_kernels();
  if (lower(now) != lower(want))
    return "OpenBLAS: " + picked + " kernels on a CPU with " + features + "; switching to " + want +
           " failed (it uses " + now + "): set OPENBLAS_CORETYPE=" + want + " in the environment";
  return "OpenBLAS: " + picked + " kernels on a CPU with " + features + ": switched to " + now +
         " (matrix products several times faster; set OPENBLAS_CORETYPE to choose)";
#else
  return "";
#endif
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
