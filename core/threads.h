// Thread counts of the libraries under LibTorch: OpenBLAS keeps its own pool, which Debian's
// LibTorch build does not size (at::set_num_threads leaves it alone), and whose idle workers spin
// in sched_yield next to a rank's compute thread (~15% of a one-core SchNet step).
#pragma once

namespace ddgnn {

// Sets OpenBLAS's thread count to n (>= 1) when the process links OpenBLAS; returns false (and
// does nothing) when it does not (another BLAS, or none).
bool set_blas_threads(int n);

}  // namespace ddgnn
