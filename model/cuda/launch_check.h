// CUDA_LAUNCH_CHECK(expr): the status of a kernel launch (model/cuda/*_kernels.h) as a CommError
// with file:line, the CUDA_CHECK of comm/nccl.h for model/'s kernels (model/ may not include
// comm/). GPU build only.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "core/error.h"

namespace ddgnn::cuda {

[[noreturn]] inline void launch_fail(const char* expr, const char* file, int line,
                                     cudaError_t code) {
  throw CommError(std::string("CUDA kernel `") + expr + "` failed at " + file + ":" +
                      std::to_string(line) + ": " + cudaGetErrorString(code),
                  "an earlier kernel's failure can surface at a later launch: rerun with "
                  "CUDA_LAUNCH_BLOCKING=1 to stop at the failing one");
}

}  // namespace ddgnn::cuda

#define CUDA_LAUNCH_CHECK(expr)                                               \
  do {                                                                        \
    const cudaError_t cuda_launch_rc_ = (expr);                               \
    if (cuda_launch_rc_ != cudaSuccess)                                       \
      ::ddgnn::cuda::launch_fail(#expr, __FILE__, __LINE__, cuda_launch_rc_); \
  } while (0)
