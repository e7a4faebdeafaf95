// Runs a check once for every level of CPU loops this CPU can run (model/kernels.h: 64-byte
// vectors, AVX2's 32-byte ones, ATen's products), so that one CPU checks what each kind runs.
#pragma once

#include <gtest/gtest.h>

#include "model/kernels.h"

namespace ddgnn::testing {

template <typename Check>
void for_each_cpu_level(Check check) {
  using kernels::CpuKernels;
  for (const CpuKernels level : {CpuKernels::kWide, CpuKernels::kAvx2, CpuKernels::kNone}) {
    if (!kernels::cpu_can_run(level)) continue;
    SCOPED_TRACE(std::string("CPU loops: ") + kernels::to_string(level));
    const kernels::CpuKernelsScope scope(level);
    check();
  }
}

}  // namespace ddgnn::testing
