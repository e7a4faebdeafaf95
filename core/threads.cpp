// OpenBLAS thread count through a weak symbol, so that core/ links without OpenBLAS.
#include "core/threads.h"

#include <algorithm>

extern "C" void openblas_set_num_threads(int n) __attribute__((weak));

namespace ddgnn {

bool set_blas_threads(int n) {
  if (!openblas_set_num_threads) return false;
  openblas_set_num_threads(std::max(1, n));
  return true;
}

}  // namespace ddgnn
