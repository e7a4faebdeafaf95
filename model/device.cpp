// The switch between the fused CPU kernels, the CUDA kernels and their device-agnostic versions
// (model/device.h).
#include "model/device.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <atomic>

namespace ddgnn {

namespace {

// Number of live GenericKernels scopes.
std::atomic<int> g_generic_scopes{0};

}  // namespace

namespace {

// LibTorch 2.4 gave autocast one API for every device type; 1.13 has one per device.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool autocast_enabled(c10::DeviceType d) {
  return at::autocast::is_autocast_enabled(d);
}
void set_autocast(c10::DeviceType d, bool on) {
  at::autocast::set_autocast_enabled(d, on);
}
c10::ScalarType autocast_dtype(c10::DeviceType d) {
  return at::autocast::get_autocast_dtype(d);
}
void set_autocast_dtype(c10::DeviceType d, c10::ScalarType t) {
  at::autocast::set_autocast_dtype(d, t);
}
#else
bool autocast_enabled(c10::DeviceType d) {
  return d == c10::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
}
void set_autocast(c10::DeviceType d, bool on) {
  if (d == c10::kCPU)
    at::autocast::set_cpu_enabled(on);
  else
    at::autocast::set_enabled(on);
}
c10::ScalarType autocast_dtype(c10::DeviceType d) {
  return d == c10::kCPU ? at::autocast::get_autocast_cpu_dtype()
                        : at::autocast::get_autocast_gpu_dtype();
}
void set_autocast_dtype(c10::DeviceType d, c10::ScalarType t) {
  if (d == c10::kCPU)
    at::autocast::set_autocast_cpu_dtype(t);
  else
    at::autocast::set_autocast_gpu_dtype(t);
}
#endif

}  // namespace

bool fused_kernels(const at::Tensor& t) {
  const auto type = t.scalar_type();
  return t.device().is_cpu() && type != at::kBFloat16 && type != at::kHalf &&
         g_generic_scopes.load(std::memory_order_relaxed) == 0 && !autocast_enabled(c10::kCPU);
}

bool cuda_kernels(const at::Tensor& t) {
#ifdef DDGNN_CUDA_KERNELS
  const auto type = t.scalar_type();
  return t.is_cuda() && (type == at::kFloat || type == at::kDouble) &&
         g_generic_scopes.load(std::memory_order_relaxed) == 0 && !autocast_enabled(c10::kCUDA);
#else
  (void)t;
  return false;
#endif
}

Bf16Autocast::Bf16Autocast(c10::DeviceType device, bool on) : m_device(device), m_on(on) {
  if (!m_on) return;
  m_was_enabled = autocast_enabled(device);
  m_was_dtype = autocast_dtype(device);
  set_autocast(device, true);
  set_autocast_dtype(device, at::kBFloat16);
  at::autocast::increment_nesting();
}

Bf16Autocast::~Bf16Autocast() {
  if (!m_on) return;
  // As torch.autocast: the cache of casted weights lives until the outermost scope ends.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(m_device, m_was_enabled);
  set_autocast_dtype(m_device, m_was_dtype);
}

AutocastOff::AutocastOff(c10::DeviceType device)
    : m_device(device), m_was_enabled(autocast_enabled(device)) {
  if (m_was_enabled) set_autocast(device, false);
}

AutocastOff::~AutocastOff() {
  if (m_was_enabled) set_autocast(m_device, true);
}

GenericKernels::GenericKernels() {
  g_generic_scopes.fetch_add(1, std::memory_order_relaxed);
}

GenericKernels::~GenericKernels() {
  g_generic_scopes.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace ddgnn
