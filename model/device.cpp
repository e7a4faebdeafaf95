// The switch between the fused CPU kernels and their device-agnostic versions (model/device.h).
#include "model/device.h"

#include <atomic>

namespace ddgnn {

namespace {

// Number of live GenericKernels scopes.
std::atomic<int> g_generic_scopes{0};

}  // namespace

bool fused_kernels(const at::Tensor& t) {
  return t.device().is_cpu() && g_generic_scopes.load(std::memory_order_relaxed) == 0;
}

GenericKernels::GenericKernels() {
  g_generic_scopes.fetch_add(1, std::memory_order_relaxed);
}

GenericKernels::~GenericKernels() {
  g_generic_scopes.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace ddgnn
