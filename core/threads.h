// Thread counts of the libraries under LibTorch: OpenBLAS keeps its own pool, which Debian's
// LibTorch build does not size (at::set_num_threads leaves it alone), and whose idle workers spin
// in sched_yield next to a rank's compute thread (~15% of a one-core SchNet step).
#pragma once

#include <cstdint>
#include <string>

namespace ddgnn {

// Sets OpenBLAS's thread count to n (>= 1) when the process links OpenBLAS; returns false (and
// does nothing) when it does not (another BLAS, or none).
bool set_blas_threads(int n);

// OpenBLAS's kernels matched to this CPU. A DYNAMIC_ARCH OpenBLAS picks its kernels when it loads,
// and one older than the CPU (Debian 12's 0.3.21 on Sapphire Rapids) falls back to Prescott's
// SSE3 kernels: single-precision matrix products run at a quarter of the speed of its AVX-512
// ones. When OpenBLAS is linked, OPENBLAS_CORETYPE is not set, and the kernels it picked need
// less than the CPU has (AVX-512 F/CD/BW/DQ/VL: SkylakeX; AVX2 and FMA: Haswell; AVX:
// SandyBridge), this switches them through OpenBLAS's own start-up (the variable set, its
// dynamic init run again) and returns "OpenBLAS: <picked> kernels on a CPU with <features>:
// switched to <new> (set OPENBLAS_CORETYPE to choose)"; "" when nothing changed. Call it while
// no BLAS call is running (at start-up); a second call finds the kernels matched.
std::string match_blas_kernels();
// The kernels OpenBLAS uses now ("" without OpenBLAS), e.g. "SkylakeX".
std::string blas_kernels();

// Cores this process may run on (its CPU affinity mask: a launcher that binds a rank to one core
// leaves it one, whatever the machine has); the machine's count when the mask cannot be read.
int cores_available();

// Compute threads for a rank: the cores it may use shared with the other ranks of its node that
// may use the same cores (`node_ranks`, 1 when alone), at least 1. E.g. 4 ranks unbound on 2
// cores: 1 each; one rank bound to 1 core: 1; one unbound rank on 16 cores: 16.
int threads_per_rank(int cores, int node_ranks);

// `requested` compute threads capped at `cores` (more threads than cores only wait for each other,
// and thousands of them exhaust the process): a warning naming `key` when it caps.
int cap_threads(int64_t requested, int cores, const char* key);

}  // namespace ddgnn
